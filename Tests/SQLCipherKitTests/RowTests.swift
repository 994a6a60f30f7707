import SQLCipherKit
import Testing

/// An encrypted connection with `person(id, name, age, note)` holding three rows.
private func openPeople(_ dir: borrowing TemporaryDirectory, name: String = "rows.db") throws -> Connection {
    let db = try Connection(path: dir.path(name), key: TestKeys.raw)
    try db.execute("""
        CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, note BLOB);
        INSERT INTO person(name, age, note) VALUES ('Ada', 36, x'0102'), ('Brian', NULL, NULL), ('Cleo', 7, x'');
        """)
    return db
}

@Suite("Row and RowCursor")
struct RowTests {
    // MARK: - Row

    @Test("a row reads columns by index and by case-insensitive name")
    func readsByIndexAndName() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let row = try #require(try db.query("SELECT id, name, age, note FROM person WHERE id = 1").first)
            #expect(row.count == 4)
            #expect(row.columnNames == ["id", "name", "age", "note"])
            #expect(try row[0] as Int64 == 1)
            #expect(try row[1] as String == "Ada")
            #expect(try row["name"] as String == "Ada")
            #expect(try row["NAME"] as String == "Ada")
            #expect(try row["Age"] as Int == 36)
            #expect(try row["note"] as [UInt8] == [1, 2])
            #expect(row.hasColumn("age"))
            #expect(row.hasColumn("AGE"))
            #expect(!row.hasColumn("missing"))
            #expect(try row.databaseValue(at: 2) == .integer(36))
            #expect(try row.databaseValues == [.integer(1), .text("Ada"), .integer(36), .blob([1, 2])])
        }
    }

    @Test("NULL reads as nil for an optional type and fails for a non-optional one, naming the column")
    func nullHandling() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let row = try #require(try db.query("SELECT name, age FROM person WHERE id = 2").first)
            #expect(try row["age"] as Int? == nil)
            let error = expectError(.valueConversion) { try row["age"] as Int }
            #expect(error?.message.contains("column `age` (index 1)") == true)
            #expect(error?.message.contains("NULL cannot be read as non-optional Int") == true)
            #expect(error?.sql == "SELECT name, age FROM person WHERE id = 2")
            #expect(try row.databaseValue(at: 1) == .null)
        }
    }

    @Test("TEXT read as Int fails with valueConversion naming the column and both types")
    func textAsInt() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            // Both the in-place row of a cursor and a copied row.
            let cursor = try db.cursor("SELECT name FROM person WHERE id = 1")
            let live = try #require(try cursor.next())
            let error = expectError(.valueConversion) { try live[0] as Int }
            #expect(error?.message == "column `name` (index 0): TEXT value cannot be represented as Int")
            #expect(error?.extendedResultCode == DatabaseError.SQLITE_MISMATCH)
            let copied = try live.copy()
            cursor.close()
            expectError(.valueConversion) { try copied["name"] as Int }
            #expect(try copied["name"] as String == "Ada")
        }
    }

    @Test("an index out of range or an unknown column name fails with invalidArgument")
    func badColumn() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let row = try #require(try db.query("SELECT id, name FROM person").first)
            for index in [-1, 2, 100] {
                let error = expectError(.invalidArgument) { try row[index] as Int }
                #expect(error?.extendedResultCode == DatabaseError.SQLITE_RANGE)
                #expect(error?.message.contains("column index \(index) out of range 0..<2") == true)
            }
            let error = expectError(.invalidArgument) { try row["age"] as Int }
            #expect(error?.message.contains("no column named `age`") == true)
            expectError(.invalidArgument) { try row.databaseValue(at: 5) }
        }
    }

    @Test("a column name that appears twice reads the first column")
    func duplicateNames() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let row = try #require(try db.query("SELECT 1 AS x, 2 AS x").first)
            #expect(try row["x"] as Int == 1)
            #expect(try row[1] as Int == 2)
        }
    }

    @Test("a copied row keeps its values after the cursor moves on; a live row refuses to read once it has")
    func copyIsStable() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let cursor = try db.cursor("SELECT name FROM person ORDER BY id")
            let first = try #require(try cursor.next())
            let copy = try first.copy()
            #expect(try copy.copy().databaseValues == [.text("Ada")])
            _ = try cursor.next()
            #expect(try copy[0] as String == "Ada")
            // It read the next person's name (Brian) before: a wrong answer with no error.
            expectError(.rowMisuse) { try first[0] as String }
            #expect(copy.columnNames == ["name"])
        }
    }

    @Test("rows returned by query stay readable after the connection closes")
    func queryRowsOutliveConnection() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let rows = try db.query("SELECT id, name, age FROM person ORDER BY id")
            db.close()
            #expect(rows.count == 3)
            #expect(try rows[2][1] as String == "Cleo")
            #expect(try rows[2]["name"] as String == "Cleo")
            #expect(rows[2].columnNames == ["id", "name", "age"])
            #expect(rows[1].hasColumn("age"))
            #expect(rows[0].description == "[id: INTEGER, name: TEXT, age: INTEGER]")
            let error = expectError(.valueConversion) { try rows[1]["age"] as Int }
            #expect(error?.message.contains("`age`") == true)
        }
    }

    @Test("a row's description lists column names and storage classes, never the values")
    func descriptionHidesValues() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            try db.execute("INSERT INTO person(name, age) VALUES ('secret-name-xyz', 987654)")
            let rows = try db.query("SELECT name, age, note, 1.5 AS r FROM person WHERE name = ?", "secret-name-xyz")
            let row = try #require(rows.first)
            #expect(row.description == "[name: TEXT, age: INTEGER, note: NULL, r: REAL]")
            #expect(!"\(rows)".contains("secret-name-xyz"))
            #expect(!"\(rows)".contains("987654"))
            let cursor = try db.cursor("SELECT name FROM person WHERE name = ?", "secret-name-xyz")
            let live = try #require(try cursor.next())
            #expect(live.description == "[name: TEXT]")
        }
    }

    // MARK: - RowCursor

    @Test("next returns each row then nil, and keeps returning nil")
    func cursorNext() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let cursor = try db.cursor("SELECT name FROM person ORDER BY id")
            var names: [String] = []
            while let row = try cursor.next() { names.append(try row[0]) }
            #expect(names == ["Ada", "Brian", "Cleo"])
            #expect(try cursor.next() == nil)
            #expect(try cursor.next() == nil)
            #expect(!cursor.statement.isBusy)
        }
    }

    @Test("forEach and map visit the remaining rows")
    func cursorForEachAndMap() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let cursor = try db.cursor("SELECT id FROM person ORDER BY id")
            _ = try cursor.next()
            var ids: [Int] = []
            try cursor.forEach { ids.append(try $0[0]) }
            #expect(ids == [2, 3])
            let mapped = try db.cursor("SELECT age FROM person ORDER BY id").map { try $0[0] as Int? }
            #expect(mapped == [36, nil, 7])
            let empty = try db.cursor("SELECT id FROM person WHERE id < ?", 0).map { try $0[0] as Int }
            #expect(empty.isEmpty)
        }
    }

    @Test("an error thrown by forEach's body stops the iteration and propagates")
    func forEachBodyError() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let cursor = try db.cursor("SELECT name, age FROM person ORDER BY id")
            var seen: [String] = []
            expectError(.valueConversion) {
                try cursor.forEach { row in
                    seen.append(try row["name"])
                    _ = try row["age"] as Int
                }
            }
            #expect(seen == ["Ada", "Brian"])
        }
    }

    @Test("a step error ends the cursor and resets the statement")
    func cursorStepError() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            try db.execute("UPDATE person SET age = -9223372036854775808 WHERE id = 2")
            let cursor = try db.cursor("SELECT abs(age) FROM person ORDER BY id")
            #expect(try cursor.next()?[0] as Int? == 36)
            let error = expectError(code: DatabaseError.SQLITE_ERROR) { try cursor.next() }
            #expect(error?.message.contains("integer overflow") == true)
            #expect(try cursor.next() == nil)
            #expect(!cursor.statement.isBusy)
        }
    }

    @Test("closing a cursor early resets its statement, releasing the read lock")
    func cursorCloseResets() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("rows.db")
            let db = try openPeople(dir)
            let other = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: nil))
            let cursor = try db.cursor("SELECT id FROM person ORDER BY id")
            _ = try cursor.next()
            #expect(cursor.statement.isBusy)
            // The unfinished read holds a SHARED lock: no exclusive lock for the other connection.
            expectError(code: DatabaseError.SQLITE_BUSY) { try other.execute("BEGIN EXCLUSIVE") }
            cursor.close()
            #expect(!cursor.statement.isBusy)
            #expect(try cursor.next() == nil)
            cursor.close()
            try other.execute("BEGIN EXCLUSIVE")
            try other.execute("COMMIT")
        }
    }

    @Test("a cursor released early resets its statement, releasing the read lock")
    func cursorReleaseResets() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("rows.db")
            let db = try openPeople(dir)
            let other = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: nil))
            let statement = try db.prepare("SELECT id FROM person ORDER BY id")
            do {
                let cursor = try statement.cursor()
                _ = try cursor.next()
                withExtendedLifetime(cursor) {
                    #expect(statement.isBusy)
                    _ = expectError(code: DatabaseError.SQLITE_BUSY) { try other.execute("BEGIN EXCLUSIVE") }
                }
            }
            #expect(!statement.isBusy)
            try other.execute("BEGIN EXCLUSIVE")
            try other.execute("COMMIT")

            // The same through the connection's cached statements.
            do {
                let cursor = try db.cursor("SELECT name FROM person")
                _ = try cursor.next()
                withExtendedLifetime(cursor) {
                    _ = expectError(code: DatabaseError.SQLITE_BUSY) { try other.execute("BEGIN EXCLUSIVE") }
                }
            }
            try other.execute("BEGIN EXCLUSIVE")
            try other.execute("COMMIT")
        }
    }

    @Test("a row from a cursor that is not kept stays readable (the row keeps its cursor)")
    func rowKeepsCursor() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let row = try #require(try db.cursor("SELECT name, age FROM person WHERE id = ?", 1).next())
            #expect(try row["name"] as String == "Ada")
            #expect(try row[1] as Int? == 36)
            #expect(try row.databaseValues == [.text("Ada"), .integer(36)])
            let prepared = try db.prepare("SELECT name FROM person ORDER BY id")
            let first = try #require(try prepared.cursor().next())
            #expect(try first[0] as String == "Ada")
        }
    }

    @Test("a new cursor over the same statement ends the old one, which no longer resets the statement")
    func newCursorEndsOldOne() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let select = try db.prepare("SELECT id FROM person ORDER BY id")
            var old: RowCursor? = try select.cursor()
            #expect(try old?.next()?[0] as Int? == 1)
            let new = try select.cursor()
            #expect(try new.next()?[0] as Int? == 1)
            #expect(try old?.next() == nil)
            old?.close()
            #expect(try new.next()?[0] as Int? == 2)
            old = nil  // releasing the old cursor must not reset the statement under the new one
            #expect(try new.next()?[0] as Int? == 3)
            #expect(try new.next() == nil)
            #expect(old == nil)
        }
    }

    @Test("query with array and dictionary arguments, and Connection.cursor with arguments")
    func queryWithArguments() throws {
        try withTemporaryDirectory { dir in
            let db = try openPeople(dir)
            let byArray = try db.query("SELECT name FROM person WHERE age > ? ORDER BY id", arguments: [5])
            #expect(try byArray.map { try $0[0] as String } == ["Ada", "Cleo"])
            let byName = try db.query("SELECT name FROM person WHERE age IS :age", arguments: ["age": nil])
            #expect(try byName.map { try $0[0] as String } == ["Brian"])
            let cursor = try db.cursor("SELECT id FROM person WHERE name = $n", arguments: ["n": "Cleo"])
            #expect(try cursor.map { try $0["id"] as Int } == [3])
            expectError(.invalidArgument) { try db.query("SELECT ?", arguments: []) }
            expectError(.invalidArgument) { try db.cursor("SELECT :a", arguments: ["b": 1]) }
        }
    }
}

@Suite("Row after close")
struct RowAfterCloseTests {
    @Test("a cursor row read after its connection closed throws instead of reading freed memory")
    func cursorRowAfterClose() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        let cursor = try db.cursor("SELECT x FROM t")
        let row = try #require(try cursor.next())
        #expect(try row[0] as Int == 1)
        db.close()
        expectError(.connectionClosed) { try row[0] as Int }
        expectError(.connectionClosed) { try row.databaseValues }
        expectError(.connectionClosed) { try row.copy() }
        #expect("\(row)" == "[row no longer current]")
    }
}

@Suite("Row names resolved once per statement")
struct RowNameLookupTests {
    @Test("duplicate names read the first column; case-insensitive and odd names resolve; missing ones throw")
    func oddNames() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("names.db"), key: TestKeys.raw)
            let sql = """
                SELECT 1 AS a, 2 AS a, 3 AS "with space", 4 AS "É", 5 AS "a_name_longer_than_fifteen_bytes", \
                6 AS "", 7 AS "A"
                """
            let rows = try db.cursor(sql)
            let row = try #require(try rows.next())
            for _ in 0..<3 {
                #expect(try row["a"] as Int == 1)       // the first of the two columns named a
                #expect(try row["A"] as Int == 7)       // an exact match comes before a case-insensitive one
                #expect(try row["with space"] as Int == 3)
                #expect(try row["É"] as Int == 4)
                #expect(try row["a_name_longer_than_fifteen_bytes"] as Int == 5)
                #expect(try row["A_NAME_LONGER_THAN_FIFTEEN_BYTES"] as Int == 5)
                #expect(try row["with SPACE"] as Int == 3)
                #expect(try row[""] as Int == 6)
                let error = expectError(.invalidArgument) { try row["missing"] as Int }
                #expect(error?.message.contains("no column named `missing`") == true)
            }
        }
    }

    @Test("names read in a different order on every row, or skipped, still find their own columns")
    func changingOrder() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("order.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(a INTEGER, b INTEGER, c INTEGER, d TEXT)")
            for value in 0..<20 { try db.execute("INSERT INTO t VALUES (?, ?, ?, ?)", value, value * 10, value * 100, "v\(value)") }
            let orders: [[String]] = [["a", "b", "c", "d"], ["d", "c", "b", "a"], ["c"], ["b", "d"], ["A", "D", "b"]]
            let rows = try db.cursor("SELECT a, b, c, d FROM t ORDER BY a")
            var rowIndex = 0
            while let row = try rows.next() {
                for name in orders[rowIndex % orders.count] {
                    switch name.lowercased() {
                    case "a": #expect(try row[name] as Int == rowIndex)
                    case "b": #expect(try row[name] as Int == rowIndex * 10)
                    case "c": #expect(try row[name] as Int == rowIndex * 100)
                    default: #expect(try row[name] as String == "v\(rowIndex)")
                    }
                }
                rowIndex += 1
            }
            #expect(rowIndex == 20)
        }
    }

    @Test("a statement with more names than it remembers still finds every column")
    func manyNames() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("many.db"), key: TestKeys.raw)
            let columns = (0..<80).map { "\($0) AS c\($0)" }.joined(separator: ", ")
            let rows = try db.cursor("SELECT \(columns)")
            let row = try #require(try rows.next())
            for _ in 0..<2 {
                for index in 0..<80 { #expect(try row["c\(index)"] as Int == index) }
                for index in stride(from: 79, through: 0, by: -1) { #expect(try row["C\(index)"] as Int == index) }
            }
        }
    }

    @Test("copied rows of one statement share its names; a TEXT column read by name as Int still throws")
    func copiedRows() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("copied.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(id INTEGER, label TEXT)")
            try db.execute("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
            let rows = try db.query("SELECT id, label FROM t ORDER BY id")
            #expect(try rows.map { try $0["label"] as String } == ["one", "two"])
            #expect(try rows.map { try $0["id"] as Int } == [1, 2])
            let error = expectError(.valueConversion) { try rows[0]["label"] as Int }
            #expect(error?.message.contains("column `label` (index 1)") == true)
        }
    }
}
