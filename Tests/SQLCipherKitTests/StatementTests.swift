import CSQLCipher
import SQLCipherKit
import Testing

/// Opens an encrypted connection with the fast raw test key and a table `t(id INTEGER PRIMARY KEY, a, b)`.
private func openWithTable(_ dir: borrowing TemporaryDirectory) throws -> Connection {
    let db = try Connection(path: dir.path("statement.db"), key: TestKeys.raw)
    try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT)")
    return db
}

@Suite("Statement")
struct StatementTests {
    // MARK: - Preparing

    @Test("prepare compiles one statement and reports its SQL, parameters and columns")
    func prepareReportsShape() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let select = try db.prepare("SELECT id, a AS alpha, b, a + 1 FROM t WHERE id > ? AND b = ?")
            #expect(select.sql == "SELECT id, a AS alpha, b, a + 1 FROM t WHERE id > ? AND b = ?")
            #expect(select.parameterCount == 2)
            #expect(select.columnCount == 4)
            #expect(select.columnNames == ["id", "alpha", "b", "a + 1"])
            #expect(try select.declaredType(ofColumn: 0) == "INTEGER")
            #expect(try select.declaredType(ofColumn: 1) == "INTEGER")
            #expect(try select.declaredType(ofColumn: 2) == "TEXT")
            #expect(try select.declaredType(ofColumn: 3) == nil)
            #expect(select.isReadOnly)
            #expect(!select.isBusy)

            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            #expect(insert.columnCount == 0)
            #expect(insert.columnNames.isEmpty)
            #expect(!insert.isReadOnly)
        }
    }

    @Test("declaredType rejects column indexes out of range")
    func declaredTypeOutOfRange() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let select = try db.prepare("SELECT a, b FROM t")
            for index in [-1, 2] {
                let error = expectError(.invalidArgument) { try select.declaredType(ofColumn: index) }
                #expect(error?.resultCode == DatabaseError.SQLITE_RANGE)
                #expect(error?.message.contains("\(index)") == true)
            }
        }
    }

    @Test("columnIndex finds the first column with a name, case-insensitively")
    func columnIndexByName() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let select = try db.prepare("SELECT a, b, a AS Upper, b AS a FROM t")
            #expect(select.columnIndex(named: "a") == 0)
            #expect(select.columnIndex(named: "A") == 0)
            #expect(select.columnIndex(named: "b") == 1)
            #expect(select.columnIndex(named: "upper") == 2)
            #expect(select.columnIndex(named: "UPPER") == 2)
            #expect(select.columnIndex(named: "Upper") == 2)
            #expect(select.columnIndex(named: "missing") == nil)
        }
    }

    @Test("a string with two statements is refused, naming the leftover SQL")
    func prepareRefusesTwoStatements() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let sql = "INSERT INTO t(a) VALUES (1); DELETE FROM t"
            let error = expectError(.invalidSQL) { try db.prepare(sql) }
            #expect(error?.message.contains("`DELETE FROM t`") == true)
            #expect(error?.sql == sql)
            #expect(error?.resultCode == DatabaseError.SQLITE_MISUSE)
            // Nothing ran.
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 0)

            let garbage = expectError(.invalidSQL) { try db.prepare("SELECT 1; garbage here") }
            #expect(garbage?.message.contains("garbage here") == true)
            expectError(.invalidSQL) { try db.cachedStatement("SELECT 1; SELECT 2") }
        }
    }

    @Test("execute, executeScript and prepare compile each statement once (the authorizer is asked once per INSERT)")
    func compiledOnce() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            var insertsAuthorized = 0
            try db.setAuthorizer { request in
                if request.actionCode == AuthorizerRequest.insert { insertsAuthorized += 1 }
                return .allow
            }
            let script = "INSERT INTO t(a) VALUES (1); SELECT a FROM t; INSERT INTO t(a) VALUES (2)"
            try db.execute(script)
            #expect(insertsAuthorized == 2, "execute")
            insertsAuthorized = 0
            var rowsSeen = 0
            try db.executeScript(script) { statement, _ in
                #expect(statement.sql == "SELECT a FROM t;")
                rowsSeen += 1
            }
            #expect(insertsAuthorized == 2, "executeScript compiled a statement twice")
            #expect(rowsSeen == 3)
            insertsAuthorized = 0
            try db.prepare("INSERT INTO t(a) VALUES (3);  -- done").run()
            #expect(insertsAuthorized == 1, "prepare")
            try db.setAuthorizer(nil)
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 5)
        }
    }

    @Test("a row handler that closes the connection mid-script: the next statement fails as closed, nothing after it runs")
    func scriptClosedByItsRowHandler() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let path = db.path
            try db.execute("INSERT INTO t(a) VALUES (1)")
            let script = "SELECT a FROM t; INSERT INTO t(a) VALUES (2); INSERT INTO t(a) VALUES (3)"
            var rowsSeen = 0
            expectError(.connectionClosed) {
                try db.executeScript(script) { _, _ in
                    rowsSeen += 1
                    db.close()
                }
            }
            #expect(rowsSeen == 1)
            // Counted with a fresh connection: neither INSERT after the close ran.
            let fresh = try Connection(path: path, key: TestKeys.raw)
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        }
    }

    @Test("a trailing semicolon, spaces or comment after the statement are accepted")
    func prepareAcceptsTrailingNoise() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            for sql in ["SELECT 1;", "SELECT 1 ;  \n", "SELECT 1; -- done", "SELECT 1; /* done */ ;"] {
                #expect(try db.prepare(sql).cursor().map { try $0[0] as Int } == [1])
            }
        }
    }

    @Test("empty SQL, blank SQL and a lone comment are refused as invalidSQL")
    func prepareRefusesEmptySQL() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            for sql in ["", "   ", "-- nothing", ";"] {
                let error = expectError(.invalidSQL) { try db.prepare(sql) }
                #expect(error?.message.contains("no statement") == true)
                #expect(error?.sql == sql)
            }
        }
    }

    @Test("a syntax error gives SQLITE_ERROR with SQLite's message and the SQL")
    func prepareSyntaxError() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let error = expectError(code: DatabaseError.SQLITE_ERROR) { try db.prepare("SELEC a FROM t") }
            #expect(error?.kind == .sqlite)
            #expect(error?.message.contains("syntax error") == true)
            #expect(error?.message.contains("SELEC") == true)
            #expect(error?.sql == "SELEC a FROM t")
            #expect(error?.description.contains("SELEC a FROM t") == true)

            let missing = expectError(code: DatabaseError.SQLITE_ERROR) { try db.prepare("SELECT * FROM nope") }
            #expect(missing?.message == "no such table: nope")
            let column = expectError(code: DatabaseError.SQLITE_ERROR) { try db.prepare("SELECT zzz FROM t") }
            #expect(column?.message == "no such column: zzz")
        }
    }

    // MARK: - Binding

    @Test("bind at an index binds parameters 1…n and rejects 0 and n+1")
    func bindAtIndex() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            for index in [0, 3, -1] {
                let error = expectError(.invalidArgument) { try insert.bind(1, at: index) }
                #expect(error?.extendedResultCode == DatabaseError.SQLITE_RANGE)
                #expect(error?.message.contains("parameter index \(index) out of range 1...2") == true)
            }
            try insert.bind(7, at: 1)
            try insert.bind("seven", at: 2)
            #expect(try !insert.step())
            #expect(try db.first("SELECT a, b FROM t") { "\(try $0[0] as Int) \(try $0[1] as String)" } == "7 seven")
            let none = try db.prepare("SELECT 1")
            expectError(.invalidArgument) { try none.bind(1, at: 1) }
        }
    }

    @Test("bind by name accepts :a, @a, $a and the bare name, and rejects unknown names")
    func bindByName() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let select = try db.prepare("SELECT :colon, @at, $dollar, ?4")
            #expect(select.parameterCount == 4)
            #expect(select.parameterName(at: 1) == ":colon")
            #expect(select.parameterName(at: 2) == "@at")
            #expect(select.parameterName(at: 3) == "$dollar")
            #expect(select.parameterName(at: 4) == "?4")
            #expect(select.parameterName(at: 0) == nil)
            #expect(select.parameterName(at: 5) == nil)
            #expect(try select.parameterIndex(named: "colon") == 1)
            #expect(try select.parameterIndex(named: ":colon") == 1)
            #expect(try select.parameterIndex(named: "at") == 2)
            #expect(try select.parameterIndex(named: "@at") == 2)
            #expect(try select.parameterIndex(named: "dollar") == 3)
            #expect(try select.parameterIndex(named: "$dollar") == 3)
            #expect(try select.parameterIndex(named: "?4") == 4)

            let row = try #require(
                try select.cursor(arguments: ["colon": "c", "@at": "a", "$dollar": "d", "?4": 4]).next())
            #expect(try row[0] as String == "c")
            #expect(try row[1] as String == "a")
            #expect(try row[2] as String == "d")
            #expect(try row[3] as Int == 4)

            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (@a, $b)")
            try insert.bind(10, named: "a")
            try insert.bind("ten", named: "$b")
            #expect(try !insert.step())
            #expect(try db.first("SELECT a, b FROM t") { "\(try $0[0] as Int) \(try $0[1] as String)" } == "10 ten")

            for name in ["nope", ":at", "@colon", ""] {
                let error = expectError(.invalidArgument) { try select.bind(1, named: name) }
                #expect(error?.extendedResultCode == DatabaseError.SQLITE_RANGE)
                #expect(error?.message.contains("no parameter named `\(name)`") == true)
            }
            expectError(.invalidArgument) { try select.parameterIndex(named: "nope") }
            let positional = try db.prepare("SELECT ?")
            #expect(positional.parameterName(at: 1) == nil)
        }
    }

    @Test("variadic bind and run check the number of values")
    func wrongArgumentCount() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            let tooFew = expectError(.invalidArgument) { try insert.run(1) }
            #expect(tooFew?.message.contains("takes 2 argument(s), 1 given") == true)
            #expect(tooFew?.extendedResultCode == DatabaseError.SQLITE_RANGE)
            expectError(.invalidArgument) { try insert.run(1, "x", 3) }
            expectError(.invalidArgument) { try insert.run() }
            expectError(.invalidArgument) { try insert.bind(1) }
            expectError(.invalidArgument) { try insert.run(arguments: [1]) }
            expectError(.invalidArgument) { try insert.run(arguments: [1, "x", nil]) }
            expectError(.invalidArgument) { try insert.cursor(1, 2, 3) }
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 0)
            try insert.run(1, "x")
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        }
    }

    @Test("named arguments must cover every named parameter and name only existing ones")
    func namedArgumentsChecked() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (:a, :b)")
            let missing = expectError(.invalidArgument) { try insert.run(arguments: ["a": 1]) }
            #expect(missing?.message.contains("no value for parameter `:b`") == true)
            let unknown = expectError(.invalidArgument) { try insert.run(arguments: ["a": 1, "b": "x", "c": 3]) }
            #expect(unknown?.message.contains("`c`") == true)
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 0)
            try insert.run(arguments: ["a": 1, "b": nil])
            try insert.run(arguments: StatementArguments([":a": 2, ":b": "two"]))
            expectError(.invalidArgument) { try insert.run(arguments: ["@a": 3, "$b": "three"]) }
            #expect(try db.all("SELECT b FROM t ORDER BY a", as: String?.self) == [nil, "two"])
        }
    }

    @Test("the same named parameter used twice is bound once")
    func repeatedNamedParameter() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            #expect(try db.prepare("SELECT :x + :x").parameterCount == 1)
            expectError(.invalidArgument) { try db.scalar("SELECT :x * :x", as: Int.self) }
            #expect(try db.scalar("SELECT :x * :x", 7, as: Int.self) == 49)
            let rows = try db.query("SELECT :x * :x", arguments: ["x": 7])
            #expect(try rows[0][0] as Int == 49)
        }
    }

    @Test("array arguments bind positionally, nil binds NULL")
    func arrayArguments() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            try insert.run(arguments: [1, nil])
            try insert.run(arguments: StatementArguments([2, "two"]))
            let values: [(any DatabaseValueConvertible)?] = [3, "three"]
            try insert.run(arguments: StatementArguments(values))
            #expect(try db.scalar("SELECT typeof(b) FROM t WHERE a = 1", as: String.self) == "null")
            #expect(try db.all("SELECT b FROM t ORDER BY a", as: String?.self) == [nil, "two", "three"])
        }
    }

    @Test("reset keeps the bound values for the next run; clearBindings sets them back to NULL")
    func resetKeepsBindings() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            try insert.bind(5, "five")
            #expect(try !insert.step())
            try insert.reset()
            #expect(try !insert.step())
            try insert.reset()
            try insert.clearBindings()
            #expect(try !insert.step())
            #expect(try db.all("SELECT a FROM t ORDER BY id", as: Int?.self) == [5, 5, nil])
        }
    }

    // MARK: - Running

    @Test("run executes to completion many times, and a failed run can be retried")
    func runRepeatedly() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            try db.execute("CREATE UNIQUE INDEX ta ON t(a)")
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            for value in 1...5 { try insert.run(value, "v\(value)") }
            #expect(db.lastInsertRowID == 5)
            let error = expectError(code: DatabaseError.SQLITE_CONSTRAINT_UNIQUE) { try insert.run(3, "dup") }
            #expect(error?.sql == insert.sql)
            #expect(!insert.isBusy)
            try insert.run(6, "v6")
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 6)
            // A SELECT run to completion steps over its rows.
            let select = try db.prepare("SELECT * FROM t")
            try select.run()
            #expect(!select.isBusy)
        }
    }

    @Test("step reports rows until done; a step error resets the statement")
    func stepAndErrors() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            try db.execute("INSERT INTO t(a) VALUES (1), (-9223372036854775808)")
            let select = try db.prepare("SELECT abs(a) FROM t ORDER BY id")
            #expect(try select.step())
            #expect(select.isBusy)
            let error = expectError(code: DatabaseError.SQLITE_ERROR) { try select.step() }
            #expect(error?.message.contains("integer overflow") == true)
            #expect(!select.isBusy)
            #expect(try select.step())
            try select.reset()
            #expect(!select.isBusy)

            let empty = try db.prepare("SELECT a FROM t WHERE a > 100")
            #expect(try !empty.step())
            #expect(!empty.isBusy)
        }
    }

    @Test("a statement stepped to its end by the caller runs again: run, bind, and first/all/scalar on a cached one")
    func haltedStatementRunsAgain() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            // step() to SQLITE_DONE leaves a statement halted, not busy: SQLite refuses to bind it until it is reset.
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, ?)")
            try insert.bind(1, "one")
            #expect(try !insert.step())
            #expect(!insert.isBusy)
            try insert.run(2, "two")
            try insert.bind(3, "three")
            #expect(try !insert.step())
            try insert.bind(4, "four")
            #expect(try !insert.step())
            #expect(try db.all("SELECT a FROM t ORDER BY a", as: Int.self) == [1, 2, 3, 4])

            // A cached SELECT stepped to its end through step(), then read again through the cache.
            let sql = "SELECT b FROM t WHERE a = ?"
            let cached = try db.cachedStatement(sql)
            try cached.bind(2)
            #expect(try cached.step())
            #expect(try !cached.step())
            #expect(try db.cachedStatement(sql) === cached)
            #expect(try db.first(sql, 3) { row in try row[0] as String } == "three")
            while try cached.step() {}
            #expect(try db.all(sql, 1) { row in try row[0] as String } == ["one"])
            while try cached.step() {}
            #expect(try db.scalar(sql, 2, as: String.self) == "two")

            // The same, stepped through the raw sqlite3_stmt, with and without parameters.
            while sqlite3_step(cached.sqliteStatement) == SQLITE_ROW {}
            #expect(try db.first(sql, 1) { row in try row[0] as String } == "one")
            while sqlite3_step(cached.sqliteStatement) == SQLITE_ROW {}
            #expect(try db.all(sql, 4) { row in try row[0] as String } == ["four"])
            let count = "SELECT count(*) FROM t"
            #expect(try db.scalar(count, as: Int.self) == 4)
            let counting = try db.cachedStatement(count)
            #expect(sqlite3_step(counting.sqliteStatement) == SQLITE_ROW)
            #expect(sqlite3_step(counting.sqliteStatement) == SQLITE_DONE)
            #expect(try db.scalar(count, as: Int.self) == 4)
            #expect(try db.cachedStatement(count) === counting)

            // A statement mid-run is not reset by a bind: its rows are still being read.
            let all = try db.prepare("SELECT a FROM t WHERE a > ? ORDER BY a")
            let rows = try all.cursor(0)
            #expect(try rows.next().map { try $0[0] as Int } == 1)
            expectError(code: DatabaseError.SQLITE_MISUSE) { try all.bind(2, at: 1) }
            #expect(try rows.next().map { try $0[0] as Int } == 2)
        }
    }

    @Test("a cursor not yet stepped keeps its rows when the same SQL runs again through the cache, or its statement runs")
    func openCursorKeepsItsRows() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            try db.execute("INSERT INTO t(a) VALUES (1), (2), (3), (4)")
            let sql = "SELECT a FROM t WHERE a > ? ORDER BY a"

            // Before the fix the cache handed the cursor's statement (not busy before its first step) to the
            // second call, which bound 2 over the cursor's 0: the cursor read [3, 4].
            let rows = try db.cursor(sql, 0)
            #expect(try db.all(sql, 2) { row in try row[0] as Int } == [3, 4])
            try db.execute(sql, 3)
            #expect(try db.first(sql, 1) { row in try row[0] as Int } == 2)
            #expect(try rows.map { try $0[0] as Int } == [1, 2, 3, 4])
            // Once the cursor is done, the cache hands its statement out again.
            #expect(try db.cachedStatement(sql) === rows.statement)

            // A cursor left open without finishing keeps its statement to itself until it is released.
            var unfinished: RowCursor? = try db.cursor(sql, 0)
            let held = unfinished?.statement
            #expect(try db.cachedStatement(sql) !== held)
            unfinished = nil
            #expect(try db.cachedStatement(sql) === held)

            // Running a statement ends the cursors over it (as a new cursor does) instead of rebinding under them:
            // before the fix this cursor read [1, 3, 4].
            let select = try db.prepare(sql)
            let cursor = try select.cursor(0)
            #expect(try cursor.next().map { try $0[0] as Int } == 1)
            try select.run(2)
            #expect(try cursor.next() == nil)
            #expect(try select.cursor(2).map { try $0[0] as Int } == [3, 4])
        }
    }

    @Test("a cursor reads rows in order and resets the statement at the end")
    func cursorReadsRows() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            try db.execute("INSERT INTO t(a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z')")
            let select = try db.prepare("SELECT a, b FROM t WHERE a >= ? ORDER BY a")
            let rows = try select.cursor(2)
            #expect(rows.statement === select)
            var seen: [String] = []
            while let row = try rows.next() { seen.append(try row["b"]) }
            #expect(seen == ["y", "z"])
            #expect(!select.isBusy)
            #expect(try rows.next() == nil)
            // The cursor can be re-created with other arguments.
            #expect(try select.cursor(arguments: [3]).map { try $0[1] as String } == ["z"])
        }
    }

    @Test("a statement can be reused with a new cursor even if the previous one was not finished")
    func cursorRecreatedMidway() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            try db.execute("INSERT INTO t(a) VALUES (1), (2), (3)")
            let select = try db.prepare("SELECT a FROM t ORDER BY a")
            let first = try select.cursor()
            _ = try first.next()
            let second = try select.cursor()
            #expect(try second.map { try $0[0] as Int } == [1, 2, 3])
        }
    }

    // MARK: - Closed connection

    @Test("a statement used after its connection closed throws connectionClosed and does not crash")
    func usedAfterClose() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            try db.execute("INSERT INTO t(a) VALUES (1), (2)")
            let select = try db.prepare("SELECT a, b FROM t WHERE a > :min")
            let cached = try db.cachedStatement("SELECT a FROM t")
            let running = try db.prepare("SELECT a FROM t")
            let cursor = try running.cursor()
            _ = try cursor.next()
            db.close()

            let error = expectError(.connectionClosed) { try select.step() }
            #expect(error?.sql == select.sql)
            #expect(error?.resultCode == DatabaseError.SQLITE_MISUSE)
            expectError(.connectionClosed) { try select.reset() }
            expectError(.connectionClosed) { try select.clearBindings() }
            expectError(.connectionClosed) { try select.bind(1, at: 1) }
            expectError(.connectionClosed) { try select.bind(1, named: "min") }
            expectError(.connectionClosed) { try select.bind(1) }
            expectError(.connectionClosed) { try select.bind(arguments: ["min": 1]) }
            expectError(.connectionClosed) { try select.run(1) }
            expectError(.connectionClosed) { try select.run(arguments: [1]) }
            expectError(.connectionClosed) { try select.cursor(1) }
            expectError(.connectionClosed) { try select.cursor(arguments: [1]) }
            expectError(.connectionClosed) { try select.parameterIndex(named: "min") }
            expectError(.connectionClosed) { try select.declaredType(ofColumn: 0) }
            expectError(.connectionClosed) { try cached.step() }
            expectError(.connectionClosed) { try cursor.next() }
            #expect(try cursor.next() == nil)
            cursor.close()
            #expect(!select.isBusy)
            #expect(!running.isBusy)
            #expect(!select.isReadOnly)
            #expect(select.description == "SELECT a, b FROM t WHERE a > :min")
        }
    }

    @Test("statements and cursors released after their connection do not crash")
    func releasedAfterConnection() throws {
        try withTemporaryDirectory { dir in
            var statement: Statement?
            var cursor: RowCursor?
            do {
                let db = try openWithTable(dir)
                try db.execute("INSERT INTO t(a) VALUES (1), (2)")
                statement = try db.prepare("SELECT a FROM t")
                cursor = try db.cursor("SELECT a FROM t")
                _ = try cursor?.next()
            }
            expectError(.connectionClosed) { try statement?.step() }
            cursor = nil
            statement = nil
            #expect(statement == nil && cursor == nil)
        }
    }

    // MARK: - Description

    @Test("description is the SQL, never the bound values")
    func descriptionHidesArguments() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithTable(dir)
            let insert = try db.prepare("INSERT INTO t(a, b) VALUES (?, :secret)")
            try insert.bind(123_456_789, "secret-value-xyz")
            #expect(insert.description == "INSERT INTO t(a, b) VALUES (?, :secret)")
            #expect(!"\(insert)".contains("secret-value-xyz"))
            #expect(!"\(insert)".contains("123456789"))
        }
    }
}
