import CSQLCipher
import Foundation
import SQLCipherKit
import Testing

/// Several connections (or processes) creating the same encrypted file at once. SQLCipher takes a file's salt when
/// the key is given and picks a random one for an empty file, so before the fix the connection that did not write
/// first held a salt of its own and failed with "file is encrypted or is not a database" at its first read.
@Suite("A new encrypted file created by several connections at once")
struct NewFileRaceTests {
    @Test("a connection keyed on the empty file while another creates it opens the file the other wrote")
    func keyedWhileAnotherCreates() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("new.db")
        // The other creator: a raw handle (as another process would be) holding the exclusive lock on the empty file.
        var creator: OpaquePointer?
        #expect(sqlite3_open_v2(path, &creator, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK)
        defer { sqlite3_close(creator) }
        let keyText = Array(TestKeys.rawText.utf8)
        #expect(sqlite3_key(creator, keyText, CInt(keyText.count)) == SQLITE_OK)
        #expect(sqlite3_exec(creator, "BEGIN EXCLUSIVE", nil, nil, nil) == SQLITE_OK)
        #expect(try fileBytes(path).isEmpty)

        // This connection keys the empty file now, then waits for the lock (its busy timeout only turns a hang into
        // a failure). The creator writes once the opener waits for the lock in SQLite's busy handler: it has keyed
        // the empty file by then, whatever the machine's load.
        let probe = try #require(BusyWaitProbe(), "the busy-wait probe VFS could not be registered")
        let result = Shared<Result<Int, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let opener = Thread {
            probe.watchCurrentThread()
            defer { probe.stopWatchingCurrentThread() }
            let outcome = Result<Int, any Error> {
                let db = try Connection(
                    path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: .seconds(120)))
                defer { db.close() }
                return try db.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1
            }
            result.withLock { $0 = outcome }
            finished.signal()
        }
        opener.start()
        _ = blockingWait { probe.hasWaitedForALock || result.withLock { $0 != nil } }
        #expect(probe.hasWaitedForALock, "the opener did not wait for the lock: \(String(describing: result.withLock { $0 }))")
        #expect(sqlite3_exec(creator, "CREATE TABLE t(x); INSERT INTO t VALUES (1); COMMIT", nil, nil, nil) == SQLITE_OK)
        #expect(finished.wait(timeout: .now() + 120) == .success, "the opener never ended")
        let count = try result.withLock { try $0?.get() }
        #expect(count == 1)

        // The file is the creator's: one salt, every row, and a fresh connection reads it.
        let fresh = try Connection(path: path, key: TestKeys.raw)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        try fresh.quickCheck()
    }

    @Test("connections racing to create one file all open it and every write is there")
    func racingCreators() throws {
        let dir = try TemporaryDirectory()
        for round in 0..<30 {
            let path = dir.path("race-\(round).db")
            let start = DispatchSemaphore(value: 0)
            let done = DispatchGroup()
            let failures = Shared<[String]>([])
            for writer in 0..<4 {
                done.enter()
                Thread {
                    defer { done.leave() }
                    start.wait()
                    do {
                        let db = try Connection(
                            path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: .seconds(120)))
                        defer { db.close() }
                        try db.execute("CREATE TABLE IF NOT EXISTS t(writer INTEGER)")
                        try db.execute("INSERT INTO t VALUES (?)", writer)
                    } catch {
                        failures.withLock { $0.append("writer \(writer): \(error)") }
                    }
                }.start()
            }
            for _ in 0..<4 { start.signal() }
            done.wait()
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
            let fresh = try Connection(path: path, key: TestKeys.raw)
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 4, "round \(round)")
            try fresh.quickCheck()
            fresh.close()
        }
    }

    @Test("opening a new file writes its first page: encrypted, private, and no other key opens it")
    func newFileHasItsSalt() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("fresh.db")
        let db = try Connection(path: path, key: TestKeys.raw)
        db.close()
        let bytes = try fileBytes(path)
        #expect(!bytes.isEmpty)
        #expect(Array(bytes.prefix(16)) != EncryptionTests.magic, "the first page is encrypted")
        #expect(try fileMode(path) == 0o600)
        // An empty file opened with any key; a written first page opens with its own key only.
        expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
        let again = try Connection(path: path, key: TestKeys.raw)
        #expect(try again.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) == 0)
        again.close()
    }
}
