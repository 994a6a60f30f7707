import SQLCipherKit
import Testing

/// A ``Row`` read in place is valid only while its statement stands on it. Before, a row kept past that read `nil`
/// (or the statement's next row) without an error: `db.first(sql) { $0 }` read `nil`, and rows collected from a
/// cursor all read the last one's values, or `nil`.
@Suite("Rows that outlive their statement's row")
struct RowLifetimeTests {
    private struct Person: Decodable, Equatable {
        let name: String
    }

    private static func open(_ dir: borrowing TemporaryDirectory) throws -> Connection {
        let db = try Connection(path: dir.path("rows.db"), key: TestKeys.raw)
        try db.execute("CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO person(name) VALUES ('Ada'), ('Brian'), ('Cleo')")
        return db
    }

    /// Every way to read a row, each of which must refuse a row that is no longer current.
    private static func expectRefused(_ row: Row, sourceLocation: SourceLocation = #_sourceLocation) {
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row[0] as String? }
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row["name"] as String? }
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row.databaseValues }
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row.databaseValue(at: 0) }
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row.copy() }
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row.decode(Person.self) }
        expectError(.rowMisuse, sourceLocation: sourceLocation) { try row.decodeColumn(String.self, named: "name") }
    }

    @Test("a row kept past first, all or executeScript throws rowMisuse instead of reading nil")
    func rowsKeptPastTheCall() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.open(dir)
            let sql = "SELECT name FROM person ORDER BY id"
            Self.expectRefused(try #require(try db.first(sql, map: { $0 })))
            for row in try db.all(sql, map: { $0 }) { Self.expectRefused(row) }
            var scriptRows: [Row] = []
            try db.executeScript(sql) { _, row in scriptRows.append(row) }
            #expect(scriptRows.count == 3)
            for row in scriptRows { Self.expectRefused(row) }
            // Inside the call the row reads, and a copy keeps it.
            #expect(try db.all(sql, map: { try $0.copy() }).map { try $0[0] as String } == ["Ada", "Brian", "Cleo"])
        }
    }

    @Test("rows collected from a cursor throw rowMisuse; the current one reads until the cursor moves on")
    func rowsCollectedFromACursor() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.open(dir)
            let cursor = try db.cursor("SELECT name FROM person ORDER BY id")
            let first = try #require(try cursor.next())
            #expect(try first["name"] as String == "Ada")
            #expect(try first.decode(Person.self) == Person(name: "Ada"))
            let second = try #require(try cursor.next())
            Self.expectRefused(first)
            #expect(try second[0] as String == "Brian")
            cursor.close()
            Self.expectRefused(second)

            let collected = try db.cursor("SELECT name FROM person ORDER BY id").map { $0 }
            #expect(collected.count == 3)
            for row in collected { Self.expectRefused(row) }
        }
    }

    @Test("a statement reset, run again, or read by a new cursor ends the rows it handed out")
    func statementMovesOn() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.open(dir)
            let statement = try db.prepare("SELECT name FROM person WHERE id >= ? ORDER BY id")
            let cursor = try statement.cursor(1)
            let row = try #require(try cursor.next())
            #expect(try row[0] as String == "Ada")
            try statement.reset()
            Self.expectRefused(row)

            let again = try #require(try statement.cursor(2).next())
            #expect(try again[0] as String == "Brian")
            let newer = try statement.cursor(3)
            Self.expectRefused(again)
            #expect(try newer.next().map { try $0[0] as String } == "Cleo")

            let stepped = try #require(try statement.cursor(1).next())
            try statement.run(1)
            Self.expectRefused(stepped)
        }
    }

    @Test("closing the connection ends its rows with connectionClosed")
    func closedConnection() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.open(dir)
            let cursor = try db.cursor("SELECT name FROM person ORDER BY id")
            let row = try #require(try cursor.next())
            db.close()
            expectError(.connectionClosed) { try row[0] as String }
            expectError(.connectionClosed) { try row.decode(Person.self) }
        }
    }

    @Test("copied rows and rows of query stay valid for good")
    func copiesStayValid() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.open(dir)
            let rows = try db.query("SELECT name FROM person ORDER BY id")
            _ = try db.all("SELECT name FROM person", as: String.self)
            #expect(try rows.map { try $0[0] as String } == ["Ada", "Brian", "Cleo"])
            db.close()
            #expect(try rows.map { try $0["name"] as String } == ["Ada", "Brian", "Cleo"])
        }
    }
}
