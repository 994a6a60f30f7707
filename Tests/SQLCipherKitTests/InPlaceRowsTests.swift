import SQLCipherKit
import Testing

/// `first`, `scalar` and `all` read their rows in place on the cached statement, without a cursor object: they must
/// keep every promise a cursor closed at the end keeps.
@Suite("Rows read in place by first, scalar and all")
struct InPlaceRowsTests {
    /// An encrypted connection with `t(x)` holding 1, 2, 3, and a second connection to the same file that takes
    /// locks without waiting.
    private static func open(_ dir: borrowing TemporaryDirectory) throws -> (Connection, Connection) {
        let path = dir.path("in-place.db")
        let db = try Connection(path: path, key: TestKeys.raw)
        try db.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1), (2), (3)")
        let other = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: nil))
        return (db, other)
    }

    /// Fails unless no read of `db` is left open: another connection can take the exclusive lock at once.
    private static func expectNoReadLeftOpen(_ other: Connection, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(throws: Never.self, sourceLocation: sourceLocation) {
            try other.execute("BEGIN EXCLUSIVE")
            try other.execute("COMMIT")
        }
    }

    @Test("first and scalar stop at the first row and leave no read open, also when the transform throws")
    func noReadLeftOpen() throws {
        try withTemporaryDirectory { dir in
            let (db, other) = try Self.open(dir)
            let sql = "SELECT x FROM t ORDER BY x"
            #expect(try db.first(sql, map: { try $0[0] as Int }) == 1)
            Self.expectNoReadLeftOpen(other)
            #expect(try db.scalar(sql, as: Int.self) == 1)
            Self.expectNoReadLeftOpen(other)
            #expect(try db.all(sql, as: Int.self) == [1, 2, 3])
            Self.expectNoReadLeftOpen(other)
            // The row of `first` is TEXT-checked as any row; the failure resets the statement too.
            expectError(.valueConversion) { try db.first("SELECT 'one' FROM t", map: { try $0[0] as Int }) }
            Self.expectNoReadLeftOpen(other)
            expectError(.valueConversion) { try db.all("SELECT 'one' FROM t", map: { try $0[0] as Int }) }
            Self.expectNoReadLeftOpen(other)
            // No row: nil, and nothing open.
            #expect(try db.first("SELECT x FROM t WHERE x > ?", 9, map: { try $0[0] as Int }) == nil)
            #expect(try db.scalar("SELECT x FROM t WHERE x > ?", 9, as: Int.self) == nil)
            Self.expectNoReadLeftOpen(other)
            // The same cached statement serves the next call with other arguments.
            #expect(try db.scalar("SELECT x FROM t WHERE x > ? ORDER BY x", 1, as: Int.self) == 2)
        }
    }

    @Test("a row kept past first(map:) reads no freed memory: it keeps its statement, refuses to read, and throws connectionClosed once the connection closed")
    func escapedRow() throws {
        try withTemporaryDirectory { dir in
            let (db, _) = try Self.open(dir)
            let row = try #require(try db.first("SELECT x FROM t ORDER BY x", map: { $0 }))
            // The statement was reset when first returned: the row no longer stands on a result row (it read nil).
            expectError(.rowMisuse) { try row[0] as Int? }
            // Running other statements (which may evict the cached one) leaves the row's statement alive.
            for value in 0..<40 { _ = try db.scalar("SELECT ? + \(value)", value, as: Int.self) }
            expectError(.rowMisuse) { try row[0] as Int? }
            expectError(.rowMisuse) { try row.copy() }
            db.close()
            expectError(.connectionClosed) { try row[0] as Int }
            expectError(.connectionClosed) { try row.copy() }
        }
    }

    @Test("a cursor left open keeps its statement from the cache; a cursor opened over it inside all(map:) ends the loop")
    func cursorGenerations() throws {
        try withTemporaryDirectory { dir in
            let (db, other) = try Self.open(dir)
            let sql = "SELECT x FROM t ORDER BY x"
            // A cursor made but not stepped keeps the cached statement to itself: scalar takes one of its own, and
            // the cursor still reads its rows (before, scalar took the same statement and the cursor read none).
            let old = try db.cursor(sql)
            #expect(try db.scalar(sql, as: Int.self) == 1)
            #expect(try old.next().map { try $0[0] as Int } == 1)
            old.close()
            Self.expectNoReadLeftOpen(other)

            // Inside all(map:), a cursor over the very statement that all steps: the loop ends and leaves the
            // statement, its bindings and its position to that cursor.
            let statement = try db.cachedStatement(sql)
            var inner: RowCursor?
            let seen = try db.all(sql, map: { row -> Int in
                let value = try row[0] as Int
                if inner == nil { inner = try statement.cursor() }
                return value
            })
            #expect(seen.count == 1)
            let cursor = try #require(inner)
            #expect(try cursor.map { try $0[0] as Int } == [1, 2, 3])
            Self.expectNoReadLeftOpen(other)

            // The same SQL run again inside the transform uses a statement of its own (the cached one is busy).
            let nested = try db.all(sql, map: { row -> Int in
                try (row[0] as Int) * 10 + (db.scalar(sql, as: Int.self) ?? 0)
            })
            #expect(nested == [11, 21, 31])
            Self.expectNoReadLeftOpen(other)
        }
    }

    @Test("a transform that closes the connection: first returns its row, all throws connectionClosed; neither touches the finalized statement")
    func transformClosesConnection() throws {
        try withTemporaryDirectory { dir in
            let (db, _) = try Self.open(dir)
            #expect(try db.first("SELECT x FROM t ORDER BY x", map: { row -> Int in
                let value = try row[0] as Int
                db.close()
                return value
            }) == 1)
            expectError(.connectionClosed) { try db.scalar("SELECT 1", as: Int.self) }
            // all wants the next row from a closed connection: the error says so, as a cursor's next() would.
            let again = try Connection(path: dir.path("in-place.db"), key: TestKeys.raw)
            expectError(.connectionClosed) {
                try again.all("SELECT x FROM t ORDER BY x", map: { row -> Int in
                    let value = try row[0] as Int
                    again.close()
                    return value
                })
            }
        }
    }
}
