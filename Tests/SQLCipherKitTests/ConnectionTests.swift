import Foundation
import SQLCipherKit
import Synchronization
import Testing

/// Opens an encrypted connection with the fast raw test key.
private func openEncrypted(_ path: String, options: OpenOptions = .init()) throws -> Connection {
    try Connection(path: path, key: TestKeys.raw, options: options)
}

/// A flag shared with a helper thread.
private final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

@Suite("Connection")
struct ConnectionTests {
    // MARK: - Opening

    @Test("an encrypted connection creates a file whose bytes are not a plaintext SQLite file")
    func opensEncrypted() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("encrypted.db")
            do {
                let db = try openEncrypted(path)
                #expect(db.isEncrypted)
                #expect(db.path == path)
                #expect(!db.isClosed)
                #expect(db.sqliteConnection != nil)
                try db.execute("CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('plain-marker-31337')")
            }
            let bytes = try fileBytes(path)
            #expect(!bytes.isEmpty)
            #expect(!contains(bytes, "SQLite format 3"))
            #expect(!contains(bytes, "plain-marker-31337"))
            let reopened = try openEncrypted(path)
            #expect(try reopened.scalar("SELECT x FROM t", as: String.self) == "plain-marker-31337")
        }
    }

    @Test("a plaintext connection (.none) writes a standard SQLite file")
    func opensPlaintext() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("plain.db")
            do {
                let db = try Connection(path: path, encryption: .none)
                #expect(!db.isEncrypted)
                try db.execute("CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('plain-marker-31337')")
            }
            let bytes = try fileBytes(path)
            #expect(Array(bytes.prefix(16)) == Array("SQLite format 3".utf8) + [0])
            #expect(contains(bytes, "plain-marker-31337"))
        }
    }

    @Test("default open options create the file, wait 5 s for locks and cache 64 statements")
    func defaultOptions() {
        let options = OpenOptions()
        #expect(options.mode == .readWriteCreate)
        #expect(!options.isURI)
        #expect(options.busyTimeout == .seconds(5))
        #expect(options.statementCacheCapacity == 64)
    }

    @Test("readWrite mode on a missing file fails with SQLITE_CANTOPEN naming the path, and creates nothing")
    func readWriteRequiresExistingFile() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("missing.db")
            let error = expectError(code: DatabaseError.SQLITE_CANTOPEN) {
                try openEncrypted(path, options: OpenOptions(mode: .readWrite))
            }
            #expect(error?.message.contains(path) == true)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("a path in a missing folder fails with SQLITE_CANTOPEN")
    func missingFolder() throws {
        try withTemporaryDirectory { dir in
            expectError(code: DatabaseError.SQLITE_CANTOPEN) {
                try openEncrypted(dir.path("no-such-folder/x.db"))
            }
        }
    }

    @Test("readWrite mode opens an existing file")
    func readWriteOpensExisting() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("rw.db")
            try openEncrypted(path).execute("CREATE TABLE t(x)")
            let db = try openEncrypted(path, options: OpenOptions(mode: .readWrite))
            try db.execute("INSERT INTO t VALUES (1)")
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
            #expect(!db.isReadOnly)
        }
    }

    @Test("a read-only connection reads, and a write fails with SQLITE_READONLY leaving the data unchanged")
    func readOnlyRejectsWrites() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("ro.db")
            do {
                let db = try openEncrypted(path)
                try db.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)")
            }
            let before = try snapshot(path)
            let db = try openEncrypted(path, options: OpenOptions(mode: .readOnly))
            #expect(db.isReadOnly)
            #expect(try db.scalar("SELECT x FROM t", as: Int.self) == 1)
            let error = expectError(code: DatabaseError.SQLITE_READONLY) {
                try db.execute("INSERT INTO t VALUES (2)")
            }
            #expect(error?.kind == .sqlite)
            expectError(code: DatabaseError.SQLITE_READONLY) {
                try db.execute("UPDATE t SET x = ?", 5)
            }
            #expect(try db.all("SELECT x FROM t", as: Int.self) == [1])
            db.close()
            #expect(try snapshot(path) == before)
        }
    }

    @Test("a file: URI with mode=ro opens read-only when isURI is set")
    func uriFilename() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("uri.db")
            try openEncrypted(path).execute("CREATE TABLE t(x); INSERT INTO t VALUES (42)")
            let db = try openEncrypted("file:\(path)?mode=ro", options: OpenOptions(isURI: true))
            #expect(db.isReadOnly)
            #expect(db.filePath == path)
            #expect(try db.scalar("SELECT x FROM t", as: Int.self) == 42)
            expectError(code: DatabaseError.SQLITE_READONLY) {
                try db.execute("INSERT INTO t VALUES (43)")
            }
            let writable = try openEncrypted("file:\(path)?mode=rw", options: OpenOptions(isURI: true))
            #expect(!writable.isReadOnly)
            try writable.execute("INSERT INTO t VALUES (43)")
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 2)
        }
    }

    @Test("an in-memory connection keeps data in memory only and is private to the connection")
    func inMemory() throws {
        let db = try Connection.inMemory()
        #expect(!db.isEncrypted)
        #expect(db.filePath == "")
        #expect(db.path == ":memory:")
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        let other = try Connection.inMemory()
        expectError(code: DatabaseError.SQLITE_ERROR) { try other.execute("SELECT * FROM t") }
    }

    @Test("an in-memory connection accepts a key")
    func inMemoryWithKey() throws {
        let db = try Connection.inMemory(encryption: .key(TestKeys.raw))
        #expect(db.isEncrypted)
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES ('a')")
        #expect(try db.scalar("SELECT x FROM t", as: String.self) == "a")
    }

    @Test("a temporary connection works, has no file path and is private")
    func temporary() throws {
        let db = try Connection.temporary()
        #expect(db.filePath == "")
        #expect(!db.isEncrypted)
        #expect(db.description.contains("temporary"))
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)")
        #expect(try db.scalar("SELECT sum(x) FROM t", as: Int.self) == 3)
        let other = try Connection.temporary()
        expectError(code: DatabaseError.SQLITE_ERROR) { try other.execute("SELECT * FROM t") }
    }

    @Test("temp_store is forced to MEMORY")
    func tempStoreIsMemory() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("t.db"))
            #expect(try db.scalar("PRAGMA temp_store", as: Int.self) == 2)
        }
    }

    @Test("filePath is the full path SQLite resolved")
    func filePath() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("resolved.db")
            let db = try openEncrypted(path)
            #expect(db.filePath == path)
            db.close()
            #expect(db.filePath == "")
        }
    }

    // MARK: - Closing

    @Test("close finalizes, is idempotent, and later calls throw connectionClosed")
    func closeIsFinal() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("c.db"))
            try db.execute("CREATE TABLE t(x)")
            db.close()
            db.close()
            #expect(db.isClosed)
            #expect(db.sqliteConnection == nil)
            #expect(db.lastInsertRowID == 0)
            #expect(db.changesCount == 0)
            #expect(db.totalChangesCount == 0)
            #expect(db.isReadOnly)
            #expect(!db.isInsideTransaction)
            let error = expectError(.connectionClosed) { try db.execute("SELECT 1") }
            #expect(error?.sql == "SELECT 1")
            expectError(.connectionClosed) { try db.prepare("SELECT 1") }
            expectError(.connectionClosed) { try db.cachedStatement("SELECT 1") }
            expectError(.connectionClosed) { try db.execute("INSERT INTO t VALUES (?)", 1) }
            expectError(.connectionClosed) { try db.execute("INSERT INTO t VALUES (?)", arguments: [1]) }
            expectError(.connectionClosed) { try db.query("SELECT 1") }
            expectError(.connectionClosed) { try db.scalar("SELECT 1", as: Int.self) }
            expectError(.connectionClosed) { try db.setBusyTimeout(.seconds(1)) }
            expectError(.connectionClosed) { try db.transaction { } }
            expectError(.connectionClosed) { try db.savepoint { } }
            db.interrupt()  // does nothing
            db.interruptHandle.interrupt()
        }
    }

    @Test("closing rolls back an open transaction")
    func closeRollsBack() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("c.db")
            let db = try openEncrypted(path)
            try db.execute("CREATE TABLE t(x)")
            try db.beginTransaction()
            try db.execute("INSERT INTO t VALUES (1)")
            db.close()
            #expect(try openEncrypted(path).scalar("SELECT count(*) FROM t", as: Int.self) == 0)
        }
    }

    @Test("description names the path and encryption, never the key")
    func description() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("d.db")
            let db = try Connection(path: path, key: TestKeys.passphrase)
            #expect(db.description == "Connection(\(path), encrypted)")
            #expect(!db.description.contains(TestKeys.sentinel))
            db.close()
            #expect(db.description == "Connection(\(path), encrypted, closed)")
            let plain = try Connection(path: dir.path("p.db"), encryption: .none)
            #expect(plain.description.contains("plaintext"))
        }
    }

    // MARK: - State

    @Test("lastInsertRowID, changesCount and totalChangesCount follow the writes")
    func changeCounters() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("s.db"))
            #expect(db.totalChangesCount == 0)
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x)")
            try db.execute("INSERT INTO t(id, x) VALUES (?, ?)", 41, "a")
            #expect(db.lastInsertRowID == 41)
            #expect(db.changesCount == 1)
            try db.execute("INSERT INTO t(x) VALUES ('b'), ('c')")
            #expect(db.lastInsertRowID == 43)
            #expect(db.changesCount == 2)
            #expect(db.totalChangesCount == 3)
            try db.execute("UPDATE t SET x = 'z' WHERE id > ?", 0)
            #expect(db.changesCount == 3)
            #expect(db.totalChangesCount == 6)
            try db.execute("DELETE FROM t WHERE id = 41")
            #expect(db.changesCount == 1)
            #expect(db.totalChangesCount == 7)
            #expect(db.lastInsertRowID == 43)
        }
    }

    @Test("isInsideTransaction is true between BEGIN and COMMIT")
    func insideTransaction() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("s.db"))
            #expect(!db.isInsideTransaction)
            try db.execute("BEGIN")
            #expect(db.isInsideTransaction)
            try db.execute("COMMIT")
            #expect(!db.isInsideTransaction)
        }
    }

    // MARK: - Executing

    @Test("execute runs several statements, skipping comments and blank tails")
    func executeSeveral() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("e.db"))
            try db.execute("""
                CREATE TABLE t(x);  -- a comment
                INSERT INTO t VALUES (1);
                /* another */ INSERT INTO t VALUES (2);
                SELECT * FROM t;
                ;;  \n
                """)
            #expect(try db.all("SELECT x FROM t ORDER BY x", as: Int.self) == [1, 2])
            try db.execute("")
            try db.execute("   -- only a comment")
        }
    }

    @Test("an error in the middle of execute names the failing statement and keeps the earlier ones")
    func executeErrorInTheMiddle() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("e.db"))
            let prepareError = expectError(code: DatabaseError.SQLITE_ERROR) {
                try db.execute("CREATE TABLE a(x); INSERT INTO nope VALUES (1); CREATE TABLE b(x)")
            }
            #expect(prepareError?.sql == "INSERT INTO nope VALUES (1);")
            #expect(prepareError?.message.contains("no such table: nope") == true)
            #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'a'", as: Int.self) == 1)
            #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'b'", as: Int.self) == 0)

            try db.execute("CREATE TABLE u(x UNIQUE)")
            let stepError = expectError(code: DatabaseError.SQLITE_CONSTRAINT_UNIQUE) {
                try db.execute("INSERT INTO u VALUES (1); INSERT INTO u VALUES (1); INSERT INTO u VALUES (2)")
            }
            #expect(stepError?.sql == "INSERT INTO u VALUES (1);")
            #expect(try db.all("SELECT x FROM u", as: Int.self) == [1])

            let syntaxError = expectError(code: DatabaseError.SQLITE_ERROR) {
                try db.execute("INSERT INTO u VALUES (3); SELEC 1; INSERT INTO u VALUES (4)")
            }
            #expect(syntaxError?.sql?.hasPrefix("SELEC") == true)
            #expect(syntaxError?.sql?.contains("INSERT INTO u VALUES (3)") == false)
            #expect(try db.all("SELECT x FROM u ORDER BY x", as: Int.self) == [1, 3])
        }
    }

    @Test("execute with values binds them positionally, and with arguments binds arrays and dictionaries")
    func executeWithArguments() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("e.db"))
            try db.execute("CREATE TABLE t(a, b)")
            try db.execute("INSERT INTO t VALUES (?, ?)", 1, "one")
            try db.execute("INSERT INTO t VALUES (?, ?)", arguments: [2, nil])
            try db.execute("INSERT INTO t VALUES (:a, :b)", arguments: ["a": 3, "b": "three"])
            let rows = try db.query("SELECT a, b FROM t ORDER BY a")
            #expect(try rows.map { try $0[0] as Int } == [1, 2, 3])
            #expect(try rows.map { try $0[1] as String? } == ["one", nil, "three"])
            expectError(.invalidArgument) { try db.execute("INSERT INTO t VALUES (?, ?)", 4) }
            expectError(.invalidArgument) { try db.execute("INSERT INTO t VALUES (?, ?)", arguments: [4]) }
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
        }
    }

    // MARK: - Statement cache

    @Test("cachedStatement returns the same statement for the same SQL")
    func cacheReturnsSameStatement() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("c.db"))
            let first = try db.cachedStatement("SELECT 1")
            let second = try db.cachedStatement("SELECT 1")
            #expect(first === second)
            #expect(try db.cachedStatement("SELECT 2") !== first)
            #expect(try db.prepare("SELECT 1") !== first)
        }
    }

    @Test("a cached statement in use by an unfinished cursor is not handed out again")
    func busyCachedStatementYieldsFresh() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("c.db"))
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3)")
            let sql = "SELECT x FROM t ORDER BY x"
            let cached = try db.cachedStatement(sql)
            let outer = try db.cursor(sql)
            #expect(outer.statement === cached)
            _ = try outer.next()
            #expect(cached.isBusy)
            let fresh = try db.cachedStatement(sql)
            #expect(fresh !== cached)
            // The nested query does not disturb the outer cursor.
            #expect(try db.all(sql, as: Int.self) == [1, 2, 3])
            #expect(try outer.next()?[0] as Int? == 2)
            outer.close()
            #expect(try db.cachedStatement(sql) === cached)
        }
    }

    @Test("the statement cache keeps at most statementCacheCapacity statements, dropping the least recently used")
    func cacheCapacity() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("c.db"), options: OpenOptions(statementCacheCapacity: 2))
            let a = try db.cachedStatement("SELECT 'a'")
            let b = try db.cachedStatement("SELECT 'b'")
            #expect(try db.cachedStatement("SELECT 'a'") === a)  // a is now the most recently used
            let c = try db.cachedStatement("SELECT 'c'")  // evicts b
            #expect(try db.cachedStatement("SELECT 'a'") === a)
            #expect(try db.cachedStatement("SELECT 'c'") === c)
            #expect(try db.cachedStatement("SELECT 'b'") !== b)
        }
    }

    @Test("two statements used in turn are found without the LRU losing track; an evicted one is not found again")
    func cacheTwoInTurn() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("c.db"), options: OpenOptions(statementCacheCapacity: 2))
            let a = try db.cachedStatement("SELECT 'a'")
            let b = try db.cachedStatement("SELECT 'b'")
            for _ in 0..<3 {
                #expect(try db.cachedStatement("SELECT 'a'") === a)
                #expect(try db.cachedStatement("SELECT 'b'") === b)
            }
            #expect(try db.cachedStatement("SELECT 'a'") === a)  // b is now the least recently used
            let c = try db.cachedStatement("SELECT 'c'")  // evicts b, which was one of the two remembered
            #expect(try db.cachedStatement("SELECT 'b'") !== b)  // evicts a (c and the new b are newer)
            #expect(try db.cachedStatement("SELECT 'c'") === c)
            #expect(try db.cachedStatement("SELECT 'a'") !== a)
            #expect(try db.all("SELECT 'a' UNION ALL SELECT 'b'", as: String.self) == ["a", "b"])

            // Capacity 1: each new statement evicts the one remembered last, which must not be found again.
            let one = try openEncrypted(dir.path("one.db"), options: OpenOptions(statementCacheCapacity: 1))
            let first = try one.cachedStatement("SELECT 1")
            _ = try one.cachedStatement("SELECT 2")
            #expect(try one.cachedStatement("SELECT 1") !== first)
            #expect(try one.scalar("SELECT 1", as: Int.self) == 1)
        }
    }

    @Test("a statement cache of capacity 0 caches nothing")
    func cacheCapacityZero() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("c.db"), options: OpenOptions(statementCacheCapacity: 0))
            let first = try db.cachedStatement("SELECT 1")
            #expect(try db.cachedStatement("SELECT 1") !== first)
            #expect(try db.scalar("SELECT 1", as: Int.self) == 1)
        }
    }

    // MARK: - Busy and interrupt

    @Test("a write blocked by another connection's lock fails with SQLITE_BUSY after the busy timeout")
    func busyTimeout() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("busy.db")
            let holder = try openEncrypted(path)
            try holder.execute("CREATE TABLE t(x)")
            let waiter = try openEncrypted(path, options: OpenOptions(busyTimeout: .milliseconds(200)))
            try holder.execute("BEGIN IMMEDIATE")
            try holder.execute("INSERT INTO t VALUES ('holder')")

            let clock = ContinuousClock()
            let start = clock.now
            let error = expectError(code: DatabaseError.SQLITE_BUSY) {
                try waiter.execute("INSERT INTO t VALUES ('waiter')")
            }
            #expect(clock.now - start >= .milliseconds(150), "the busy timeout was not applied")
            #expect(error?.sql == "INSERT INTO t VALUES ('waiter')")
            expectError(code: DatabaseError.SQLITE_BUSY) {
                try waiter.transaction(.immediate) { try waiter.execute("INSERT INTO t VALUES ('waiter')") }
            }
            #expect(!waiter.isInsideTransaction)

            try waiter.setBusyTimeout(.milliseconds(400))
            let longer = clock.now
            expectError(code: DatabaseError.SQLITE_BUSY) { try waiter.execute("BEGIN IMMEDIATE") }
            #expect(clock.now - longer >= .milliseconds(350), "setBusyTimeout was not applied")

            try holder.execute("ROLLBACK")
            #expect(try waiter.scalar("SELECT count(*) FROM t", as: Int.self) == 0)
            try waiter.execute("INSERT INTO t VALUES ('waiter')")
            #expect(try holder.all("SELECT x FROM t", as: String.self) == ["waiter"])
        }
    }

    @Test("without a busy timeout a blocked write fails at once with SQLITE_BUSY")
    func noBusyTimeout() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("busy.db")
            let holder = try openEncrypted(path)
            try holder.execute("CREATE TABLE t(x)")
            let waiter = try openEncrypted(path, options: OpenOptions(busyTimeout: nil))
            try holder.execute("BEGIN EXCLUSIVE")
            expectError(code: DatabaseError.SQLITE_BUSY) { try waiter.execute("INSERT INTO t VALUES (1)") }
            try holder.execute("COMMIT")
            try waiter.execute("INSERT INTO t VALUES (1)")
        }
    }

    @Test("interrupt from another thread stops a long query with SQLITE_INTERRUPT; the connection stays usable")
    func interruptFromAnotherThread() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("i.db"))
            let handle = db.interruptHandle
            let stop = StopFlag()
            let finished = DispatchSemaphore(value: 0)
            // Interrupt repeatedly: an interrupt that arrives before the query starts is cleared by SQLite.
            Thread.detachNewThread {
                while !stop.isSet {
                    handle.interrupt()
                    Thread.sleep(forTimeInterval: 0.02)
                }
                finished.signal()
            }
            let sql = """
                WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
                SELECT count(*) FROM c
                """
            let error = expectError(code: DatabaseError.SQLITE_INTERRUPT) {
                try db.scalar(sql, as: Int.self)
            }
            stop.set()
            finished.wait()
            #expect(error?.sql == sql)
            #expect(try db.scalar("SELECT 1", as: Int.self) == 1)
        }
    }

    @Test("interrupt() on the connection's own thread stops the running statement at its next step")
    func interruptOnOwnThread() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("i.db"))
            let rows = try db.cursor("""
                WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
                SELECT x FROM c
                """)
            #expect(try rows.next()?[0] as Int? == 1)
            db.interrupt()
            expectError(code: DatabaseError.SQLITE_INTERRUPT) { try rows.next() }
            #expect(try rows.next() == nil)
            #expect(!rows.statement.isBusy)
            #expect(try db.scalar("SELECT 2", as: Int.self) == 2)
        }
    }

    @Test("an interrupt handle outlives its connection harmlessly")
    func interruptAfterClose() throws {
        let db = try Connection.inMemory()
        let handle = db.interruptHandle
        db.close()
        handle.interrupt()
        #expect(db.isClosed)
    }

    // MARK: - Query helpers

    @Test("query, scalar, first and all read rows with variadic or array arguments")
    func queryHelpers() throws {
        try withTemporaryDirectory { dir in
            let db = try openEncrypted(dir.path("q.db"))
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
            for name in ["a", "b", "c"] { try db.execute("INSERT INTO t(name) VALUES (?)", name) }

            let rows = try db.query("SELECT id, name FROM t WHERE id >= ? ORDER BY id", 2)
            #expect(rows.count == 2)
            #expect(try rows[0]["name"] as String == "b")
            let named = try db.query("SELECT name FROM t WHERE id = :id", arguments: ["id": 3])
            #expect(try named.map { try $0[0] as String } == ["c"])

            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
            #expect(try db.scalar("SELECT name FROM t WHERE id = ?", 99, as: String.self) == nil)
            let nullable: String?? = try db.scalar("SELECT NULL", as: String?.self)
            #expect(nullable == .some(nil))
            expectError(.valueConversion) { try db.scalar("SELECT NULL", as: String.self) }

            #expect(try db.first("SELECT id, name FROM t ORDER BY id DESC") { try $0["name"] as String } == "c")
            #expect(try db.first("SELECT id FROM t WHERE id > ?", 10) { try $0[0] as Int } == nil)

            #expect(try db.all("SELECT name FROM t ORDER BY id", as: String.self) == ["a", "b", "c"])
            #expect(try db.all("SELECT id FROM t WHERE id < ? ORDER BY id", 3, as: Int.self) == [1, 2])
            let pairs = try db.all("SELECT id, name FROM t ORDER BY id") { row in
                "\(try row[0] as Int)=\(try row[1] as String)"
            }
            #expect(pairs == ["1=a", "2=b", "3=c"])

            let cursor = try db.cursor("SELECT id FROM t WHERE name IN (:x, :y) ORDER BY id", arguments: ["x": "a", "y": "c"])
            #expect(try cursor.map { try $0[0] as Int } == [1, 3])
            #expect(try db.query("SELECT * FROM t WHERE id < 0").isEmpty)
        }
    }

    @Test("scalar and first release their statement, so another connection can lock the database exclusively")
    func helpersReleaseStatements() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("q.db")
            let db = try openEncrypted(path)
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)")
            _ = try db.scalar("SELECT x FROM t", as: Int.self)
            _ = try db.first("SELECT x FROM t") { try $0[0] as Int }
            #expect(!db.isInsideTransaction)
            let other = try openEncrypted(path, options: OpenOptions(busyTimeout: nil))
            try other.execute("BEGIN EXCLUSIVE")
            try other.execute("COMMIT")
        }
    }
}
