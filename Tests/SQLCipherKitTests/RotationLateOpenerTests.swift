import Foundation
@testable import SQLCipherKit
import SQLCipherKitTestSupport
import Testing

/// A client outside this library (python's sqlcipher3) that opens the database while a copy rotation runs. Before,
/// it waited for the lock, and after `rotate` exited 0 its commit went to the replaced file: an acknowledged write
/// nobody would ever read.
@Suite("Copy rotation and a process that opens the database meanwhile", .serialized)
struct RotationLateOpenerTests {
    static let oldKeyText = "x'" + String(repeating: "5a", count: 32) + "'"
    static let newKeyText = "x'" + String(repeating: "6b", count: 32) + "'"
    static var oldKey: EncryptionKey { try! EncryptionKey(sqlcipherRawKeyText: oldKeyText) }
    static var newKey: EncryptionKey { try! EncryptionKey(sqlcipherRawKeyText: newKeyText) }

    static func makeDatabase(_ path: String, journalMode: String, rows: Int) throws {
        let db = try Connection(path: path, encryption: .key(oldKey))
        try db.execute("PRAGMA journal_mode = \(journalMode)")
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
        try db.transaction {
            for row in 0..<rows { try db.execute("INSERT INTO t(body) VALUES (?)", String(repeating: "r\(row)", count: 20)) }
        }
        db.close()
    }

    static func count(_ path: String, _ key: EncryptionKey) -> Int? {
        guard let db = try? Connection(path: path, encryption: .key(key), options: OpenOptions(mode: .readOnly))
        else { return nil }
        defer { db.close() }
        return try? db.scalar("SELECT count(*) FROM t", as: Int.self)
    }

    @Test("a process that opens the file while the copy is written: refused before the rename, its write kept",
          arguments: ["WAL", "DELETE"])
    func refusedBeforeTheRename(journalMode: String) throws {
        guard PeerProcess.isAvailable else { try Test.cancel("skipped: \(PeerProcess.unavailableReason)") }
        try withTemporaryDirectory { directory in
            let path = directory.path("late.db")
            try Self.makeDatabase(path, journalMode: journalMode, rows: 3000)
            let before = try fileBytes(path)
            let peer = Locked<PeerProcess?>(nil)
            defer { peer.withLock { $0?.stop() } }
            var request = RotationRequest(path: path, oldEncryption: .key(Self.oldKey), newEncryption: .key(Self.newKey))
            request.lockTimeout = .seconds(1)
            let error = #expect(throws: DatabaseError.self) {
                try KeyRotation.rotate(request) { _ in
                    // The client opens the file while the copy is written.
                    try peer.withLock { peer in
                        if peer == nil { peer = try PeerProcess(database: path, rawKeyText: Self.oldKeyText, readsFirst: false) }
                    }
                }
            }
            #expect(error?.message.contains("opened by another process while the copy was written") == true, "\(String(describing: error))")
            #expect(try fileBytes(path) == before, "nothing changed")
            #expect(Self.count(path, Self.newKey) == nil)
            // The client's write goes where every later reader looks.
            let client = try #require(peer.withLock { $0 })
            if case .failure(let failure) = try client.insert(into: "t") { Issue.record("the client's insert failed: \(failure)") }
            client.stop()
            #expect(Self.count(path, Self.oldKey) == 3001)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
                .filter { $0.contains(".sqlcipherkit-tmp-") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test("a process that opens the file in the instant before the rename: its statements fail, nothing is lost")
    func openedJustBeforeTheRename() throws {
        guard PeerProcess.isAvailable else { try Test.cancel("skipped: \(PeerProcess.unavailableReason)") }
        try withTemporaryDirectory { directory in
            let path = directory.path("zombie.db")
            try Self.makeDatabase(path, journalMode: "WAL", rows: 500)
            let peer = Locked<PeerProcess?>(nil)
            defer { peer.withLock { $0?.stop() } }
            let resolved = realPath(path) ?? path
            KeyRotation.testHookBeforeRename.withLock { hooks in
                hooks[resolved] = {
                    peer.withLock { $0 = try? PeerProcess(database: path, rawKeyText: Self.oldKeyText, readsFirst: false) }
                }
            }
            defer { _ = KeyRotation.testHookBeforeRename.withLock { $0.removeValue(forKey: resolved) } }
            var request = RotationRequest(path: path, oldEncryption: .key(Self.oldKey), newEncryption: .key(Self.newKey))
            request.lockTimeout = .seconds(1)
            let result = try KeyRotation.rotate(request)
            let client = try #require(peer.withLock { $0 })
            #expect(result.isRotated)
            #expect(result.warnings.count == 1)
            #expect(result.warnings.first?.contains("\(client.processIdentifier)") == true, "\(result.warnings)")

            // The client's connection is on the replaced file: it fails, loudly, and writes nothing.
            guard case .failure(let readError) = try client.count("t") else {
                Issue.record("the client read the replaced file")
                return
            }
            #expect(readError.message.contains("not a database"), "\(readError)")
            if case .success = try client.insert(into: "t") { Issue.record("the client wrote into the replaced file") }
            client.stop()

            #expect(Self.count(path, Self.newKey) == 500)
            #expect(Self.count(path, Self.oldKey) == nil)
            let check = try Connection(path: path, encryption: .key(Self.newKey))
            defer { check.close() }
            try check.quickCheck()
            try check.execute("INSERT INTO t(body) VALUES ('after')")
            #expect(try check.scalar("SELECT count(*) FROM t", as: Int.self) == 501)
        }
    }
}
