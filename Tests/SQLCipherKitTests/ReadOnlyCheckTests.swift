import Foundation
@testable import SQLCipherKit
import Testing

/// Every read-only check (the key check before a read-write open, the "which key opens it" probe, verification,
/// inspection) reads the database as SQLite will after recovery, writes nothing and creates nothing: a hot journal is
/// rolled back in memory, a WAL no connection holds is read through a private index.
@Suite("A read-only check reads as SQLite will after recovery, and writes nothing")
struct ReadOnlyCheckTests {
    /// The folder's files with their bytes: a check must change none and add none.
    static func folder(_ dir: TemporaryDirectory) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.url.path) {
            files[name] = try fileBytes(dir.path(name))
        }
        return files
    }

    static func hotJournalDatabase(_ dir: TemporaryDirectory) throws -> String {
        let path = dir.path("app.db")
        try KeyCheckWritesNothingTests.crashedJournalDatabase(path, in: dir)
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.url.path) where name.hasPrefix("live-") {
            try FileManager.default.removeItem(atPath: dir.path(name))
        }
        return path
    }

    @Test("a hot journal: the right key verifies and says so, a wrong key is refused, and nothing is written")
    func hotJournal() throws {
        try withTemporaryDirectory { dir in
            let path = try Self.hotJournalDatabase(dir)
            let before = try Self.folder(dir)
            #expect(before["app.db-journal"] != nil)

            let verification = try DatabaseVerification.verify(path: path, encryption: .key(TestKeys.raw))
            #expect(verification.hasHotJournal)
            #expect(verification.isIntact)
            #expect(verification.writeAheadLog == nil)
            #expect(try Self.folder(dir) == before)

            expectError(.wrongKey) { try DatabaseVerification.verify(path: path, encryption: .key(TestKeys.otherPassphrase)) }
            #expect(try Self.folder(dir) == before)
            #expect(Connection.probeKey(path: path, encryption: .key(TestKeys.raw)) == .opens)
            #expect(Connection.probeKey(path: path, encryption: .key(TestKeys.otherPassphrase)) == .doesNotOpen)
            let inspection = try DatabaseFileInspection.inspect(path: path, encryption: .key(TestKeys.raw))
            #expect(inspection.hasHotJournal)
            #expect(inspection.database?.journalMode == "delete")
            #expect(DatabaseFileInspection.inspect(path: path).hasHotJournal)
            #expect(try Self.folder(dir) == before)

            // The rows as the check saw them are the rows a read-write open leaves after its rollback; the rollback
            // took about the journal's pages in memory, no more.
            let check = ReadOnlyCheck(path: path)
            let seen = try check.run(encryption: .key(TestKeys.raw), busyTimeout: nil) { db in
                try db.scalar("SELECT count(*) FROM t WHERE body NOT LIKE 'unfinished%'", as: Int.self)
            }
            #expect(seen == 2000)
            #expect(check.rolledBackJournal)
            let journalSize = before["app.db-journal"]?.count ?? 0
            #expect(check.overlayMemoryHighWater > 0 && check.overlayMemoryHighWater <= journalSize,
                    "\(check.overlayMemoryHighWater) bytes in memory for a journal of \(journalSize)")
            #expect(try Self.folder(dir) == before)
            let db = try Connection(path: path, key: TestKeys.raw)
            try db.quickCheck()
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            #expect(try db.scalar("SELECT count(*) FROM t WHERE body LIKE 'unfinished%'", as: Int.self) == 0)
            db.close()
            #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
        }
    }

    @Test("a rekey killed mid-way: only the old key opens the file as its rollback will leave it")
    func interruptedRekey() throws {
        try withTemporaryDirectory { dir in
            let source = dir.path("source.db")
            try EncryptionTests.makeDatabase(source, rows: 2000)
            let path = dir.path("app.db")
            let newKey = TestKeys.passphrase
            try CrashedCopy.withInterruptedRekey(of: source, key: TestKeys.raw, newKey: newKey, table: "t", to: path)
            try FileManager.default.removeItem(atPath: source)
            let before = try Self.folder(dir)

            // As it lies, without its journal, the file opens with neither key.
            #expect(!Connection.opensWithoutSideFiles(path: path, encryption: .key(TestKeys.raw)))
            #expect(!Connection.opensWithoutSideFiles(path: path, encryption: .key(newKey)))
            #expect(Connection.probeKeys(path: path, old: .key(TestKeys.raw), new: .key(newKey)) == .old)
            #expect(try Self.folder(dir) == before)

            expectError(.wrongKey) { try Connection(path: path, key: newKey) }
            #expect(try Self.folder(dir) == before)
            let db = try Connection(path: path, key: TestKeys.raw)
            try db.quickCheck()
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            db.close()
        }
    }

    @Test("a WAL database nothing holds: checks create no -wal and no -shm, and read the WAL's commits",
          arguments: [false, true])
    func walNothingHolds(withWAL: Bool) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            if withWAL {
                try KeyCheckWritesNothingTests.crashedWALDatabase(path, in: dir)
                for name in try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
                where name.hasPrefix("live-") {
                    try FileManager.default.removeItem(atPath: dir.path(name))
                }
            } else {
                try EncryptionTests.makeDatabase(path, journalMode: "WAL", rows: 250)
            }
            let before = try Self.folder(dir)
            #expect((before["app.db-wal"] != nil) == withWAL)

            let verification = try DatabaseVerification.verify(path: path, encryption: .key(TestKeys.raw))
            #expect(verification.isIntact)
            #expect((verification.writeAheadLog != nil) == withWAL)
            #expect(!verification.isWriteAheadLogInUse)
            let inspection = try DatabaseFileInspection.inspect(path: path, encryption: .key(TestKeys.raw))
            #expect(inspection.database?.journalMode == "wal")
            #expect(Connection.probeKey(path: path, encryption: .key(TestKeys.raw)) == .opens)
            let rows = try ReadOnlyCheck(path: path).run(encryption: .key(TestKeys.raw), busyTimeout: nil) { db in
                try db.scalar("SELECT count(*) FROM t", as: Int.self)
            }
            #expect(rows == 250)
            #expect(try Self.folder(dir) == before)
        }
    }

    @Test("a same-key WAL of another database whose frames never touch page 1 is refused before it is checkpointed")
    func foreignWALWithoutPageOne() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, journalMode: "WAL", rows: 3000)
            let other = dir.path("other.db")
            try EncryptionTests.makeDatabase(other, journalMode: "WAL", rows: 3000)
            let writer = try Connection(path: other, key: TestKeys.raw)
            try writer.execute("PRAGMA wal_autocheckpoint = 0")
            // The same length: the row is rewritten in place, on its leaf page only.
            try writer.execute("UPDATE t SET body = lower(body) WHERE id = 1500")
            try FileManager.default.copyItem(atPath: other + "-wal", toPath: path + "-wal")
            writer.close()
            let pages = WALFrames(try fileBytes(path + "-wal")).frames.map(\.pageNumber)
            try #require(!pages.isEmpty && !pages.contains(1), "the WAL must not hold page 1: \(pages)")
            let before = KeyCheckWritesNothingTests.state(path)

            let error = expectError(.damaged) { try Connection(path: path, key: TestKeys.raw) }
            #expect(error?.message.contains("-wal") == true, "\(error.map { "\($0)" } ?? "")")
            #expect(KeyCheckWritesNothingTests.state(path) == before)
            #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
            #expect(try DatabaseVerification.verify(path: path, encryption: .key(TestKeys.raw)).isIntact == false)
            #expect(KeyCheckWritesNothingTests.state(path) == before)

            // Moved aside, as the message says: every row of the database is there, as it was.
            try FileManager.default.moveItem(atPath: path + "-wal", toPath: dir.path("aside-wal"))
            let db = try Connection(path: path, key: TestKeys.raw)
            try db.quickCheck()
            #expect(try db.scalar("SELECT count(*) FROM t WHERE body = lower(body)", as: Int.self) == 0)
            db.close()
        }
    }

    @Test("the check holds a read lock: another connection cannot commit while it reads, and can afterwards")
    func holdsReadLock() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, rows: 10)
            let writer = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: nil))
            try ReadOnlyCheck(path: path).run(encryption: .key(TestKeys.raw), busyTimeout: nil) { check in
                _ = try check.scalar("SELECT count(*) FROM t", as: Int.self)
                try writer.execute("BEGIN IMMEDIATE")
                try writer.execute("INSERT INTO t(body) VALUES ('during the check')")
                expectError(code: DatabaseError.SQLITE_BUSY) { try writer.execute("COMMIT") }
                try writer.execute("ROLLBACK")
                // Between its statements too: the lock lasts as long as the check.
                _ = try check.scalar("SELECT count(*) FROM t", as: Int.self)
                try writer.execute("BEGIN IMMEDIATE")
                try writer.execute("INSERT INTO t(body) VALUES ('during the check')")
                expectError(code: DatabaseError.SQLITE_BUSY) { try writer.execute("COMMIT") }
                try writer.execute("ROLLBACK")
                // SQL on the check's connection cannot write, not even into memory.
                #expect(check.isReadOnly)
                expectError(code: DatabaseError.SQLITE_READONLY) { try check.execute("DELETE FROM t") }
            }
            try writer.execute("INSERT INTO t(body) VALUES ('after the check')")
            #expect(try writer.scalar("SELECT count(*) FROM t", as: Int.self) == 11)
            writer.close()
        }
    }

    @Test("another process holding the WAL: the check reads through the live WAL index, as before",
          .enabled(if: PeerProcess.isAvailable, "needs python3 with sqlcipher3 (pip install sqlcipher3==0.6.4), as .ci/test installs"))
    func heldByAnotherProcess() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, journalMode: "WAL", rows: 10)
            let peer = try PeerProcess(database: path, rawKeyText: TestKeys.rawText)
            defer { peer.stop() }
            // The peer read the database before it said "ready": its WAL and WAL index exist.
            #expect(FileManager.default.fileExists(atPath: path + "-wal"))
            let check = ReadOnlyCheck(path: path)
            #expect(!check.usesOverlay)
            #expect(!check.otherProcessIDs.isEmpty)
            let verification = try DatabaseVerification.verify(path: path, encryption: .key(TestKeys.raw))
            #expect(verification.isIntact)
            #expect(verification.isWriteAheadLogInUse)
            #expect(verification.writeAheadLog == nil)
        }
    }
}
