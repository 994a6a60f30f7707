import Foundation
import SQLCipherKit
import Testing

/// Checking a key never writes: no hot journal is rolled back and no write-ahead log checkpointed into a file before
/// its key is known to be right, and a side file that does not belong to the database is never replayed into it.
@Suite("A key check writes nothing")
struct KeyCheckWritesNothingTests {
    /// The database file and its side files, byte for byte (`nil` for a missing one).
    static func state(_ path: String) -> [String: [UInt8]?] {
        var files: [String: [UInt8]?] = [:]
        for suffix in ["", "-wal", "-journal"] {
            files[suffix] = try? fileBytes(path + suffix)
        }
        return files
    }

    static func rowCount(_ path: String, key: EncryptionKey = TestKeys.raw) throws -> Int {
        let db = try Connection(path: path, key: key)
        defer { db.close() }
        return try db.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1
    }

    /// A WAL database whose last transactions are only in its `-wal` (copied while a connection held it open, as a
    /// crash would leave it).
    static func crashedWALDatabase(_ path: String, in dir: TemporaryDirectory, key: EncryptionKey = TestKeys.raw,
                                   rows: Int = 200, walRows: Int = 50) throws {
        let live = dir.path("live-\(UUID().uuidString).db")
        try EncryptionTests.makeDatabase(live, key: key, journalMode: "WAL", rows: rows)
        try CrashedCopy.withWAL(of: live, key: key, table: "t", walRows: walRows, to: path)
    }

    /// A rollback-journal database copied in the middle of a large transaction: a hot journal, and pages of the
    /// unfinished transaction already in the main file.
    static func crashedJournalDatabase(_ path: String, in dir: TemporaryDirectory, key: EncryptionKey = TestKeys.raw)
        throws
    {
        let live = dir.path("live-\(UUID().uuidString).db")
        try EncryptionTests.makeDatabase(live, key: key, journalMode: "DELETE", rows: 2000)
        try CrashedCopy.withHotJournal(of: live, key: key, table: "t", keepingRows: 1000, to: path)
    }

    @Test("a wrong key beside the database's own WAL: refused, and the file and its WAL are as they were")
    func wrongKeyOwnWAL() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try Self.crashedWALDatabase(path, in: dir)
            let before = Self.state(path)
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            #expect(Self.state(path) == before)
            // The right key then recovers every committed row, the WAL's included.
            #expect(try Self.rowCount(path) == 250)
        }
    }

    @Test("a WAL of another database beside it: a wrong key and the right key both leave every byte as it was")
    func foreignWAL() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, journalMode: "WAL", rows: 3000)
            let other = dir.path("other.db")
            try Self.crashedWALDatabase(other, in: dir, key: TestKeys.passphrase)
            try FileManager.default.copyItem(atPath: other + "-wal", toPath: path + "-wal")
            let before = Self.state(path)

            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            #expect(Self.state(path) == before)
            let error = expectError(.damaged) { try Connection(path: path, key: TestKeys.raw) }
            #expect(error?.message.contains("-wal") == true)
            #expect(Self.state(path) == before)

            // Moved aside, as the message says: every row is there.
            try FileManager.default.moveItem(atPath: path + "-wal", toPath: dir.path("aside-wal"))
            #expect(try Self.rowCount(path) == 3000)
        }
    }

    @Test("a hot journal and a wrong key: nothing is rolled back; the right key then rolls it back")
    func hotJournalWrongKey() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try Self.crashedJournalDatabase(path, in: dir)
            let before = Self.state(path)
            #expect(before["-journal"] != nil)
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            #expect(Self.state(path) == before)

            // The scratch copy used for the check is gone.
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
                .filter { $0.contains("sqlcipherkit-tmp") }
            #expect(leftovers.isEmpty)

            let db = try Connection(path: path, key: TestKeys.raw)
            try db.quickCheck()
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 2000)
            #expect(try db.scalar("SELECT count(*) FROM t WHERE body LIKE 'unfinished%'", as: Int.self) == 0)
        }
    }

    @Test("a journal of another database beside it is never rolled back into it")
    func foreignJournal() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, journalMode: "DELETE", rows: 3000)
            let other = dir.path("other.db")
            try Self.crashedJournalDatabase(other, in: dir)
            try FileManager.default.copyItem(atPath: other + "-journal", toPath: path + "-journal")
            let before = Self.state(path)

            // Same key, another database: its journal carries its own salt.
            let error = expectError(.damaged) { try Connection(path: path, key: TestKeys.raw) }
            #expect(error?.message.contains("-journal") == true)
            #expect(Self.state(path) == before)
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            #expect(Self.state(path) == before)
        }
    }

    @Test("the busy timeout applies from the first read: the key check waits for another connection's lock")
    func busyTimeoutCoversTheKeyCheck() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, rows: 10)
            let holder = try Connection(path: path, key: TestKeys.raw)
            try holder.execute("BEGIN EXCLUSIVE")
            try holder.execute("INSERT INTO t(body) VALUES ('held')")
            // The opener runs on a thread of its own; the lock is let go once the opener waits for it in SQLite's
            // busy handler, not after a guessed time (which, on a loaded machine, could come before it even tried).
            let probe = try #require(BusyWaitProbe(), "the busy-wait probe VFS could not be registered")
            let outcome = Shared<Result<Int?, any Error>?>(nil)
            let finished = DispatchSemaphore(value: 0)
            Thread {
                probe.watchCurrentThread()
                defer { probe.stopWatchingCurrentThread() }
                let result = Result<Int?, any Error> {
                    let db = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: .seconds(120)))
                    defer { db.close() }
                    return try db.scalar("SELECT count(*) FROM t", as: Int.self)
                }
                outcome.withLock { $0 = result }
                finished.signal()
            }.start()
            _ = blockingWait { probe.hasWaitedForALock || outcome.withLock { $0 != nil } }
            // Before, the open failed at once with "database is locked": the timeout was set after the key check.
            #expect(probe.hasWaitedForALock, "the open did not wait for the lock: \(String(describing: outcome.withLock { $0 }))")
            try holder.execute("COMMIT")
            #expect(finished.wait(timeout: .now() + 120) == .success, "the open never ended")
            let count = try outcome.withLock { try $0?.get() }
            #expect(count == 11)
        }
    }

    @Test("a lock held by another process past the busy timeout is 'busy', not a wrong key",
          .enabled(if: PeerProcess.isAvailable, "needs python3 with sqlcipher3 (pip install sqlcipher3==0.6.4), as .ci/test installs"))
    func lockedIsBusy() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db")
            try EncryptionTests.makeDatabase(path, rows: 10)
            let peer = try PeerProcess(database: path, rawKeyText: TestKeys.rawText)
            defer { peer.stop() }
            try peer.send("lock")
            let before = Self.state(path)
            expectError(.busy) {
                try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: .milliseconds(100)))
            }
            #expect(Self.state(path) == before)
            try peer.send("unlock")
            #expect(try Self.rowCount(path) == 10)
        }
    }
}
