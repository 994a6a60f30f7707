import Foundation
@testable import SQLCipherKit
import Testing

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

private class Parent: Decodable {
    let a: Int64
    private enum CodingKeys: String, CodingKey { case a }
    required init(from decoder: any Decoder) throws {
        a = try decoder.container(keyedBy: CodingKeys.self).decode(Int64.self, forKey: .a)
    }
}

private final class Child: Parent {
    let b: Int64
    private enum CodingKeys: String, CodingKey { case b }
    required init(from decoder: any Decoder) throws {
        b = try decoder.container(keyedBy: CodingKeys.self).decode(Int64.self, forKey: .b)
        try super.init(from: decoder)
    }
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
        case 2: result = try contextAfterDecoding(Child.self, db, "SELECT 1 AS a, 2 AS b UNION ALL SELECT 3, 4")
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
