import Foundation
@testable import SQLCipherKit
import Testing

// The column of each coding key is learnt on a cursor's first row and reused; the keyed container is built once per
// cursor and refers to its context without retaining it. These tests pin what that reuse must not change.

private struct TwoInts: Decodable, Equatable {
    var a: Int64
    var b: Int64
}

private struct OptionalSecond: Decodable, Equatable {
    var a: Int64
    var b: Int64?
}

/// A class hierarchy whose levels decode with different key types, so each row switches key type twice.
private class Base: Decodable {
    let a: Int64
    private enum CodingKeys: String, CodingKey { case a }
    required init(from decoder: any Decoder) throws {
        a = try decoder.container(keyedBy: CodingKeys.self).decode(Int64.self, forKey: .a)
    }
}

private final class Derived: Base {
    let b: Int64
    private enum CodingKeys: String, CodingKey { case b }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        b = try container.decode(Int64.self, forKey: .b)
        try super.init(from: container.superDecoder())
    }
}

/// Keeps the container and the decoder its initializer was given (a record must never do this; the library has to
/// stay safe when one does). Used by one test only.
private struct Keeper: Decodable {
    var a: Int64
    enum CodingKeys: String, CodingKey { case a }

    nonisolated(unsafe) static var keptContainer: KeyedDecodingContainer<CodingKeys>?
    nonisolated(unsafe) static var keptDecoder: (any Decoder)?

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        a = try container.decode(Int64.self, forKey: .a)
        Self.keptContainer = container
        Self.keptDecoder = decoder
    }
}

@Suite("Codable: keys learnt once per cursor")
struct DecodingReuseTests {
    @Test("a duplicated column name reads the same column as row[name] on every row, through every entry point")
    func duplicateColumnNames() throws {
        let db = try Connection.inMemory()
        let sql = "SELECT 1 AS a, 2 AS A, 3 AS b, 4 AS a UNION ALL SELECT 5, 6, 7, 8 UNION ALL SELECT 9, 10, 11, 12"
        let byName = try db.cursor(sql).map { row in TwoInts(a: try row["a"], b: try row["b"]) }
        #expect(byName == [TwoInts(a: 1, b: 3), TwoInts(a: 5, b: 7), TwoInts(a: 9, b: 11)])
        #expect(try db.fetchAll(TwoInts.self, sql) == byName)
        #expect(try db.fetchCursor(TwoInts.self, sql).all() == byName)
        #expect(try db.query(sql).map { try $0.decode(TwoInts.self) } == byName)
    }

    @Test("the same type over a statement without one of its columns: missing for the new statement only")
    func columnMissingInSecondStatement() throws {
        let db = try Connection.inMemory()
        try db.execute("CREATE TABLE t(a INTEGER, b INTEGER)")
        for a in 1...3 { try db.execute("INSERT INTO t(a, b) VALUES (?, ?)", Int64(a), Int64(a * 10)) }
        #expect(try db.fetchAll(TwoInts.self, "SELECT a, b FROM t ORDER BY a").map(\.b) == [10, 20, 30])
        let missing = expectError(.invalidArgument) { try db.fetchAll(TwoInts.self, "SELECT a FROM t ORDER BY a") }
        #expect(missing?.message.contains("no column named `b`") == true)
        #expect(try db.fetchAll(OptionalSecond.self, "SELECT a, b FROM t ORDER BY a").map(\.b) == [10, 20, 30])
        #expect(try db.fetchAll(OptionalSecond.self, "SELECT a FROM t ORDER BY a").map(\.b) == [nil, nil, nil])
        // The first statement again, from the statement cache: its columns are found again.
        #expect(try db.fetchAll(TwoInts.self, "SELECT a, b FROM t ORDER BY a").map(\.b) == [10, 20, 30])
        // Columns in another order in a third statement: each key still finds its own column.
        #expect(try db.fetchAll(TwoInts.self, "SELECT b, a FROM t ORDER BY a") == [
            TwoInts(a: 1, b: 10), TwoInts(a: 2, b: 20), TwoInts(a: 3, b: 30),
        ])
    }

    @Test("conversion errors on later rows, after the columns are learnt, name the column; the cursor goes on")
    func conversionErrorsAfterLearning() throws {
        let db = try Connection.inMemory()
        let cursor = try db.fetchCursor(
            TwoInts.self,
            "SELECT 1 AS a, 2 AS b UNION ALL SELECT 3, 'four' UNION ALL SELECT NULL, 6 UNION ALL SELECT 7, 8.5"
                + " UNION ALL SELECT 9, 10")
        #expect(try cursor.next() == TwoInts(a: 1, b: 2))
        let text = expectError(.valueConversion) { try cursor.next() }
        #expect(text?.message.contains("column `b`") == true)
        #expect(text?.message.contains("TEXT value cannot be represented as Int64") == true)
        let null = expectError(.valueConversion) { try cursor.next() }
        #expect(null?.message.contains("column `a`") == true)
        #expect(null?.message.contains("NULL") == true)
        let real = expectError(.valueConversion) { try cursor.next() }
        #expect(real?.message.contains("column `b`") == true)
        #expect(try cursor.next() == TwoInts(a: 9, b: 10))
        #expect(try cursor.next() == nil)
    }

    @Test("column names match case-insensitively on every row, not only the first")
    func caseInsensitiveOnEveryRow() throws {
        let db = try Connection.inMemory()
        #expect(try db.fetchAll(TwoInts.self, "SELECT 1 AS A, 2 AS B UNION ALL SELECT 3, 4 UNION ALL SELECT 5, 6")
            == [TwoInts(a: 1, b: 2), TwoInts(a: 3, b: 4), TwoInts(a: 5, b: 6)])
    }

    @Test("a class hierarchy that switches key types within each row decodes every row")
    func keyTypesAlternate() throws {
        let db = try Connection.inMemory()
        let sql = "SELECT 1 AS a, 2 AS b UNION ALL SELECT 3, 4 UNION ALL SELECT 5, 6"
        for records in [try db.fetchAll(Derived.self, sql), try db.fetchCursor(Derived.self, sql).all()] {
            #expect(records.map(\.a) == [1, 3, 5])
            #expect(records.map(\.b) == [2, 4, 6])
        }
    }

    @Test("a container or decoder kept past its row throws instead of reading another row, even once the cursor is gone")
    func keptContainerDoesNotRead() throws {
        do {
            let db = try Connection.inMemory()
            let cursor = try db.fetchCursor(Keeper.self, "SELECT 1 AS a UNION ALL SELECT 2")
            #expect(try cursor.next()?.a == 1)
            let container = try #require(Keeper.keptContainer)
            // The statement is on row 1 still, but the record is decoded: no read.
            expectError(.invalidState) { try container.decode(Int64.self, forKey: .a) }
            #expect(try cursor.next()?.a == 2)
            // The container of row 1 does not read row 2.
            expectError(.invalidState) { try container.decode(Int64.self, forKey: .a) }
            expectError(.invalidState) { try container.decodeIfPresent(Int64.self, forKey: .a) }
            expectError(.invalidState) { try container.decodeNil(forKey: .a) }
            expectError(.invalidState) { try container.decode(String.self, forKey: .a) }
            db.close()
        }
        // Cursor and connection released: the kept container and decoder still only throw.
        let container = try #require(Keeper.keptContainer)
        expectError(.invalidState) { try container.decode(Int64.self, forKey: .a) }
        let decoder = try #require(Keeper.keptDecoder)
        expectError(.invalidState) { try decoder.container(keyedBy: Keeper.CodingKeys.self).decode(Int64.self, forKey: .a) }
        expectError(.invalidState) { try decoder.singleValueContainer().decode(Int64.self) }
        var unkeyed = try decoder.unkeyedContainer()
        expectError(.invalidState) { try unkeyed.decode(Int64.self) }
        Keeper.keptContainer = nil
        Keeper.keptDecoder = nil

        // A row decoded on its own: the same.
        let db = try Connection.inMemory()
        let row = try #require(try db.query("SELECT 7 AS a").first)
        #expect(try row.decode(Keeper.self).a == 7)
        let single = try #require(Keeper.keptContainer)
        expectError(.invalidState) { try single.decode(Int64.self, forKey: .a) }
        Keeper.keptContainer = nil
        Keeper.keptDecoder = nil
    }
}

// A decoding cursor's context is referred to unretained by its decoder and containers; when the cursor ends, a
// context some record still holds a container of is retained for good, so that the container never points to freed
// memory. That must happen only for such a record: these tests check, through the context's lifetime, that ordinary
// decoding (keyed, nested, unkeyed, single values, class hierarchies, errors) frees it.

private struct Flat: Decodable { var a: Int64; var b: String? }

private struct Nested: Decodable {
    struct Inner: Decodable { var x: Int }
    var a: Int64
    var inner: Inner          // read from a JSON column
    var list: [Int]           // read from a JSON column
}

/// Keeps its container: the misuse the context is kept alive for.
private struct Hoarder: Decodable {
    nonisolated(unsafe) static var kept: KeyedDecodingContainer<CodingKeys>?
    enum CodingKeys: String, CodingKey { case a }
    var a: Int64
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        Self.kept = container
        a = try container.decode(Int64.self, forKey: .a)
    }
}

@Suite("Decoding context lifetime", .serialized)
struct DecodingContextLifetimeTests {
    /// Decodes every row of `sql` as `Record` through a cursor and returns the cursor's context, weakly.
    private func contextAfterDecoding<Record: Decodable>(
        _ type: Record.Type, _ db: Connection, _ sql: String, expectingErrors: Bool = false
    ) throws -> (weak: () -> RowDecodingContext?, keptAlive: Bool) {
        weak var weakContext: RowDecodingContext?
        var keptAlive = false
        do {
            let cursor = try db.fetchCursor(Record.self, sql)
            weakContext = cursor.context
            if expectingErrors {
                while true {
                    do { guard try cursor.next() != nil else { break } } catch {}
                }
            } else {
                _ = try cursor.all()
            }
            withExtendedLifetime(cursor) {}
        }
        keptAlive = weakContext?.isKeptAlive ?? false
        return ({ weakContext }, keptAlive)
    }

    @Test("ordinary decoding frees the context when the cursor ends", arguments: [0, 1, 2, 3, 4])
    func freed(shape: Int) throws {
        let db = try Connection.inMemory()
        let result: (weak: () -> RowDecodingContext?, keptAlive: Bool)
        switch shape {
        case 0: result = try contextAfterDecoding(Flat.self, db, "SELECT 1 AS a, 'x' AS b UNION ALL SELECT 2, NULL")
        case 1: result = try contextAfterDecoding(
            Nested.self, db, #"SELECT 1 AS a, '{"x": 2}' AS inner, '[1, 2]' AS list UNION ALL SELECT 3, '{"x": 4}', '[]'"#)
        case 2: result = try contextAfterDecoding(Derived.self, db, "SELECT 1 AS a, 2 AS b UNION ALL SELECT 3, 4")
        case 3: result = try contextAfterDecoding(Int64.self, db, "SELECT 1 UNION ALL SELECT 2")
        default: result = try contextAfterDecoding(
            Flat.self, db, "SELECT 'text' AS a, 'x' AS b UNION ALL SELECT 2, 'y'", expectingErrors: true)
        }
        #expect(result.weak() == nil, "the context of an ordinary decode must be freed (shape \(shape))")
        #expect(!result.keptAlive)
    }

    @Test("a record that keeps its container keeps the context allocated, and only then")
    func keptOnlyForHoarders() throws {
        let db = try Connection.inMemory()
        let result = try contextAfterDecoding(Hoarder.self, db, "SELECT 1 AS a UNION ALL SELECT 2")
        #expect(result.weak() != nil)
        #expect(result.keptAlive)
        let container = try #require(Hoarder.kept)
        expectError(.invalidState) { try container.decode(Int64.self, forKey: .a) }
        Hoarder.kept = nil
    }
}
