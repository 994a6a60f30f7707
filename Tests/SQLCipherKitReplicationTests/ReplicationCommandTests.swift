#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing
@testable import sqlcipherkit

/// Runs `sqlcipherkit` in this process, on a thread of its own (the commands wait for async work, which must not
/// hold one of Swift's cooperative threads), capturing its output.
private func runCommand(_ arguments: [String]) async -> (status: Int32, output: String, error: String) {
    await withCheckedContinuation { continuation in
        Thread {
            let capture = OutputCapture()
            let status = Output.$capture.withValue(capture) { SQLCipherKitCommand.run(arguments: arguments) }
            continuation.resume(returning: (status.rawValue, capture.standardOutput, capture.standardError))
        }.start()
    }
}

private func json(_ text: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
}

@Suite("The replicate, restore and snapshots commands")
struct ReplicationCommandTests {
    @Test("snapshots --json lists the generation and its restore points; restore --json writes the newest, verified")
    func snapshotsAndRestore() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(4)
            try await fixture.sync()
            try await fixture.insert(4)
            try await fixture.sync()
            let expected = try fixture.checkpointedCopy()
            let url = "file://" + fixture.store.root
            let listing = await runCommand(["snapshots", url, "--json"])
            #expect(listing.status == 0, "\(listing)")
            let envelope = try json(listing.output)
            let result = try #require(envelope["result"] as? [String: Any])
            let generations = try #require(result["generations"] as? [[String: Any]])
            #expect(generations.count == 1)
            let latest = try #require(generations.first?["latestRestorePoint"] as? [String: Any])
            #expect(latest["index"] as? Int == (await fixture.replicator.status.lastIndex))

            let keyFile = fixture.directory.path("notes.key")
            try fixture.key.write(toKeyFile: keyFile)
            let destination = fixture.directory.path("restored.db")
            let restore = await runCommand(["restore", url, destination, "--key-file", keyFile, "--json"])
            #expect(restore.status == 0, "\(restore)")
            let restored = try #require(try json(restore.output)["result"] as? [String: Any])
            #expect(restored["isVerified"] as? Bool == true)
            #expect(try fileBytes(destination) == expected)

            let again = await runCommand(["restore", url, destination])
            #expect(again.status == 1)
            #expect(again.error.contains("exists"))
            #expect(!again.error.contains("replacesExisting"), "no API name for a CLI user: \(again.error)")
        }
    }

    @Test("restore exits 3 when the key does not open the result and 4 for a damaged replica, writing nothing")
    func failures() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(4)
            try await fixture.sync()
            try await fixture.insert(4)
            try await fixture.sync()
            let url = "file://" + fixture.store.root
            let otherKey = fixture.directory.path("other.key")
            try EncryptionKey.generateRaw().write(toKeyFile: otherKey)
            let destination = fixture.directory.path("restored.db")
            let wrongKey = await runCommand(["restore", url, destination, "--key-file", otherKey, "--json"])
            #expect(wrongKey.status == 3, "\(wrongKey)")
            #expect(!FileManager.default.fileExists(atPath: destination))

            let segment = try #require(try fixture.objectFiles().keys.filter { $0.hasSuffix(".wal") }.sorted().last)
            try flipByte(in: fixture.objectPath(segment), at: 64)
            let damaged = await runCommand(["restore", url, destination])
            #expect(damaged.status == 4, "\(damaged)")
            #expect(damaged.error.contains(segment))
            #expect(damaged.error.contains("last good restore point"))
            #expect(!FileManager.default.fileExists(atPath: destination))
        }
    }

    @Test("restore says whether it authenticated and names the newest point; snapshots of an empty URL and an index past the end fail")
    func answersThatCanBeTrusted() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(4)
            try await fixture.sync()
            try await fixture.insert(4)
            let status = try await fixture.sync()
            let generation = try #require(status.generation)
            let url = "file://" + fixture.store.root

            let unchecked = await runCommand(["restore", url, fixture.directory.path("a.db")])
            #expect(unchecked.status == 0, "\(unchecked)")
            #expect(unchecked.output.contains("integrity checked only"), "\(unchecked.output)")
            #expect(unchecked.output.contains("the newest point the replica holds: \(generation)/\(status.lastIndex ?? -1)"))

            let keyFile = fixture.directory.path("notes.key")
            try fixture.key.write(toKeyFile: keyFile)
            let checked = await runCommand(["restore", url, fixture.directory.path("b.db"), "--key-file", keyFile, "--json"])
            #expect(checked.status == 0, "\(checked)")
            let result = try #require(try json(checked.output)["result"] as? [String: Any])
            #expect(result["isAuthenticated"] as? Bool == true)
            #expect((result["newestPoint"] as? [String: Any])?["generation"] as? String == generation)

            let older = await runCommand([
                "restore", url, fixture.directory.path("c.db"), "--generation", generation, "--index", "0",
            ])
            #expect(older.status == 0, "\(older)")
            #expect(older.output.contains("not the newest point"), "\(older.output)")

            let pastTheEnd = await runCommand([
                "restore", url, fixture.directory.path("d.db"), "--generation", generation, "--index", "99", "--json",
            ])
            #expect(pastTheEnd.status == 1, "\(pastTheEnd)")
            let error = try #require(try json(pastTheEnd.output)["error"] as? [String: Any])
            #expect(error["kind"] as? String == "notFound")
            #expect((error["message"] as? String)?.contains("no such restore point") == true)

            // A typo in the folder: not an empty replica, an error that says to check the URL; nothing is created.
            let typo = "file://" + fixture.directory.path("replcia")
            for arguments in [["snapshots", typo], ["restore", typo, fixture.directory.path("e.db")]] {
                let result = await runCommand(arguments)
                #expect(result.status == 1, "\(result)")
                #expect(result.error.contains("check the replica's URL"), "\(result.error)")
            }
            #expect(!FileManager.default.fileExists(atPath: fixture.directory.path("replcia")))

            let withKey = await runCommand(["snapshots", url, "--key-file", keyFile, "--json"])
            #expect(withKey.status == 0, "\(withKey)")
            let listing = try #require(try json(withKey.output)["result"] as? [String: Any])
            #expect(listing["isAuthenticated"] as? Bool == true)
            let generations = try #require(listing["generations"] as? [[String: Any]])
            #expect((generations.first?["authenticity"] as? String)?.hasPrefix("authenticated with") == true)

            // A key that verifies nothing: not a listing with ok: true beside generations that "do not verify", but
            // status 3, as restore answers, in the text and the JSON alike.
            let wrongKeyFile = fixture.directory.path("wrong.key")
            try EncryptionKey.generateRaw().write(toKeyFile: wrongKeyFile)
            for arguments in [["snapshots", url, "--key-file", wrongKeyFile], ["snapshots", url, "--key-file", wrongKeyFile, "--json"]] {
                let wrong = await runCommand(arguments)
                #expect(wrong.status == 3, "\(wrong)")
                if arguments.last == "--json" {
                    let document = try json(wrong.output)
                    #expect(document["ok"] as? Bool == false)
                    #expect(document["exitStatus"] as? Int == 3)
                } else {
                    #expect(wrong.error.contains("verifies with"), "\(wrong.error)")
                }
            }
        }
    }

    @Test("--lease-duration above the 10 minutes a newcomer waits at most is a usage error, as is 0")
    func leaseDurationBounded() async throws {
        for value in ["11m", "0s"] {
            let result = await runCommand(["replicate", "db.db", "--key-file", "k.key", "--to", "file:///tmp/x", "--lease-duration", value])
            #expect(result.status == 2, "\(value): \(result)")
            #expect(result.error.contains("--lease-duration must be more than 0 and at most 10m"), "\(result.error)")
        }
    }

    @Test("replicate runs as a sidecar until SIGTERM, ships what is left, and its replica restores to the source")
    func replicateUntilSigterm() async throws {
        try await withTemporaryDirectory { folder in
            let path = folder.path("service.db")
            let key = try EncryptionKey.generateRaw()
            let keyFile = folder.path("service.key")
            try key.write(toKeyFile: keyFile)
            let pool = try DatabasePool(path: path, keyProvider: .fixed(key))
            try await pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("sqlcipherkit").path
            let errorPath = folder.path("replicate.err")
            let outputPath = folder.path("replicate.out")
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = [
                "replicate", path, "--key-file", keyFile, "--to", "file://" + folder.path("replica"),
                "--sync-interval", "50ms",
            ]
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            try process.run()
            // Synchronised on the line it prints once its first sync is done.
            try await waitForText("replicating", inFile: errorPath, of: process)
            #expect(try String(contentsOfFile: errorPath, encoding: .utf8).contains("replicating"))
            try await pool.write { db in
                for id in 1...30 { try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, plaintextMarker) }
            }
            process.terminate()
            process.waitUntilExit()
            let errors = try String(contentsOfFile: errorPath, encoding: .utf8)
            #expect(process.terminationStatus == 0, "\(errors)")
            #expect(try String(contentsOfFile: outputPath, encoding: .utf8).contains("stopped:"))
            let expected = try checkpointedCopy(of: path, key: key, in: folder)
            pool.close()
            let restored = folder.path("restored.db")
            _ = try await Replica(store: try FolderReplicaStore(root: folder.path("replica"))).restore(to: restored)
            #expect(try fileBytes(restored) == expected)
            let connection = try Connection(path: restored, key: key)
            #expect(try connection.scalar("SELECT count(*) FROM note", as: Int.self) == 30)
            connection.close()
        }
    }
}
#endif
