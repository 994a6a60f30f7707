import SQLCipherKit
import Testing

private struct Person: FetchableRecord, Equatable {
    var id: Int64
    var name: String
    var age: Int?

    init(id: Int64, name: String, age: Int?) {
        self.id = id
        self.name = name
        self.age = age
    }

    init(row: Row) throws {
        id = try row[0]
        name = try row["name"]
        age = try row[2]
    }
}

/// Both protocols: the fetch goes through `init(row:)`, which marks the record so the test can tell.
private struct Both: FetchableRecord, Decodable {
    var id: Int64
    var viaRow = false

    private enum CodingKeys: String, CodingKey { case id }

    init(row: Row) throws {
        id = try row[0]
        viaRow = true
    }
}

@Suite("FetchableRecord")
struct FetchableRecordTests {
    static func openPeople(_ dir: TemporaryDirectory) throws -> Connection {
        let db = try Connection(path: dir.path("people.db"), key: TestKeys.raw)
        try db.execute("""
            CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER);
            INSERT INTO person(name, age) VALUES ('Ada', 36), ('Brian', NULL), ('Cleo', 7);
            """)
        return db
    }

    @Test("fetchAll, fetchCursor and fetchOne build records with init(row:)")
    func fetches() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.openPeople(dir)
            let sql = "SELECT id, name, age FROM person ORDER BY id"
            let expected = [Person(id: 1, name: "Ada", age: 36), Person(id: 2, name: "Brian", age: nil),
                            Person(id: 3, name: "Cleo", age: 7)]
            #expect(try db.fetchAll(Person.self, sql) == expected)
            let cursor = try db.fetchCursor(Person.self, sql)
            var fetched: [Person] = []
            while let person = try cursor.next() { fetched.append(person) }
            #expect(fetched == expected)
            #expect(try cursor.next() == nil)
            #expect(try db.fetchOne(Person.self, "SELECT id, name, age FROM person WHERE id = ?", 3) == expected[2])
            #expect(try db.fetchOne(Person.self, "SELECT id, name, age FROM person WHERE id = ?", 9) == nil)
            #expect(try db.cursor(sql).records(Person.self).all() == expected)
        }
    }

    @Test("a type that is also Decodable is fetched through init(row:)")
    func preferredOverDecodable() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.openPeople(dir)
            #expect(try db.fetchAll(Both.self, "SELECT id FROM person").allSatisfy(\.viaRow))
            #expect(try db.fetchOne(Both.self, "SELECT id FROM person")?.viaRow == true)
            #expect(try db.fetchCursor(Both.self, "SELECT id FROM person").next()?.viaRow == true)
            // Decodable stays reachable for such a type through Row.decode.
            let row = try #require(try db.cursor("SELECT id FROM person").next())
            #expect(try row.decode(Both.self).viaRow == false)
        }
    }

    @Test("conversions stay strict: TEXT read as Int throws valueConversion naming the column, and the cursor goes on")
    func strict() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.openPeople(dir)
            struct Wrong: FetchableRecord {
                var name: Int
                init(row: Row) throws { name = try row["name"] }
            }
            let cursor = try db.fetchCursor(Wrong.self, "SELECT name FROM person ORDER BY id")
            let error = expectError(.valueConversion) { try cursor.next() }
            #expect(error?.message.contains("column `name` (index 0)") == true)
            #expect(error?.message.contains("TEXT value cannot be represented as Int") == true)
            expectError(.valueConversion) { try cursor.next() }
        }
    }
}
