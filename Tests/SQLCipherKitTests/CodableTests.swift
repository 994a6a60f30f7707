import Foundation
import SQLCipherKit
import Testing

// MARK: - Fixtures

/// Declared DatabaseValueConvertible: read and written natively.
private enum Priority: Int, Codable, DatabaseValueConvertible {
    case low = 1, high = 2
}

/// Only Codable: read and written through a single-value container.
private enum Status: String, Codable {
    case active, archived
}

private struct Author: Codable, Equatable {
    var name: String
    var karma: Int
}

private struct Note: Codable, Equatable {
    var id: Int64?
    var body: String
    var rank: Int
    var small: Int8
    var byte: UInt8
    var score: Double
    var ratio: Float
    var isPinned: Bool
    var createdAt: Date
    var uuid: UUID
    var link: URL
    var payload: Data
    var comment: String?
    var priority: Priority
    var status: Status
    var formerStatus: Status?
    var tags: [String]
    var author: Author
    var counters: [String: Int]

    enum CodingKeys: String, CodingKey {
        case id, body, rank, small, byte, score, ratio
        case isPinned = "is_pinned", createdAt = "created_at"
        case uuid, link, payload, comment, priority, status
        case formerStatus = "former_status"
        case tags, author, counters
    }

    static let createTable = """
        CREATE TABLE note(
            id INTEGER PRIMARY KEY, body TEXT NOT NULL, rank INTEGER, small INTEGER, byte INTEGER, score REAL,
            ratio REAL, is_pinned INTEGER, created_at TEXT, uuid BLOB, link TEXT, payload BLOB, comment TEXT,
            priority INTEGER, status TEXT, former_status TEXT, tags TEXT, author TEXT, counters BLOB)
        """

    static func sample(_ body: String = "hello", rank: Int = 1) -> Note {
        Note(
            id: nil, body: body, rank: rank, small: -8, byte: 200, score: 2.5, ratio: 0.25, isPinned: true,
            createdAt: Date(timeIntervalSince1970: 1_700_000_000.123), uuid: UUID(), link: URL(string: "https://example.com/a?b=c")!,
            payload: Data([0, 1, 2, 255]), comment: nil, priority: .high, status: .archived, formerStatus: nil,
            tags: ["a", "b"], author: Author(name: "Ada", karma: 3), counters: ["x": 1])
    }
}

private struct Pair: Codable, Equatable {
    var a: Int64
    var b: String?
}

/// Asks for its keys in an order that depends on the row, to defeat the learnt key order.
private struct Wobbly: Decodable, Equatable {
    var a: Int64
    var b: Int64

    enum CodingKeys: String, CodingKey { case a, b, flip }

    init(a: Int64, b: Int64) {
        self.a = a
        self.b = b
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if try container.decode(Bool.self, forKey: .flip) {
            b = try container.decode(Int64.self, forKey: .b)
            a = try container.decode(Int64.self, forKey: .a)
        } else {
            a = try container.decode(Int64.self, forKey: .a)
            b = try container.decode(Int64.self, forKey: .b)
        }
    }
}

private func openEncrypted(_ directory: TemporaryDirectory, _ name: String = "codable.db") throws -> Connection {
    try Connection(path: directory.path(name), key: TestKeys.raw)
}

// MARK: - Decoding

@Suite("Codable: decoding rows")
struct CodableDecodingTests {
    @Test("a record round-trips through insert and fetchOne with every supported property type")
    func roundTrip() throws {
        try withTemporaryDirectory { directory in
            let db = try openEncrypted(directory)
            try db.execute(Note.createTable)
            var note = Note.sample()
            note.id = try db.insert(note, into: "note")
            let fetched = try #require(try db.fetchOne(Note.self, "SELECT * FROM note WHERE id = ?", note.id))
            #expect(fetched.id == note.id)
            #expect(fetched.body == note.body && fetched.rank == note.rank && fetched.small == -8 && fetched.byte == 200)
            #expect(fetched.score == 2.5 && fetched.ratio == 0.25 && fetched.isPinned)
            #expect(abs(fetched.createdAt.timeIntervalSince1970 - note.createdAt.timeIntervalSince1970) < 0.001)
            #expect(fetched.uuid == note.uuid && fetched.link == note.link && fetched.payload == note.payload)
            #expect(fetched.comment == nil && fetched.formerStatus == nil)
            #expect(fetched.priority == .high && fetched.status == .archived)
            #expect(fetched.tags == ["a", "b"] && fetched.author == note.author && fetched.counters == ["x": 1])
        }
    }

    @Test("values are stored in the library's native formats, nested values as JSON TEXT")
    func storageFormats() throws {
        try withTemporaryDirectory { directory in
            let db = try openEncrypted(directory)
            try db.execute(Note.createTable)
            let note = Note.sample()
            let id = try db.insert(note, into: "note")
            let row = try #require(try db.query("SELECT * FROM note WHERE id = ?", id).first)
            #expect(try row["created_at"] as String == "2023-11-14 22:13:20.123")
            #expect(try row["uuid"] as DatabaseValue == note.uuid.databaseValue)
            #expect(try row["is_pinned"] as DatabaseValue == .integer(1))
            #expect(try row["priority"] as DatabaseValue == .integer(2))
            #expect(try row["status"] as DatabaseValue == .text("archived"))
            #expect(try row["comment"] as DatabaseValue == .null)
            #expect(try row["tags"] as DatabaseValue == .text(#"["a","b"]"#))
            #expect(try row["author"] as DatabaseValue == .text(#"{"karma":3,"name":"Ada"}"#))
            #expect(try row["payload"] as DatabaseValue == .blob([0, 1, 2, 255]))
        }
    }

    @Test("fetchAll, fetchOne, fetchCursor, RowCursor.decode and Row.decode agree")
    func entryPoints() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE pair(a INTEGER, b TEXT)")
        for a in 1...5 { try db.execute("INSERT INTO pair(a, b) VALUES (?, ?)", Int64(a), a.isMultiple(of: 2) ? nil : "v\(a)") }
        let expected = (1...5).map { Pair(a: Int64($0), b: $0.isMultiple(of: 2) ? nil : "v\($0)") }
        let sql = "SELECT a, b FROM pair WHERE a >= ? ORDER BY a"

        #expect(try db.fetchAll(Pair.self, sql, 1) == expected)
        #expect(try db.fetchAll(Pair.self, "SELECT a, b FROM pair WHERE a >= :min ORDER BY a", arguments: ["min": 4])
            == Array(expected.suffix(2)))
        #expect(try db.fetchOne(Pair.self, sql, 3) == expected[2])
        #expect(try db.fetchOne(Pair.self, sql, 99) == nil)
        #expect(try db.fetchOne(Pair.self, "SELECT a, b FROM pair WHERE a = ?", arguments: [2]) == expected[1])
        #expect(try db.fetchCursor(Pair.self, sql, 1).all() == expected)
        #expect(try db.cursor(sql, 1).decode(Pair.self).all() == expected)
        #expect(try db.query(sql, 1).map { try $0.decode(Pair.self) } == expected)
        #expect(try db.cursor(sql, 1).map { try $0.decode(Pair.self) } == expected)
        var seen: [Pair] = []
        try db.fetchCursor(Pair.self, sql, 1).forEach { seen.append($0) }
        #expect(seen == expected)
    }

    @Test("CodingKeys map properties to columns; names match case-insensitively; extra columns are ignored")
    func codingKeysAndCase() throws {
        struct Renamed: Decodable, Equatable {
            var identifier: Int64
            var label: String
            enum CodingKeys: String, CodingKey { case identifier = "id", label = "BODY" }
        }
        let db = try Connection.inMemory()
        #expect(try db.fetchAll(Renamed.self, "SELECT 7 AS id, 'x' AS body, 3 AS extra")
            == [Renamed(identifier: 7, label: "x")])
    }

    @Test("keys asked for in a different order on each row still read the right columns")
    func changingKeyOrder() throws {
        let db = try Connection.inMemory()
        let rows = try db.fetchAll(
            Wobbly.self,
            "SELECT 1 AS a, 2 AS b, 0 AS flip UNION ALL SELECT 3, 4, 1 UNION ALL SELECT 5, 6, 0 UNION ALL SELECT 7, 8, 1")
        #expect(rows == [Wobbly(a: 1, b: 2), Wobbly(a: 3, b: 4), Wobbly(a: 5, b: 6), Wobbly(a: 7, b: 8)])
    }

    @Test("a missing column is nil for an optional property")
    func missingOptionalColumn() throws {
        let db = try Connection.inMemory()
        #expect(try db.fetchOne(Pair.self, "SELECT 1 AS a") == Pair(a: 1, b: nil))
    }

    @Test("a single-value type reads the first column; an unkeyed type reads the columns in order")
    func topLevelSingleAndUnkeyed() throws {
        let db = try Connection.inMemory()
        #expect(try db.fetchAll(Status.self, "SELECT 'active' UNION ALL SELECT 'archived'") == [.active, .archived])
        #expect(try db.fetchOne([Int64].self, "SELECT 1, 2, 3") == [1, 2, 3])
    }

    @Test("a dictionary is read from a JSON BLOB as well as from TEXT")
    func jsonFromBlob() throws {
        struct Holder: Decodable { var counters: [String: Int] }
        let db = try Connection.inMemory()
        let blob = Array(#"{"a":1,"b":2}"#.utf8)
        #expect(try db.fetchOne(Holder.self, "SELECT ? AS counters", blob)?.counters == ["a": 1, "b": 2])
    }

    // MARK: Errors

    @Test("NULL for a non-optional property names the column and the Swift type")
    func nullForNonOptional() throws {
        let db = try Connection.inMemory()
        let error = expectError(.valueConversion) { try db.fetchOne(Pair.self, "SELECT NULL AS a, 'x' AS b") }
        #expect(error?.message.contains("column `a`") == true)
        #expect(error?.message.contains("Int64") == true)
        #expect(error?.message.contains("Pair") == true)
    }

    @Test("a value of the wrong storage class names the column and the Swift type")
    func wrongStorageClass() throws {
        let db = try Connection.inMemory()
        let error = expectError(.valueConversion) { try db.fetchOne(Pair.self, "SELECT 'text' AS a, 'x' AS b") }
        #expect(error?.message.contains("column `a`") == true)
        #expect(error?.message.contains("TEXT value cannot be represented as Int64") == true)
        #expect(error?.sql == "SELECT 'text' AS a, 'x' AS b")
    }

    @Test("a missing column for a non-optional property is invalidArgument naming the column")
    func missingColumn() throws {
        let db = try Connection.inMemory()
        let error = expectError(.invalidArgument) { try db.fetchOne(Pair.self, "SELECT 'x' AS b") }
        #expect(error?.message.contains("no column named `a`") == true)
    }

    @Test("an invalid enum raw value is a conversion error that does not quote the stored value")
    func invalidRawValue() throws {
        struct Holder: Decodable { var status: Status }
        let db = try Connection.inMemory()
        let error = expectError(.valueConversion) { try db.fetchOne(Holder.self, "SELECT 'SECRET-VALUE' AS status") }
        #expect(error?.message.contains("column `status`") == true)
        #expect(error?.message.contains("Status") == true)
        #expect(error?.message.contains("SECRET-VALUE") == false)
    }

    @Test("JSON that does not match the property's type is a conversion error naming column and type")
    func invalidJSON() throws {
        struct Holder: Decodable { var tags: [String] }
        let db = try Connection.inMemory()
        let notJSON = expectError(.valueConversion) { try db.fetchOne(Holder.self, "SELECT 'not json' AS tags") }
        #expect(notJSON?.message.contains("column `tags`") == true)
        #expect(notJSON?.message.contains("Array<String>") == true)
        let wrongShape = expectError(.valueConversion) { try db.fetchOne(Holder.self, #"SELECT '{"a":1}' AS tags"#) }
        #expect(wrongShape?.message.contains("column `tags`") == true)
        let integer = expectError(.valueConversion) { try db.fetchOne(Holder.self, "SELECT 5 AS tags") }
        #expect(integer?.message.contains("INTEGER") == true)
    }

    @Test("a decoding error does not end the cursor")
    func cursorContinuesAfterError() throws {
        let db = try Connection.inMemory()
        let cursor = try db.fetchCursor(Pair.self, "SELECT 1 AS a, 'x' AS b UNION ALL SELECT NULL, 'y' UNION ALL SELECT 3, 'z'")
        #expect(try cursor.next() == Pair(a: 1, b: "x"))
        expectError(.valueConversion) { try cursor.next() }
        #expect(try cursor.next() == Pair(a: 3, b: "z"))
        #expect(try cursor.next() == nil)
    }

    @Test("decoding a cursor row after its connection closed throws connectionClosed")
    func closedConnection() throws {
        let db = try Connection.inMemory()
        let rows = try db.cursor("SELECT 1 AS a, 'x' AS b")
        let row = try #require(try rows.next())
        db.close()
        expectError(.connectionClosed) { try row.decode(Pair.self) }
    }
}

// MARK: - Encoding

@Suite("Codable: inserting and updating records")
struct CodableEncodingTests {
    @Test("identifiers are quoted and values are bound, never spliced into the SQL")
    func quotingAndBinding() throws {
        struct Odd: Codable, Equatable {
            var text: String
            var group: Int
            enum CodingKeys: String, CodingKey { case text = "the \"text\"", group }
        }
        let db = try Connection.inMemory()
        try db.execute(#"CREATE TABLE "odd ""table"""("the ""text""" TEXT, "group" INTEGER)"#)
        let hostile = "'); DROP TABLE \"odd \"\"table\"\"\"; --"
        try db.insert(Odd(text: hostile, group: 1), into: "odd \"table\"")
        #expect(try db.fetchAll(Odd.self, #"SELECT * FROM "odd ""table""""#) == [Odd(text: hostile, group: 1)])
    }

    @Test("nil is stored as NULL, so a nil INTEGER PRIMARY KEY gets a new rowid")
    func nilIsNull() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE pair(a INTEGER PRIMARY KEY, b TEXT DEFAULT 'default')")
        struct Row: Encodable { var a: Int64?; var b: String? }
        let id = try db.insert(Row(a: nil, b: nil), into: "pair")
        #expect(id == 1)
        #expect(try db.scalar("SELECT b FROM pair WHERE a = 1", as: DatabaseValue.self) == .null)
    }

    @Test("onConflict chooses INSERT OR REPLACE / IGNORE; without it a conflict is a constraint error")
    func conflicts() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE pair(a INTEGER PRIMARY KEY, b TEXT)")
        try db.insert(Pair(a: 1, b: "one"), into: "pair")
        expectError(code: DatabaseError.SQLITE_CONSTRAINT) { try db.insert(Pair(a: 1, b: "again"), into: "pair") }
        try db.insert(Pair(a: 1, b: "ignored"), into: "pair", onConflict: .ignore)
        #expect(try db.fetchOne(Pair.self, "SELECT * FROM pair") == Pair(a: 1, b: "one"))
        try db.insert(Pair(a: 1, b: "replaced"), into: "pair", onConflict: .replace)
        #expect(try db.fetchAll(Pair.self, "SELECT * FROM pair") == [Pair(a: 1, b: "replaced")])
    }

    @Test("update finds the declared primary key, single or composite, and reports whether a row changed")
    func update() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE pair(a INTEGER PRIMARY KEY, b TEXT)")
        try db.insert(Pair(a: 1, b: "one"), into: "pair")
        #expect(try db.update(Pair(a: 1, b: "uno"), in: "pair"))
        #expect(try db.update(Pair(a: 2, b: "two"), in: "pair") == false)
        #expect(try db.fetchAll(Pair.self, "SELECT * FROM pair") == [Pair(a: 1, b: "uno")])

        struct Cell: Codable, Equatable { var row: Int; var column: Int; var value: String }
        try db.execute(#"CREATE TABLE cell("row" INTEGER, "column" INTEGER, value TEXT, PRIMARY KEY("column", "row"))"#)
        try db.insert(Cell(row: 1, column: 1, value: "a"), into: "cell")
        try db.insert(Cell(row: 1, column: 2, value: "b"), into: "cell")
        #expect(try db.update(Cell(row: 1, column: 2, value: "B"), in: "cell"))
        #expect(try db.fetchAll(Cell.self, #"SELECT * FROM cell ORDER BY "column""#).map(\.value) == ["a", "B"])
    }

    @Test("update with an explicit key; errors for a table without primary key or a record without the key field")
    func updateErrors() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE loose(a INTEGER, b TEXT)")
        try db.insert(Pair(a: 1, b: "one"), into: "loose")
        let noKey = expectError(.invalidArgument) { try db.update(Pair(a: 1, b: "x"), in: "loose") }
        #expect(noKey?.message.contains("PRIMARY KEY") == true)
        #expect(try db.update(Pair(a: 1, b: "uno"), in: "loose", primaryKey: ["a"]))
        #expect(try db.fetchOne(Pair.self, "SELECT * FROM loose") == Pair(a: 1, b: "uno"))
        let missing = expectError(.invalidArgument) { try db.update(Pair(a: 1, b: "x"), in: "loose", primaryKey: ["id"]) }
        #expect(missing?.message.contains("`id`") == true)
    }

    @Test("a value that cannot be encoded names the field")
    func encodingErrorNamesField() throws {
        struct Measurements: Encodable { var name: String; var samples: [Double] }
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE m(name TEXT, samples TEXT)")
        let error = expectError(.valueConversion) {
            try db.insert(Measurements(name: "x", samples: [1, .nan]), into: "m")
        }
        #expect(error?.message.contains("field `samples`") == true)
        #expect(try db.scalar("SELECT count(*) FROM m", as: Int.self) == 0)
    }

    @Test("a record must encode a keyed container")
    func recordMustBeKeyed() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE t(a)")
        expectError(.valueConversion) { try db.insert([1, 2], into: "t") }
        expectError(.valueConversion) { try db.insert(Status.active, into: "t") }
    }

    @Test("an unknown column is SQLite's error, naming it")
    func unknownColumn() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE pair(a INTEGER)")
        let error = expectError(.sqlite) { try db.insert(Pair(a: 1, b: "x"), into: "pair") }
        #expect(error?.message.contains("b") == true)
    }

    @Test("records written through a pool are encrypted on disk and read back on both engines")
    func encryptedThroughPool() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("pool.db")
        let pool = try DatabasePool(path: path, keyProvider: .fixed(TestKeys.passphrase))
        try await pool.write { db in
            try db.execute(Note.createTable)
            for rank in 0..<50 { try db.insert(Note.sample("SENTINEL-CODABLE-BODY-\(rank)", rank: rank), into: "note") }
        }
        let notes = try await pool.read { db in try db.fetchAll(Note.self, "SELECT * FROM note ORDER BY rank") }
        #expect(notes.map(\.rank) == Array(0..<50))
        #expect(notes.allSatisfy { $0.author == Author(name: "Ada", karma: 3) })
        pool.close()
        for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
            #expect(!contains(try fileBytes(file), "SENTINEL-CODABLE-BODY"), "\(file)")
        }
        if let expected = Engine.expectedMajor { #expect(Engine.major == expected) }
    }
}
