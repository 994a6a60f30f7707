import Foundation
import SQLCipherKit
import Testing

/// An encrypted connection in a temporary directory, kept alive with it.
private struct Fixture {
    let directory: TemporaryDirectory
    let db: Connection

    init() throws {
        directory = try TemporaryDirectory()
        db = try Connection(path: directory.path("values.db"), key: TestKeys.raw)
    }

    /// Binds `value` and returns SQLite's storage class for it (`typeof(?)`).
    func storageClass(of value: some DatabaseValueConvertible) throws -> String? {
        try db.scalar("SELECT typeof(?)", value, as: String.self)
    }

    /// Stores `value` in a column without affinity and reads it back as `T`.
    func roundTrip<V: DatabaseValueConvertible, T: DatabaseValueConvertible>(_ value: V, as type: T.Type) throws -> T? {
        try db.execute("CREATE TABLE IF NOT EXISTS v(x)")
        try db.execute("DELETE FROM v")
        try db.execute("INSERT INTO v(x) VALUES (?)", value)
        return try db.scalar("SELECT x FROM v", as: T.self)
    }

    /// The stored value of an SQL expression read as `T`; conversion failures throw.
    func read<T: DatabaseValueConvertible>(_ expression: String, as type: T.Type) throws -> T? {
        try db.scalar("SELECT \(expression) AS value", as: T.self)
    }
}

private enum Status: String, DatabaseValueConvertible {
    case active, archived
}

private enum Priority: Int, DatabaseValueConvertible {
    case low = 1, high = 9
}

/// A value type conformed the way a user would: two requirements, no C pointer.
private struct Cents: DatabaseValueConvertible, Equatable {
    var value: Int64
    var databaseValue: DatabaseValue { .integer(value) }
    static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Cents? {
        guard case .integer(let value) = databaseValue else { return nil }
        return Cents(value: value)
    }
}

/// A type that binds in place and refuses some values through `bind(to:)`, and reads through `decode(from:)`.
private struct Tag: DatabaseValueConvertible, Equatable {
    var bytes: [UInt8]
    var databaseValue: DatabaseValue { .blob(bytes) }
    static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Tag? {
        guard case .blob(let bytes) = databaseValue else { return nil }
        return Tag(bytes: bytes)
    }
    static func decode(from column: DatabaseColumn) -> Tag? {
        column.isNull ? nil : fromDatabaseValue(column.databaseValue)
    }
    func bind(to parameter: DatabaseParameter) -> ResultCode {
        guard bytes.count <= 4 else { return DatabaseError.SQLITE_TOOBIG }
        return bytes.withUnsafeBytes { parameter.bindBlob($0) }
    }
}

@Suite("DatabaseValue and conversions")
struct DatabaseValueTests {
    // MARK: - Conforming types

    @Test("a type conformed with databaseValue and fromDatabaseValue alone round-trips, strictly, in every binding form")
    func userConformance() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(Cents(value: 1999), as: Cents.self) == Cents(value: 1999))
        #expect(try f.storageClass(of: Cents(value: 1)) == "integer")
        try f.db.execute("INSERT INTO v(x) VALUES (?), (?)", arguments: [Cents(value: 2), Cents(value: 3)])
        #expect(try f.db.scalar("SELECT sum(x) FROM v", as: Int64.self) == 1999 + 2 + 3)
        expectError(.valueConversion) { try f.read("'12'", as: Cents.self) }
        #expect(try f.read("NULL", as: Cents?.self) == .some(nil))
        let rows = try f.db.cursor("SELECT x FROM v ORDER BY x")
        var read: [Cents] = []
        while let row = try rows.next() { read.append(try row[0]) }
        #expect(read == [Cents(value: 2), Cents(value: 3), Cents(value: 1999)])
    }

    @Test("bind(to:) can refuse a value: invalidArgument with its code, and nothing is stored")
    func customBindRefuses() throws {
        let f = try Fixture()
        try f.db.execute("CREATE TABLE t(x)")
        try f.db.execute("INSERT INTO t(x) VALUES (?)", Tag(bytes: [1, 2]))
        let error = expectError(.invalidArgument) {
            try f.db.execute("INSERT INTO t(x) VALUES (?)", Tag(bytes: [1, 2, 3, 4, 5]))
        }
        #expect(error?.extendedResultCode == DatabaseError.SQLITE_TOOBIG)
        expectError(.invalidArgument) { try f.db.execute("INSERT INTO t(x) VALUES (?)", arguments: [Tag(bytes: [9, 9, 9, 9, 9])]) }
        expectError(.invalidArgument) { try f.db.execute("INSERT INTO t(x) VALUES (?)", Tag?.some(Tag(bytes: [0, 0, 0, 0, 0]))) }
        #expect(try f.db.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        #expect(try f.db.scalar("SELECT hex(x) FROM t", as: String.self) == "0102")
        #expect(try f.db.scalar("SELECT x FROM t", as: Tag.self) == Tag(bytes: [1, 2]))
        #expect(try f.db.scalar("SELECT NULL", as: Tag?.self) == .some(nil))
        expectError(.valueConversion) { try f.db.scalar("SELECT 'text'", as: Tag.self) }
    }

    // MARK: - DatabaseValue

    @Test("each storage class round-trips through DatabaseValue", arguments: [
        DatabaseValue.null, .integer(-42), .integer(.max), .integer(.min), .real(2.5), .real(-0.125),
        .text(""), .text("héllo ✓"), .blob([]), .blob([0, 1, 2, 255]),
    ])
    func databaseValueRoundTrip(value: DatabaseValue) throws {
        let fixture = try Fixture()
        #expect(try fixture.roundTrip(value, as: DatabaseValue.self) == value)
        #expect(try fixture.storageClass(of: value) == value.storageClassName.lowercased())
        #expect(value.databaseValue == value)
        #expect(DatabaseValue.fromDatabaseValue(value) == value)
    }

    @Test("storage class names, isNull and description name only the class, never the value")
    func databaseValueDescription() {
        #expect(DatabaseValue.null.storageClassName == "NULL")
        #expect(DatabaseValue.integer(1).storageClassName == "INTEGER")
        #expect(DatabaseValue.real(1).storageClassName == "REAL")
        #expect(DatabaseValue.text("x").storageClassName == "TEXT")
        #expect(DatabaseValue.blob([1]).storageClassName == "BLOB")
        #expect(DatabaseValue.null.isNull)
        #expect(!DatabaseValue.integer(0).isNull)
        #expect(!DatabaseValue.text("").isNull)
        #expect(DatabaseValue.text("secret-value-xyz").description == "TEXT")
        #expect(DatabaseValue.integer(987_654_321).description == "INTEGER")
        #expect("\(DatabaseValue.blob([0x73, 0x65, 0x63]))" == "BLOB")
        #expect(DatabaseValue.integer(1) != DatabaseValue.real(1))
        #expect(Set([DatabaseValue.integer(1), .integer(1), .text("1")]).count == 2)
    }

    // MARK: - Integers

    @Test("integers of every width round-trip at their bounds")
    func integerBounds() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(Int.min, as: Int.self) == Int.min)
        #expect(try f.roundTrip(Int.max, as: Int.self) == Int.max)
        #expect(try f.roundTrip(Int8.min, as: Int8.self) == Int8.min)
        #expect(try f.roundTrip(Int8.max, as: Int8.self) == Int8.max)
        #expect(try f.roundTrip(Int16.min, as: Int16.self) == Int16.min)
        #expect(try f.roundTrip(Int16.max, as: Int16.self) == Int16.max)
        #expect(try f.roundTrip(Int32.min, as: Int32.self) == Int32.min)
        #expect(try f.roundTrip(Int32.max, as: Int32.self) == Int32.max)
        #expect(try f.roundTrip(Int64.min, as: Int64.self) == Int64.min)
        #expect(try f.roundTrip(Int64.max, as: Int64.self) == Int64.max)
        #expect(try f.roundTrip(UInt8.max, as: UInt8.self) == UInt8.max)
        #expect(try f.roundTrip(UInt16.max, as: UInt16.self) == UInt16.max)
        #expect(try f.roundTrip(UInt32.max, as: UInt32.self) == UInt32.max)
        #expect(try f.roundTrip(UInt64(Int64.max), as: UInt64.self) == UInt64(Int64.max))
        #expect(try f.roundTrip(UInt(Int64.max), as: UInt.self) == UInt(Int64.max))
        #expect(try f.roundTrip(UInt64(0), as: UInt64.self) == 0)
        #expect(try f.storageClass(of: Int8(3)) == "integer")
        #expect(try f.storageClass(of: UInt64(3)) == "integer")
    }

    @Test("an integer that overflows the requested type fails with valueConversion naming both types")
    func integerOverflow() throws {
        let f = try Fixture()
        let error = expectError(.valueConversion) { try f.read("300", as: Int8.self) }
        #expect(error?.extendedResultCode == DatabaseError.SQLITE_MISMATCH)
        #expect(error?.message.contains("INTEGER") == true)
        #expect(error?.message.contains("Int8") == true)
        #expect(error?.message.contains("`value`") == true)
        expectError(.valueConversion) { try f.read("-129", as: Int8.self) }
        expectError(.valueConversion) { try f.read("-1", as: UInt8.self) }
        expectError(.valueConversion) { try f.read("256", as: UInt8.self) }
        expectError(.valueConversion) { try f.read("32768", as: Int16.self) }
        expectError(.valueConversion) { try f.read("65536", as: UInt16.self) }
        expectError(.valueConversion) { try f.read("2147483648", as: Int32.self) }
        expectError(.valueConversion) { try f.read("-1", as: UInt32.self) }
        expectError(.valueConversion) { try f.read("-1", as: UInt64.self) }
        expectError(.valueConversion) { try f.read("-1", as: UInt.self) }
        #expect(try f.read("-128", as: Int8.self) == -128)
        #expect(try f.read("255", as: UInt8.self) == 255)
    }

    @Test("a UInt64 above Int64.max is refused when bound (invalidArgument, SQLITE_TOOBIG) and nothing is stored")
    func unsignedAboveInt64Max() throws {
        let f = try Fixture()
        try f.db.execute("CREATE TABLE u(x)")
        let big = UInt64(Int64.max) + 1
        let error = expectError(.invalidArgument) { try f.db.execute("INSERT INTO u VALUES (?)", big) }
        #expect(error?.extendedResultCode == DatabaseError.SQLITE_TOOBIG)
        #expect(error?.message.contains("argument 1") == true)
        #expect(error?.message.contains("\(big)") == false)
        expectError(.invalidArgument) { try f.db.execute("INSERT INTO u VALUES (?)", UInt.max) }
        expectError(.invalidArgument) { try f.db.execute("INSERT INTO u VALUES (?)", arguments: [UInt64.max]) }
        expectError(.invalidArgument) { try f.db.execute("INSERT INTO u VALUES (:x)", arguments: ["x": UInt64.max]) }
        expectError(.invalidArgument) { try f.db.execute("INSERT INTO u VALUES (?)", UInt64?.some(.max)) }
        #expect(try f.db.scalar("SELECT count(*) FROM u", as: Int.self) == 0)
        // Its database value is the exact decimal text, never a wrapped number.
        #expect(big.databaseValue == .text("9223372036854775808"))
        #expect(UInt64(5).databaseValue == .integer(5))
    }

    @Test("integers read from REAL only when the value is an exact integer")
    func integersFromReal() throws {
        let f = try Fixture()
        #expect(try f.read("2.0", as: Int.self) == 2)
        #expect(try f.read("-7.0", as: Int8.self) == -7)
        expectError(.valueConversion) { try f.read("2.5", as: Int.self) }
        expectError(.valueConversion) { try f.read("1e19", as: Int64.self) }
        expectError(.valueConversion) { try f.read("9223372036854775807.0", as: Int64.self) }
    }

    @Test("TEXT, BLOB and NULL do not read as integers")
    func integersFromOtherClasses() throws {
        let f = try Fixture()
        let text = expectError(.valueConversion) { try f.read("'12'", as: Int.self) }
        #expect(text?.message.contains("TEXT value cannot be represented as Int") == true)
        expectError(.valueConversion) { try f.read("'abc'", as: Int64.self) }
        expectError(.valueConversion) { try f.read("x'01'", as: Int.self) }
        let null = expectError(.valueConversion) { try f.read("NULL", as: Int.self) }
        #expect(null?.message.contains("NULL cannot be read as non-optional") == true)
        expectError(.valueConversion) { try f.read("NULL", as: Int64.self) }
    }

    // MARK: - Bool, Double, Float

    @Test("Bool stores 1 and 0 and reads any nonzero INTEGER as true")
    func bool() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(true, as: Int.self) == 1)
        #expect(try f.roundTrip(false, as: Int.self) == 0)
        #expect(try f.roundTrip(true, as: Bool.self) == true)
        #expect(try f.roundTrip(false, as: Bool.self) == false)
        #expect(try f.read("2", as: Bool.self) == true)
        #expect(try f.read("-1", as: Bool.self) == true)
        expectError(.valueConversion) { try f.read("'true'", as: Bool.self) }
        expectError(.valueConversion) { try f.read("1.0", as: Bool.self) }
        expectError(.valueConversion) { try f.read("NULL", as: Bool.self) }
    }

    @Test("Double reads REAL and INTEGER, not TEXT")
    func double() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(3.25, as: Double.self) == 3.25)
        #expect(try f.roundTrip(-Double.greatestFiniteMagnitude, as: Double.self) == -.greatestFiniteMagnitude)
        #expect(try f.storageClass(of: 1.0) == "real")
        #expect(try f.read("7", as: Double.self) == 7)
        #expect(try f.read("0.1", as: Double.self) == 0.1)
        expectError(.valueConversion) { try f.read("'1.5'", as: Double.self) }
        expectError(.valueConversion) { try f.read("x'00'", as: Double.self) }
        expectError(.valueConversion) { try f.read("NULL", as: Double.self) }
        #expect(Double.fromDatabaseValue(.integer(3)) == 3)
        #expect(Double.fromDatabaseValue(.text("3")) == nil)
    }

    @Test("Float round-trips and refuses values beyond its range")
    func float() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(Float(1.5), as: Float.self) == 1.5)
        #expect(try f.storageClass(of: Float(1.5)) == "real")
        #expect(try f.read("12", as: Float.self) == 12)
        expectError(.valueConversion) { try f.read("1e300", as: Float.self) }
        expectError(.valueConversion) { try f.read("'1.5'", as: Float.self) }
        #expect(Float.fromDatabaseValue(.real(.infinity)) == .infinity)
    }

    // MARK: - String and bytes

    @Test("String reads TEXT only, including empty and non-ASCII text")
    func string() throws {
        let f = try Fixture()
        #expect(try f.roundTrip("", as: String.self) == "")
        #expect(try f.storageClass(of: "") == "text")
        #expect(try f.roundTrip("naïve – 日本 🎉", as: String.self) == "naïve – 日本 🎉")
        #expect(try f.roundTrip("a\u{0}b", as: String.self) == "a\u{0}b")
        let error = expectError(.valueConversion) { try f.read("12", as: String.self) }
        #expect(error?.message.contains("INTEGER value cannot be represented as String") == true)
        expectError(.valueConversion) { try f.read("1.5", as: String.self) }
        expectError(.valueConversion) { try f.read("x'41'", as: String.self) }
        expectError(.valueConversion) { try f.read("NULL", as: String.self) }
    }

    @Test("byte arrays round-trip as BLOB; an empty array is an empty BLOB, not NULL; TEXT reads as its UTF-8")
    func bytes() throws {
        let f = try Fixture()
        #expect(try f.roundTrip([UInt8]([0, 1, 255]), as: [UInt8].self) == [0, 1, 255])
        #expect(try f.storageClass(of: [UInt8]()) == "blob")
        #expect(try f.roundTrip([UInt8](), as: [UInt8].self) == [])
        #expect(try f.read("'AB'", as: [UInt8].self) == [0x41, 0x42])
        expectError(.valueConversion) { try f.read("1", as: [UInt8].self) }
        expectError(.valueConversion) { try f.read("NULL", as: [UInt8].self) }
    }

    @Test("Data round-trips as BLOB; empty Data is stored as an empty BLOB, not NULL")
    func data() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(Data([9, 8, 7]), as: Data.self) == Data([9, 8, 7]))
        #expect(try f.storageClass(of: Data([1])) == "blob")
        try f.db.execute("CREATE TABLE d(x)")
        try f.db.execute("INSERT INTO d VALUES (?)", Data())
        try f.db.execute("INSERT INTO d VALUES (?)", arguments: [Data()])
        try f.db.execute("INSERT INTO d VALUES (:x)", arguments: ["x": Data()])
        try f.db.execute("INSERT INTO d VALUES (?)", Data().databaseValue)
        try f.db.execute("INSERT INTO d VALUES (?)", [UInt8]())
        let kinds = try f.db.all("SELECT typeof(x) || ':' || length(x) FROM d", as: String.self)
        #expect(kinds == Array(repeating: "blob:0", count: 5))
        #expect(try f.db.all("SELECT x FROM d", as: Data.self) == Array(repeating: Data(), count: 5))
        #expect(try f.read("'hi'", as: Data.self) == Data("hi".utf8))
        expectError(.valueConversion) { try f.read("NULL", as: Data.self) }
        expectError(.valueConversion) { try f.read("3", as: Data.self) }
    }

    // MARK: - UUID and URL

    @Test("UUID is stored as a 16-byte BLOB and read from that BLOB or canonical TEXT")
    func uuid() throws {
        let f = try Fixture()
        let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        #expect(try f.storageClass(of: uuid) == "blob")
        #expect(try f.roundTrip(uuid, as: [UInt8].self) == [
            0xE6, 0x21, 0xE1, 0xF8, 0xC3, 0x6C, 0x49, 0x5A, 0x93, 0xFC, 0x0C, 0x24, 0x7A, 0x3E, 0x6E, 0x5F,
        ])
        #expect(try f.roundTrip(uuid, as: UUID.self) == uuid)
        #expect(try f.read("'E621E1F8-C36C-495A-93FC-0C247A3E6E5F'", as: UUID.self) == uuid)
        #expect(try f.read("'e621e1f8-c36c-495a-93fc-0c247a3e6e5f'", as: UUID.self) == uuid)
        #expect(try f.read("x'E621E1F8C36C495A93FC0C247A3E6E5F'", as: UUID.self) == uuid)
        expectError(.valueConversion) { try f.read("'not-a-uuid'", as: UUID.self) }
        expectError(.valueConversion) { try f.read("x'E621E1F8C36C495A93FC0C247A3E6E'", as: UUID.self) }
        expectError(.valueConversion) { try f.read("x'E621E1F8C36C495A93FC0C247A3E6E5F00'", as: UUID.self) }
        expectError(.valueConversion) { try f.read("42", as: UUID.self) }
    }

    @Test("URL is stored as its absolute string")
    func url() throws {
        let f = try Fixture()
        let url = URL(string: "https://example.com/a/b?c=d#e")!
        #expect(try f.roundTrip(url, as: String.self) == "https://example.com/a/b?c=d#e")
        #expect(try f.roundTrip(url, as: URL.self) == url)
        let file = URL(fileURLWithPath: "/tmp/some file.db")
        #expect(try f.roundTrip(file, as: URL.self) == file)
        expectError(.valueConversion) { try f.read("42", as: URL.self) }
        expectError(.valueConversion) { try f.read("x'41'", as: URL.self) }
        expectError(.valueConversion) { try f.read("NULL", as: URL.self) }
    }

    // MARK: - Date

    @Test("a Date is stored as UTC text with milliseconds and reads back exactly")
    func dateRoundTrip() throws {
        let f = try Fixture()
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        #expect(try f.roundTrip(date, as: String.self) == "2023-11-14 22:13:20.250")
        #expect(try f.roundTrip(date, as: Date.self) == date)
        let early = Date(timeIntervalSince1970: -1.5)
        #expect(try f.roundTrip(early, as: String.self) == "1969-12-31 23:59:58.500")
        #expect(try f.roundTrip(early, as: Date.self) == early)
        #expect(try f.roundTrip(Date(timeIntervalSince1970: 0), as: String.self) == "1970-01-01 00:00:00.000")
        #expect(try f.roundTrip(Date(timeIntervalSince1970: 951_782_400), as: String.self) == "2000-02-29 00:00:00.000")
        // Precision is milliseconds: the rest is dropped.
        let fine = Date(timeIntervalSince1970: 1_700_000_000.2509)
        #expect(try f.roundTrip(fine, as: String.self) == "2023-11-14 22:13:20.250")
    }

    @Test("SQLite's date functions understand the stored format")
    func dateUnderstoodBySQLite() throws {
        let f = try Fixture()
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        #expect(try f.db.scalar("SELECT datetime(?)", date, as: String.self) == "2023-11-14 22:13:20")
        #expect(try f.db.scalar("SELECT strftime('%s', ?)", date, as: String.self) == "1700000000")
        #expect(try f.db.scalar("SELECT ? < ?", date, date.addingTimeInterval(0.001), as: Bool.self) == true)
    }

    @Test("dates are read from every documented text form", arguments: [
        ("2024-02-29", 1_709_164_800.0),
        ("2024-02-29 13:45", 1_709_214_300.0),
        ("2024-02-29 13:45:30", 1_709_214_330.0),
        ("2024-02-29 13:45:30.5", 1_709_214_330.5),
        ("2024-02-29 13:45:30.250", 1_709_214_330.25),
        ("2024-02-29 13:45:30.125000", 1_709_214_330.125),
        ("2024-02-29T13:45:30", 1_709_214_330.0),
        ("2024-02-29T13:45", 1_709_214_300.0),
        ("2024-02-29T13:45:30Z", 1_709_214_330.0),
        ("2024-02-29 13:45:30.5Z", 1_709_214_330.5),
        ("2024-02-29T13:45:30+02:00", 1_709_207_130.0),
        ("2024-02-29T13:45:30-05:30", 1_709_234_130.0),
        ("2024-02-29 13:45+01:00", 1_709_210_700.0),
    ])
    func dateTextForms(text: String, seconds: Double) throws {
        let f = try Fixture()
        #expect(try f.db.scalar("SELECT ?", text, as: Date.self) == Date(timeIntervalSince1970: seconds))
    }

    @Test("malformed date text does not convert", arguments: [
        "", "garbage", "2024", "2024-02", "2024-2-29", "2024-13-01", "2024-00-10", "2024-02-32",
        "2024-02-29 24:00", "2024-02-29 13:60", "2024-02-29 13:45:60", "2024-02-29 13", "2024-02-29 13:45:30.",
        "2024-02-29 13:45:30 ", "2024-02-29X13:45", "2024-02-29 13:45:30+0200", "2024-02-29 13:45:30+02",
        "2024-02-29Z", "1700000000",
    ])
    func dateMalformedText(text: String) throws {
        let f = try Fixture()
        expectError(.valueConversion) { try f.db.scalar("SELECT ?", text, as: Date.self) }
    }

    @Test("dates are read from numbers as seconds since 1970")
    func dateFromNumbers() throws {
        let f = try Fixture()
        #expect(try f.read("1700000000", as: Date.self) == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(try f.read("1700000000.5", as: Date.self) == Date(timeIntervalSince1970: 1_700_000_000.5))
        #expect(try f.read("-86400", as: Date.self) == Date(timeIntervalSince1970: -86400))
        expectError(.valueConversion) { try f.read("x'00'", as: Date.self) }
        expectError(.valueConversion) { try f.read("NULL", as: Date.self) }
        #expect(Date.fromDatabaseValue(.real(.infinity)) == nil)
        #expect(Date.fromDatabaseValue(.real(.nan)) == nil)
    }

    @Test("SQLite's datetime('now') and strftime('%s', 'now') read as the current date")
    func dateFromSQLiteNow() throws {
        let f = try Fixture()
        let now = Date()
        let text = try #require(try f.read("datetime('now')", as: Date.self))
        #expect(abs(text.timeIntervalSince(now)) < 5)
        let integer = try #require(try f.read("CAST(strftime('%s', 'now') AS INTEGER)", as: Date.self))
        #expect(abs(integer.timeIntervalSince(now)) < 5)
        let fractional = try #require(try f.read("strftime('%Y-%m-%d %H:%M:%f', 'now')", as: Date.self))
        #expect(abs(fractional.timeIntervalSince(now)) < 5)
        // An INTEGER column's affinity turns strftime's text into an integer.
        try f.db.execute("CREATE TABLE e(at INTEGER)")
        try f.db.execute("INSERT INTO e VALUES (strftime('%s', 'now'))")
        #expect(try f.db.scalar("SELECT typeof(at) FROM e", as: String.self) == "integer")
        let stored = try #require(try f.db.scalar("SELECT at FROM e", as: Date.self))
        #expect(abs(stored.timeIntervalSince(now)) < 5)
    }

    // MARK: - Optional and RawRepresentable

    @Test("Optional nil binds NULL and NULL reads as nil; a wrong type still fails for an optional")
    func optional() throws {
        let f = try Fixture()
        let none: Int? = nil
        #expect(try f.storageClass(of: none) == "null")
        #expect(try f.storageClass(of: Int?.some(3)) == "integer")
        #expect(try f.roundTrip(none, as: Int?.self) == .some(nil))
        #expect(try f.roundTrip(Int?.some(3), as: Int?.self) == .some(3))
        #expect(try f.roundTrip(String?.none, as: String?.self) == .some(nil))
        expectError(.valueConversion) { try f.read("'abc'", as: Int?.self) }
        expectError(.valueConversion) { try f.read("300", as: Int8?.self) }
        #expect(none.databaseValue == .null)
        #expect(Int?.fromDatabaseValue(.null) == .some(nil))
        #expect(Int?.fromDatabaseValue(.text("x")) == nil)
    }

    @Test("a RawRepresentable enum is stored as its raw value; an unknown raw value fails")
    func rawRepresentable() throws {
        let f = try Fixture()
        #expect(try f.roundTrip(Status.archived, as: String.self) == "archived")
        #expect(try f.roundTrip(Status.active, as: Status.self) == .active)
        #expect(try f.roundTrip(Priority.high, as: Int.self) == 9)
        #expect(try f.roundTrip(Priority.low, as: Priority.self) == .low)
        #expect(try f.storageClass(of: Priority.low) == "integer")
        let error = expectError(.valueConversion) { try f.read("'deleted'", as: Status.self) }
        #expect(error?.message.contains("Status") == true)
        expectError(.valueConversion) { try f.read("5", as: Priority.self) }
        expectError(.valueConversion) { try f.read("9", as: Status.self) }
        #expect(try f.read("NULL", as: Status?.self) == .some(nil))
    }
}
