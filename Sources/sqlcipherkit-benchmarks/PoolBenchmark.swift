import CSQLCipher
import Dispatch
import SQLCipherKit
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The pool benchmark: what a `DatabasePool` costs to open with a passphrase, and how reads and writes go through it
/// concurrently. SQLCipherKit only (the C API has no pool to compare with); the raw-key opens are the reference.
///
/// - Open latency: a plain `Connection` with the passphrase pays SQLCipher's PBKDF2 at every open; a new pool pays one
///   derivation (OpenSSL, in the library) for its first connection; every further connection opens with the derived
///   raw key. The Nth connection is timed as the read that has to open it (the readers before it are held busy by
///   reads parked on a semaphore) minus the same read on a reader that is already open.
/// - Read throughput: point lookups by primary key, one read transaction each, from 1, 2 and 4 threads (synchronous
///   `pool.read`) or tasks (`async` `pool.read`).
/// - Write throughput: one-row updates, one write transaction each, alone and while 2 threads read.
enum PoolBenchmark {
    static let table = "pool_item"
    static let rowCount = 100_000
    /// Readers opened one after the other in the Nth-connection measurement.
    static let openedReaderCount = 8
    /// Reads on an already open reader that give the baseline subtracted from the opening read.
    static let warmReadCount = 15
    static let concurrencyLevels = [1, 2, 4]
    static let readerCountDuringWrites = 2
    static let lookupSQL = "SELECT value, label FROM \(table) WHERE id = ?"
    static let updateSQL = "UPDATE \(table) SET value = value + 1 WHERE id = ?"

    // MARK: - Setup

    /// Creates the table and fills it in one transaction (about 4 MB: id, an integer, a 30-byte text).
    static func fill(_ db: Connection) throws {
        try db.execute("CREATE TABLE \(table)(id INTEGER PRIMARY KEY, value INTEGER NOT NULL, label TEXT NOT NULL)")
        let insert = try db.prepare("INSERT INTO \(table)(id, value, label) VALUES (?, ?, ?)")
        for id in 1...rowCount {
            try insert.run(id, Workloads.value(row: id, column: 0), "item \(id) of the pool benchmark")
        }
    }

    /// A random primary key (xorshift64*): cheap, no system call, a different sequence per thread.
    struct RowPicker {
        private var state: UInt64

        init(seed: Int) {
            state = 0x9E37_79B9_7F4A_7C15 &* UInt64(seed + 1)
        }

        mutating func next() -> Int {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return Int((state &* 0x2545_F491_4F6C_DD1D) % UInt64(rowCount)) + 1
        }
    }

    static func lookup(_ db: Connection, id: Int) throws -> Int64 {
        try db.first(lookupSQL, id, map: { row in try row[0] as Int64 }) ?? 0
    }

    // MARK: - One point read against the C API

    static let pointReadCount = 20_000

    /// `pointReadCount` lookups, each in its own `pool.read`; returns the checksum.
    @inline(never)
    static func poolPointReads(_ pool: DatabasePool) throws -> Int64 {
        var picker = RowPicker(seed: 7)
        var checksum: Int64 = 0
        for _ in 0..<pointReadCount {
            let id = picker.next()
            checksum &+= try pool.read { db in try lookup(db, id: id) }
        }
        return checksum
    }

    /// The same lookups through the C API: BEGIN DEFERRED, the SELECT, COMMIT, each prepared once per call.
    @inline(never)
    static func rawPointReads(_ raw: RawConnection, seed: Int = 7, count: Int = pointReadCount) throws -> Int64 {
        let begin = try raw.prepare("BEGIN DEFERRED TRANSACTION")
        let select = try raw.prepare(lookupSQL)
        let commit = try raw.prepare("COMMIT TRANSACTION")
        defer { for statement in [begin, select, commit] { sqlite3_finalize(statement) } }
        var picker = RowPicker(seed: seed)
        var checksum: Int64 = 0
        for _ in 0..<count {
            let id = picker.next()
            guard sqlite3_step(begin) == SQLITE_DONE else { throw BenchmarkError.mismatch("BEGIN failed") }
            sqlite3_reset(begin)
            sqlite3_bind_int64(select, 1, Int64(id))
            if sqlite3_step(select) == SQLITE_ROW { checksum &+= sqlite3_column_int64(select, 0) }
            sqlite3_reset(select)
            guard sqlite3_step(commit) == SQLITE_DONE else { throw BenchmarkError.mismatch("COMMIT failed") }
            sqlite3_reset(commit)
        }
        return checksum
    }

    // MARK: - Open latency

    /// One read that holds a reader connection until released, on a thread of its own.
    final class ReaderHold: Sendable {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let failure = Locked<(any Error)?>(nil)

        init(_ pool: DatabasePool) throws {
            DispatchQueue(label: "sqlcipherkit-benchmarks.reader-hold").async { [self] in
                do {
                    try pool.read { _ in
                        entered.signal()
                        release.wait()
                    }
                } catch {
                    failure.withLock { $0 = error }
                    entered.signal()
                }
                finished.signal()
            }
            entered.wait()
            if let error = failure.withLock({ $0 }) { throw error }
        }

        func end() {
            release.signal()
            finished.wait()
        }
    }

    /// Opens readers 1…``openedReaderCount`` of `pool` one at a time: each is opened by an empty read (the readers
    /// before it are held busy), then timed again on the open reader; records both.
    static func measureReaderOpens(
        _ pool: DatabasePool, opening: inout [[Double]], warm: inout [[Double]]
    ) throws {
        var holds: [ReaderHold] = []
        defer { for hold in holds { hold.end() } }
        for index in 0..<openedReaderCount {
            let openingSeconds = try measureSeconds { try pool.read { _ in } }
            guard pool.readerConnectionCount == index + 1 else {
                throw BenchmarkError.mismatch(
                    "the pool has \(pool.readerConnectionCount) readers open, expected \(index + 1)")
            }
            var warmSeconds: [Double] = []
            for _ in 0..<warmReadCount {
                warmSeconds.append(try measureSeconds { try pool.read { _ in } })
            }
            opening[index].append(openingSeconds)
            warm[index].append(Measurement.median(warmSeconds))
            if index + 1 < openedReaderCount {
                holds.append(try ReaderHold(pool))
            }
        }
    }

    // MARK: - Concurrent runs

    /// What one thread or task did in a run.
    struct WorkerResult: Sendable {
        var isWriter = false
        var operationCount = 0
        /// Seconds per operation (writers only).
        var latencies: [Double] = []
    }

    /// State shared by the workers of one run.
    final class RunState: Sendable {
        let isStopped = Atomic<Bool>(false)
        let ready = DispatchSemaphore(value: 0)
        let start = DispatchSemaphore(value: 0)
        let finished = DispatchGroup()
        let results = Locked<[WorkerResult]>([])
        let errors = Locked<[any Error]>([])

        var isRunning: Bool { !isStopped.load(ordering: .relaxed) }

        func record(_ result: WorkerResult) { results.withLock { $0.append(result) } }
        func record(_ error: any Error) { errors.withLock { $0.append(error) } }
    }

    /// Runs `body` on `threadCount` threads of their own (one serial dispatch queue each: the global queues would
    /// run only as many CPU-bound blocks at once as there are CPUs), started together and stopped after `seconds`.
    /// Returns what each did and the wall-clock time from the start to the last one's end.
    static func runOnThreads(
        _ threadCount: Int, seconds: Double, _ body: @escaping @Sendable (Int, RunState) throws -> WorkerResult
    ) throws -> (results: [WorkerResult], seconds: Double, usage: ProcessUsage) {
        let state = RunState()
        for index in 0..<threadCount {
            state.finished.enter()
            DispatchQueue(label: "sqlcipherkit-benchmarks.worker-\(index)").async {
                state.ready.signal()
                state.start.wait()
                do {
                    state.record(try body(index, state))
                } catch {
                    state.record(error)
                }
                state.finished.leave()
            }
        }
        for _ in 0..<threadCount { state.ready.wait() }
        let usageBefore = ProcessUsage.now()
        let elapsed = measureSeconds {
            for _ in 0..<threadCount { state.start.signal() }
            sleepSeconds(seconds)
            state.isStopped.store(true, ordering: .relaxed)
            state.finished.wait()
        }
        let usage = ProcessUsage.now() - usageBefore
        if let error = state.errors.withLock({ $0.first }) { throw error }
        return (state.results.withLock { $0 }, elapsed, usage)
    }

    /// The read loop of a worker thread: point lookups through the synchronous `pool.read` until stopped.
    static func readLoop(_ pool: DatabasePool, seed: Int, state: RunState) throws -> WorkerResult {
        var picker = RowPicker(seed: seed)
        var result = WorkerResult()
        var checksum: Int64 = 0
        while state.isRunning {
            let id = picker.next()
            checksum &+= try pool.read { db in try lookup(db, id: id) }
            result.operationCount += 1
        }
        guard checksum != 0 || result.operationCount == 0 else {
            throw BenchmarkError.mismatch("the lookups found nothing")
        }
        return result
    }

    /// The write loop of the writer thread: one-row updates through the synchronous `pool.write` until stopped.
    static func writeLoop(_ pool: DatabasePool, seed: Int, state: RunState) throws -> WorkerResult {
        var picker = RowPicker(seed: seed)
        var result = WorkerResult(isWriter: true)
        while state.isRunning {
            let id = picker.next()
            result.latencies.append(try measureSeconds { try pool.write { db in try db.execute(updateSQL, id) } })
            result.operationCount += 1
        }
        return result
    }

    /// Operations per second in one run, and the CPU the process used meanwhile (in CPUs: CPU seconds per second).
    struct Throughput {
        var operationsPerSecond: Double
        var cpuCount: Double
        /// Voluntary context switches of the process per 1,000 operations: a thread that blocks (on a lock, a
        /// semaphore, I/O) switches out voluntarily.
        var voluntarySwitchesPerThousand: Double
    }

    /// Point lookups per second from `threadCount` threads (synchronous `pool.read`).
    static func readsOnThreads(_ pool: DatabasePool, threadCount: Int, seconds: Double) throws -> Throughput {
        let run = try runOnThreads(threadCount, seconds: seconds) { index, state in
            try readLoop(pool, seed: index, state: state)
        }
        let count = run.results.map(\.operationCount).reduce(0, +)
        return Throughput(
            operationsPerSecond: Double(count) / run.seconds, cpuCount: run.usage.cpuSeconds / run.seconds,
            voluntarySwitchesPerThousand: run.usage.voluntarySwitches * 1000 / Double(count))
    }

    /// Point lookups per second from `taskCount` tasks (`async` `pool.read`, with the pool's default execution: in
    /// place on the task's thread while reads are short), started together in a task group and stopped after
    /// `seconds`: what a service does when that many requests read at once.
    ///
    /// A read that runs in place does not suspend, so no more tasks read at once than Swift's cooperative pool has
    /// threads (one per CPU); the others start when those end. The figure is the throughput of that many tasks,
    /// not a measure of fairness between them.
    static func readsInTasks(_ pool: DatabasePool, taskCount: Int, seconds: Double) throws -> Throughput {
        let state = RunState()
        let done = DispatchSemaphore(value: 0)
        let usageBefore = ProcessUsage.now()
        let elapsed = measureSeconds {
            Task.detached {
                await withTaskGroup(of: Void.self) { group in
                    for index in 0..<taskCount {
                        group.addTask {
                            var picker = RowPicker(seed: 100 + index)
                            var result = WorkerResult()
                            do {
                                while state.isRunning {
                                    let id = picker.next()
                                    _ = try await pool.read { db in try lookup(db, id: id) }
                                    result.operationCount += 1
                                }
                            } catch {
                                state.record(error)
                            }
                            state.record(result)
                        }
                    }
                }
                done.signal()
            }
            sleepSeconds(seconds)
            state.isStopped.store(true, ordering: .relaxed)
            done.wait()
        }
        let usage = ProcessUsage.now() - usageBefore
        if let error = state.errors.withLock({ $0.first }) { throw error }
        let count = state.results.withLock { $0.map(\.operationCount).reduce(0, +) }
        return Throughput(
            operationsPerSecond: Double(count) / elapsed, cpuCount: usage.cpuSeconds / elapsed,
            voluntarySwitchesPerThousand: usage.voluntarySwitches * 1000 / Double(count))
    }

    /// One write run: the writer thread alone or with `readerCount` reading threads.
    struct WriteRun {
        var writesPerSecond: Double
        var readsPerSecond: Double
        var writeLatencies: [Double]
        var cpuCount: Double
    }

    static func writeRun(_ pool: DatabasePool, readerCount: Int, seconds: Double) throws -> WriteRun {
        let run = try runOnThreads(1 + readerCount, seconds: seconds) { index, state in
            index == 0
                ? try writeLoop(pool, seed: 1000, state: state) : try readLoop(pool, seed: 1000 + index, state: state)
        }
        let writes = run.results.filter(\.isWriter)
        let reads = run.results.filter { !$0.isWriter }
        return WriteRun(
            writesPerSecond: Double(writes.map(\.operationCount).reduce(0, +)) / run.seconds,
            readsPerSecond: Double(reads.map(\.operationCount).reduce(0, +)) / run.seconds,
            writeLatencies: writes.flatMap(\.latencies), cpuCount: run.usage.cpuSeconds / run.seconds)
    }

    /// The process's CPU time (user + system) and voluntary context switches so far, or between two readings.
    struct ProcessUsage {
        var cpuSeconds: Double
        var voluntarySwitches: Double

        static func now() -> ProcessUsage {
            var usage = rusage()
            #if canImport(Glibc)
            let who = __rusage_who_t(RUSAGE_SELF.rawValue)
            #else
            let who = RUSAGE_SELF
            #endif
            guard getrusage(who, &usage) == 0 else { return ProcessUsage(cpuSeconds: .nan, voluntarySwitches: .nan) }
            func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
            return ProcessUsage(
                cpuSeconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
                voluntarySwitches: Double(usage.ru_nvcsw))
        }

        static func - (after: ProcessUsage, before: ProcessUsage) -> ProcessUsage {
            ProcessUsage(
                cpuSeconds: after.cpuSeconds - before.cpuSeconds,
                voluntarySwitches: after.voluntarySwitches - before.voluntarySwitches)
        }
    }

    /// The size of the pool's WAL file, in bytes (0 when missing).
    static func walByteCount(_ path: String) -> Int64 {
        var status = stat()
        return stat(path + "-wal", &status) == 0 ? Int64(status.st_size) : 0
    }

    static func sleepSeconds(_ seconds: Double) {
        var interval = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        var remaining = timespec()
        while nanosleep(&interval, &remaining) != 0 && errno == EINTR {
            interval = remaining
        }
    }
}

/// The figures of the pool benchmark, one value per timed round in every array unless said otherwise.
struct PoolMeasurement {
    var rounds = 0
    var pageSize: Int64 = 0
    var pageCount: Int64 = 0
    var cacheSize: Int64 = 0
    var synchronous: Int64 = 0
    /// `Connection(path:key:)` with the passphrase: SQLCipher's PBKDF2 at every open.
    var passphraseConnection: [Double] = []
    /// `DatabasePool(path:keyProvider:configuration:)` with the passphrase: its first connection (the writer).
    var poolCreation: [Double] = []
    /// `Connection(path:key:)` with a raw key, on a database of the same content keyed with it.
    var rawKeyConnection: [Double] = []
    /// The same open through the C API (``RawConnection``).
    var rawKeyC: [Double] = []
    /// Per reader 1…8: the read that opened it, and the median of the same read on it once open.
    var openingRead: [[Double]] = Array(repeating: [], count: PoolBenchmark.openedReaderCount)
    var warmRead: [[Double]] = Array(repeating: [], count: PoolBenchmark.openedReaderCount)
    /// Library key derivations per pool (expected: 1).
    var derivationsPerPool: [Int] = []

    /// Per concurrency level (1, 2, 4), one value per round.
    var readsOnThreads: [Int: [PoolBenchmark.Throughput]] = [:]
    var readsInTasks: [Int: [PoolBenchmark.Throughput]] = [:]

    /// The first writes of a new pool, while its WAL file grows from nothing.
    var writesGrowingWAL: PoolBenchmark.WriteRun?
    var walByteCountAfterGrowth: Int64 = 0
    var writesAlone: [PoolBenchmark.WriteRun] = []
    /// Seconds per pass of ``PoolBenchmark/pointReadCount`` lookups: `pool.read` and raw C.
    var pointReadPool: [Double] = []
    var pointReadRaw: [Double] = []
    var writesWithReaders: [PoolBenchmark.WriteRun] = []

    /// Opening read minus warm read, per reader index, over all rounds.
    func readerOpenSeconds(_ index: Int) -> [Double] {
        zip(openingRead[index], warmRead[index]).map { $0 - $1 }
    }

    /// Every reader's open (the first reader is the pool's second connection; all open alike).
    var nthOpenSeconds: [Double] { (0..<PoolBenchmark.openedReaderCount).flatMap(readerOpenSeconds) }
}

/// Runs the pool benchmark in `directory` and prints its report.
func runPoolBenchmark(_ options: BenchmarkOptions, directory: String, rawKeyText: String) throws {
    let clock = ContinuousClock()
    let start = clock.now
    let path = directory + "/pool.sqlite"
    let rawKeyPath = directory + "/pool-raw-key.sqlite"
    defer {
        removeDatabaseFiles(atPath: path)
        removeDatabaseFiles(atPath: rawKeyPath)
    }
    // A random passphrase: the cost is PBKDF2's, whatever the text.
    let passphrase = try EncryptionKey(passphrase: "pool benchmark " + randomRawKeyText())
    let rawKey = try EncryptionKey(sqlcipherRawKeyText: rawKeyText)
    var measurement = PoolMeasurement()

    // Setup (not timed): the passphrase database through a pool (so in WAL mode), its raw-key twin through a
    // Connection, in WAL mode too.
    do {
        let pool = try DatabasePool(path: path, keyProvider: .fixed(passphrase))
        defer { pool.close() }
        try pool.write { db in try PoolBenchmark.fill(db) }
        try pool.writeWithoutTransaction { db in
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            // SQLCipher 4 answers `PRAGMA page_size` with its cipher_page_size, as text.
            func integer(_ pragma: String) throws -> Int64 {
                switch try db.scalar("PRAGMA \(pragma)", as: DatabaseValue.self) {
                case .integer(let value): value
                case .text(let text): Int64(text) ?? -1
                default: -1
                }
            }
            measurement.pageSize = try integer("page_size")
            measurement.pageCount = try integer("page_count")
            measurement.cacheSize = try integer("cache_size")
            measurement.synchronous = try integer("synchronous")
        }
        let twin = try Connection(path: rawKeyPath, key: rawKey)
        defer { twin.close() }
        _ = try twin.scalar("PRAGMA journal_mode = WAL", as: String.self)
        try twin.transaction { try PoolBenchmark.fill(twin) }
    }
    let setupSeconds = BackupBenchmark.seconds(clock.now - start)

    try measureOpenLatency(
        options, path: path, passphrase: passphrase, rawKeyPath: rawKeyPath, rawKey: rawKey, rawKeyText: rawKeyText,
        into: &measurement)

    // One point read: a pool with one reader and a C connection on the raw-key twin, alternating.
    do {
        let pointPool = try DatabasePool(
            path: rawKeyPath, keyProvider: .fixed(rawKey), configuration: .init(maximumReaderCount: 1))
        defer { pointPool.close() }
        let raw = try RawConnection(path: rawKeyPath, rawKeyText: rawKeyText)
        try raw.execute("PRAGMA query_only = 1")
        var poolSum: Int64 = 0
        var rawSum: Int64 = 0
        var point = Measurement(name: "point read", rowCount: PoolBenchmark.pointReadCount, targetRatio: 1.3)
        try compare(
            &point, warmUpCount: options.poolWarmUpCount + 1, iterationCount: options.poolOpenRoundCount,
            raw: { _ in try measureSeconds { rawSum = try PoolBenchmark.rawPointReads(raw) } },
            wrapper: { _ in
                let seconds = try measureSeconds { poolSum = try PoolBenchmark.poolPointReads(pointPool) }
                // The pool keeps the WAL read lock for a few milliseconds after its reads, and the lock's count is
                // the process's: a writer access gives it back, so the raw reads after it run on their own.
                try pointPool.writeWithoutTransaction { _ in }
                return seconds
            })
        guard poolSum == rawSum else { throw BenchmarkError.mismatch("point read sums \(poolSum) and \(rawSum)") }
        measurement.pointReadPool = point.wrapperSeconds
        measurement.pointReadRaw = point.rawSeconds
    }
    let openSeconds = BackupBenchmark.seconds(clock.now - start) - setupSeconds

    // Throughput: one new pool with 4 readers; every level in every round, so that drift is shared.
    let maximumLevel = PoolBenchmark.concurrencyLevels.max()!
    let pool = try DatabasePool(
        path: path, keyProvider: .fixed(passphrase), configuration: .init(maximumReaderCount: maximumLevel))
    defer { pool.close() }
    // The WAL file is new (the last connection's close removed it): the first commits append to it.
    measurement.writesGrowingWAL = try PoolBenchmark.writeRun(pool, readerCount: 0, seconds: options.poolWriteSeconds)
    // Then it is grown past its steady size (one UPDATE of every row: more frames than wal_autocheckpoint's 1000
    // pages) and checkpointed, as in a service that has run a while; later commits rewrite it in place.
    try pool.write { db in try db.execute("UPDATE \(PoolBenchmark.table) SET value = value + 1") }
    try pool.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
    measurement.walByteCountAfterGrowth = PoolBenchmark.walByteCount(path)

    // Warm-up: opens every reader and fills the page caches.
    _ = try PoolBenchmark.readsOnThreads(pool, threadCount: maximumLevel, seconds: options.poolThroughputSeconds)
    for _ in 0..<options.poolThroughputRoundCount {
        for level in PoolBenchmark.concurrencyLevels {
            measurement.readsOnThreads[level, default: []].append(
                try PoolBenchmark.readsOnThreads(pool, threadCount: level, seconds: options.poolThroughputSeconds))
            measurement.readsInTasks[level, default: []].append(
                try PoolBenchmark.readsInTasks(pool, taskCount: level, seconds: options.poolThroughputSeconds))
        }
    }
    for round in 0..<options.poolWriteRoundCount {
        // Alternate which goes first, to spread drift.
        let readerCounts = round % 2 == 0 ? [0, PoolBenchmark.readerCountDuringWrites]
            : [PoolBenchmark.readerCountDuringWrites, 0]
        for readerCount in readerCounts {
            let run = try PoolBenchmark.writeRun(pool, readerCount: readerCount, seconds: options.poolWriteSeconds)
            if readerCount == 0 {
                measurement.writesAlone.append(run)
            } else {
                measurement.writesWithReaders.append(run)
            }
        }
    }

    printPoolReport(
        measurement, options: options, setupSeconds: setupSeconds, openSeconds: openSeconds,
        totalSeconds: BackupBenchmark.seconds(clock.now - start))
}

/// The open-latency rounds: every kind of open in every round, interleaved so that load drifts hit all alike.
///
/// A keeper connection holds each file open meanwhile, as a pool's writer does for its readers: no timed open creates
/// the WAL index, and no close (untimed anyway) checkpoints and removes the WAL.
private func measureOpenLatency(
    _ options: BenchmarkOptions, path: String, passphrase: EncryptionKey, rawKeyPath: String, rawKey: EncryptionKey,
    rawKeyText: String, into measurement: inout PoolMeasurement
) throws {
    let passphraseKeeper = try Connection(path: path, key: passphrase)
    let rawKeyKeeper = try Connection(path: rawKeyPath, key: rawKey)
    defer {
        passphraseKeeper.close()
        rawKeyKeeper.close()
    }
    for round in 0..<(options.poolWarmUpCount + options.poolOpenRoundCount) {
        var connection: Connection?
        let passphraseSeconds = try measureSeconds { connection = try Connection(path: path, key: passphrase) }
        connection?.close()

        var rawKeySeconds: [Double] = []
        var rawKeyCSeconds: [Double] = []
        for _ in 0..<2 {
            rawKeySeconds.append(try measureSeconds { connection = try Connection(path: rawKeyPath, key: rawKey) })
            connection?.close()
            var raw: RawConnection?
            rawKeyCSeconds.append(try measureSeconds {
                // The open's first query is where a C program's open reads the file and proves the key.
                raw = try RawConnection(path: rawKeyPath, rawKeyText: rawKeyText)
                _ = try raw!.integer("SELECT count(*) FROM sqlite_master")
            })
            withExtendedLifetime(raw) {}  // closed here, after the timing
        }

        let derivationCountBefore = KeyDerivation.derivationCount
        var pool: DatabasePool?
        let creationSeconds = try measureSeconds {
            pool = try DatabasePool(
                path: path, keyProvider: .fixed(passphrase),
                configuration: .init(maximumReaderCount: PoolBenchmark.openedReaderCount))
        }
        var opening = Array(repeating: [Double](), count: PoolBenchmark.openedReaderCount)
        var warm = opening
        try PoolBenchmark.measureReaderOpens(pool!, opening: &opening, warm: &warm)
        let derivationCount = KeyDerivation.derivationCount - derivationCountBefore
        pool!.close()

        guard round >= options.poolWarmUpCount else { continue }
        measurement.rounds += 1
        measurement.passphraseConnection.append(passphraseSeconds)
        measurement.rawKeyConnection += rawKeySeconds
        measurement.rawKeyC += rawKeyCSeconds
        measurement.poolCreation.append(creationSeconds)
        for index in 0..<PoolBenchmark.openedReaderCount {
            measurement.openingRead[index] += opening[index]
            measurement.warmRead[index] += warm[index]
        }
        measurement.derivationsPerPool.append(derivationCount)
    }
}
