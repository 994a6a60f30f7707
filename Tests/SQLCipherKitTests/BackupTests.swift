import Foundation
import SQLCipherKit
import Testing

@Suite("Backup")
struct BackupTests {
    static func source(_ path: String, key: EncryptionKey = TestKeys.raw, rows: Int = 2000) throws -> Connection {
        try EncryptionTests.makeDatabase(path, key: key, journalMode: "WAL", rows: rows)
        let db = try Connection(path: path, key: key)
        try db.execute("PRAGMA user_version = 7")
        return db
    }

    static func leftovers(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains("sqlcipherkit-tmp") }
    }

    @Test("a backup with the same key and with a different key holds the same data, encrypted, mode 0600",
          arguments: [false, true])
    func sameAndDifferentKey(differentKey: Bool) throws {
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"))
            let backupPath = dir.path("backup.db")
            let backupKey = differentKey ? TestKeys.otherPassphrase : TestKeys.raw
            if differentKey {
                try db.backup(toPath: backupPath, encryption: .key(backupKey))
            } else {
                try db.backup(toPath: backupPath)
            }
            let bytes = try fileBytes(backupPath)
            #expect(!contains(bytes, EncryptionTests.marker))
            #expect(Array(bytes.prefix(16)) != EncryptionTests.magic)
            #expect(try fileMode(backupPath) == 0o600)
            let copy = try Connection(path: backupPath, key: backupKey)
            #expect(try copy.all("SELECT body FROM t ORDER BY id", as: String.self)
                == db.all("SELECT body FROM t ORDER BY id", as: String.self))
            #expect(try copy.scalar("PRAGMA user_version", as: Int.self) == 7)
            if differentKey {
                expectError(.wrongKey) { try Connection(path: backupPath, key: TestKeys.raw) }
            }
            #expect(try Self.leftovers(in: dir.url.path).isEmpty)
        }
    }

    @Test("progress is monotonic and ends complete")
    func progress() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"))
            var seen: [BackupProgress] = []
            try db.backup(toPath: dir.path("backup.db"), pagesPerStep: 2) { seen.append($0) }
            #expect(seen.count > 5)
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.pagesCopied <= $1.pagesCopied })
            let last = try #require(seen.last)
            #expect(last.pagesCopied == last.pageCount)
            #expect(last.fractionCompleted == 1)
        }
    }

    @Test("cancelling leaves nothing under the final name and an earlier backup untouched")
    func cancellation() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"))
            let backupPath = dir.path("backup.db")
            #expect(throws: CancellationError.self) {
                try db.backup(toPath: backupPath, pagesPerStep: 5) { progress in
                    if progress.pagesCopied >= 15 { throw CancellationError() }
                }
            }
            #expect(!FileManager.default.fileExists(atPath: backupPath))
            #expect(try Self.leftovers(in: dir.url.path).isEmpty)

            try db.backup(toPath: backupPath)
            let earlier = try snapshot(backupPath)
            try db.execute("INSERT INTO t(body) VALUES ('newer')")
            #expect(throws: CancellationError.self) {
                try db.backup(toPath: backupPath, pagesPerStep: 5) { _ in throw CancellationError() }
            }
            #expect(try snapshot(backupPath) == earlier)
        }
    }

    @Test("WAL: a second connection writing during the backup goes on; the copy is the snapshot it started from")
    func concurrentWriterWAL() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("live.db")
            let db = try Self.source(path)
            let writer = try Connection(path: path, key: TestKeys.raw)
            var writes = 0
            var restarts = 0
            // Small steps: the file has a few dozen pages (4096 bytes each on SQLCipher 4), and three writes must land
            // between steps.
            try db.backup(toPath: dir.path("backup.db"), pagesPerStep: 5) { progress in
                restarts = max(restarts, progress.restartCount)
                if writes < 3 {
                    writes += 1
                    try writer.execute("INSERT INTO t(body) VALUES (?)", "written during backup \(writes)")
                }
            }
            #expect(writes == 3)
            #expect(restarts == 0)
            let copy = try Connection(path: dir.path("backup.db"), key: TestKeys.raw)
            try copy.quickCheck()
            #expect(try copy.scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            #expect(try writer.scalar("SELECT count(*) FROM t", as: Int.self) == 2003)
        }
    }

    @Test("rollback journal: writes from another connection at every step restart the copy a bounded number of times, then it finishes with every row")
    func concurrentWriterRollback() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("live.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.raw, journalMode: "DELETE", rows: 2000)
            let db = try Connection(path: path, key: TestKeys.raw)
            let writer = try Connection(path: path, key: TestKeys.raw)
            var writes = 0
            var restarts = 0
            // A write after every step: without the bound the copy would start again for ever.
            var steps = 0
            try db.backup(toPath: dir.path("backup.db"), pagesPerStep: 20) { progress in
                steps += 1
                // Only to turn an endless copy into a failure: a bounded copy takes a few dozen steps.
                if steps > 100_000 { throw CancellationError() }
                restarts = max(restarts, progress.restartCount)
                if progress.pagesCopied < progress.pageCount {
                    writes += 1
                    try writer.execute("INSERT INTO t(body) VALUES (?)", "written during backup \(writes)")
                }
            }
            #expect(restarts == Connection.maximumBackupRestarts)
            let copy = try Connection(path: dir.path("backup.db"), key: TestKeys.raw)
            try copy.quickCheck()
            #expect(try copy.scalar("SELECT count(*) FROM t", as: Int.self) == 2000 + writes)
        }
    }

    @Test("mismatched page size, an unkeyed destination and a plaintext source are refused before any copy")
    func refusals() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"))
            let otherPageSize = CipherSettings(pageSize: Engine.isVersion4 ? 1024 : 4096)
            let pageError = expectError(.invalidArgument) {
                try db.backup(toPath: dir.path("a.db"), encryption: .key(TestKeys.raw, settings: otherPageSize))
            }
            #expect(pageError?.message.contains("page size") == true)
            let plainError = expectError(.invalidArgument) { try db.backup(toPath: dir.path("b.db"), encryption: .none) }
            #expect(plainError?.message.contains("exportDecryptedPlaintextCopy") == true)
            expectError(.invalidArgument) {
                try db.backup(toPath: dir.path("c.db"), encryption: .key(TestKeys.raw, settings: CipherSettings(usesHMAC: false)))
            }
            expectError(.invalidArgument) { try db.backup(toPath: dir.path("d.db"), pagesPerStep: 0) }

            let plain = try openPlain(dir.path("plain.db"))
            try plain.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            expectError(.invalidArgument) { try plain.backup(toPath: dir.path("e.db"), encryption: .key(TestKeys.raw)) }
            try plain.backup(toPath: dir.path("plain-backup.db"))      // plaintext to plaintext is ordinary SQLite
            #expect(try openPlain(dir.path("plain-backup.db")).scalar("SELECT x FROM t", as: Int.self) == 1)

            for name in ["a.db", "b.db", "c.db", "d.db", "e.db"] {
                #expect(!FileManager.default.fileExists(atPath: dir.path(name)))
            }
            #expect(try Self.leftovers(in: dir.url.path).isEmpty)
        }
    }

    @Test("restore round trip: the live database keeps its own key")
    func restore() throws {
        try withTemporaryDirectory { dir in
            let livePath = dir.path("live.db")
            let db = try Self.source(livePath)
            let backupPath = dir.path("backup.db")
            try db.backup(toPath: backupPath, encryption: .key(TestKeys.otherPassphrase))
            try db.execute("DELETE FROM t WHERE id > 10")
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 10)
            try db.restore(fromPath: backupPath, encryption: .key(TestKeys.otherPassphrase))
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            db.close()
            #expect(try Connection(path: livePath, key: TestKeys.raw).scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            expectError(.fileSystem) { try Connection(path: livePath, key: TestKeys.raw).restore(fromPath: dir.path("missing.db")) }
            expectError(.wrongKey) { try Connection(path: livePath, key: TestKeys.raw).restore(fromPath: backupPath) }
        }
    }

    @Test("an encrypted file loads into a keyed in-memory database and back")
    func memory() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"))
            let memory = try Connection.inMemory(encryption: .key(TestKeys.raw))
            try db.backup(to: memory)
            #expect(try memory.scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            try memory.execute("INSERT INTO t(body) VALUES ('from memory')")
            let backPath = dir.path("from-memory.db")
            try memory.backup(toPath: backPath, encryption: .key(TestKeys.otherPassphrase))
            #expect(!contains(try fileBytes(backPath), EncryptionTests.marker))
            #expect(try Connection(path: backPath, key: TestKeys.otherPassphrase)
                .scalar("SELECT count(*) FROM t", as: Int.self) == 2001)
            expectError(.invalidArgument) { try db.backup(to: try Connection.inMemory()) }
        }
    }

    @Test("the backup opens in the sqlcipher shell with its key", .enabled(if: !Engine.isVersion4,
        "the system sqlcipher shell is SQLCipher 3.4.1; it cannot open the SQLCipher 4 format this leg writes"))
    func shellReadsBackup() throws {
        guard let shell = which("sqlcipher") else {
            Issue.record("the sqlcipher shell is not installed (.ci/run installs it)")
            return
        }
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"))
            try db.backup(toPath: dir.path("backup.db"))
            let result = try run(shell, [dir.path("backup.db")],
                                 input: "PRAGMA key = \"\(TestKeys.rawText)\";\nSELECT count(*) FROM t;\n")
            #expect(result.output.contains("2000"))
        }
    }

    @Test("a missing folder, a read-only folder and a full disk give clear errors and leave no file")
    func fileSystemFailures() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.source(dir.path("live.db"), rows: 20000)   // over 1 MB, four times the tmpfs
            expectError(.fileSystem) { try db.backup(toPath: dir.path("missing/backup.db")) }

            guard let small = try? TemporaryMount(size: "256k", in: dir) else {
                Issue.record("mounting a small tmpfs failed; CI runs as root and must be able to (mount -t tmpfs)")
                return
            }
            let error = expectError(code: DatabaseError.SQLITE_FULL) {
                try db.backup(toPath: small.path + "/backup.db")
            }
            #expect(error?.message.contains("full") == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: small.path).isEmpty)

            try small.remountReadOnly()
            expectError(.fileSystem) { try db.backup(toPath: small.path + "/backup.db") }
        }
    }
}

/// A small tmpfs mounted for one test (needs root, which CI has), unmounted afterwards.
final class TemporaryMount {
    let path: String

    init(size: String, in directory: TemporaryDirectory) throws {
        path = directory.path("mount-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard try run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path]).status == 0 else {
            throw CocoaError(.fileWriteNoPermission)
        }
    }

    func remountReadOnly() throws {
        _ = try run("/bin/mount", ["-o", "remount,ro", path])
    }

    deinit {
        _ = try? run("/bin/umount", [path])
    }
}
