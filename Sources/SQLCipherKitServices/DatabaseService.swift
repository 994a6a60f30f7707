#if Services  // trait Services (Package.swift)
import CoreMetrics
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication
import ServiceLifecycle

/// An encrypted ``DatabasePool`` run as a swift-service-lifecycle `Service`, with a health check, swift-metrics
/// instruments, replication, and key rotation while the service keeps serving.
///
/// ```swift
/// let database = try DatabaseService(path: "app.db", keyFile: "/run/secrets/app.key")
/// let server = Application(router: router(database.pool))            // Hummingbird, Vapor, …
/// let group = ServiceGroup(services: [database, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// **Lifecycle.** ``run()`` holds the pool open until graceful shutdown, then closes it: the work in flight
/// finishes, new work fails with ``DatabaseError/connectionClosed``. List it before the services that use it.
///
/// **Live key rotation** is a ``LiveKeyRotation`` (``keyRotation``), which opens the pool: the operator writes the
/// new key to ``pendingKeyFile`` (`<keyFile>.next`, mode 0600; write it under another name, then `mv`), and at its
/// next check (every ``Configuration/keyFileCheckInterval`` while ``run()`` runs) it is handed over, one atomic file
/// operation at a time, with crash recovery at start and at every check; see ``LiveKeyRotation`` for the steps and
/// the files. An application without swift-service-lifecycle (a Vapor app) can use ``LiveKeyRotation`` on its own.
///
/// **Replication.** With ``Configuration/replication`` set, the service ships the database's encrypted pages and
/// log frames to a ``ReplicaStore`` while it runs (a ``Replicator`` that owns the checkpoints), pauses replication
/// around a live rotation (the rotated database starts a new generation: earlier generations restore with the
/// earlier key), reports replication lag in ``checkHealth()``, and at graceful shutdown ships what is left before the
/// pool closes (bounded by ``ReplicatorConfiguration/shutdownTimeout``, logged). See Docs/Replication.md.
///
/// **Follower mode.** ``init(followingReplicaInto:keyFile:configuration:)`` opens a service on a local copy that
/// follows the replica another service ships (a ``ReplicaFollower``): it serves reads, refuses writes, and becomes
/// the primary without a restart on ``promote()`` or on an operator's `sqlcipherkit promote`.
public final class DatabaseService: Service, Sendable {
    /// How the service opens the pool and watches its key file.
    public struct Configuration: Sendable {
        /// Readers, cipher settings and open options of the pool.
        public var pool: DatabasePool.Configuration
        /// How often to look for a pending key; `nil` never rotates on its own (call ``rotateIfPending()``).
        public var keyFileCheckInterval: Duration?
        /// Appended to the key file's path to name the pending key file.
        public var pendingKeySuffix: String
        /// Accept a pending passphrase shorter than ``EncryptionKey/minimumRotationPassphraseByteCount`` bytes, or
        /// with a line break inside (`false` by default: such text is more likely a mistake than a key).
        public var allowsWeakPassphrase: Bool
        /// How long opening the service waits for another process's hand-over on the same key folder.
        public var handOverWaitTimeout: Duration
        /// The `database` dimension of every metric: a name, not a path.
        public var metricsName: String
        /// Where rotations, health failures and shutdown are reported (never key material).
        public var logger: Logger
        /// The metrics backend; by default the one bootstrapped with `MetricsSystem.bootstrap`.
        public var metricsFactory: any MetricsFactory
        /// Replicate the database to a store while the service runs; `nil` (the default) does not replicate.
        public var replication: ReplicationOptions?

        /// Creates a configuration.
        public init(
            pool: DatabasePool.Configuration = DatabasePool.Configuration(),
            keyFileCheckInterval: Duration? = .seconds(1),
            pendingKeySuffix: String = ".next",
            allowsWeakPassphrase: Bool = false,
            handOverWaitTimeout: Duration = .seconds(60),
            metricsName: String = "default",
            logger: Logger = Logger(label: "sqlcipherkit.service"),
            metricsFactory: any MetricsFactory = MetricsSystem.factory,
            replication: ReplicationOptions? = nil
        ) {
            self.replication = replication
            self.metricsFactory = metricsFactory
            self.pool = pool
            self.keyFileCheckInterval = keyFileCheckInterval
            self.pendingKeySuffix = pendingKeySuffix
            self.allowsWeakPassphrase = allowsWeakPassphrase
            self.handOverWaitTimeout = handOverWaitTimeout
            self.metricsName = metricsName
            self.logger = logger
        }
    }

    /// What ``checkHealth()`` found.
    public struct HealthReport: Sendable, CustomStringConvertible {
        /// The database path.
        public let path: String
        /// The number of tables, views, indexes and triggers, read through a fresh connection with the key.
        public let schemaObjectCount: Int
        /// Reader connections open in the pool.
        public let readerConnectionCount: Int
        /// The SQLCipher version serving the file.
        public let engineVersion: String
        /// Where replication stands; `nil` when the service does not replicate, or follows.
        public let replication: ReplicationHealth?
        /// Where following stands; `nil` unless the service follows a replica.
        public let following: FollowingHealth?

        /// `false` when replication lags past its threshold or has stopped, or when a follower's copy is staler than
        /// the threshold (the database itself serves: the report is returned, not thrown).
        public var isHealthy: Bool { !(replication?.isLagging ?? false) && !(following?.isLagging ?? false) }

        /// A one-line summary (no key material).
        public var description: String {
            (isHealthy ? "healthy: " : "degraded: ")
                + "\(path) opens with its key (\(schemaObjectCount) schema objects), \(readerConnectionCount)"
                + " readers open, SQLCipher \(engineVersion)" + (replication.map { "; \($0)" } ?? "")
                + (following.map { "; \($0)" } ?? "")
        }
    }

    /// The pool; use it (or an SQLKit/Fluent driver over it) for all database work.
    public var pool: DatabasePool { keyRotation.pool }
    /// The database path.
    public let path: String
    /// The live key rotation of the pool: the key-file watch, the hand-over and its crash recovery. ``run()`` runs
    /// its checks; ``rotateIfPending()`` is its ``LiveKeyRotation/checkNow()``.
    public let keyRotation: LiveKeyRotation
    /// The file holding the current key.
    public var keyFile: String { keyRotation.keyFile }
    /// Where an operator puts a new key to have it rotated in.
    public var pendingKeyFile: String { keyRotation.pendingKeyFile }
    /// Where a hand-over records the key being rotated in, from the rekey until it is renamed over ``keyFile``.
    public var rotatingKeyFile: String { keyRotation.rotatingKeyFile }
    /// Where the service writes the key it uses when ``keyFile`` stops opening the database (`<keyFile>.in-use`);
    /// see ``LiveKeyRotation/inUseKeyFile``.
    ///
    /// - Warning: The copy is a key file like the others: back it up, move it or delete it with the same care.
    public var inUseKeyFile: String { keyRotation.inUseKeyFile }
    /// The replicator when ``Configuration/replication`` is set: its ``Replicator/status``,
    /// ``Replicator/statusUpdates()`` and ``Replicator/syncNow()`` are the service's. ``run()`` runs it. `nil` for a
    /// service in follower mode until it is promoted.
    public var replicator: Replicator? { role.withLock { $0.replicator } }

    let configuration: Configuration
    /// Whether the service follows a replica, is being promoted, or is the primary.
    let role: Locked<ServiceRole>
    /// Whether the pool's connections open with writes refused (`PRAGMA query_only`): while the service follows.
    let refusesWrites: Locked<Bool>
    /// One element when the service becomes the primary (``run()`` of a follower waits for it).
    let promotions = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    let replicationState = Locked(ReplicationRunState.notStarted)
    private let metrics: DatabaseServiceMetrics

    var logger: Logger { configuration.logger }
    var configurationReplication: ReplicationOptions? { configuration.replication }

    /// Opens (or creates) the database with the key in `keyFile`.
    ///
    /// When the key file does not open the database, a hand-over was interrupted: the key in `<keyFile>.rotating`,
    /// then the one in `<keyFile>.next`, is tried, and the one that opens the database is written into the key file
    /// (a hand-over another process is running on the same key folder is waited for, up to
    /// ``Configuration/handOverWaitTimeout``).
    ///
    /// - Throws: The errors of ``LiveKeyRotation/init(path:keyFile:configuration:)``: those of
    ///   ``DatabasePool/init(path:keyProvider:configuration:)`` and of the key file; ``DatabaseError/wrongKey``
    ///   naming every file tried when none opens the database, and the copy of a key in use (``inUseKeyFile``) that
    ///   does, if there is one (it is never used on its own).
    public convenience init(path: String, keyFile: String, configuration: Configuration = Configuration()) throws {
        try self.init(path: path, keyFile: keyFile, configuration: configuration, following: nil)
    }

    /// Opens the pool; with `follower`, on the follower's started copy, with writes refused until a promotion.
    init(path: String, keyFile: String, configuration: Configuration, following follower: ReplicaFollower?) throws {
        self.path = path
        self.configuration = configuration
        let refusesWrites = Locked(follower != nil)
        self.refusesWrites = refusesWrites
        metrics = DatabaseServiceMetrics(database: configuration.metricsName, factory: configuration.metricsFactory)
        var poolConfiguration = configuration.pool
        if follower != nil {
            // Writes are refused on every connection while the service follows: only the follower writes the copy
            // (another writer would stop it). Set before the caller's preparation, so that a preparation that
            // writes fails here rather than stopping the follower later.
            let preparation = poolConfiguration.openOptions.prepareConnection
            poolConfiguration.openOptions.prepareConnection = { connection in
                if refusesWrites.withLock({ $0 }) { try connection.execute("PRAGMA query_only = 1") }
                try preparation?(connection)
            }
        }
        var rotation = LiveKeyRotation.Configuration(
            pool: poolConfiguration, checkInterval: configuration.keyFileCheckInterval ?? .seconds(1),
            pendingKeySuffix: configuration.pendingKeySuffix, allowsWeakPassphrase: configuration.allowsWeakPassphrase,
            handOverWaitTimeout: configuration.handOverWaitTimeout, metricsName: configuration.metricsName,
            logger: configuration.logger, metricsFactory: configuration.metricsFactory)
        rotation.weakPassphraseRemedy = "to accept it anyway, set DatabaseService.Configuration.allowsWeakPassphrase"
        keyRotation = try LiveKeyRotation(path: path, keyFile: keyFile, configuration: rotation)
        let pool = keyRotation.pool
        if let follower {
            role = Locked(.following(follower))
            keyRotation.refusesChecks.withLock {
                $0 = "\(path) follows a replica: its key is the primary's, and only the follower writes it; promote the"
                    + " service first"
            }
        } else {
            let replicator = configuration.replication.map { options in
                Replicator(
                    pool: pool, store: options.store, configuration: options.replicatorConfiguration(for: configuration))
            }
            role = Locked(.primary(replicator))
            if let replicator { keyRotation.pausesReplication(replicator) }
        }
    }

    // MARK: - Service

    /// Checks the key files (and replicates, when configured) until graceful shutdown (or cancellation), then ships
    /// what replication has left (bounded, logged) and closes the pool after the work in flight.
    public func run() async throws {
        if isFollowing {
            guard await followUntilPromoted() else {
                logger.info("closing the database after the work in flight", metadata: ["path": "\(path)"])
                await offCooperativePool { [pool] in pool.close() }
                return
            }
        }
        let replication = replicator.map { replicator in Task { [self] in await replicate(replicator) } }
        if let interval = configuration.keyFileCheckInterval {
            await cancelWhenGracefulShutdown { [self] in
                await keyRotation.run(every: interval) { [self] in
                    metrics.readers.record(pool.readerConnectionCount)
                }
            }
        } else {
            try? await gracefulShutdown()
        }
        if let replication { await finishReplication(replication) }
        logger.info("closing the database after the work in flight", metadata: ["path": "\(path)"])
        await offCooperativePool { [pool] in pool.close() }
    }

    // MARK: - Live key rotation

    /// Runs one check now (``LiveKeyRotation/checkNow()``): settles a recorded hand-over, reopens the pool when
    /// another replica changed the key, retries a WAL truncate left after a rotation, and hands the pending key over
    /// if there is one (also when an earlier attempt failed and its pause has not ended). Replication pauses around
    /// a key change.
    ///
    /// - Returns: `true` when this call rotated a key in; `false` when there was nothing to rotate, another check
    ///   is running, or another process holds the hand-over turn.
    /// - Throws: The error that stopped the hand-over; the pool then keeps the key that opens the database, and
    ///   the pending file stays for the next check (or is renamed `<pending>.rejected` when it cannot be a key).
    ///   A service in follower mode refuses (``DatabaseError/invalidState``): its copy's key is the primary's.
    @discardableResult
    public func rotateIfPending() async throws -> Bool {
        try await keyRotation.checkNow()
    }


    // MARK: - Health and backups

    /// Proves the key in ``keyFile`` still opens the database: opens a fresh read-only connection with it and
    /// reads the schema (page 1 decrypted and authenticated), then runs a read through the pool. During a hand-over
    /// (between its rekey and its rename), the key recorded in ``rotatingKeyFile`` stands in for the key file.
    ///
    /// - Throws: ``DatabaseError/wrongKey`` when the key no longer opens the file; the pool's errors
    ///   (``DatabaseError/connectionClosed`` after shutdown).
    public func checkHealth() async throws -> HealthReport {
        let started = ContinuousClock.now
        do {
            var report = try await offCooperativePool { [self] () throws -> HealthReport in
                let connection = try Connection(
                    path: path, encryption: .key(try keyRotation.keyForHealthCheck(), settings: configuration.pool.settings),
                    options: OpenOptions(mode: .readOnly))
                defer { connection.close() }
                let count = try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) ?? 0
                return HealthReport(
                    path: path, schemaObjectCount: count, readerConnectionCount: pool.readerConnectionCount,
                    engineVersion: SQLCipher.version, replication: nil, following: nil)
            }
            _ = try await pool.read { db in try db.scalar("SELECT 1", as: Int.self) }
            if let replication = await replicationHealth() {
                report = report.with(replication: replication)
                if replication.isLagging {
                    logger.warning("replication lags", metadata: ["path": "\(path)", "replication": "\(replication)"])
                }
            }
            if let following = await followingHealth() {
                report = report.with(following: following)
                if following.isLagging {
                    logger.warning("the follower's copy is stale", metadata: ["path": "\(path)", "following": "\(following)"])
                }
            }
            metrics.healthCheck(succeeded: true, ContinuousClock.now - started)
            metrics.readers.record(pool.readerConnectionCount)
            return report
        } catch {
            metrics.healthCheck(succeeded: false, ContinuousClock.now - started)
            logger.error("health check failed", metadata: ["path": "\(path)", "error": "\(error)"])
            throw error
        }
    }

    /// Writes a verified, encrypted backup of the database to `destination`, from a reader (writes go on).
    ///
    /// - Parameters:
    ///   - destination: The backup file (replaced atomically when it exists).
    ///   - key: The backup's key; `nil` uses the database's current key.
    public func backup(toPath destination: String, key: EncryptionKey? = nil) async throws {
        let started = ContinuousClock.now
        do {
            let encryption = Encryption.key(key ?? keyRotation.currentKey, settings: configuration.pool.settings)
            try await pool.read { db in
                // All pages in one step: a partial step restarts whenever the writer commits.
                try db.backup(toPath: destination, encryption: encryption, pagesPerStep: 1 << 30)
            }
            metrics.backup(succeeded: true, ContinuousClock.now - started)
        } catch {
            metrics.backup(succeeded: false, ContinuousClock.now - started)
            throw error
        }
    }
}
#endif
