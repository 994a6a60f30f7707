import Dispatch
import Foundation
import SQLCipherKit
import Synchronization
import Testing

/// Where async pool reads run: in place on the task (which sees its task-local values) or on the reader's queue (a
/// plain dispatch block, which does not).
private enum Probe {
    @TaskLocal static var isCallingTask = false
}

@Suite("Async pool reads")
struct AsyncReadTests {
    static func makePool(_ dir: TemporaryDirectory, readers: Int = 2,
                         execution: DatabasePool.AsyncReadExecution = .adaptive) throws -> DatabasePool {
        let pool = try DatabasePool(path: dir.path("async.db"), keyProvider: .fixed(TestKeys.raw),
                                    configuration: .init(maximumReaderCount: readers, asyncReadExecution: execution))
        try pool.write { db in
            try db.execute("CREATE TABLE t(x INTEGER)")
            try db.execute("INSERT INTO t VALUES (1), (2), (3)")
        }
        return pool
    }

    /// Whether the read's closure ran in the calling task (in place) rather than on the reader's queue.
    static func runsInPlace(_ pool: DatabasePool, _ body: @escaping @Sendable (Connection) throws -> Void = { _ in })
        async throws -> Bool
    {
        try await Probe.$isCallingTask.withValue(true) {
            try await pool.read { db in
                try body(db)
                return Probe.isCallingTask
            }
        }
    }

    @Test("a short async read runs in place; after a long one, reads go to the reader's queue")
    func adaptive() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir)
        defer { pool.close() }
        #expect(try await Self.runsInPlace(pool))
        // 20 ms moves the average (1/8 of it per read) far above the 100 µs limit for the next read.
        #expect(try await Self.runsInPlace(pool) { _ in Thread.sleep(forTimeInterval: 0.02) })
        #expect(try await !Self.runsInPlace(pool))
        #expect(try await pool.read { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) } == 6)
    }

    @Test("readerQueue runs every async read on the reader's queue")
    func readerQueue() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, execution: .readerQueue)
        defer { pool.close() }
        for _ in 0..<3 {
            #expect(try await !Self.runsInPlace(pool))
        }
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
    }

    @Test("a task cancelled before its read starts gets CancellationError and the closure does not run",
          arguments: [DatabasePool.AsyncReadExecution.adaptive, .readerQueue])
    func cancelledBeforeStart(execution: DatabasePool.AsyncReadExecution) async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, execution: execution)
        defer { pool.close() }
        let ran = Atomic<Int>(0)
        let task = Task {
            // Wait until cancelled, without suspending on anything the cancellation would end early.
            while !Task.isCancelled { await Task.yield() }
            return try await pool.read { _ in ran.add(1, ordering: .relaxed) }
        }
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(ran.load(ordering: .relaxed) == 0)
        // The reader went back to the pool: the next read gets it.
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
        #expect(pool.readerConnectionCount <= 2)
    }

    @Test("a task waiting for a reader is cancelled while the reader is held in place; the pool goes on")
    func cancelWhileWaiting() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 1)
        defer { pool.close() }
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // Held on a thread of its own (a synchronous read), so no cooperative thread is blocked by the test.
        let holder = Thread {
            _ = try? pool.read { _ in
                started.signal()
                release.wait()
            }
        }
        holder.start()
        started.wait()
        let ran = Atomic<Int>(0)
        let waiting = Task { try await pool.read { _ in ran.add(1, ordering: .relaxed) } }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        let result = await waiting.result
        #expect(throws: CancellationError.self) { try result.get() }
        release.signal()
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
        #expect(ran.load(ordering: .relaxed) == 0)
    }

    @Test("using the pool from inside a read that runs in place is refused, not a deadlock")
    func reentranceInPlace() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 1)
        defer { pool.close() }
        let inPlace = try await Self.runsInPlace(pool) { _ in
            let error = #expect(throws: DatabaseError.self) { try pool.read { _ in 1 } }
            #expect(error?.kind == .invalidState)
            let writeError = #expect(throws: DatabaseError.self) { try pool.write { _ in 1 } }
            #expect(writeError?.kind == .invalidState)
        }
        #expect(inPlace)
        // The thread is no longer marked once the read is over.
        #expect(try Self.countSynchronously(pool) == 3)
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
    }

    /// The synchronous API, outside an async context (where the async overload would be chosen).
    static func countSynchronously(_ pool: DatabasePool) throws -> Int? {
        try pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) }
    }

    @Test("many tasks reading in place with a writer: every read sees a consistent snapshot")
    func manyTasks() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 4)
        defer { pool.close() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for value in 0..<100 {
                    try await pool.write { db in
                        try db.execute("UPDATE t SET x = x + 1 WHERE x = (SELECT min(x) FROM t)")
                        try db.execute("UPDATE t SET x = x - 1 WHERE x = (SELECT max(x) FROM t)")
                        _ = value
                    }
                }
            }
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<200 {
                        let sum = try await pool.read { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) }
                        #expect(sum == 6)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(pool.readerConnectionCount <= 4)
    }

    @Test("close() waits for reads running in place, then refuses new ones")
    func closeDrainsInPlaceReads() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 1)
        let started = Atomic<Bool>(false)
        let finished = Atomic<Int>(0)
        let reader = Task.detached {
            try await Probe.$isCallingTask.withValue(true) {
                try await pool.read { _ in
                    #expect(Probe.isCallingTask, "the first read of a pool runs in place")
                    started.store(true, ordering: .releasing)
                    Thread.sleep(forTimeInterval: 0.2)
                    finished.add(1, ordering: .relaxed)
                }
            }
        }
        // Polled rather than waited for on a semaphore: no cooperative thread is blocked by the test itself.
        var polls = 0
        while !started.load(ordering: .acquiring), polls < 60_000 {
            polls += 1
            try await Task.sleep(for: .milliseconds(1))
        }
        pool.close()
        #expect(finished.load(ordering: .relaxed) == 1, "close returned before the read finished")
        try await reader.value
        let error = await #expect(throws: DatabaseError.self) { try await pool.read { _ in 1 } }
        #expect(error?.kind == .connectionClosed)
    }
}
