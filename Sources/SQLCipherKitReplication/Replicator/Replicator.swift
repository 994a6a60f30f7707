#if Replication  // trait Replication (Package.swift)
import Foundation
import Logging
import SQLCipherKit

/// Ships an encrypted database to a ``ReplicaStore`` continuously: a snapshot of the main file's bytes, then every
/// committed frame of its write-ahead log, exactly as they are on disk (ciphertext: the key never leaves the
/// process and nothing is decrypted to be shipped). Point-in-time restore is ``Replica/restore(to:at:options:)``.
///
/// In a service, around a ``DatabasePool``:
///
/// ```swift
/// let replicator = Replicator(pool: pool, store: try replicaStore(for: "file:///mnt/replica/notes"))
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
/// One replicator writes a replica: it takes the replica's lease when it starts (another live replicator's lease
/// makes it refuse, ``ReplicationError/Kind/leaseHeld``), checks it before every sync and stops for good when
/// another took it (``ReplicationError/Kind/fenced``). Every object it writes is authenticated with a key derived
/// from the database key (``Replica``'s restore checks it).
///
/// Rekeying needs the replicator out of the way (its connection keeps the old key): use
/// ``withReplicationPaused(_:)``; the next generation starts on the new key.
public actor Replicator {
    /// Where the replica goes.
    package nonisolated let store: any ReplicaStore
    /// How it ships.
    package nonisolated let configuration: ReplicatorConfiguration

    enum Source: Sendable {
        case pool(DatabasePool)
        case file(path: String, keyProvider: KeyProvider, settings: CipherSettings)
    }

    /// The generation being written.
    struct ActiveGeneration: Sendable {
        let name: String
        let sequence: Int
        var nextIndex: Int
        /// The MAC chain's value after the last segment named (the manifest's MAC before the first).
        var chain: String
        /// After the last frame shipped (or captured for shipping); `nil` while the generation has no log.
        var position: WALPosition?
        /// The replicator's last checkpoint was complete with everything shipped: a restarted log continues it.
        var expectsRestart: Bool
        /// The log at ``position`` has not had its header shipped yet.
        var needsLogHeader: Bool
        var lastSnapshotAt: Date
        var lastSnapshotIndex: Int
        var lastCheckpointAt: Date
        /// The main file holds exactly the database at this index (the chain's value there) and will not change
        /// until the pin moves (the last checkpoint was complete).
        var frozenAt: (index: Int, position: WALPosition?, chain: String)?
        /// A snapshot copied while other connections could checkpoint: it serves restore points from the first
        /// segment that reaches `frame` of its log.
        var pendingSnapshot: PendingSnapshot?
        /// The index at which that snapshot became usable (and the chain's value there), once shipping reached it.
        var pendingSnapshotIndex: (index: Int, chain: String)?
        /// The segment at ``nextIndex`` whose upload failed (the store may hold it): stored again, under the same
        /// name, before anything else of the generation.
        var unconfirmed: UnconfirmedSegment?

        /// Where the next generation links to: the last point of this one.
        var link: GenerationLink {
            GenerationLink(generation: name, sequence: sequence, index: nextIndex - 1, chain: chain)
        }
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
    /// The MAC key of the database open now (derived from its key).
    var authentication: ReplicaAuthentication?
    let lease: ReplicaLease
    var generation: ActiveGeneration?
    var captured: [CapturedSegment] = []
    var hasTriedResume = false
    var nextGenerationReason = (GenerationReason.firstGeneration, "the replica had no generation to continue")
    /// Whether the last stop shipped everything committed before it (`nil` before any stop).
    package private(set) var shippedEverythingAtLastStop: Bool?
    /// The last point of the generation before the next one (kept when a generation ends).
    var previousLink: GenerationLink?
    /// Set by a promoted follower before the start: the point of the old primary's generation it reached. The lease
    /// is taken whoever holds it (fencing the old primary) and the first generation follows that point.
    var promotion: GenerationLink?
    /// The name the promoting follower gave the generation when it fenced the old primary (the lease named it, so the
    /// old primary's stop message does): used when its sequence number is still the next one.
    var promotedGenerationName: String?
    /// The replica's identity, once known (from the store's newest generation, or new).
    var replicaIdentity: String?
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
    package init(
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
        lease = ReplicaLease(store: store, duration: configuration.leaseDuration)
    }

    /// Makes this replicator the one of a promoted follower: call before the start. It takes the replica's lease
    /// from whoever holds it (the old primary stops at its next sync: ``ReplicationError/Kind/fenced``), and its
    /// first generation follows `link` (the old primary's point the follower reached), its reason
    /// ``GenerationReason/promoted``.
    func takeOver(after link: GenerationLink, generationName: String?) {
        promotion = link
        promotedGenerationName = generationName
        previousLink = link
        nextGenerationReason = (
            .promoted, "a follower that had reached \(link.generation)/\(link.index) was promoted to primary")
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

    /// The generation this replicator writes: the current one, or the one a promotion chose until it begins.
    package var generationName: String? { status.generation ?? promotedGenerationName }

    /// Opens the database (its own connection, the pin) and takes the replica's lease. ``syncNow()`` and ``run()``
    /// start it when needed (the CLI and the tests call it to see a refusal before anything else).
    ///
    /// - Throws: ``DatabaseError`` (`invalidArgument`) for a plaintext database or one not in WAL mode, and the
    ///   database's errors (a wrong key, a missing file); ``ReplicationError`` (`leaseHeld`) when another replicator
    ///   writes the replica, and the store's errors.
    package func start() async throws {
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
    /// doubling wait (up to a minute); the database keeps serving.
    ///
    /// - Throws: Only what retrying cannot fix: a plaintext database, one not in WAL mode, a key that does not open
    ///   it (also when another process rekeyed it while it ran), another replicator's lease
    ///   (``ReplicationError/Kind/leaseHeld``), a lease taken over (``ReplicationError/Kind/fenced``). Store
    ///   failures are logged, counted and retried.
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
            } catch let error as ReplicationError where error.kind == .fenced || error.kind == .leaseHeld {
                logger.error("replication stopped for good: another replicator writes the replica", metadata: [
                    "error": "\(error)",
                ])
                await closeWithoutShipping()
                throw error
            } catch let error as DatabaseError
                where error.resultCode == DatabaseError.SQLITE_NOTADB || error.kind == .wrongKey {
                // The key no longer opens the file (another process rekeyed it): retrying cannot help.
                let stopped = DatabaseError(
                    .wrongKey,
                    "the key no longer opens the database (another process changed its key?); replication stopped"
                        + " for good (\(error.reason))")
                logger.error("replication stopped for good", metadata: ["error": "\(stopped)"])
                await closeWithoutShipping()
                throw stopped
            } catch let error as DatabaseError where [.invalidArgument, .invalidState].contains(error.kind) {
                // The database cannot be replicated: retrying cannot help.
                logger.error("replication stopped for good", metadata: ["error": "\(error)"])
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
    /// generation when the log on disk still continues it. (A user cancels ``run()``, which ends with this.)
    package func stop() async throws {
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
                    .paused, "replication was paused for \(reason); the log on disk does not continue the replica")
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

    private func setNextGenerationReason(_ reason: GenerationReason, _ detail: String) {
        nextGenerationReason = (reason, detail)
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
            let busyTimeout = configuration.busyTimeout
            database = try await offCooperativePool {
                try ReplicatedDatabase.open(
                    path: path, encryption: .key(key, settings: settings), busyTimeout: busyTimeout)
            }
        }
        do {
            try await database.locked { try database.pinLocked() }
            authentication = try await database.locked { try database.authentication() }
            let logger = self.logger
            // A promotion's lease names the generation the follower chose when it fenced the old primary, from the
            // first write on: the old primary's stop message names it whichever lease write it reads.
            try await lease.acquire(
                generation: promotion != nil ? promotedGenerationName : nil, now: configuration.now(),
                force: promotion != nil,
                waiting: { holder, duration in
                    logger.warning(
                        "replica lease held by a replicator this host cannot check; waiting for it to renew before taking it over",
                        metadata: ["holder": "\(holder)", "wait": "\(duration)"])
                }, wait: configuration.wait)
        } catch {
            await database.close()
            authentication = nil
            throw error
        }
        self.database = database
        // A promoted follower's log is its own (appended, with its own salts), never the old primary's: nothing to
        // resume.
        hasTriedResume = promotion != nil
        logger.info("replication started", metadata: ["path": "\(database.path)"])
    }

    private func shutDown() async {
        guard let database else { return }
        let timeout = configuration.shutdownTimeout
        // Whichever ends first: the last ship, or the timeout. Then the ship is cancelled and awaited for one more
        // timeout, so that the connections do not close under it; a ship that ignores cancellation (a store call
        // blocked in the kernel) is abandoned: what it uses fails once closed, and the lease is left as a killed
        // process leaves it, since this process may still write.
        let outcome = await SQLCipherKit.outcome(of: { try await self.finalShip() }, timeout: timeout)
        var shipped = false
        if case .finished(.success) = outcome { shipped = true }
        shippedEverythingAtLastStop = shipped
        if shipped {
            logger.info("replication stopped; everything committed was shipped", metadata: [
                "generation": "\(generation?.name ?? "none")", "index": "\((generation?.nextIndex ?? 1) - 1)",
            ])
        } else {
            var metadata: Logger.Metadata = ["generation": "\(generation?.name ?? "none")", "timeout": "\(timeout)"]
            if case .abandoned = outcome { metadata["lastShip"] = "still running after cancellation; lease left" }
            logger.warning("replication stopped before everything was shipped", metadata: metadata)
        }
        await database.close()
        self.database = nil
        authentication = nil
        // Captured or unconfirmed segments may or may not be in the store: the next generation links to what the
        // store's catalog then shows.
        if let generation { previousLink = captured.isEmpty && generation.unconfirmed == nil ? generation.link : nil }
        generation = nil
        captured.removeAll()
        if case .abandoned = outcome { await lease.abandon() } else { await lease.release() }
        nextGenerationReason = (
            .notContinuous, "the replicator started again and the log on disk does not continue the replica")
    }

    /// After a lease was lost: closes without shipping anything more (another replicator writes the replica now).
    private func closeWithoutShipping() async {
        guard let database else { return }
        await database.close()
        self.database = nil
        authentication = nil
        generation = nil
        captured.removeAll()
        await lease.abandon()
    }

    /// What a killed process leaves: the replicator's connections closed (its pin gone), nothing shipped, nothing
    /// remembered, its lease left in the store. Tests use it to see what a replicator started afterwards finds.
    func closeAsIfKilled() async {
        await closeWithoutShipping()
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
            // Before a promoted replicator's first generation exists, its lease keeps naming the one it will write
            // (a check naming none would rewrite the lease without it, and the fenced primary could read that).
            try await lease.check(generation: generation?.name ?? promotedGenerationName, now: configuration.now())
            if !database.isSameFile {
                await breakContinuity(.fileReplaced, "the database file was replaced (another file now has its path)")
                await database.close()
                self.database = nil
                authentication = nil
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
        } catch let error as ReplicationError where error.kind == .fenced {
            statusValue.lastError = "\(error)"
            publishStatus()
            throw error
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
    func breakContinuity(_ reason: GenerationReason, _ detail: String) async {
        if let generation {
            logger.warning("replication continuity broken; a new generation starts", metadata: [
                "generation": "\(generation.name)", "reason": "\(reason)", "detail": "\(detail)",
            ])
            // Segments captured but not stored, or one whose upload failed, may or may not be part of it: no link
            // then (the next generation follows what the store's catalog shows).
            previousLink = captured.isEmpty && generation.unconfirmed == nil ? generation.link : nil
        }
        generation = nil
        // The status names no generation until the next one starts (it is set again only by a successful sync).
        statusValue.generation = nil
        captured.removeAll()
        nextGenerationReason = (reason, detail)
        hasTriedResume = true
    }

    /// After a failed sync. Not replicating (no generation): checkpoint without a pin, as SQLite would have. While
    /// replicating: when the log has outgrown its limit, give up continuity so SQLite can restart it.
    private func handleFailure() async {
        guard let database else { return }
        let size = ((try? ReadOnlyFile(path: database.walPath)) ?? nil).flatMap { try? $0.size() } ?? 0
        statusValue.unshippedFrameCount = max(0, Int((size - 32) / Int64(max(1, database.pageSize + 24))))
        if generation != nil {
            guard size > configuration.maximumWALByteCount else { return }
            statusValue.gapCount += 1
            metrics.gaps.increment()
            let since = statusValue.lastSuccessfulSync.map(ISO8601.string) ?? "the start"
            await breakContinuity(
                .gap,
                "the store failed since \(since) and the log reached \(size) bytes (limit"
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
        try await offCooperativePool(on: database?.queue ?? .global(), body)
    }
}

#endif
