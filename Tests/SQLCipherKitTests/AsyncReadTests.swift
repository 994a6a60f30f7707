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
        // The first read of a pool runs in place (nothing is known of its reads yet).
        #expect(try await Self.runsInPlace(pool))
        // A read of at least 20 ms (wherever it runs: on a loaded machine the first read may already have been
        // slow) moves the average (1/8 of it per read) far above the 100 µs limit for the next read.
        _ = try await Self.runsInPlace(pool) { _ in Thread.sleep(forTimeInterval: 0.02) }
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
        var released = false
        defer { if !released { release.signal() } }
        try await Self.waitOffCooperativeThreads(for: started, count: 1)
        let ran = Atomic<Int>(0)
        let waiting = Task { try await pool.read { _ in ran.add(1, ordering: .relaxed) } }
        // Cancelled once it waits for the reader (the pool says so), not after a guess at how long that takes.
        try await Self.poll(until: { pool.readerWaiterCount == 1 })
        waiting.cancel()
        let result = await waiting.result
        #expect(throws: CancellationError.self) { try result.get() }
        released = true
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

    /// Waits for `count` signals of `semaphore` on a thread of its own, so no cooperative thread (which other tests
    /// running in parallel need) is blocked meanwhile.
    static func waitOffCooperativeThreads(for semaphore: DispatchSemaphore, count: Int) async throws {
        let arrived = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Thread.detachNewThread {
                for _ in 0..<count {
                    // Bounded only to turn a hang into a failure.
                    guard semaphore.wait(timeout: .now() + 300) == .success else {
                        continuation.resume(returning: false)
                        return
                    }
                }
                continuation.resume(returning: true)
            }
        }
        guard arrived else { throw DatabaseError(.invalidState, "the readers were never held") }
    }

    /// Checks `condition` until it holds, yielding between checks; fails after 300 s (a hang, not a slow machine).
    static func poll(until condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(300)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                throw DatabaseError(.invalidState, "the condition never held")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
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

    // MARK: - Reads in place take turns at the start and end of their transactions (ReadLockGate)

    /// Waits, without blocking a cooperative thread, until `task` is done; a hang (a deadlock in the pool) becomes a
    /// failure after 60 s instead of stopping the suite.
    static func finishes<T: Sendable>(_ task: Task<T, any Error>, _ comment: Comment) async throws -> T? {
        let done = Atomic<Bool>(false)
        let watched = Task {
            defer { done.store(true, ordering: .releasing) }
            return try await task.value
        }
        var polls = 0
        while !done.load(ordering: .acquiring) {
            polls += 1
            if polls > 60_000 {
                Issue.record(comment)
                return nil
            }
            try await Task.sleep(for: .milliseconds(1))
        }
        return try await watched.value
    }

    final class Counts: Sendable {
        let inPlace = Atomic<Int>(0)
        let mismatches = Atomic<Int>(0)
        let ran = Atomic<Int>(0)
    }

    @Test("many tasks reading concurrently in place each get the row they asked for")
    func concurrentPointReads() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 4)
        defer { pool.close() }
        try await pool.write { db in
            try db.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, label TEXT NOT NULL, twice INTEGER NOT NULL)")
            let insert = try db.prepare("INSERT INTO item(id, label, twice) VALUES (?, ?, ?)")
            for id in 1...500 { try insert.run(id, "item \(id)", id * 2) }
        }
        let counts = Counts()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    try await Probe.$isCallingTask.withValue(true) {
                        for step in 0..<300 {
                            let id = (task * 131 + step * 17) % 500 + 1
                            let row = try await pool.read { db in
                                (try db.first("SELECT label, twice FROM item WHERE id = ?", id) { row in
                                    (try row[0] as String, try row[1] as Int)
                                }, Probe.isCallingTask)
                            }
                            if row.1 { counts.inPlace.add(1, ordering: .relaxed) }
                            if row.0?.0 != "item \(id)" || row.0?.1 != id * 2 {
                                counts.mismatches.add(1, ordering: .relaxed)
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(counts.mismatches.load(ordering: .relaxed) == 0)
        // Where each read ran depends on timing (a read slowed down by the machine can raise the average); the first
        // read of a pool always runs in place.
        #expect(counts.inPlace.load(ordering: .relaxed) > 0)
        #expect(pool.readerConnectionCount <= 4)
        // Counted again through a fresh connection: the reads changed nothing.
        let fresh = try Connection(path: dir.path("async.db"), key: TestKeys.raw)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM item WHERE label = 'item ' || id AND twice = 2 * id",
                                 as: Int.self) == 500)
    }

    @Test("a read in place takes its snapshot when it starts, before its first statement")
    func snapshotAtStart() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 1)
        defer { pool.close() }
        let started = DispatchSemaphore(value: 0)
        let written = DispatchSemaphore(value: 0)
        // The writer commits on a thread of its own while the read has started and run no statement yet.
        let writer = Thread {
            guard started.wait(timeout: .now() + 300) == .success else { return }
            _ = try? pool.write { db in try db.execute("UPDATE t SET x = x + 10") }
            written.signal()
        }
        writer.start()
        let (sum, inPlace) = try await Probe.$isCallingTask.withValue(true) {
            try await pool.read { db in
                started.signal()
                let didWrite = written.wait(timeout: .now() + 300) == .success
                #expect(didWrite, "the writer did not commit")
                return (try db.scalar("SELECT sum(x) FROM t", as: Int.self), Probe.isCallingTask)
            }
        }
        #expect(inPlace)
        #expect(sum == 6, "the read saw a commit made after it started")
        #expect(try await pool.read { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) } == 36)
    }

    @Test("a read in place that throws, or ends its own transaction, leaves the pool usable")
    func failedReadsReleaseTheGate() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 2)
        defer { pool.close() }
        struct Failure: Error {}
        await #expect(throws: Failure.self) {
            try await pool.read { db in
                _ = try db.scalar("SELECT count(*) FROM t", as: Int.self)
                throw Failure()
            }
        }
        let misuse = await #expect(throws: DatabaseError.self) {
            try await pool.read { db in try db.execute("COMMIT") }
        }
        #expect(misuse?.kind == .transactionMisuse)
        await #expect(throws: DatabaseError.self) {
            try await pool.read { db in try db.execute("SELECT * FROM missing_table") }
        }
        // Had any of them kept the gate, these reads (from two tasks; in place unless the failed reads were slow
        // enough to move the average, see PoolReadLockGateTests for the gate alone) would hang.
        let next = Task {
            try await withThrowingTaskGroup(of: Int?.self) { group in
                for _ in 0..<2 {
                    group.addTask { try await pool.read { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) } }
                }
                return try await group.reduce(0) { $0 + ($1 ?? 0) }
            }
        }
        #expect(try await Self.finishes(next, "a read after the failed ones did not finish") == 12)
        #expect(try Self.countSynchronously(pool) == 3)
    }

    @Test("tasks waiting for a busy pool, cancelled, leave at once and take no connection with them")
    func cancelManyWaiting() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, readers: 2)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // Both readers held by synchronous reads on threads of their own, until the test lets them go: however
        // slowly the machine runs the rest, they are still held when the tasks are cancelled.
        for _ in 0..<2 {
            Thread.detachNewThread {
                _ = try? pool.read { _ in
                    held.signal()
                    release.wait()
                }
            }
        }
        var released = false
        defer { if !released { for _ in 0..<2 { release.signal() } } }
        try await Self.waitOffCooperativeThreads(for: held, count: 2)
        let counts = Counts()
        var waiting: [Task<Void, any Error>] = []
        for _ in 0..<6 {
            waiting.append(Task { try await pool.read { _ in _ = counts.ran.add(1, ordering: .relaxed) } })
        }
        // Every task is queued for a reader before it is cancelled (the pool says so; no guess at how long that
        // takes). The bound only turns a hang into a failure.
        try await Self.poll(until: { pool.readerWaiterCount == 6 })
        for task in waiting { task.cancel() }
        // Every cancelled task finishes while both readers are still held: none waited for one.
        for task in waiting {
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
        }
        #expect(counts.ran.load(ordering: .relaxed) == 0)
        #expect(pool.readerWaiterCount == 0)
        released = true
        for _ in 0..<2 { release.signal() }
        // The pool still has its two readers, both free: two reads at once get them, in place.
        let sums = try await withThrowingTaskGroup(of: Int?.self) { group in
            for _ in 0..<2 {
                group.addTask { try await pool.read { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) } }
            }
            return try await group.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(sums == [6, 6])
        #expect(pool.readerConnectionCount == 2)
        pool.close()
        #expect(pool.isClosed)
    }
}
