#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// `sqlcipherkit replicate` as an operator runs it: a second one on the same replica refuses, one killed is taken
/// over by the next at once, and one whose key stops opening the database exits non-zero instead of staying alive
/// while nothing is shipped (a supervisor must see it).
@Suite("The replicate process's lifetime", .serialized)
struct ReplicateCommandLifetimeTests {
    /// A running `sqlcipherkit replicate` with its output in files.
    final class Sidecar {
        let command: SQLCipherKitProcess

        init(database: String, keyFile: String, replica: String, folder: TemporaryDirectory, name: String) throws {
            command = try SQLCipherKitProcess(
                ["replicate", database, "--key-file", keyFile, "--to", replica, "--sync-interval", "50ms"],
                folder: folder, name: name)
        }

        var process: Process { command.process }
        var errorPath: String { command.errorPath }
        var errors: String { command.errors }

        /// Waits (bounded only to turn a hang into a failure) until it printed `text` or exited.
        func wait(for text: String) async throws {
            try await waitForText(text, inFile: errorPath, of: process)
        }

        /// Waits until it exits (bounded: 120 s, a hang fails the test) and returns its status.
        func exitStatus() async throws -> Int32? {
            try await command.exitStatus()
        }
    }

    private func database(in folder: TemporaryDirectory) async throws -> (String, String, EncryptionKey) {
        let path = folder.path("service.db")
        let key = try EncryptionKey.generateRaw()
        let keyFile = folder.path("service.key")
        try key.write(toKeyFile: keyFile)
        let pool = try DatabasePool(path: path, keyProvider: .fixed(key))
        try await pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
        pool.close()
        return (path, keyFile, key)
    }

    @Test("a second replicate on the same replica exits 1 naming the first; after the first is killed, the next starts at once")
    func secondRefusedThenTakesOver() async throws {
        try await withTemporaryDirectory { folder in
            let (path, keyFile, _) = try await database(in: folder)
            let replica = "file://" + folder.path("replica")
            let first = try Sidecar(database: path, keyFile: keyFile, replica: replica, folder: folder, name: "first")
            defer { if first.process.isRunning { first.process.terminate() } }
            try await first.wait(for: "replicating")
            #expect(first.errors.contains("replicating"))

            let second = try Sidecar(database: path, keyFile: keyFile, replica: replica, folder: folder, name: "second")
            #expect(try await second.exitStatus() == 1)
            #expect(second.errors.contains("another replicator holds the replica's lease"), "\(second.errors)")
            #expect(second.errors.contains(", process "), "\(second.errors)")
            #expect(first.process.isRunning)

            // SIGKILL: the lease stays in the store; the next replicate sees its holder is dead and takes it.
            kill(first.process.processIdentifier, SIGKILL)
            first.process.waitUntilExit()
            let third = try Sidecar(database: path, keyFile: keyFile, replica: replica, folder: folder, name: "third")
            defer { if third.process.isRunning { third.process.terminate() } }
            try await third.wait(for: "replicating")
            #expect(third.errors.contains("replicating"), "\(third.errors)")
            third.process.terminate()
            #expect(try await third.exitStatus() == 0, "\(third.errors)")
        }
    }

    @Test("replicate exits 3 when another process rekeys the database under it, instead of staying alive",
          .enabled(if: PeerProcess.isAvailable, Comment(rawValue: PeerProcess.unavailableReason)))
    func exitsWhenKeyStopsOpening() async throws {
        try await withTemporaryDirectory { folder in
            let (path, keyFile, key) = try await database(in: folder)
            // More than a checkpoint's worth of pages (1,000 frames): the rekey rewrites them all, the sidecar ships
            // them and checkpoints, and its read transaction must then start again with a key that no longer opens
            // the file.
            let pool = try DatabasePool(path: path, keyProvider: .fixed(key))
            try await pool.write { db in
                for id in 1...1200 {
                    try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, String(repeating: "x", count: 4000))
                }
            }
            pool.close()
            let sidecar = try Sidecar(
                database: path, keyFile: keyFile, replica: "file://" + folder.path("replica"), folder: folder,
                name: "sidecar")
            defer { if sidecar.process.isRunning { sidecar.process.terminate() } }
            try await sidecar.wait(for: "replicating")
            let peer = try key.withRawKeyText { try PeerProcess(database: path, rawKeyText: String(decoding: $0, as: UTF8.self)) }
            try EncryptionKey.generateRaw().withRawKeyText { try peer.rekey(toRawKeyText: String(decoding: $0, as: UTF8.self)) }
            peer.stop()
            let status = try await sidecar.exitStatus()
            #expect(status == 3, "\(sidecar.errors)")
            #expect(sidecar.errors.contains("stopped for good"), "\(sidecar.errors)")
        }
    }
}
#endif
