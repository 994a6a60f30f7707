import Foundation
import SQLCipherKit
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
