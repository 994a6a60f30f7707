import SQLCipherKit
import Testing

/// An encrypted connection with an empty table `t(x)`.
private func openWithTable(_ path: String, options: OpenOptions = .init()) throws -> Connection {
    let db = try Connection(path: path, key: TestKeys.raw, options: options)
    try db.execute("CREATE TABLE IF NOT EXISTS t(x)")
    return db
}

private func values(_ db: Connection) throws -> [String] {
    try db.all("SELECT x FROM t ORDER BY rowid", as: String.self)
}

private struct Cancelled: Error {}

/// `#expect(throws: Cancelled.self)` as a function. Swift 6.3 gives a closure made by that macro inside a
/// `withTemporaryDirectory` closure the same name as a neighbouring closure, and then runs the wrong body
/// (`nm … | swift demangle | grep "unmangled suffix"` shows the collision).
private func expectCancelled<R>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R) {
    #expect(throws: Cancelled.self, sourceLocation: sourceLocation) { _ = try body() }
}

@Suite("Transactions and savepoints")
struct TransactionTests {
    // MARK: - transaction

    @Test("a transaction commits its work and returns the body's value")
    func commits() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            let result = try db.transaction { () throws -> Int in
                #expect(db.isInsideTransaction)
                try db.execute("INSERT INTO t VALUES ('a')")
                try db.execute("INSERT INTO t VALUES ('b')")
                return 42
            }
            #expect(result == 42)
            #expect(!db.isInsideTransaction)
            #expect(try values(try openWithTable(path)) == ["a", "b"])
        }
    }

    @Test("a throwing transaction rolls back and rethrows the body's error")
    func rollsBackOnThrow() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            try db.execute("INSERT INTO t VALUES ('before')")
            expectCancelled {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('undone')")
                    try db.execute("DELETE FROM t WHERE x = 'before'")
                    throw Cancelled()
                }
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(db) == ["before"])

            // A database error from the body also rolls back.
            try db.execute("CREATE TABLE u(x UNIQUE)")
            expectError(code: DatabaseError.SQLITE_CONSTRAINT_UNIQUE) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('undone too')")
                    try db.execute("INSERT INTO u VALUES (1), (1)")
                }
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(db) == ["before"])
            #expect(try db.scalar("SELECT count(*) FROM u", as: Int.self) == 0)
        }
    }

    @Test("a COMMIT that fails on a deferred foreign key rolls back and throws SQLITE_CONSTRAINT")
    func commitFailureRollsBack() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("fk.db"), key: TestKeys.raw)
            try db.execute("""
                PRAGMA foreign_keys = ON;
                CREATE TABLE parent(id INTEGER PRIMARY KEY);
                CREATE TABLE child(id INTEGER PRIMARY KEY,
                                   parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
                INSERT INTO parent(id) VALUES (1);
                """)
            #expect(try db.scalar("PRAGMA foreign_keys", as: Int.self) == 1)
            try db.transaction { try db.execute("INSERT INTO child(parent_id) VALUES (1)") }

            let error = expectError(code: DatabaseError.SQLITE_CONSTRAINT) {
                try db.transaction {
                    try db.execute("INSERT INTO child(id, parent_id) VALUES (99, 42)")  // orphan, checked at COMMIT
                    try db.execute("INSERT INTO parent(id) VALUES (2)")
                }
            }
            #expect(error?.extendedResultCode == DatabaseError.SQLITE_CONSTRAINT_FOREIGNKEY)
            #expect(error?.sql?.hasPrefix("COMMIT") == true)
            #expect(!db.isInsideTransaction)
            #expect(try db.scalar("SELECT count(*) FROM child WHERE id = 99", as: Int.self) == 0)
            #expect(try db.all("SELECT id FROM parent ORDER BY id", as: Int.self) == [1])
            // The connection is usable afterwards.
            try db.transaction { try db.execute("INSERT INTO parent(id) VALUES (3)") }
            #expect(try db.all("SELECT id FROM parent ORDER BY id", as: Int.self) == [1, 3])
        }
    }

    @Test("a transaction inside a transaction throws transactionMisuse; the outer one is unaffected")
    func nestedTransaction() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            try db.transaction {
                try db.execute("INSERT INTO t VALUES ('outer')")
                let error = expectError(.transactionMisuse) {
                    try db.transaction { try db.execute("INSERT INTO t VALUES ('inner')") }
                }
                #expect(error?.resultCode == DatabaseError.SQLITE_MISUSE)
                #expect(error?.message.contains("savepoint") == true)
                #expect(db.isInsideTransaction)
                try db.execute("INSERT INTO t VALUES ('outer 2')")
            }
            #expect(try values(db) == ["outer", "outer 2"])

            // Propagated, the misuse rolls the outer transaction back.
            expectError(.transactionMisuse) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('gone')")
                    try db.transaction {}
                }
            }
            #expect(try values(db) == ["outer", "outer 2"])

            // A manual BEGIN counts as an open transaction too.
            try db.beginTransaction()
            expectError(.transactionMisuse) { try db.transaction {} }
            expectError(.transactionMisuse) { try db.transaction(.deferred) {} }
            #expect(db.isInsideTransaction)
            try db.rollback()
        }
    }

    @Test("a nested transaction of each kind inside a read transaction throws transactionMisuse and takes no write lock")
    func nestedInsideReadTransaction() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            try db.execute("PRAGMA journal_mode = WAL")
            try db.execute("INSERT INTO t VALUES ('one')")
            let other = try openWithTable(path, options: OpenOptions(busyTimeout: .zero))
            for (count, kind) in [TransactionKind.deferred, .immediate, .exclusive].enumerated() {
                // A fresh read transaction each time: one that has seen an older snapshot could not take the write
                // lock anyway (SQLITE_BUSY_SNAPSHOT), and would hide a nested BEGIN that tried.
                try db.transaction(.deferred) {
                    #expect(try values(db).count == 1 + count)
                    let error = expectError(.transactionMisuse) { try db.transaction(kind) {} }
                    #expect(error?.message.contains("do not nest") == true)
                    #expect(db.isInsideTransaction)
                    // The outer transaction still only reads: another connection takes the write lock at once.
                    try other.transaction(.immediate) { try other.execute("INSERT INTO t VALUES ('other')") }
                    #expect(try values(db).count == 1 + count)
                }
            }
            #expect(try values(db) == ["one", "other", "other", "other"])
        }
    }

    @Test("a callback that empties the statement cache while BEGIN, COMMIT or ROLLBACK runs leaves that statement alive")
    func cacheEmptiedDuringTransactionStatement() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            // The slots are prepared; then a rollback hook sets an authorizer, which would empty the statement
            // cache (and with it the slot of the ROLLBACK that is running). The hook's contract says not to use the
            // connection: without the first fix, the running statement was finalized under the engine (signal 11
            // on both engines); now the hook's use of the connection is refused, and the ROLLBACK that ran the hook
            // says so once it has rolled back.
            try db.beginTransaction()
            try db.rollback()
            var rollbacks = 0
            try db.setRollbackHook {
                rollbacks += 1
                try? db.setAuthorizer(nil)
            }
            for value in ["rolled back 1", "rolled back 2"] {
                try db.beginTransaction()
                try db.execute("INSERT INTO t VALUES (?)", value)
                expectError(.callbackMisuse) { try db.rollback() }
                #expect(!db.isInsideTransaction)
            }
            #expect(rollbacks == 2)
            try db.setRollbackHook(nil)

            // A trace handler does the same at the end of each BEGIN and COMMIT (a trace event comes as the
            // statement ends, inside its step).
            var emptied = 0
            try db.trace { event in
                if event.sql.hasPrefix("BEGIN") || event.sql.hasPrefix("COMMIT") {
                    emptied += 1
                    try? db.setAuthorizer(nil)
                }
            }
            for index in 1...20 {
                try db.transaction { try db.execute("INSERT INTO t VALUES (?)", "kept \(index)") }
            }
            try db.trace(nil)
            #expect(emptied == 40)
            #expect(try values(db) == (1...20).map { "kept \($0)" })

            let fresh = try openWithTable(dir.path("t.db"))
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 20)
        }
    }

    @Test("a body that issues COMMIT itself gets transactionMisuse")
    func bodyCommits() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            let error = expectError(.transactionMisuse) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('committed by the body')")
                    try db.execute("COMMIT")
                    try db.execute("INSERT INTO t VALUES ('outside any transaction')")
                }
            }
            #expect(error?.message.contains("ended by its own body") == true)
            #expect(!db.isInsideTransaction)
            // As documented: the body's COMMIT stands, and the later statement ran in autocommit mode.
            #expect(try values(db) == ["committed by the body", "outside any transaction"])
        }
    }

    @Test("a body that issues ROLLBACK itself gets transactionMisuse")
    func bodyRollsBack() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            expectError(.transactionMisuse) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('rolled back by the body')")
                    try db.rollback()
                }
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(db).isEmpty)

            // A body that ends the transaction and then throws: the caller must not take its error for a rollback
            // (before, the body's own error was thrown, and what it committed looked rolled back).
            let error = expectError(.transactionMisuse) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('committed by the body')")
                    try db.commit()
                    throw Cancelled()
                }
            }
            #expect(error?.message.contains("Cancelled") == true)
            #expect(!db.isInsideTransaction)
            #expect(try values(db) == ["committed by the body"])
        }
    }

    // MARK: - Kinds

    @Test("an immediate transaction (the default) takes the write lock at BEGIN")
    func immediateKind() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            let other = try openWithTable(path, options: OpenOptions(busyTimeout: nil))
            let checkWriteLockHeld: () throws -> Void = {
                // Another connection may read but not write.
                let count = try other.scalar("SELECT count(*) FROM t", as: Int.self)
                #expect(count == 0)
                expectError(code: DatabaseError.SQLITE_BUSY) { try other.execute("INSERT INTO t VALUES ('o')") }
                expectError(code: DatabaseError.SQLITE_BUSY) { try other.execute("BEGIN IMMEDIATE") }
            }
            try db.transaction(.immediate, checkWriteLockHeld)
            try db.transaction { try checkWriteLockHeld() }
            #expect(TransactionKind.immediate.rawValue == "IMMEDIATE")
        }
    }

    @Test("a deferred transaction takes no lock until it first reads or writes")
    func deferredKind() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            let other = try openWithTable(path, options: OpenOptions(busyTimeout: nil))
            try db.transaction(.deferred) {
                #expect(db.isInsideTransaction)
                try other.execute("INSERT INTO t VALUES ('other')")  // no lock held yet
                try db.execute("INSERT INTO t VALUES ('mine')")
                expectError(code: DatabaseError.SQLITE_BUSY) { try other.execute("INSERT INTO t VALUES ('o2')") }
            }
            #expect(try values(db) == ["other", "mine"])
            #expect(TransactionKind.deferred.rawValue == "DEFERRED")
        }
    }

    @Test("an exclusive transaction keeps readers out (rollback journal)")
    func exclusiveKind() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            let other = try openWithTable(path, options: OpenOptions(busyTimeout: nil))
            try db.transaction(.exclusive) {
                try db.execute("INSERT INTO t VALUES ('mine')")
                expectError(code: DatabaseError.SQLITE_BUSY) { try other.scalar("SELECT count(*) FROM t", as: Int.self) }
            }
            #expect(try other.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
            #expect(TransactionKind.exclusive.rawValue == "EXCLUSIVE")
        }
    }

    @Test("beginTransaction, commit and rollback drive a transaction by hand")
    func manualTransaction() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            try db.beginTransaction()
            #expect(db.isInsideTransaction)
            try db.execute("INSERT INTO t VALUES ('kept')")
            try db.commit()
            #expect(!db.isInsideTransaction)
            try db.beginTransaction(.deferred)
            try db.execute("INSERT INTO t VALUES ('dropped')")
            try db.rollback()
            #expect(!db.isInsideTransaction)
            #expect(try values(db) == ["kept"])
            expectError(code: DatabaseError.SQLITE_ERROR) { try db.commit() }
            expectError(code: DatabaseError.SQLITE_ERROR) { try db.rollback() }
            try db.beginTransaction(.exclusive)
            expectError(code: DatabaseError.SQLITE_ERROR) { try db.beginTransaction() }
            try db.rollback()
        }
    }

    // MARK: - Savepoints

    @Test("a nested savepoint that throws rolls back alone while the outer work commits")
    func nestedSavepointRollsBackAlone() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            try db.transaction {
                try db.execute("INSERT INTO t VALUES ('outer')")
                expectCancelled {
                    try db.savepoint {
                        try db.execute("INSERT INTO t VALUES ('inner undone')")
                        throw Cancelled()
                    }
                }
                #expect(db.isInsideTransaction)
                try db.savepoint {
                    try db.execute("INSERT INTO t VALUES ('inner kept')")
                    expectCancelled {
                        try db.savepoint("deepest") {
                            try db.execute("INSERT INTO t VALUES ('deepest undone')")
                            throw Cancelled()
                        }
                    }
                }
                try db.execute("INSERT INTO t VALUES ('outer 2')")
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(try openWithTable(path)) == ["outer", "inner kept", "outer 2"])
        }
    }

    @Test("a savepoint outside a transaction acts as one: committed on return, rolled back on throw")
    func savepointAsTransaction() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            let result = try db.savepoint { () throws -> String in
                #expect(db.isInsideTransaction)
                try db.execute("INSERT INTO t VALUES ('saved')")
                return "done"
            }
            #expect(result == "done")
            #expect(!db.isInsideTransaction)
            #expect(try values(try openWithTable(path)) == ["saved"])

            expectCancelled {
                try db.savepoint {
                    try db.execute("INSERT INTO t VALUES ('undone')")
                    throw Cancelled()
                }
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(db) == ["saved"])
        }
    }

    @Test("savepoint names are quoted, so any text works")
    func savepointNamesQuoted() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir.path("t.db"))
            for name in ["plain", "with space", "with \"quote\"", "select", "; DROP TABLE t; --"] {
                try db.savepoint(name) { try db.execute("INSERT INTO t VALUES (?)", name) }
                expectCancelled {
                    try db.savepoint(name) {
                        try db.execute("INSERT INTO t VALUES ('undone')")
                        throw Cancelled()
                    }
                }
            }
            #expect(try values(db) == ["plain", "with space", "with \"quote\"", "select", "; DROP TABLE t; --"])
            #expect(Connection.quoteIdentifier("a\"b") == "\"a\"\"b\"")
            #expect(Connection.quoteIdentifier("") == "\"\"")
        }
    }

    /// How a body ends the savepoint it runs in.
    enum SavepointEnding: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case commit = "COMMIT", end = "END", releaseOwn = "RELEASE", rollback = "ROLLBACK"

        var testDescription: String { rawValue }

        /// The statement, for a savepoint named `name`.
        func sql(_ name: String) -> String { self == .releaseOwn ? "RELEASE \"\(name)\"" : rawValue }

        /// Whether the body's first write stays after it.
        var keepsFirstWrite: Bool { self != .rollback }
    }

    @Test("a savepoint whose body ends it, writes again and throws gets transactionMisuse; what stays is what it committed",
          arguments: SavepointEnding.allCases)
    func savepointEndedByBodyThenThrows(ending: SavepointEnding) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            // Before: the body's own error, and both writes kept with no word of it.
            let error = expectError(.transactionMisuse) {
                try db.savepoint("sp") {
                    try db.execute("INSERT INTO t VALUES ('first')")
                    try db.execute(ending.sql("sp"))
                    try db.execute("INSERT INTO t VALUES ('second, in autocommit')")
                    throw Cancelled()
                }
            }
            #expect(error?.message.contains("ended by its own body") == true)
            #expect(error?.message.contains("Cancelled") == true)
            #expect(!db.isInsideTransaction)
            let expected = (ending.keepsFirstWrite ? ["first"] : []) + ["second, in autocommit"]
            #expect(try values(try openWithTable(path)) == expected)
        }
    }

    @Test("a savepoint whose body ends it and returns gets transactionMisuse", arguments: SavepointEnding.allCases)
    func savepointEndedByBodyReturns(ending: SavepointEnding) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            expectError(.transactionMisuse) {
                try db.savepoint("sp") {
                    try db.execute("INSERT INTO t VALUES ('first')")
                    try db.execute(ending.sql("sp"))
                }
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(try openWithTable(path)) == (ending.keepsFirstWrite ? ["first"] : []))
        }
    }

    @Test("a savepoint whose body ends it and begins a transaction of its own: that transaction is rolled back")
    func savepointEndedByBodyThenBegins() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            for throwsAtTheEnd in [true, false] {
                expectError(.transactionMisuse) {
                    try db.savepoint {
                        try db.execute("INSERT INTO t VALUES ('committed by the body')")
                        try db.execute("COMMIT")
                        try db.execute("BEGIN")
                        try db.execute("INSERT INTO t VALUES ('in the body''s own transaction')")
                        if throwsAtTheEnd { throw Cancelled() }
                    }
                }
                #expect(!db.isInsideTransaction)
            }
            #expect(try values(try openWithTable(path)) == ["committed by the body", "committed by the body"])
        }
    }

    @Test("a nested savepoint that releases itself, writes again and throws: transactionMisuse, and the enclosing transaction rolls it all back")
    func nestedSavepointReleasedByBody() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            expectError(.transactionMisuse) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('outer')")
                    try db.savepoint("inner") {
                        try db.execute("INSERT INTO t VALUES ('inner')")
                        try db.execute("RELEASE inner")
                        try db.execute("INSERT INTO t VALUES ('after the release')")
                        throw Cancelled()
                    }
                }
            }
            #expect(!db.isInsideTransaction)
            #expect(try values(try openWithTable(path)).isEmpty)
        }
    }

    @Test("an engine rollback inside the body (an interrupted write) is not taken for the body's own COMMIT")
    func engineRollbackIsNotMisuse() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("t.db")
            let db = try openWithTable(path)
            var interrupts = false
            try db.setProgressHandler(every: 1) { interrupts }
            let insert = {
                interrupts = true
                defer { interrupts = false }
                try db.execute("INSERT INTO t VALUES ('interrupted')")
            }
            // An interrupted write rolls the whole transaction back: the body rethrows the interrupt, which is thrown
            // as it is.
            expectError(code: DatabaseError.SQLITE_INTERRUPT) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('rolled back by the engine')")
                    try insert()
                }
            }
            expectError(code: DatabaseError.SQLITE_INTERRUPT) {
                try db.savepoint {
                    try db.execute("INSERT INTO t VALUES ('rolled back by the engine')")
                    try insert()
                }
            }
            // A body that catches it and returns: transactionMisuse says the engine rolled back, not the body.
            let error = expectError(.transactionMisuse) {
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('rolled back by the engine')")
                    try? insert()
                }
            }
            #expect(error?.message.contains("engine rolled the transaction back") == true)
            #expect(!db.isInsideTransaction)
            #expect(try values(try openWithTable(path)).isEmpty)
        }
    }

    @Test("a savepoint whose RELEASE fails on a deferred foreign key rolls back and rethrows")
    func savepointReleaseFailure() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("fk.db"), key: TestKeys.raw)
            try db.execute("""
                PRAGMA foreign_keys = ON;
                CREATE TABLE parent(id INTEGER PRIMARY KEY);
                CREATE TABLE child(id INTEGER PRIMARY KEY,
                                   parent_id INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
                """)
            // Outside a transaction, releasing the outermost savepoint commits: the deferred check fails there.
            expectError(code: DatabaseError.SQLITE_CONSTRAINT) {
                try db.savepoint { try db.execute("INSERT INTO child(parent_id) VALUES (42)") }
            }
            #expect(!db.isInsideTransaction)
            #expect(try db.scalar("SELECT count(*) FROM child", as: Int.self) == 0)
        }
    }
}
