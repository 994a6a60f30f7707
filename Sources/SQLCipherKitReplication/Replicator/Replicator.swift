#if Replication  // trait Replication (Package.swift)
import Foundation
import Logging
import SQLCipherKit
import Synchronization

/// Ships an encrypted database to a ``ReplicaStore`` continuously: a snapshot of the main file's bytes, then every
/// committed frame of its write-ahead log, exactly as they are on disk (ciphertext: the key never leaves the
/// process and nothing is decrypted to be shipped). Point-in-time restore is ``Replica/restore(to:at:options:)``.
///
/// In a service, around a ``DatabasePool``:
///
/// ```swift
/// let replicator = Replicator(pool: pool, store: try FolderReplicaStore(root: "/mnt/replica/notes"))
/// let replication = Task { try await replicator.run() }   // syncs every second until cancelled
/// // … serve …
/// replication.cancel()                                     // run() then ships what is left (bounded) and stops
/// try await replication.value
/// pool.close()
/// ```
///
/// While it runs the replicator owns the checkpoints: the pool's writer stops checkpointing on its own, and a
/// read transaction on the replicator's own connection keeps every other connection (of any process) from
/// checkpointing frames it has not shipped. It checkpoints itself, only after shipping. When continuity breaks (a
/// log restarted by a checkpoint it did not run, the file replaced, a gap after an outage) it starts a new
/// generation with a new snapshot. See Docs/Replication.md.
///
/// Rekeying needs the replicator out of the way (its connection keeps the old key): use
/// ``withReplicationPaused(_:)``; the next generation starts on the new key.
public actor Replicator {
    /// Where the replica goes.
    public nonisolated let store: any ReplicaStore
    /// How it ships.
    public nonisolated let configuration: ReplicatorConfiguration

    enum Source: Sendable {
        case pool(DatabasePool)
        case file(path: String, keyProvider: KeyProvider, settings: CipherSettings)
    }

    /// The generation being written.
    struct ActiveGeneration: Sendable {
        let name: String
        var nextIndex: Int
        /// After the last frame shipped (or captured for shipping); `nil` while the generation has no log.
        var position: WALPosition?
        /// The replicator's last checkpoint was complete with everything shipped: a restarted log continues it.
        var expectsRestart: Bool
        /// The log at ``position`` has not had its header shipped yet.
        var needsLogHeader: Bool
        var lastSnapshotAt: Date
        var lastSnapshotIndex: Int
        var lastCheckpointAt: Date
        /// The main file holds exactly the database at this index and will not change until the pin moves (the
        /// last checkpoint was complete).
        var frozenAt: (index: Int, position: WALPosition?)?
        /// A snapshot copied while other connections could checkpoint: it serves restore points from the first
        /// segment that reaches `frame` of its log.
        var pendingSnapshot: PendingSnapshot?
        /// The index at which that snapshot became usable, once shipping reached it.
        var pendingSnapshotIndex: Int?
    }

    struct PendingSnapshot: Sendable {
        let frame: UInt32
        let log: WALPosition
        let createdAtMilliseconds: Int64
    }

    /// Frames read under the write lock, in memory until stored (the log may restart meanwhile).
    struct CapturedSegment: Sendable {
        let key: String
        let bytes: [UInt8]
    }

    let source: Source
    let logger: Logger
    let metrics: ReplicationMetrics
    var database: ReplicatedDatabase?
    var generation: ActiveGeneration?
    var captured: [CapturedSegment] = []
    var hasTriedResume = false
    var nextGenerationReason = "first generation of this replicator"
    var previousGeneration: String?
    var statusValue = ReplicationStatus()
    var caughtUpAt: Date?
    private var tail: Task<Void, Never>?
    private var statusObservers: [UUID: AsyncStream<ReplicationStatus>.Continuation] = [:]

    /// Replicates the database of `pool`, in this process.
    public init(pool: DatabasePool, store: any ReplicaStore, configuration: ReplicatorConfiguration = .init()) {
        self.init(source: .pool(pool), store: store, configuration: configuration)
    }

    /// Replicates a database another process writes (the sidecar of `sqlcipherkit replicate`). The key is needed
    /// only to hold a read transaction (SQLite reads page 1 to start one); nothing shipped is decrypted.
    ///
    /// The replicator guarantees less here: see Docs/Replication.md for what the other process must not do.
    public init(
        databasePath: String, keyProvider: KeyProvider, cipherSettings: CipherSettings = .engineDefault,
        store: any ReplicaStore, configuration: ReplicatorConfiguration = .init()
    ) {
        self.init(
            source: .file(path: databasePath, keyProvider: keyProvider, settings: cipherSettings), store: store,
            configuration: configuration)
    }

    private init(source: Source, store: any ReplicaStore, configuration: ReplicatorConfiguration) {
        self.source = source
        self.store = store
        self.configuration = configuration
        var logger = configuration.logger
        logger[metadataKey: "replica"] = "\(store.description)"
        self.logger = logger
        metrics = ReplicationMetrics(database: configuration.metricsName, factory: configuration.metricsFactory)
    }

    /// Where the replicator stands.
    public var status: ReplicationStatus {
        var status = statusValue
        status.lag = lag
        return status
    }

    /// The status after every sync, successful or not, from now on (a health endpoint, a dashboard, a test that
    /// waits for a gap or for the store to be caught up with instead of waiting for time). The stream ends when the
    /// task iterating it is cancelled.
    public func statusUpdates() -> AsyncStream<ReplicationStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: ReplicationStatus.self, bufferingPolicy: .bufferingNewest(64))
        let id = UUID()
        statusObservers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.removeObserver(id) }
        }
        return stream
    }

    private func removeObserver(_ id: UUID) {
        statusObservers[id] = nil
    }

    private func publishStatus() {
        guard !statusObservers.isEmpty else { return }
        let status = status
        for continuation in statusObservers.values { continuation.yield(status) }
    }

    // MARK: - Running

    /// Opens the database (its own connection, the pin) without contacting the store yet. ``syncNow()`` and
    /// ``run()`` start it when needed.
    ///
    /// - Throws: ``ReplicationError`` (`invalidArgument`) for a plaintext database or one not in WAL mode; the
    ///   database's errors (a wrong key, a missing file).
    public func start() async throws {
        try await serialized { try await self.openIfNeeded() }
    }

    /// Ships everything committed now: starts or resumes a generation when there is none, uploads the new log
    /// frames, checkpoints when the log is long enough, takes a snapshot when one is due, and applies retention
    /// after it. Tests call it instead of waiting for the interval.
    ///
    /// - Returns: The status after the sync.
    /// - Throws: The store's errors (the database is not affected; the next sync retries), or the database's.
    @discardableResult
    public func syncNow() async throws -> ReplicationStatus {
        try await serialized { try await self.syncOnce() }
        return status
    }

    /// Syncs every ``ReplicatorConfiguration/syncInterval`` until the task is cancelled, then ships what is left
    /// (within ``ReplicatorConfiguration/shutdownTimeout``) and stops. While the store fails it retries with a
    /// doubling wait (up to ``ReplicatorConfiguration/maximumRetryInterval``); the database keeps serving.
    ///
    /// - Throws: Only what retrying cannot fix: a plaintext database, one not in WAL mode, a key that does not open
    ///   it (also when another process rekeyed it while it ran). Store failures are logged, counted and retried.
    public func run() async throws {
        do {
            try await start()
        } catch {
            logger.error("replication cannot start", metadata: ["error": "\(error)"])
            throw error
        }
        var failures = 0
        while !Task.isCancelled {
            do {
                try await syncNow()
                failures = 0
            } catch let error as ReplicationError where error.kind == .invalidArgument || error.kind == .wrongKey {
                try? await stop()
                throw error
            } catch let error as DatabaseError where error.kind == .wrongKey || error.kind == .notADatabase {
                // The key no longer opens the file (another process rekeyed it): retrying cannot help.
                logger.error("replication stopped: the key no longer opens the database", metadata: [
                    "error": "\(error)",
                ])
                try? await stop()
                throw error
            } catch {
                failures += 1
            }
            let interval = failures == 0
                ? configuration.syncInterval
                : min(configuration.syncInterval * (1 << min(failures, 16)), configuration.maximumRetryInterval)
            try? await configuration.wait(interval)
        }
        try await stop()
    }

    /// Ships what is left (within ``ReplicatorConfiguration/shutdownTimeout``, logged), then closes the
    /// replicator's connections and gives the pool its automatic checkpoints back. ``start()`` again resumes the
    /// generation when the log on disk still continues it.
    public func stop() async throws {
        try await serialized { await self.shutDown() }
    }

    /// Stops replication around `body` (for a rekey: ``DatabasePool/rekey(to:)`` refuses while the replicator's
    /// connection is open), then starts again. The rekeyed database goes into a new generation; restoring an
    /// earlier one needs the earlier key.
    ///
    /// - Returns: What `body` returns.
    ///
    /// No sync of ``run()`` runs while `body` does (the pause is one of the replicator's serialized operations).
    /// Replication starts again also when `body` throws (on the key that then opens the database).
    ///
    /// - Parameters:
    ///   - reason: What the pause is for (e.g. "a live key rotation"): the next generation's `generation.json`
    ///     gives it as the reason when the log on disk no longer continues the replica afterwards.
    ///   - body: The work to do with replication stopped.
    @discardableResult
    public func withReplicationPaused<T: Sendable>(
        for reason: String? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await serialized {
            await self.shutDown()
            if let reason {
                await self.setNextGenerationReason(
                    "replication paused for \(reason); the log on disk does not continue the replica")
            }
            let result: T
            do {
                result = try await body()
            } catch {
                // Replication goes on with the key that opens the database; the error is `body`'s.
                try? await self.openIfNeeded()
                throw error
            }
            try await self.openIfNeeded()
            return result
        }
    }

    private func setNextGenerationReason(_ reason: String) {
        nextGenerationReason = reason
    }

    /// Runs the replicator's operations one at a time (an actor alone would interleave them at each `await`).
    private func serialized<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tail
        let task = Task { () async throws -> T in
            _ = await previous?.value
            return try await body()
        }
        tail = Task { _ = try? await task.value }
        return try await task.value
    }

    private func openIfNeeded() async throws {
        guard database == nil else { return }
        let database: ReplicatedDatabase
        switch source {
        case .pool(let pool):
            database = try await ReplicatedDatabase.open(pool: pool)
        case .file(let path, let keyProvider, let settings):
            let key = try keyProvider.key()
            database = try await onQueue {
                try ReplicatedDatabase.open(
                    path: path, encryption: .key(key, settings: settings), busyTimeout: self.configuration.busyTimeout)
            }
        }
        do {
            try await database.locked { try database.pinLocked() }
        } catch {
            await database.close()
            throw error
        }
        self.database = database
        hasTriedResume = false
        logger.info("replication started", metadata: ["path": "\(database.path)"])
    }

    private func shutDown() async {
        guard let database else { return }
        let timeout = configuration.shutdownTimeout
        // Whichever ends first: the last ship, or the timeout (a ship still running then fails on closed
        // connections; what it stored is complete objects only).
        let shipped = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let outcome = FirstOutcome(continuation)
            Task { outcome.resume((try? await self.finalShip()) != nil) }
            Task {
                try? await Task.sleep(for: timeout)
                outcome.resume(false)
            }
        }
        if shipped {
            logger.info("replication stopped; everything committed was shipped", metadata: [
                "generation": "\(generation?.name ?? "none")", "index": "\((generation?.nextIndex ?? 1) - 1)",
            ])
        } else {
            logger.warning("replication stopped before everything was shipped", metadata: [
                "generation": "\(generation?.name ?? "none")", "timeout": "\(timeout)",
            ])
        }
        await database.close()
        self.database = nil
        previousGeneration = generation?.name ?? previousGeneration
        generation = nil
        captured.removeAll()
        nextGenerationReason = "the replicator started again and the log on disk does not continue the replica"
    }

    /// What a killed process leaves: the replicator's connections closed (its pin gone), nothing shipped, nothing
    /// remembered. Tests use it to see what a replicator started afterwards finds.
    func closeAsIfKilled() async {
        guard let database else { return }
        await database.close()
        self.database = nil
        generation = nil
        captured.removeAll()
    }

    private func finalShip() async throws {
        guard generation != nil else { return }
        try await uploadCaptured()
        try await ship()
    }

    // MARK: - One sync

    private func syncOnce() async throws {
        try await openIfNeeded()
        guard let database else { return }
        do {
            if !database.isSameFile {
                await breakContinuity("the database file was replaced (another file now has its path)")
                await database.close()
                self.database = nil
                try await openIfNeeded()
            }
            try await uploadCaptured()
            if generation == nil && !hasTriedResume {
                hasTriedResume = true
                try await resumeIfContinuous()
            }
            if generation == nil { try await startGeneration() }
            try await ship()
            if isCheckpointDue || isSnapshotDue { try await checkpointStep() }
            if isSnapshotDue { try await takeExactSnapshot() }
            statusValue.consecutiveFailureCount = 0
            statusValue.lastError = nil
            statusValue.unshippedFrameCount = 0
            statusValue.lastSuccessfulSync = configuration.now()
            statusValue.generation = generation?.name
            statusValue.lastIndex = generation.map { $0.nextIndex - 1 }
            metrics.record(status)
            publishStatus()
        } catch {
            statusValue.consecutiveFailureCount += 1
            statusValue.lastError = "\(error)"
            metrics.failures.increment()
            logger.warning("replication sync failed; the database keeps serving, the next sync retries", metadata: [
                "error": "\(error)", "failures": "\(statusValue.consecutiveFailureCount)",
            ])
            await handleFailure()
            metrics.record(status)
            publishStatus()
            throw error
        }
    }

    /// How long commits have waited: 0 after a sync that shipped everything, the time since the last one that did
    /// otherwise.
    var lag: Duration {
        guard statusValue.consecutiveFailureCount > 0, let caughtUpAt else { return .zero }
        return .milliseconds(Int64(max(0, configuration.now().timeIntervalSince(caughtUpAt)) * 1000))
    }

    var isCheckpointDue: Bool {
        guard let generation, let position = generation.position, position.frame > 0, !generation.expectsRestart
        else { return false }
        return Int(position.frame) >= configuration.checkpointFrameCount
            || configuration.now().timeIntervalSince(generation.lastCheckpointAt) >= configuration.checkpointInterval.seconds
    }

    var isSnapshotDue: Bool {
        guard let generation, let interval = configuration.snapshotInterval, generation.pendingSnapshot == nil
        else { return false }
        return configuration.now().timeIntervalSince(generation.lastSnapshotAt) >= interval.seconds
            && generation.nextIndex - 1 > generation.lastSnapshotIndex
    }

    /// Ends the generation: the next sync starts a new one.
    func breakContinuity(_ reason: String) async {
        if let generation {
            logger.warning("replication continuity broken; a new generation starts", metadata: [
                "generation": "\(generation.name)", "reason": "\(reason)",
            ])
            previousGeneration = generation.name
        }
        generation = nil
        // The status names no generation until the next one starts (it is set again only by a successful sync).
        statusValue.generation = nil
        captured.removeAll()
        nextGenerationReason = reason
        hasTriedResume = true
    }

    /// After a failed sync. Not replicating (no generation): checkpoint without a pin, as SQLite would have. While
    /// replicating: when the log has outgrown its limit, give up continuity so SQLite can restart it.
    private func handleFailure() async {
        guard let database else { return }
        let size = (try? ReadOnlyFile(path: database.walPath))?.flatMap { try? $0.size() } ?? 0
        statusValue.unshippedFrameCount = max(0, Int((size - 32) / Int64(max(1, database.pageSize + 24))))
        if generation != nil {
            guard size > configuration.maximumWALByteCount else { return }
            statusValue.gapCount += 1
            metrics.gaps.increment()
            let since = statusValue.lastSuccessfulSync.map(ISO8601.string) ?? "the start"
            await breakContinuity(
                "gap: the store failed since \(since) and the log reached \(size) bytes (limit"
                    + " \(configuration.maximumWALByteCount)); the replicator checkpointed without shipping")
        }
        do {
            try await database.locked {
                database.unpinLocked()
                _ = try database.checkpointLocked()
            }
        } catch {
            logger.error("checkpoint without replication failed", metadata: ["error": "\(error)"])
        }
    }

    /// Runs blocking work on the database's queue (never on Swift's cooperative threads).
    func onQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let queue = database?.queue ?? DispatchQueue.global()
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}

/// Resumes a continuation with the first outcome given, ignoring the later ones (the replicator's and the service's
/// bounded waits: whichever of the work and the timeout ends first).
package final class FirstOutcome: Sendable {
    private let continuation: Mutex<CheckedContinuation<Bool, Never>?>

    package init(_ continuation: CheckedContinuation<Bool, Never>) {
        self.continuation = Mutex(continuation)
    }

    package func resume(_ value: Bool) {
        continuation.withLock { continuation in
            continuation?.resume(returning: value)
            continuation = nil
        }
    }
}
#endif
