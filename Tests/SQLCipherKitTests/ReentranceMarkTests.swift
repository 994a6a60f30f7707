import SQLCipherKit
import Testing

/// A pool refuses to be used from inside its own closures (it would deadlock), on every path a closure runs on,
/// and only there: other pools and later calls are not refused.
@Suite("Re-entrance marks")
struct ReentranceMarkTests {
    private static func pool(_ dir: borrowing TemporaryDirectory, _ name: String) throws -> DatabasePool {
        let pool = try DatabasePool(path: dir.path(name), keyProvider: .fixed(TestKeys.raw))
        try pool.write { db in try db.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)") }
        return pool
    }

    @Test("refused inside a synchronous read or write, also from inside another pool's closure nested in it")
    func synchronousNesting() throws {
        try withTemporaryDirectory { dir in
            let first = try Self.pool(dir, "first.db")
            let second = try Self.pool(dir, "second.db")
            defer { first.close(); second.close() }
            try first.read { _ in
                expectError(.invalidState) { try first.read { _ in 1 } }
                // Another pool is not refused; inside it, both it and the enclosing first pool are.
                let inSecond = try second.read { db in
                    expectError(.invalidState) { try second.write { _ in 1 } }
                    expectError(.invalidState) { try first.read { _ in 1 } }
                    return try db.scalar("SELECT x FROM t", as: Int.self)
                }
                #expect(inSecond == 1)
                expectError(.invalidState) { try first.write { _ in 1 } }
            }
            try first.write { _ in
                expectError(.invalidState) { try first.read { _ in 1 } }
                // A write of the first pool, a read of the second in place, then the first's writer again: a
                // deadlock on the writer's queue unless every enclosing owner is checked.
                let readInSecond = try second.read { db in
                    expectError(.invalidState) { try first.write { _ in 1 } }
                    return try db.scalar("SELECT x FROM t", as: Int.self)
                }
                let writtenInSecond = try second.write { db in
                    expectError(.invalidState) { try first.write { _ in 1 } }
                    return try db.scalar("SELECT x FROM t", as: Int.self)
                }
                #expect(readInSecond == 1 && writtenInSecond == 1)
                expectError(.invalidState) { try first.write { _ in 1 } }
            }
            // Nothing is left marked once the closures returned.
            #expect(try first.read { db in try db.scalar("SELECT x FROM t", as: Int.self) } == 1)
            #expect(try first.write { db in try db.scalar("SELECT x FROM t", as: Int.self) } == 1)
        }
    }

    @Test("refused inside an async write and an async read on the reader's queue; the queue's thread is unmarked after")
    func onQueues() async throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(
            path: dir.path("queues.db"), keyProvider: .fixed(TestKeys.raw),
            configuration: .init(maximumReaderCount: 1, asyncReadExecution: .readerQueue))
        defer { pool.close() }
        try await pool.write { db in try db.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)") }
        let refusedInWrite = try await pool.write { _ in Self.refusesReentrance(pool) }
        #expect(refusedInWrite)
        let refusedInRead = try await pool.read { _ in Self.refusesReentrance(pool) }
        #expect(refusedInRead)
        // The reader's queue thread ran the blocks above; nothing there is left marked for this pool.
        #expect(try await pool.read { db in try db.scalar("SELECT x FROM t", as: Int.self) } == 1)
        #expect(try await pool.write { db in try db.scalar("SELECT x FROM t", as: Int.self) } == 1)
    }

    /// Whether a synchronous read and a synchronous write from here are both refused as re-entrant.
    private static func refusesReentrance(_ pool: DatabasePool) -> Bool {
        func refused(_ body: () throws -> Int) -> Bool {
            do { _ = try body() } catch let error as DatabaseError { return error.kind == .invalidState } catch {}
            return false
        }
        return refused { try pool.read { _ in 1 } } && refused { try pool.write { _ in 1 } }
    }
}
