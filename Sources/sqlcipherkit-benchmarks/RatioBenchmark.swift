import CSQLCipher
import Dispatch
import SQLCipherKit
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 23's table: every workload once through the raw C API and once through SQLCipherKit, paired, in rounds, in
/// one process and on one engine, printed as SQLCipherKit / raw ratios.
///
/// The same workloads run one at a time in `--once` mode (one side, one steady pass, after a warm-up pass where one
/// makes sense) so that `valgrind --tool=callgrind --zero-before=Z --dump-after=F`, with Z and F the mangled names
/// of ``threadStartsPass()`` and ``measuredWorkloadPass(_:_:_:)``, counts the instructions of that pass alone, every
/// thread included
/// (`.ci/bench-callgrind` runs the pairs).
///
/// The files live in one folder (`fixture`): made by ``prepare(in:rotateMegabyteCount:)`` (also `--prepare DIR`),
/// keyed with two random raw keys stored in `DIR/keys` (mode 0600; a benchmark's throwaway keys).
enum RatioBenchmark {
    /// A row of the table.
    enum Workload: String, CaseIterable {
        case rotateCopy = "rotate-copy"
        case rotateInPlace = "rotate-in-place"
        case decodableCursor = "decodable-cursor"
        case decodableFetchAll = "decodable-fetchall"
        /// The same `Decodable` type with the `init(row:)` that `@RowDecodable` generates.
        case decodableGenerated = "decodable-generated"
        case poolRead1 = "pool-read-1"
        case poolRead4 = "pool-read-4"
        case asyncRead4 = "async-read-4"
        case openKey = "open-key"
        case byIndex = "by-index"
        /// 50,000 rows of 10 integers in one transaction, into a fresh table each pass.
        case insert
        case poolRead8 = "pool-read-8"
        case poolRead16 = "pool-read-16"
        /// The same async reads with `.readerQueue`: each on its reader's own queue (an OS thread per reader).
        case asyncRead4Queue = "async-read-4-queue"
        /// The same async reads against the raw C API on as many threads as the machine has CPUs (at most 4, one
        /// per task), the width of Swift's cooperative thread pool that async reads in place run on.
        case asyncRead4CPUs = "async-read-4-cpus"

        /// Issue 23's target, `nil` for a row given for information.
        var target: Double? {
            switch self {
            case .rotateCopy, .rotateInPlace: 1.1
            case .decodableCursor, .decodableFetchAll, .decodableGenerated: 1.5
            case .poolRead1, .poolRead4: 1.3
            case .asyncRead4: 1.5
            case .openKey: 1.2
            case .byIndex: 1.05
            case .insert: 1.3
            case .poolRead8, .poolRead16, .asyncRead4Queue, .asyncRead4CPUs: nil
            }
        }

        var isRotation: Bool { self == .rotateCopy || self == .rotateInPlace }

        /// What each side does, for the table.
        var label: String {
            switch self {
            case .rotateCopy:
                "rotate copy | raw: ATTACH ? KEY ?, sqlcipher_export, quick_check, rename"
            case .rotateInPlace: "rotate in place | raw: sqlite3_rekey, quick_check"
            case .decodableCursor: "Decodable fetchCursor, 200k rows x 10 | raw loop"
            case .decodableFetchAll: "Decodable fetchAll, 200k rows x 10 | raw loop"
            case .decodableGenerated: "Decodable fetchAll with @RowDecodable's init(row:) | raw loop"
            case .poolRead1: "pool.read point lookup, 1 thread | BEGIN;SELECT;COMMIT"
            case .poolRead4: "pool.read, 4 threads | 4 threads, own connections"
            case .asyncRead4: "async pool.read, 4 tasks | 4 threads, own connections"
            case .openKey: "open + raw key + first query (x\(RatioBenchmark.openCount))"
            case .byIndex: "fetch by index row[i], 200k rows x 10 | raw loop"
            case .insert:
                "insert 50k rows x 10 INTEGER, one transaction | BEGIN IMMEDIATE, prepare, bind x10, step, reset,"
                    + " COMMIT"
            case .poolRead8: "pool.read, 8 threads | 8 threads, own connections"
            case .poolRead16: "pool.read, 16 threads | 16 threads, own connections"
            case .asyncRead4Queue: "async pool.read, 4 tasks, .readerQueue | 4 threads, own connections"
            case .asyncRead4CPUs:
                "async pool.read, 4 tasks | \(min(RatioBenchmark.cpuCount, 4)) threads (one per CPU, at most 4), own"
                    + " connections"
            }
        }

        var threadCount: Int {
            switch self {
            case .poolRead1: 1
            case .poolRead4, .asyncRead4, .asyncRead4Queue, .asyncRead4CPUs: 4
            case .poolRead8: 8
            case .poolRead16: 16
            default: 0
            }
        }
    }

    /// Point lookups per pass, split evenly among the threads or tasks.
    static let pointReadCount = 40_000
    /// The CPUs the process may run on: the width of Swift's cooperative thread pool.
    static let cpuCount = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    /// Opens per pass of ``Workload/openKey``.
    static let openCount = 200

    static let rotateTable = "rotate_source"

    // MARK: - Fixture

    /// The folder's files and keys.
    struct Fixture {
        let directory: String
        let keyTexts: [String]

        var fetchPath: String { directory + "/fetch.sqlite" }
        var poolPath: String { directory + "/pool.sqlite" }
        /// The insert row's file, one per side (each side's pass drops its previous table and writes a new one).
        func insertPath(_ side: Side) -> String { directory + "/insert-\(side.rawValue).sqlite" }
        func rotatePath(_ side: Side, _ workload: Workload) -> String {
            directory + "/rotate-\(workload.rawValue)-\(side.rawValue).sqlite"
        }
        /// Which of the two keys a rotation file has now (a rotation swaps them).
        func keyIndex(of path: String) -> Int {
            guard let file = fopen(path + ".key-index", "r") else { return 0 }
            defer { fclose(file) }
            return fgetc(file) == 0x31 ? 1 : 0
        }
        func setKeyIndex(_ index: Int, of path: String) {
            guard let file = fopen(path + ".key-index", "w") else { return }
            fputc(index == 1 ? 0x31 : 0x30, file)
            fclose(file)
        }
        var rawKey: EncryptionKey { get throws { try EncryptionKey(sqlcipherRawKeyText: keyTexts[0]) } }
    }

    enum Side: String { case raw, kit }

    /// Creates every file of the table in `directory` (which must exist): the fetch table, the pool table (WAL), and
    /// for each rotation method and side a database of at least `rotateMegabyteCount` MB, all four byte for byte
    /// the same.
    static func prepare(in directory: String, rotateMegabyteCount: Int) throws -> Fixture {
        let keys = [randomRawKeyText(), randomRawKeyText()]
        let keyPath = directory + "/keys"
        let descriptor = open(keyPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw BenchmarkError.system("cannot write \(keyPath)") }
        let text = keys.joined(separator: "\n") + "\n"
        _ = text.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        close(descriptor)
        let fixture = Fixture(directory: directory, keyTexts: keys)
        let key = try fixture.rawKey

        let fetch = try Connection(path: fixture.fetchPath, key: key)
        try Workloads.createFetchSource(fetch)
        fetch.close()

        let pool = try Connection(path: fixture.poolPath, key: key)
        _ = try pool.scalar("PRAGMA journal_mode = WAL", as: String.self)
        try pool.transaction { try PoolBenchmark.fill(pool) }
        try pool.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pool.close()

        for side in [Side.raw, .kit] {
            try Connection(path: fixture.insertPath(side), key: key).close()
        }

        let first = fixture.rotatePath(.raw, .rotateCopy)
        try BackupBenchmark.createSource(atPath: first, rawKeyText: keys[0], megabyteCount: rotateMegabyteCount)
        for workload in [Workload.rotateCopy, .rotateInPlace] {
            for side in [Side.raw, .kit] where fixture.rotatePath(side, workload) != first {
                try copyFile(first, to: fixture.rotatePath(side, workload))
            }
        }
        return fixture
    }

    /// Reads the keys of a folder made by ``prepare(in:rotateMegabyteCount:)``.
    static func load(_ directory: String) throws -> Fixture {
        guard let file = fopen(directory + "/keys", "r") else {
            throw BenchmarkError.usage("\(directory) has no keys file: make it with --prepare \(directory)")
        }
        defer { fclose(file) }
        var keys: [String] = []
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            keys.append(String(cString: line).trimmed())
        }
        guard keys.count == 2 else { throw BenchmarkError.usage("\(directory)/keys must hold two keys") }
        return Fixture(directory: directory, keyTexts: keys)
    }

    static func copyFile(_ source: String, to destination: String) throws {
        let input = open(source, O_RDONLY)
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer {
            if input >= 0 { close(input) }
            if output >= 0 { close(output) }
        }
        guard input >= 0, output >= 0 else { throw BenchmarkError.system("cannot copy \(source) to \(destination)") }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            guard count > 0 else {
                guard count == 0 else { throw BenchmarkError.system("cannot read \(source)") }
                return
            }
            let written = buffer.withUnsafeBytes { write(output, $0.baseAddress, count) }
            guard written == count else { throw BenchmarkError.system("cannot write \(destination)") }
        }
    }

    // MARK: - The contestants

    /// Everything a pass needs that is opened once, outside the timing: connections, pools, readers' connections.
    final class Session {
        let fixture: Fixture
        private var rawFetch: RawConnection?
        private var kitFetch: Connection?
        private var pools: [Int: DatabasePool] = [:]
        private var rawReaders: [Int: [RawConnection]] = [:]
        private var keeper: Connection?
        private var threads: [Int: WorkerThreads] = [:]
        private var rawInserter: RawConnection?
        private var kitInserter: Connection?
        /// Each side's table for the next insert pass, and how many tables it has made.
        private(set) var insertTables: [Side: String] = [:]
        private var insertTableCount = 0

        init(_ fixture: Fixture) {
            self.fixture = fixture
        }

        func close() {
            kitFetch?.close()
            for pool in pools.values { pool.close() }
            pools = [:]
            rawReaders = [:]
            rawFetch = nil
            keeper?.close()
            keeper = nil
            for workers in threads.values { workers.stop() }
            threads = [:]
            rawInserter = nil
            kitInserter?.close()
            kitInserter = nil
        }

        func rawInsertConnection() throws -> RawConnection {
            if let rawInserter { return rawInserter }
            let connection = try RawConnection(path: fixture.insertPath(.raw), rawKeyText: fixture.keyTexts[0])
            rawInserter = connection
            return connection
        }

        func kitInsertConnection() throws -> Connection {
            if let kitInserter { return kitInserter }
            let connection = try Connection(path: fixture.insertPath(.kit), key: fixture.rawKey)
            kitInserter = connection
            return connection
        }

        /// What a pass needs made before it is timed: for the insert row, the side's previous table checked (every
        /// row there) and dropped, and a new empty one.
        func beforePass(_ workload: Workload, _ side: Side) throws {
            // A pool keeps the WAL read lock taken for a few milliseconds after its reads (see
            // DatabasePool.Configuration.holdsReadLockBetweenReads). The lock's count is the process's, so the raw
            // readers of the next pass would share it: a writer access gives it back, and each pass starts without.
            for pool in pools.values { try pool.writeWithoutTransaction { _ in } }
            guard workload == .insert else { return }
            // Each side through its own connection; this part is not timed.
            let count: () throws -> Int64
            let execute: (String) throws -> Void
            if side == .raw {
                let raw = try rawInsertConnection()
                count = { try raw.integer("SELECT count(*) FROM \(self.insertTables[side]!)") }
                execute = { try raw.execute($0) }
            } else {
                let db = try kitInsertConnection()
                count = { try db.scalar("SELECT count(*) FROM \(self.insertTables[side]!)", as: Int64.self) ?? 0 }
                execute = { try db.execute($0) }
            }
            if let previous = insertTables[side] {
                let rows = try count()
                guard rows == Workloads.insertRowCount else {
                    throw BenchmarkError.mismatch(
                        "\(side.rawValue) insert left \(rows) rows, not \(Workloads.insertRowCount)")
                }
                try execute("DROP TABLE \(previous)")
            }
            insertTableCount += 1
            let table = "insert_\(side.rawValue)_\(insertTableCount)"
            try execute(Workloads.createTableSQL(table))
            insertTables[side] = table
        }

        func raw() throws -> RawConnection {
            if let rawFetch { return rawFetch }
            let connection = try RawConnection(path: fixture.fetchPath, rawKeyText: fixture.keyTexts[0])
            rawFetch = connection
            return connection
        }

        func kit() throws -> Connection {
            if let kitFetch { return kitFetch }
            let connection = try Connection(path: fixture.fetchPath, key: fixture.rawKey)
            kitFetch = connection
            return connection
        }

        func pool(readers: Int, onReaderQueues: Bool = false) throws -> DatabasePool {
            // Negative keys for the pools whose async reads run on the readers' queues.
            let cacheKey = onReaderQueues ? -readers : readers
            if let pool = pools[cacheKey] { return pool }
            let pool = try DatabasePool(
                path: fixture.poolPath, keyProvider: .fixed(fixture.rawKey),
                configuration: .init(
                    maximumReaderCount: readers, asyncReadExecution: onReaderQueues ? .readerQueue : .adaptive))
            pools[cacheKey] = pool
            return pool
        }

        func readers(_ count: Int) throws -> [RawConnection] {
            if let readers = rawReaders[count] { return readers }
            let readers = try (0..<count).map { _ in
                let raw = try RawConnection(path: fixture.poolPath, rawKeyText: fixture.keyTexts[0])
                try raw.execute("PRAGMA query_only = 1")
                return raw
            }
            rawReaders[count] = readers
            return readers
        }

        func workers(_ count: Int) -> WorkerThreads {
            if let workers = threads[count] { return workers }
            let workers = WorkerThreads(count: count)
            threads[count] = workers
            return workers
        }

        /// A connection that holds the pool file open during the opens, as a service's pool writer does: no timed
        /// open creates the WAL index, no close checkpoints. A SQLCipherKit connection, as a pool's writer is.
        func holdPoolFile() throws {
            if keeper == nil { keeper = try Connection(path: fixture.poolPath, key: fixture.rawKey) }
        }
    }

    /// Runs one side of one workload once; returns a checksum the two sides must agree on.
    static func run(_ workload: Workload, _ side: Side, _ session: Session) throws -> Int64 {
        let fixture = session.fixture
        switch (workload, side) {
        case (.rotateCopy, _), (.rotateInPlace, _):
            let path = fixture.rotatePath(side, workload)
            let from = fixture.keyIndex(of: path)
            let to = 1 - from
            if side == .raw {
                if workload == .rotateCopy {
                    try rawRotateByCopy(path, from: fixture.keyTexts[from], to: fixture.keyTexts[to])
                } else {
                    try rawRotateInPlace(path, from: fixture.keyTexts[from], to: fixture.keyTexts[to])
                }
            } else {
                try KeyRotation.rotate(RotationRequest(
                    path: path, oldEncryption: .key(try EncryptionKey(sqlcipherRawKeyText: fixture.keyTexts[from])),
                    newEncryption: .key(try EncryptionKey(sqlcipherRawKeyText: fixture.keyTexts[to])),
                    method: workload == .rotateCopy ? .copy : .inPlace))
            }
            fixture.setKeyIndex(to, of: path)
            return 0
        case (.decodableCursor, .raw), (.decodableFetchAll, .raw), (.decodableGenerated, .raw), (.byIndex, .raw):
            return try Workloads.rawFetch(session.raw())
        case (.decodableCursor, .kit):
            return try Workloads.decodingCursorFetch(session.kit())
        case (.decodableFetchAll, .kit):
            return try Workloads.fetchAllDecoded(session.kit())
        case (.decodableGenerated, .kit):
            return try Workloads.fetchAllGenerated(session.kit())
        case (.byIndex, .kit):
            return try Workloads.wrapperFetch(session.kit())
        case (.poolRead1, .raw), (.poolRead4, .raw), (.asyncRead4, .raw), (.poolRead8, .raw), (.poolRead16, .raw):
            let readers = try session.readers(workload.threadCount)
            let perThread = pointReadCount / readers.count
            return try onThreads(readers.count, session) { index in
                try rawPointReads(readers[index], seed: index, count: perThread)
            }
        case (.poolRead1, .kit), (.poolRead4, .kit), (.poolRead8, .kit), (.poolRead16, .kit):
            let pool = try session.pool(readers: workload.threadCount)
            let perThread = pointReadCount / workload.threadCount
            if workload.threadCount == 1 { return try poolPointReads(pool, seed: 0, count: perThread) }
            return try onThreads(workload.threadCount, session) { index in
                try poolPointReads(pool, seed: index, count: perThread)
            }
        case (.asyncRead4, .kit), (.asyncRead4CPUs, .kit), (.asyncRead4Queue, .kit):
            let pool = try session.pool(readers: workload.threadCount, onReaderQueues: workload == .asyncRead4Queue)
            return try inTasks(workload.threadCount, pool: pool, countPerTask: pointReadCount / workload.threadCount)
        case (.asyncRead4Queue, .raw):
            return try run(.asyncRead4, .raw, session)
        case (.asyncRead4CPUs, .raw):
            // The 4 tasks' lookups (seeds 0-3, same checksum), shared among one thread per CPU.
            let parts = workload.threadCount
            let threads = min(cpuCount, parts)
            let readers = try session.readers(threads)
            return try onThreads(threads, session) { index in
                var sum: Int64 = 0
                for part in stride(from: index, to: parts, by: threads) {
                    sum &+= try rawPointReads(readers[index], seed: part, count: pointReadCount / parts)
                }
                return sum
            }
        case (.insert, .raw):
            return try Workloads.rawInsert(session.rawInsertConnection(), table: session.insertTables[.raw]!)
        case (.insert, .kit):
            return try Workloads.wrapperInsert(session.kitInsertConnection(), table: session.insertTables[.kit]!)
        case (.openKey, .raw):
            try session.holdPoolFile()
            var sum: Int64 = 0
            for _ in 0..<openCount {
                let raw = try RawConnection(path: fixture.poolPath, rawKeyText: fixture.keyTexts[0])
                sum &+= try raw.integer("SELECT count(*) FROM sqlite_master")
            }
            return sum
        case (.openKey, .kit):
            try session.holdPoolFile()
            let key = try fixture.rawKey
            var sum: Int64 = 0
            for _ in 0..<openCount {
                let db = try Connection(path: fixture.poolPath, key: key)
                sum &+= try db.scalar("SELECT count(*) FROM sqlite_master", as: Int64.self) ?? 0
                db.close()
            }
            return sum
        }
    }

    /// The raw copy recipe: `ATTACH ? AS rotated KEY ?` (the path and key text bound, not in the SQL),
    /// `SELECT sqlcipher_export('rotated')`, `DETACH`; then the copy opened with the new key and `PRAGMA
    /// quick_check`; then `rename` over the original.
    static func rawRotateByCopy(_ path: String, from oldKey: String, to newKey: String) throws {
        let copyPath = path + ".raw-rotation"
        removeDatabaseFiles(atPath: copyPath)
        do {
            let source = try RawConnection(path: path, rawKeyText: oldKey)
            let attach = try source.prepare("ATTACH DATABASE ?1 AS rotated KEY ?2")
            sqlite3_bind_text(attach, 1, copyPath, -1, SQLITE_TRANSIENT_BENCH)
            sqlite3_bind_text(attach, 2, newKey, -1, SQLITE_TRANSIENT_BENCH)
            let code = sqlite3_step(attach)
            sqlite3_finalize(attach)
            guard code == SQLITE_DONE else { try source.check(code, "ATTACH"); return }
            try source.execute("SELECT sqlcipher_export('rotated'); DETACH DATABASE rotated")
        }
        try rawQuickCheck(copyPath, key: newKey)
        guard rename(copyPath, path) == 0 else { throw BenchmarkError.system("cannot rename \(copyPath)") }
    }

    /// The raw in-place recipe: `sqlite3_rekey` (what `PRAGMA rekey` calls), then `PRAGMA quick_check` on the same
    /// connection.
    static func rawRotateInPlace(_ path: String, from oldKey: String, to newKey: String) throws {
        let connection = try RawConnection(path: path, rawKeyText: oldKey)
        let code = newKey.withCString { sqlite3_rekey(connection.sqliteConnection, $0, Int32(newKey.utf8.count)) }
        try connection.check(code, "sqlite3_rekey")
        let result = try connection.texts("PRAGMA quick_check")
        guard result == ["ok"] else { throw BenchmarkError.mismatch("quick_check after rekey: \(result)") }
    }

    static func rawQuickCheck(_ path: String, key: String) throws {
        let connection = try RawConnection(path: path, rawKeyText: key)
        let result = try connection.texts("PRAGMA quick_check")
        guard result == ["ok"] else { throw BenchmarkError.mismatch("quick_check of the raw copy: \(result)") }
    }

    /// `count` lookups, each in its own `pool.read`.
    static func poolPointReads(_ pool: DatabasePool, seed: Int, count: Int) throws -> Int64 {
        var picker = PoolBenchmark.RowPicker(seed: seed)
        var checksum: Int64 = 0
        for _ in 0..<count {
            let id = picker.next()
            checksum &+= try pool.read { db in try PoolBenchmark.lookup(db, id: id) }
        }
        return checksum
    }

    /// The same lookups through the C API (``PoolBenchmark/rawPointReads(_:seed:count:)``), prepared once per pass.
    static func rawPointReads(_ raw: RawConnection, seed: Int, count: Int) throws -> Int64 {
        try PoolBenchmark.rawPointReads(raw, seed: seed, count: count)
    }

    /// Threads of their own, started once and kept for every pass: a pass does not pay for starting threads, and
    /// under callgrind the threads that ran the warm-up are still alive when the counts are zeroed before the
    /// measured pass (callgrind does not zero the counts of threads that have ended).
    final class WorkerThreads: @unchecked Sendable {
        let count: Int
        private let starts: [DispatchSemaphore]
        private let done = DispatchSemaphore(value: 0)
        /// Written before the threads are released and read by them after: the semaphores order it.
        private nonisolated(unsafe) var job: (@Sendable (Int) -> Void)?

        init(count: Int) {
            self.count = count
            starts = (0..<count).map { _ in DispatchSemaphore(value: 0) }
            for index in 0..<count {
                let context = Unmanaged.passRetained(WorkerContext(workers: self, index: index)).toOpaque()
                var thread = pthread_t()
                let code = pthread_create(&thread, nil, { argument in
                    let context = Unmanaged<WorkerContext>.fromOpaque(argument!).takeRetainedValue()
                    context.workers.loop(context.index)
                    return nil
                }, context)
                precondition(code == 0, "pthread_create failed (\(code))")
                pthread_detach(thread)
            }
        }

        private func loop(_ index: Int) {
            while true {
                starts[index].wait()
                guard let job else { return }
                job(index)
                done.signal()
            }
        }

        /// Runs `body` on every thread, released together; returns once all are done.
        func run(_ body: @escaping @Sendable (Int) -> Void) {
            job = body
            for start in starts { start.signal() }
            for _ in 0..<count { done.wait() }
        }

        /// Ends the threads.
        func stop() {
            job = nil
            for start in starts { start.signal() }
        }
    }

    final class WorkerContext {
        let workers: WorkerThreads
        let index: Int

        init(workers: WorkerThreads, index: Int) {
            self.workers = workers
            self.index = index
        }
    }

    /// Runs `body` on the session's `count` worker threads, released together; returns the sum of their checksums
    /// once all are done.
    static func onThreads(
        _ count: Int, _ session: Session, _ body: @escaping @Sendable (Int) throws -> Int64
    ) throws -> Int64 {
        let results = Results()
        session.workers(count).run { index in
            threadStartsPass()
            do {
                results.add(try body(index))
            } catch {
                results.fail(error)
            }
        }
        return try results.sum()
    }

    /// `count` tasks in a task group, each doing `countPerTask` lookups through the async `pool.read`.
    static func inTasks(_ count: Int, pool: DatabasePool, countPerTask: Int) throws -> Int64 {
        let done = DispatchSemaphore(value: 0)
        let results = Results()
        Task.detached {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    group.addTask {
                        var picker = PoolBenchmark.RowPicker(seed: index)
                        var checksum: Int64 = 0
                        do {
                            for _ in 0..<countPerTask {
                                let id = picker.next()
                                checksum &+= try await pool.read { db in try PoolBenchmark.lookup(db, id: id) }
                            }
                            results.add(checksum)
                        } catch {
                            results.fail(error)
                        }
                    }
                }
            }
            done.signal()
        }
        done.wait()
        return try results.sum()
    }

    /// The checksums of several threads or tasks, and the first error.
    final class Results: Sendable {
        private let state = Locked<(sum: Int64, error: (any Error)?)>((0, nil))

        func add(_ value: Int64) { state.withLock { $0.sum &+= value } }
        func fail(_ error: any Error) { state.withLock { if $0.error == nil { $0.error = error } } }
        func sum() throws -> Int64 {
            let (sum, error) = state.withLock { $0 }
            if let error { throw error }
            return sum
        }
    }

    // MARK: - Wall clock, paired

    /// Prepares a folder, then runs every selected workload's pair (the order of the two sides alternating) round
    /// after round, so that drift hits all rows alike; prints the table.
    static func runWallClock(_ options: BenchmarkOptions, directory: String) throws {
        let clock = ContinuousClock()
        let start = clock.now
        print("Issue 23 ratios: SQLCipherKit / raw C API, paired, round-robin (load average at start"
            + " \(MachineDescription.loadAverage))")
        let fixture = try prepare(in: directory, rotateMegabyteCount: options.rotateMegabyteCount)
        defer {
            for name in ["fetch", "pool", "insert-raw", "insert-kit"] {
                removeDatabaseFiles(atPath: directory + "/\(name).sqlite")
            }
            for workload in [Workload.rotateCopy, .rotateInPlace] {
                for side in [Side.raw, .kit] {
                    let path = fixture.rotatePath(side, workload)
                    removeDatabaseFiles(atPath: path)
                    unlink(path + ".key-index")
                }
            }
            unlink(directory + "/keys")
        }
        let rotateBytes = regularFileByteCount(fixture.rotatePath(.raw, .rotateCopy))
        print("  rotation database \(formatted(Double(rotateBytes) / 1e6, decimals: 1)) MB"
            + " (--rotate-mb \(options.rotateMegabyteCount)); setup"
            + " \(formatted(BackupBenchmark.seconds(clock.now - start), decimals: 1)) s")
        let session = Session(fixture)
        defer { session.close() }
        let workloads = options.ratioWorkloads
        var measurements = workloads.map {
            Measurement(name: $0.rawValue, rowCount: 0, targetRatio: $0.target)
        }
        let rounds = options.ratioWarmUpCount + options.ratioRoundCount
        let fastRepeat = options.ratioFastRepeat
        for round in 0..<rounds {
            for (index, workload) in workloads.enumerated() {
                for repeatIndex in 0..<(workload.isRotation ? 1 : fastRepeat) {
                    let rawFirst = (round + repeatIndex) % 2 == 0
                    var seconds: [Side: Double] = [:]
                    var sums: [Side: Int64] = [:]
                    for side in rawFirst ? [Side.raw, .kit] : [.kit, .raw] {
                        try session.beforePass(workload, side)
                        seconds[side] = try measureSeconds { sums[side] = try run(workload, side, session) }
                    }
                    guard sums[.raw] == sums[.kit] else {
                        throw BenchmarkError.mismatch("\(workload.rawValue): \(sums[.raw]!) and \(sums[.kit]!)")
                    }
                    guard round >= options.ratioWarmUpCount else { continue }
                    measurements[index].rawSeconds.append(seconds[.raw]!)
                    measurements[index].wrapperSeconds.append(seconds[.kit]!)
                }
            }
            printToStandardError("round \(round + 1) of \(rounds) done, load average \(MachineDescription.loadAverage)")
        }
        print("  \(options.ratioWarmUpCount) warm-up + \(options.ratioRoundCount) rounds; rotations once per round,"
            + " the other rows \(fastRepeat) pairs per round; \(pointReadCount) point lookups per pass"
            + " (split among the threads or tasks)")
        print("")
        let header = ["workload", "raw ms", "kit ms", "ratio", "paired", "target", "met"]
        let widths = [18, 10, 10, 7, 7, 8, 3]
        func line(_ cells: [String]) -> String {
            zip(cells, widths).enumerated().map { index, pair in pair.0.padded(pair.1, right: index > 0) }
                .joined(separator: "  ")
        }
        print(line(header))
        for (index, measurement) in measurements.enumerated() {
            print(line([
                measurement.name, formatted(measurement.rawMedian * 1000, decimals: 1),
                formatted(measurement.wrapperMedian * 1000, decimals: 1),
                formatted(measurement.ratio, decimals: 3) + "x",
                formatted(measurement.pairedRatioMedian, decimals: 3) + "x",
                measurement.targetRatio.map { "<= " + formatted($0, decimals: 2) + "x" } ?? "none",
                measurement.targetRatio == nil ? "" : measurement.meetsTarget ? "yes" : "NO",
            ]) + "  " + workloads[index].label)
        }
        print("")
        print("ms: medians (wall clock); ratio: kit median / raw median; paired: median of the per-pair ratios;"
            + " pairs: \(options.ratioRoundCount) per rotation row, \(options.ratioRoundCount * fastRepeat) per other"
            + " row. Wall clock only: instruction"
            + " counts come from .ci/bench-callgrind.")
        print("load average at the end: \(MachineDescription.loadAverage); ratio part"
            + " \(formatted(BackupBenchmark.seconds(clock.now - start), decimals: 1)) s")
    }

    static func regularFileByteCount(_ path: String) -> Int64 {
        var status = stat()
        return stat(path, &status) == 0 ? Int64(status.st_size) : 0
    }

    // MARK: - One pass, for callgrind

    /// `--once WORKLOAD --side raw|kit DIR`: opens what the workload needs, runs one warm-up pass (not for
    /// rotations and opens, whose first pass is the steady one), then the measured pass, and prints its checksum.
    static func runOnce(_ workload: Workload, side: Side, directory: String, passes: Int = 1) throws {
        let fixture = try load(directory)
        let session = Session(fixture)
        defer { session.close() }
        if (workload == .asyncRead4 || workload == .asyncRead4CPUs) && side == .kit {
            // Opens the pool's readers and warms their caches on threads that stay alive (see WorkerThreads);
            // the cooperative pool's threads of an async warm-up could end before the counts are zeroed.
            _ = try run(.poolRead4, side, session)
            // The worker threads zero their own counts now: they take no part in the measured pass.
            session.workers(4).run { _ in threadStartsPass() }
        } else if !workload.isRotation && workload != .openKey {
            try session.beforePass(workload, side)
            _ = try run(workload, side, session)
        } else if workload == .openKey {
            try session.holdPoolFile()
        }
        for _ in 0..<passes {
            try session.beforePass(workload, side)
            let sum = try measuredWorkloadPass(workload, side, session)
            print("\(workload.rawValue) \(side.rawValue): checksum \(sum)")
        }
    }

    /// The pass callgrind counts (`--zero-before` and `--dump-after` name this function). The store after the call
    /// keeps it from being a tail call: callgrind would not see this function return, and would not dump.
    @inline(never)
    static func measuredWorkloadPass(_ workload: Workload, _ side: Side, _ session: Session) throws -> Int64 {
        threadStartsPass()
        let sum = try run(workload, side, session)
        measuredPassCount.add(1, ordering: .relaxed)
        return sum
    }

    static let measuredPassCount = Atomic<Int>(0)

    /// Called by the main thread and by each worker thread as a pass starts: callgrind's `--zero-before` zeroes the
    /// counts of the thread that enters the function only (the warm-up pass ran on the same threads), and only the
    /// last `--zero-before` option counts, so `.ci/bench-callgrind` names this function alone. The store keeps it
    /// from being optimized away.
    @inline(never)
    static func threadStartsPass() {
        measuredPassCount.add(0, ordering: .relaxed)
    }
}

/// `SQLITE_TRANSIENT`: SQLite copies the bound text (the C macro is not imported).
let SQLITE_TRANSIENT_BENCH = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
