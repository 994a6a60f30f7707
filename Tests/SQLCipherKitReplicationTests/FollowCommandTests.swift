#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// `sqlcipherkit restore --follow` and `sqlcipherkit promote` as an operator runs them: separate processes, stopped
/// with SIGTERM, their exit status and JSON agreeing with what is on disk.
@Suite("The follow and promote commands", .serialized)
struct FollowCommandTests {
    static func count(_ path: String, key: EncryptionKey, where condition: String = "1") throws -> Int {
        let db = try Connection(path: path, key: key)
        defer { db.close() }
        return try db.scalar("SELECT count(*) FROM note WHERE \(condition)", as: Int.self) ?? -1
    }

    /// Waits until the copy at `path` holds `rows` rows (bounded: 120 s turns a hang into a failure).
    static func waitForRows(_ rows: Int, in path: String, key: EncryptionKey) async throws {
        _ = await suspendingWait { (try? count(path, key: key)) == rows }
        #expect(try count(path, key: key) == rows)
    }

    static func json(_ text: String) throws -> [String: Any] {
        let envelope = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        return try #require(envelope["result"] as? [String: Any])
    }

    @Test("a follower process shows the primary's commits, stops current on SIGTERM (exit 0), and promote fences the old primary's replicate (exit 1) while a restore keeps every shipped and acknowledged row")
    func followAndPromote() async throws {
        try await withTemporaryDirectory { folder in
            let primary = folder.path("primary.db")
            let copy = folder.path("follower.db")
            let replica = "file://" + folder.path("replica")
            let key = try EncryptionKey.generateRaw()
            let keyFile = folder.path("notes.key")
            try key.write(toKeyFile: keyFile)
            let pool = try DatabasePool(path: primary, keyProvider: .fixed(key))
            try await pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
            let replicate = try SQLCipherKitProcess(
                ["replicate", primary, "--key-file", keyFile, "--to", replica, "--sync-interval", "50ms"],
                folder: folder, name: "replicate")
            try await replicate.wait(for: "replicating")
            let follow = try SQLCipherKitProcess(
                ["restore", replica, copy, "--follow", "--key-file", keyFile, "--poll-interval", "50ms", "--json"],
                folder: folder, name: "follow")
            try await follow.wait(for: "following")
            try await pool.write { db in
                for id in 1...30 { try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, plaintextMarker) }
            }
            try await Self.waitForRows(30, in: copy, key: key)
            #expect(follow.stop() == 0, "\(follow.errors)")
            let followed = try Self.json(follow.output)
            #expect(followed["isCurrent"] as? Bool == true)
            #expect((followed["point"] as? [String: Any])?["index"] as? Int ?? 0 > 0)

            let promote = try SQLCipherKitProcess(
                ["promote", replica, copy, "--key-file", keyFile, "--sync-interval", "50ms", "--json"],
                folder: folder, name: "promote")
            // The line it prints once its generation is started and shipped.
            try await promote.wait(for: "replicating it to")
            // The old primary is alive and writes on: its replicate stops at its next sync, naming the new
            // generation, instead of forking the replica.
            try await pool.write { db in
                for id in 1001...1010 { try db.execute("INSERT INTO note(id, body) VALUES (?, 'fenced')", id) }
            }
            #expect(try await replicate.exitStatus() == 1, "\(replicate.errors)")
            let catalog = try await Replica(store: try FolderReplicaStore(root: folder.path("replica"))).catalog()
            let newGeneration = try #require(catalog.generations.last)
            #expect(newGeneration.reason == .promoted, "\(catalog.generations.map { ($0.name, $0.reason, $0.problems) }) \(promote.errors) \(replicate.errors)")
            #expect(replicate.errors.contains(newGeneration.name), "\(replicate.errors)")
            // The new primary takes writes; they are shipped before SIGTERM ends its replicate.
            let promoted = try DatabasePool(path: copy, keyProvider: .fixed(key))
            try await promoted.write { db in
                for id in 2001...2005 { try db.execute("INSERT INTO note(id, body) VALUES (?, 'new primary')", id) }
            }
            #expect(promote.stop() == 0, "\(promote.errors)")
            promoted.close()
            pool.close()
            let summary = try Self.json(promote.output)
            #expect((summary["promotedFrom"] as? [String: Any])?["generation"] as? String
                == catalog.generations.first?.name)
            let third = folder.path("third.db")
            _ = try await Replica(store: try FolderReplicaStore(root: folder.path("replica"))).restore(
                to: third, options: RestoreOptions(verificationKeys: [VerificationKey(name: "key", key: key)]))
            #expect(try Self.count(third, key: key, where: "id <= 30") == 30)
            #expect(try Self.count(third, key: key, where: "id > 2000") == 5)
            #expect(try Self.count(third, key: key, where: "body = 'fenced'") == 0)
            #expect(!FileManager.default.fileExists(atPath: copy + ".follower"))
        }
    }

    @Test("a follower stopped while the store fails exits 1 and says how stale the copy is; its JSON agrees")
    func stoppedStale() async throws {
        try await withTemporaryDirectory { folder in
            let primary = folder.path("primary.db")
            let copy = folder.path("follower.db")
            let key = try EncryptionKey.generateRaw()
            let keyFile = folder.path("notes.key")
            try key.write(toKeyFile: keyFile)
            let pool = try DatabasePool(path: primary, keyProvider: .fixed(key))
            try await pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
            let store = try FolderReplicaStore(root: folder.path("replica"))
            let replicator = Replicator(pool: pool, store: store)
            _ = try await replicator.syncNow()
            try await replicator.stop()
            let follow = try SQLCipherKitProcess(
                ["restore", "file://" + folder.path("replica"), copy, "--follow", "--key-file", keyFile,
                 "--poll-interval", "50ms", "--json"],
                folder: folder, name: "follow")
            try await follow.wait(for: "following")
            // The store goes away (an outage): the follower says it could not catch up, and keeps its copy.
            #expect(rename(folder.path("replica"), folder.path("replica-away")) == 0)
            try await follow.wait(for: "could not catch up")
            #expect(try Self.count(copy, key: key) == 0)
            #expect(follow.stop() == 1, "\(follow.errors)")
            #expect(follow.errors.contains("stale"), "\(follow.errors)")
            pool.close()
        }
    }

    @Test("--follow without a key, or with --at, is a usage error; promote on a file that is not a follower's copy changes nothing")
    func misuse() async throws {
        try await withTemporaryDirectory { folder in
            let key = try EncryptionKey.generateRaw()
            let keyFile = folder.path("notes.key")
            try key.write(toKeyFile: keyFile)
            let replica = "file://" + folder.path("replica")
            let noKey = try SQLCipherKitProcess(["restore", replica, folder.path("a.db"), "--follow"], folder: folder, name: "a")
            #expect(try await noKey.exitStatus() == 2, "\(noKey.errors)")
            let withAt = try SQLCipherKitProcess(
                ["restore", replica, folder.path("b.db"), "--follow", "--key-file", keyFile, "--at",
                 "2026-11-24T10:00:00Z"], folder: folder, name: "b")
            #expect(try await withAt.exitStatus() == 2, "\(withAt.errors)")
            let plain = folder.path("plain.db")
            #expect(FileManager.default.createFile(atPath: plain, contents: Data("not a copy".utf8)))
            let promote = try SQLCipherKitProcess(["promote", replica, plain, "--key-file", keyFile], folder: folder, name: "c")
            #expect(try await promote.exitStatus() == 1, "\(promote.errors)")
            #expect(promote.errors.contains("not a follower's copy"))
            #expect(try fileBytes(plain) == Array("not a copy".utf8))
            #expect(!FileManager.default.fileExists(atPath: folder.path("a.db")))
            #expect(!FileManager.default.fileExists(atPath: folder.path("b.db")))
            #expect(!FileManager.default.fileExists(atPath: folder.path("replica") + "/lease.json"))
        }
    }
}
#endif
