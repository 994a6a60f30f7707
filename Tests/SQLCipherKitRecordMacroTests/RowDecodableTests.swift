#if RecordMacro
import Foundation
import SQLCipherKitRecordMacro
import SQLCipherKitTestSupport
import Testing

// MARK: - Fixtures

/// Declared DatabaseValueConvertible: read natively.
enum Priority: Int, Codable, DatabaseValueConvertible {
    case low = 1, high = 2
}

/// Only Codable: read through a single-value container.
enum Status: String, Codable {
    case active, archived
}

struct Author: Codable, Equatable {
    var name: String
    var karma: Int
}

/// Every kind of property `Row.decode(_:)` reads, with CodingKeys renaming some: `init(row:)` must give the same.
@RowDecodable
struct Note: Codable, Equatable {
    var id: Int64?
    var body: String
    var rank: Int
    var small: Int8
    var score: Double
    var isPinned: Bool
    var createdAt: Date
    var uuid: UUID
    var payload: Data
    var comment: String?
    var priority: Priority
    var status: Status
    var formerStatus: Optional<Status>
    var tags: [String]
    var author: Author
    var counters: [String: Int]
    /// Not in CodingKeys: neither decoded nor generated.
    var cached = "unset"

    enum CodingKeys: String, CodingKey {
        case id, body, rank, small, score
        case isPinned = "is_pinned", createdAt = "created_at"
        case uuid, payload, comment, priority, status
        case formerStatus = "former_status"
        case tags, author, counters
    }

    static let createTable = """
        CREATE TABLE note(
            id INTEGER PRIMARY KEY, body TEXT NOT NULL, rank INTEGER, small INTEGER, score REAL, is_pinned INTEGER,
            created_at TEXT, uuid BLOB, payload BLOB, comment TEXT, priority INTEGER, status TEXT, former_status TEXT,
            tags TEXT, author TEXT, counters BLOB)
        """

    static func sample(_ body: String = "hello") -> Note {
        Note(
            id: nil, body: body, rank: 7, small: -8, score: 2.5, isPinned: true,
            createdAt: Date(timeIntervalSince1970: 1_700_000_000.125), uuid: UUID(), payload: Data([0, 1, 2, 255]),
            comment: nil, priority: .high, status: .archived, formerStatus: nil, tags: ["a", "b"],
            author: Author(name: "Ada", karma: 3), counters: ["x": 1])
    }
}

/// Its `init(from:)` fails: fetching it proves the generated `init(row:)` is the one used.
@RowDecodable
struct Point: Decodable, Equatable {
    var x: Int64
    var y: Int64

    init(x: Int64, y: Int64) {
        self.x = x
        self.y = y
    }

    struct NotThisWay: Error {}

    init(from decoder: any Decoder) throws {
        throw NotThisWay()
    }
}

/// What the synthesized decoding skips is skipped; what it reads is read.
@RowDecodable
struct Shapes {
    let kind = "fixed"                       // a let with a value: never read
    var label: String = "default label"      // a var with a value: read
    var `default`: Int64                     // a keyword as a name: the column `default`
    var a, b: Int64                          // two bindings, one annotation
    var observed: Int64 {                    // stored, with an observer: read
        didSet { precondition(oldValue != observed || true) }
    }
    var doubled: Int64 { b * 2 }             // computed: not read
    static var count: Int64 { 0 }            // static: not read
}

/// Public: the generated initializer must be public too (a public requirement), or this file does not compile.
@RowDecodable
public struct PublicRecord: Sendable {
    public var id: Int64
}

/// Generic over its column's type.
@RowDecodable
struct Box<Value: DatabaseValueConvertible & Decodable> {
    var value: Value
}

/// Not Decodable at all: the macro needs only the properties' types.
@RowDecodable
struct Plain {
    var name: String
    var note: String?
    var mood: Status?
}

/// Expects `body` to throw a `DatabaseError` of `kind` whose message names `column`.
private func expectError(
    _ kind: DatabaseError.Kind, naming column: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = #expect(throws: DatabaseError.self, sourceLocation: sourceLocation) { try body() }
    #expect(error?.kind == kind, sourceLocation: sourceLocation)
    #expect(error?.message.contains("`\(column)`") == true, sourceLocation: sourceLocation)
}

private func open(_ directory: TemporaryDirectory) throws -> Connection {
    let key = try EncryptionKey(sqlcipherRawKeyText: "x'" + String(repeating: "9d1f3e77", count: 8) + "'")
    return try Connection(path: directory.path("macro.db"), key: key)
}

// MARK: - Tests

@Suite("@RowDecodable: a generated init(row:)")
struct RowDecodableTests {
    @Test("reads every kind of property as Row.decode(_:) does, under the CodingKeys names")
    func sameAsDecodable() throws {
        try withTemporaryDirectory { directory in
            let db = try open(directory)
            try db.execute(Note.createTable)
            for body in ["one", "two", "three"] {
                _ = try db.insert(Note.sample(body), into: "note")
            }
            try db.execute("UPDATE note SET comment = 'c', former_status = 'active' WHERE body = 'two'")
            let fetched = try db.fetchAll(Note.self, "SELECT * FROM note ORDER BY id")   // init(row:)
            let decoded = try db.query("SELECT * FROM note ORDER BY id").map { try $0.decode(Note.self) }
            #expect(fetched.count == 3)
            #expect(fetched == decoded)
            #expect(fetched[1].comment == "c" && fetched[1].formerStatus == .active)
            #expect(fetched[0].comment == nil && fetched[0].formerStatus == nil)
            #expect(fetched[0].tags == ["a", "b"] && fetched[0].author == Author(name: "Ada", karma: 3))
            #expect(fetched[0].priority == .high && fetched[0].status == .archived && fetched[0].isPinned)
            #expect(fetched.allSatisfy { $0.cached == "unset" })
            // Straight from a row too.
            let row = try #require(try db.query("SELECT * FROM note WHERE body = 'two'").first)
            #expect(try Note(row: row) == decoded[1])
        }
    }

    @Test("fetchAll, fetchCursor and fetchOne use init(row:), not init(from:)")
    func usesInitRow() throws {
        try withTemporaryDirectory { directory in
            let db = try open(directory)
            try db.execute("CREATE TABLE p(x INTEGER, y INTEGER); INSERT INTO p VALUES (1, 2), (3, 4)")
            #expect(try db.fetchAll(Point.self, "SELECT x, y FROM p ORDER BY x") == [Point(x: 1, y: 2), Point(x: 3, y: 4)])
            #expect(try db.fetchCursor(Point.self, "SELECT y AS y, x AS x FROM p ORDER BY x").all().map(\.x) == [1, 3])
            #expect(try db.fetchOne(Point.self, "SELECT * FROM p WHERE x = 3") == Point(x: 3, y: 4))
            // The same type through Decodable fails: the generated initializer is what made the fetches work.
            let row = try #require(try db.query("SELECT x, y FROM p").first)
            #expect(throws: Point.NotThisWay.self) { _ = try row.decode(Point.self) }
        }
    }

    @Test("skips what the synthesized decoding skips: let with a value, computed and static properties")
    func skipsWhatCodableSkips() throws {
        try withTemporaryDirectory { directory in
            let db = try open(directory)
            try db.execute("""
                CREATE TABLE s(kind TEXT, label TEXT, "default" INTEGER, a INTEGER, b INTEGER, observed INTEGER,
                    doubled INTEGER, count INTEGER);
                INSERT INTO s VALUES ('from the file', 'read', 5, 1, 2, 9, 100, 100)
                """)
            let shapes = try #require(try db.fetchOne(Shapes.self, "SELECT * FROM s"))
            #expect(shapes.kind == "fixed")
            #expect(shapes.label == "read")
            #expect(shapes.default == 5 && shapes.a == 1 && shapes.b == 2 && shapes.doubled == 4)
            #expect(shapes.observed == 9)
            // Without the columns the generated code does not read, it still works.
            let fewer = try #require(try db.fetchOne(Shapes.self, #"SELECT label, "default", a, b, observed FROM s"#))
            #expect(fewer.b == 2)
        }
    }

    @Test("optional properties read NULL and missing columns as nil; others throw naming the column")
    func missingAndNull() throws {
        try withTemporaryDirectory { directory in
            let db = try open(directory)
            try db.execute("CREATE TABLE t(name TEXT, note TEXT, mood TEXT); INSERT INTO t VALUES ('n', NULL, 'active')")
            let full = try #require(try db.fetchOne(Plain.self, "SELECT * FROM t"))
            #expect(full.name == "n" && full.note == nil && full.mood == .active)
            let partial = try #require(try db.fetchOne(Plain.self, "SELECT name FROM t"))
            #expect(partial.note == nil && partial.mood == nil)

            expectError(.invalidArgument, naming: "name") { _ = try db.fetchOne(Plain.self, "SELECT note FROM t") }
            expectError(.valueConversion, naming: "name") { _ = try db.fetchOne(Plain.self, "SELECT NULL AS name") }
        }
    }

    @Test("types stay strict: TEXT is not read as an integer, a wrong enum value and bad JSON throw")
    func strictTypes() throws {
        try withTemporaryDirectory { directory in
            let db = try open(directory)
            expectError(.valueConversion, naming: "value") {
                _ = try db.fetchOne(Box<Int64>.self, "SELECT '12' AS value")
            }
            #expect(try db.fetchOne(Box<Int64>.self, "SELECT 12 AS value")?.value == 12)
            #expect(try db.fetchOne(Box<String>.self, "SELECT 'x' AS value")?.value == "x")

            expectError(.valueConversion, naming: "mood") {
                _ = try db.fetchOne(Plain.self, "SELECT 'n' AS name, 'sleepy' AS mood")
            }

            try db.execute(Note.createTable)
            _ = try db.insert(Note.sample(), into: "note")
            try db.execute("UPDATE note SET tags = '{not json'")
            expectError(.valueConversion, naming: "tags") { _ = try db.fetchAll(Note.self, "SELECT * FROM note") }
        }
    }

    @Test("a public struct gets a public init(row:)")
    func publicRecord() throws {
        try withTemporaryDirectory { directory in
            let db = try open(directory)
            #expect(try db.fetchOne(PublicRecord.self, "SELECT 41 + 1 AS id")?.id == 42)
        }
    }
}
#endif
