import Dispatch
import Foundation
@testable import SQLCipherKit
import Synchronization
import Testing

/// A pool's free readers wait in slots that a read takes and fills without the pool's mutex (`ReaderParking`):
/// a reader given back that way must still reach a caller queued under the mutex, a rekey or close() must still wait
/// for such a read and close its reader, and one thread reading again and again keeps to one reader.
@Suite("DatabasePool reader parking")
struct PoolReaderParkingTests {
    static func makePool(_ dir: TemporaryDirectory, readers: Int) throws -> DatabasePool {
        let pool = try DatabasePool(
            path: dir.path("parking.db"), keyProvider: .fixed(TestKeys.raw),
            configuration: .init(maximumReaderCount: readers))
        try pool.write { db in
            try db.execute("CREATE TABLE t(x INTEGER)")
            try db.execute("INSERT INTO t VALUES (1), (2), (3)")
        }
        // Opens the reader and parks it: the reads below take it without the mutex.
        #expect(try pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
        return pool
    }

    /// Runs a synchronous read on a thread of its own that signals `entered`, then waits for `release`.
    static func holdReader(_ pool: DatabasePool, entered: DispatchSemaphore, release: DispatchSemaphore,
                           inside: @escaping @Sendable (Connection) throws -> Void = { _ in }) -> DispatchSemaphore {
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = try? pool.read { db in
                entered.signal()
                release.wait()
                try inside(db)
            }
            finished.signal()
        }.start()
        return finished
    }

    @Test("a reader given back without the mutex goes to the reads queued for it, synchronous and async")
    func handOverToWaiters() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 1)
        defer { pool.close() }
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holderFinished = Self.holdReader(pool, entered: entered, release: release)
        var released = false
        defer { if !released { release.signal() } }
        try #require(await awaitSignal(entered), "the reader was never held")

        let syncResult = Atomic<Int>(0)
        let syncFinished = DispatchSemaphore(value: 0)
        Thread {
            syncResult.store((try? pool.read { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) ?? 0 }) ?? -1,
                             ordering: .relaxed)
            syncFinished.signal()
        }.start()
        let asyncFinished = Atomic<Bool>(false)
        let asyncRead = Task {
            defer { asyncFinished.store(true, ordering: .sequentiallyConsistent) }
            return try await pool.read { db in try db.scalar("SELECT max(x) FROM t", as: Int.self) }
        }
        try #require(await suspendingWait { pool.readerWaiterCount == 2 }, "the two reads never queued")

        released = true
        release.signal()
        #expect(await awaitSignal(holderFinished))
        // Bounded waits: a reader given back without reaching the queued reads would leave them waiting for good
        // (the pool's close() then fails them, so the test ends).
        try #require(await awaitSignal(syncFinished), "the synchronous read never got the reader")
        try #require(await suspendingWait { asyncFinished.load(ordering: .sequentiallyConsistent) },
                     "the async read never got the reader")
        #expect(syncResult.load(ordering: .relaxed) == 6)
        #expect(try await asyncRead.value == 3)
        #expect(pool.readerWaiterCount == 0)
        #expect(pool.readerConnectionCount == 1)
    }

    @Test("one thread reading again and again keeps to one reader")
    func oneThreadOneReader() throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 4)
        defer { pool.close() }
        for _ in 0..<200 {
            #expect(try pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
        }
        #expect(pool.readerConnectionCount == 1)
    }

    @Test("a rekey waits for a read that took its reader without the mutex, closes that reader, and reads go on")
    func rekeyWaitsForParkedRead() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 2)
        defer { pool.close() }
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let readDone = Atomic<Bool>(false)
        let holderFinished = Self.holdReader(pool, entered: entered, release: release) { _ in
            readDone.store(true, ordering: .sequentiallyConsistent)
        }
        var released = false
        defer { if !released { release.signal() } }
        try #require(await awaitSignal(entered), "the reader was never held")

        let sawReadDone = Atomic<Int>(0)  // 1: the rekey returned after the read, 2: before it, 3: it failed
        let rekeyFinished = DispatchSemaphore(value: 0)
        Thread {
            do {
                _ = try pool.rekey(to: .fixed(TestKeys.otherPassphrase))
                sawReadDone.store(readDone.load(ordering: .sequentiallyConsistent) ? 1 : 2, ordering: .relaxed)
            } catch {
                sawReadDone.store(3, ordering: .relaxed)
            }
            rekeyFinished.signal()
        }.start()
        // The barrier is up while the read still holds its reader; only then is the read let go.
        try #require(await suspendingWait { pool.coordinator.isBarrierUp }, "the rekey never raised its barrier")
        released = true
        release.signal()
        #expect(await awaitSignal(holderFinished))
        #expect(await awaitSignal(rekeyFinished))
        #expect(sawReadDone.load(ordering: .relaxed) == 1)
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
        let fresh = try Connection(path: dir.path("parking.db"), key: TestKeys.otherPassphrase)
        #expect(try fresh.scalar("SELECT sum(x) FROM t", as: Int.self) == 6)
        fresh.close()
    }

    @Test("close() from inside a read that took its reader without the mutex closes the readers when it ends")
    func closeFromInsideParkedRead() throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 2)
        let sum = try pool.read { db -> Int? in
            pool.close()
            return try db.scalar("SELECT sum(x) FROM t", as: Int.self)
        }
        #expect(sum == 6)
        #expect(pool.readerConnectionCount == 0)
        #expect(throws: DatabaseError.self) { try pool.read { _ in 1 } }
    }
}
