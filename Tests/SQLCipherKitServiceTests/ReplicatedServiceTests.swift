#if Services  // trait Services (Package.swift), which turns on Replication
import Foundation
import Logging
import MetricsTestKit
import SQLCipherKit
import SQLCipherKitReplication
import SQLCipherKitServices
import SQLCipherKitTestSupport
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

/// A folder store the test switches: `up`, `down` (every call fails as an unreachable store does) or `stuck` (every
/// call waits until the test releases it). Each call's outcome is signalled, so a test waits for events, not for
/// time.
final class SwitchedStore: ReplicaStore {
    enum Mode: Sendable { case up, down, stuck }

    let inner: FolderReplicaStore
    private let state = Locked<(mode: Mode, waiting: [CheckedContinuation<Void, Never>])>((.up, []))
    private let entered: AsyncStream<Void>.Continuation
    /// One element each time a call starts waiting in `stuck` mode.
    let stuckCalls: AsyncStream<Void>

    init(_ inner: FolderReplicaStore) {
        self.inner = inner
        (stuckCalls, entered) = AsyncStream.makeStream(of: Void.self)
    }

    var mode: Mode {
        get { state.withLock { $0.mode } }
        set {
            let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.mode = newValue
                guard newValue != .stuck else { return [] }
                let waiting = state.waiting
                state.waiting = []
                return waiting
            }
            for continuation in released { continuation.resume() }
        }
    }

    var description: String { "switched " + inner.description }

    private func check() async throws {
        switch mode {
        case .up:
            return
        case .down:
            throw ReplicationError(.unreachable, "the test switched the store off")
        case .stuck:
            await withCheckedContinuation { continuation in
                let isStuck = state.withLock { state in
                    guard state.mode == .stuck else { return false }
                    state.waiting.append(continuation)
                    return true
                }
                if isStuck { entered.yield() } else { continuation.resume() }
            }
            try await check()
        }
    }

    func put(_ key: String, bytes: [UInt8]) async throws {
        try await check()
        try await inner.put(key, bytes: bytes)
    }

    func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        try await check()
        try await inner.put(key, file: path, offset: offset, length: length, progress: progress)
    }

    func get(_ key: String) async throws -> [UInt8] {
        try await check()
        return try await inner.get(key)
    }

    func list(prefix: String) async throws -> [ReplicaObject] {
        try await check()
        return try await inner.list(prefix: prefix)
    }

    func delete(_ keys: [String]) async throws {
        try await check()
        try await inner.delete(keys)
    }
}

/// A clock the test moves by hand (the replicator's `now`: its lag and the times in the replica).
final class ManualClock: Sendable {
    private let current = Locked(Date())
    var now: Date { current.withLock { $0 } }
    func advance(seconds: Double) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// Waits for the first element of `stream` that satisfies `condition`, failing after 120 s (only to turn a hang into
/// a failure).
func first<T: Sendable>(
    _ stream: AsyncStream<T>, _ what: String, where condition: @escaping @Sendable (T) -> Bool
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            for await element in stream where condition(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(120))
            return nil
        }
        defer { group.cancelAll() }
        guard let found = try await group.next() ?? nil else {
            throw CocoaError(.userCancelled, userInfo: [NSLocalizedDescriptionKey: "waited 120 s for \(what)"])
        }
        return found
    }
}

/// Runs the `sqlcipherkit` binary built beside the tests, on a thread of its own: a command under load may take tens of
/// seconds, and a cooperative thread blocked that long starves the other suites' tasks.
func runCLI(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    try await offCooperativePool { try runCLIBlocking(arguments) }
}

private func runCLIBlocking(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("sqlcipherkit")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("DatabaseService with replication")
struct ReplicatedServiceTests {
    static let keyText = "x'" + String(repeating: "0badcafe", count: 8) + "'"
    static let newKeyText = "x'" + String(repeating: "5ca1ab1e", count: 8) + "'"

    /// A service on a new database in `directory`, replicating to `store`.
    static func service(
        in directory: TemporaryDirectory, store: any ReplicaStore, logs: LogLines,
        metrics: TestMetrics = TestMetrics(), lagThreshold: Duration = .seconds(10),
        configure: (inout ReplicatorConfiguration) -> Void = { _ in }
    ) throws -> DatabaseService {
        let keyFile = directory.path("db.key")
        if !FileManager.default.fileExists(atPath: keyFile) { try writeKeyFile(keyText, to: keyFile) }
        var replicator = ReplicatorConfiguration(snapshotInterval: nil, retention: nil)
        configure(&replicator)
        let configuration = DatabaseService.Configuration(
            keyFileCheckInterval: nil, metricsName: "notes",
            logger: logs.logger(),
            metricsFactory: metrics,
            replication: .init(
                store: store, syncInterval: replicator.syncInterval, lagThreshold: lagThreshold,
                replicator: replicator))
        let service = try DatabaseService(
            path: directory.path("notes.db"), keyFile: keyFile, configuration: configuration)
        try service.pool.write { db in
            try db.execute("CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        }
        return service
    }

    static func insert(_ service: DatabaseService, _ ids: ClosedRange<Int>) async throws {
        try await service.pool.write { db in
            for id in ids {
                try db.execute("INSERT INTO note VALUES (?, ?)", id, String(repeating: "row \(id) ", count: 200))
            }
        }
    }

    /// The rows of a restored file, counted through a fresh connection with `keyText`.
    static func rowCount(_ path: String, keyText: String = keyText) throws -> Int {
        let connection = try Connection(path: path, encryption: .key(try EncryptionKey(sqlcipherRawKeyText: keyText)))
        defer { connection.close() }
        return try connection.scalar("SELECT count(*) FROM note", as: Int.self) ?? -1
    }

    @Test("a live rotation while replicating starts a new generation; the old one restores with the old key only, and restore --key-file says which key opens it")
    func rotationStartsGeneration() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let service = try Self.service(in: directory, store: store, logs: logs)
        let replicator = try #require(service.replicator)
        try await Self.insert(service, 1...20)
        let before = try await replicator.syncNow()
        let oldGeneration = try #require(before.generation)
        let oldKeyFile = directory.path("old.key")
        try writeKeyFile(Self.keyText, to: oldKeyFile)

        try writeKeyFile(Self.newKeyText, to: service.pendingKeyFile)
        #expect(try await service.rotateIfPending())
        // Replication went on by itself after the rekey (its connection reopened with the new key).
        try await Self.insert(service, 21...30)
        let after = try await replicator.syncNow()
        let newGeneration = try #require(after.generation)
        #expect(newGeneration != oldGeneration)
        let catalog = try await Replica(store: store).catalog()
        #expect(catalog.generations.map(\.name) == [oldGeneration, newGeneration])
        #expect(catalog.generations.last?.reason == .paused)
        #expect(catalog.generations.last?.reasonDetail?.contains("replication was paused for a key change (live rotation)") == true)

        // The old generation with the new key: refused, saying which generation and to use the key it had then.
        let newKeyFile = service.keyFile
        let refused = directory.path("refused.db")
        let wrong = try await runCLI([
            "restore", "file://" + store.root, refused, "--generation", oldGeneration, "--key-file", newKeyFile,
        ])
        #expect(wrong.status == 3, "\(wrong.output)")
        #expect(wrong.output.contains("the key file \(newKeyFile)"), "\(wrong.output)")
        #expect(wrong.output.contains(oldGeneration), "\(wrong.output)")
        #expect(wrong.output.contains("give the key the database had when generation \(oldGeneration) was written"),
                "\(wrong.output)")
        #expect(!FileManager.default.fileExists(atPath: refused))
        // With the old key: restored, verified, and the output names the key that opened it.
        let oldRestored = directory.path("old.db")
        let right = try await runCLI([
            "restore", "file://" + store.root, oldRestored, "--generation", oldGeneration, "--key-file", oldKeyFile,
        ])
        #expect(right.status == 0, "\(right.output)")
        #expect(right.output.contains("verified with the key file \(oldKeyFile)"), "\(right.output)")
        #expect(try Self.rowCount(oldRestored) == 20)
        // The new generation opens with the new key and has every row.
        let newRestored = directory.path("new.db")
        let latest = try await runCLI(["restore", "file://" + store.root, newRestored, "--key-file", newKeyFile])
        #expect(latest.status == 0, "\(latest.output)")
        #expect(latest.output.contains("verified with the key file \(newKeyFile)"), "\(latest.output)")
        #expect(try Self.rowCount(newRestored, keyText: Self.newKeyText) == 30)
        for line in logs.all {
            #expect(!line.contains("0badcafe") && !line.contains("5ca1ab1e"))
        }
        try await replicator.stop()
        service.pool.close()
    }

    @Test("graceful shutdown ships what is left before the pool closes, and logs it")
    func shutdownShipsTheRest() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        // An hour between syncs: only the shutdown can ship the rows written after the first sync.
        let service = try Self.service(in: directory, store: store, logs: logs) { $0.syncInterval = .seconds(3600) }
        let replicator = try #require(service.replicator)
        let updates = await replicator.statusUpdates()
        try await testGracefulShutdown { trigger in
            let running = Task { try await service.run() }
            _ = try await first(updates, "the first sync") { $0.generation != nil }
            try await Self.insert(service, 1...50)
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        #expect(service.pool.isClosed)
        let restored = directory.path("restored.db")
        _ = try await Replica(store: store).restore(to: restored, at: .latest)
        #expect(try Self.rowCount(restored) == 50)
        let lines = logs.all
        #expect(lines.contains { $0.contains("shipping what replication has left before closing the database") })
        #expect(lines.contains { $0.contains("everything committed was shipped") })
        #expect(lines.contains { $0.contains("replication finished before the database closes") })
    }

    @Test("graceful shutdown waits for a store that does not answer only up to the shutdown timeout, and says so")
    func shutdownIsBounded() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = SwitchedStore(try FolderReplicaStore(root: directory.path("replica")))
        let service = try Self.service(in: directory, store: store, logs: logs) { configuration in
            configuration.syncInterval = .milliseconds(10)
            configuration.shutdownTimeout = .seconds(1)
        }
        let replicator = try #require(service.replicator)
        let updates = await replicator.statusUpdates()
        try await testGracefulShutdown { trigger in
            let running = Task { try await service.run() }
            _ = try await first(updates, "the first sync") { $0.generation != nil }
            store.mode = .stuck
            try await Self.insert(service, 1...5)
            _ = try await first(store.stuckCalls, "a sync stuck in the store") { _ in true }
            trigger.triggerGracefulShutdown()
            // Returns although the store never answers: the wait is bounded.
            try await running.value
        }
        #expect(service.pool.isClosed)
        #expect(logs.all.contains {
            $0.contains("replication did not finish shipping within the shutdown timeout")
        })
        store.mode = .up
    }

    @Test("an outage of the store: every request is served, retries back off, past the log limit a gap is recorded and a new generation starts when the store is back; the health check reports the lag")
    func outage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let metrics = TestMetrics()
        let clock = ManualClock()
        let waits = Locked<[Duration]>([])
        let (waitStream, waited) = AsyncStream.makeStream(of: Duration.self)
        let store = SwitchedStore(try FolderReplicaStore(root: directory.path("replica")))
        let limit: Int64 = 256 * 1024
        let service = try Self.service(
            in: directory, store: store, logs: logs, metrics: metrics, lagThreshold: .seconds(30)
        ) { configuration in
            configuration.syncInterval = .milliseconds(10)
            configuration.maximumRetryInterval = .milliseconds(640)
            configuration.checkpointFrameCount = 100_000
            configuration.maximumWALByteCount = limit
            configuration.now = { clock.now }
            // The back-off is recorded, not waited for: the loop goes on at once (a tick to let others run).
            configuration.wait = { interval in
                waits.withLock { $0.append(interval) }
                waited.yield(interval)
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        let replicator = try #require(service.replicator)
        let updates = await replicator.statusUpdates()
        let database = [("database", "notes")]
        try await testGracefulShutdown { trigger in
            let running = Task { try await service.run() }
            let up = try await first(updates, "the first sync") { $0.generation != nil }
            let firstGeneration = try #require(up.generation)
            var report = try await service.checkHealth()
            #expect(report.isHealthy)
            #expect(report.description.contains("replication up to date"), "\(report)")

            store.mode = .down
            var written = 0
            // Writes go on, each acknowledged, while syncs fail (those of run(), and one the test asks for after
            // each batch), until the log outgrows its limit.
            var status = await replicator.status
            while status.gapCount == 0 && written < 2000 {
                try await Self.insert(service, (written + 1)...(written + 10))
                written += 10
                await #expect(throws: ReplicationError.self) { try await replicator.syncNow() }
                status = await replicator.status
            }
            #expect(status.gapCount == 1, "no gap after \(written) rows")
            #expect(status.generation == nil)
            // Past the limit the replicator checkpoints on its own: the log stops growing while writes go on.
            for _ in 0..<30 {
                try await Self.insert(service, (written + 1)...(written + 10))
                written += 10
                await #expect(throws: ReplicationError.self) { try await replicator.syncNow() }
            }
            let walSize = try #require(
                try FileManager.default.attributesOfItem(atPath: service.path + "-wal")[.size] as? NSNumber)
            #expect(walSize.int64Value <= limit + 64 * 1024, "the log grew to \(walSize) bytes")
            // run() retried meanwhile, backing off: the wait doubled from the sync interval up to its maximum.
            _ = try await first(waitStream, "the back-off at its maximum, twice") { _ in
                waits.withLock { $0.filter { $0 == .milliseconds(640) }.count >= 2 }
            }
            let recorded = waits.withLock { $0 }
            let doubling: [Duration] = [20, 40, 80, 160, 320, 640, 640].map { .milliseconds($0) }
            #expect(
                (0...(recorded.count - doubling.count)).contains { Array(recorded[$0..<($0 + doubling.count)]) == doubling },
                "\(recorded.suffix(20))")
            // The health check reports the lag once it passes the threshold (the replicator's clock moved on).
            clock.advance(seconds: 31)
            report = try await service.checkHealth()
            #expect(!report.isHealthy)
            #expect(report.description.hasPrefix("degraded:"), "\(report)")
            #expect(report.description.contains("replication lags"), "\(report)")
            #expect(report.replication?.status.gapCount == 1)
            store.mode = .up
            let back = try await replicator.syncNow()
            #expect(back.generation != firstGeneration)
            try await Self.insert(service, (written + 1)...(written + 10))
            written += 10
            report = try await service.checkHealth()
            #expect(report.isHealthy, "\(report)")
            trigger.triggerGracefulShutdown()
            try await running.value

            let catalog = try await Replica(store: store.inner).catalog()
            #expect(catalog.generations.count == 2)
            #expect(catalog.generations.last?.reason == .gap)
            #expect(try metrics.expectCounter("sqlcipherkit_replication_gaps_total", database).totalValue == 1)
            #expect(try metrics.expectCounter("sqlcipherkit_replication_failures_total", database).totalValue > 0)
            // One generation for the first sync, one after the gap, each counted under its reason.
            #expect(try metrics.expectCounter(
                "sqlcipherkit_replication_generations_total", database + [("reason", "firstGeneration")]).totalValue == 1)
            #expect(try metrics.expectCounter(
                "sqlcipherkit_replication_generations_total", database + [("reason", "gap")]).totalValue == 1)
            #expect(try metrics.expectCounter("sqlcipherkit_replication_shipped_bytes_total", database).totalValue > 0)
            #expect(try metrics.expectGauge("sqlcipherkit_replication_lag_seconds", database).lastValue == 0)
            #expect(try metrics.expectGauge("sqlcipherkit_replication_lag_frames", database).lastValue == 0)
            #expect(try metrics.expectGauge(
                "sqlcipherkit_replication_last_success_timestamp_seconds", database).lastValue != nil)
            let lines = logs.all
            #expect(lines.contains { $0.contains("replication continuity broken") && $0.contains("reason=gap") })
            // Every acknowledged write is in the replica (the gap's rows are in the new generation's snapshot).
            let restored = directory.path("restored.db")
            _ = try await Replica(store: store.inner).restore(to: restored, at: .latest)
            #expect(try Self.rowCount(restored) == written)
        }
    }
}
#endif
