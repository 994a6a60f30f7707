import CoreMetrics
import Foundation
import Logging
import SQLCipherKit
import ServiceLifecycle
import Synchronization

/// An encrypted ``DatabasePool`` run as a swift-service-lifecycle `Service`, with a health check, swift-metrics
/// instruments, and key rotation while the service keeps serving.
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
/// **Live key rotation.** The operator writes the new key to ``pendingKeyFile`` (`<keyFile>.next`, mode 0600, the
/// key-file format). At its next check (every ``Configuration/keyFileCheckInterval``) the service:
/// 1. reads and parses the new key (a file it cannot use is renamed `<keyFile>.next.rejected`, nothing changes);
/// 2. rekeys the pool behind its barrier: new requests wait (they are not failed), requests in flight finish,
///    readers close, the writer rekeys, verifies every page and truncates the WAL; requests resume on the new key;
/// 3. verifies with fresh connections that the new key opens the file and the old key no longer does;
/// 4. only then retires the old key: renames `<keyFile>.next` over `<keyFile>` (atomic, folder synced).
///
/// A crash between 2 and 4 leaves the file on the new key with the new key still in `<keyFile>.next`: the next
/// start finds that the key file no longer opens it, opens it with the pending key and finishes step 4.
public final class DatabaseService: Service, Sendable {
    /// How the service opens the pool and watches its key file.
    public struct Configuration: Sendable {
        /// Readers, cipher settings and open options of the pool.
        public var pool: DatabasePool.Configuration
        /// How often to look for a pending key; `nil` never rotates on its own (call ``rotateIfPending()``).
        public var keyFileCheckInterval: Duration?
        /// Appended to the key file's path to name the pending key file.
        public var pendingKeySuffix: String
        /// The `database` dimension of every metric: a name, not a path.
        public var metricsName: String
        /// Where rotations, health failures and shutdown are reported (never key material).
        public var logger: Logger
        /// The metrics backend; by default the one bootstrapped with `MetricsSystem.bootstrap`.
        public var metricsFactory: any MetricsFactory

        /// Creates a configuration.
        public init(
            pool: DatabasePool.Configuration = DatabasePool.Configuration(),
            keyFileCheckInterval: Duration? = .seconds(1),
            pendingKeySuffix: String = ".next",
            metricsName: String = "default",
            logger: Logger = Logger(label: "sqlcipherkit.service"),
            metricsFactory: any MetricsFactory = MetricsSystem.factory
        ) {
            self.metricsFactory = metricsFactory
            self.pool = pool
            self.keyFileCheckInterval = keyFileCheckInterval
            self.pendingKeySuffix = pendingKeySuffix
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

        /// A one-line summary (no key material).
        public var description: String {
            "healthy: \(path) opens with its key (\(schemaObjectCount) schema objects), \(readerConnectionCount)"
                + " readers open, SQLCipher \(engineVersion)"
        }
    }

    /// The pool; use it (or an SQLKit/Fluent driver over it) for all database work.
    public let pool: DatabasePool
    /// The database path.
    public let path: String
    /// The file holding the current key.
    public var keyFile: String { keys.keyFile }
    /// Where an operator puts a new key to have it rotated in.
    public var pendingKeyFile: String { keys.pendingKeyFile }

    private let configuration: Configuration
    private let keys: RotatingKeyFile
    private let metrics: DatabaseServiceMetrics
    private let rotationLock = Mutex(false)

    private var logger: Logger { configuration.logger }

    /// Opens (or creates) the database with the key in `keyFile`.
    ///
    /// When the key file does not open the file but a pending key does, a rotation was interrupted after the rekey:
    /// it is finished (the pending file renamed over the key file) and the pool opens with that key.
    ///
    /// - Throws: The errors of ``DatabasePool/init(path:keyProvider:configuration:)`` and of the key file.
    public init(path: String, keyFile: String, configuration: Configuration = Configuration()) throws {
        self.path = path
        self.configuration = configuration
        self.keys = RotatingKeyFile(keyFile: keyFile, pendingSuffix: configuration.pendingKeySuffix)
        self.metrics = DatabaseServiceMetrics(
            database: configuration.metricsName, factory: configuration.metricsFactory)
        let settled = RotatingKeyFile.Generation(isPending: false)
        do {
            pool = try DatabasePool(
                path: path, keyProvider: keys.provider(for: settled), configuration: configuration.pool)
        } catch DatabaseError.wrongKey where keys.hasPendingKey {
            let pending = RotatingKeyFile.Generation(isPending: true)
            pool = try DatabasePool(
                path: path, keyProvider: keys.provider(for: pending), configuration: configuration.pool)
            try keys.retire(pending)
            configuration.logger.notice("finished an interrupted key rotation: the pending key opens the database", 
                                        metadata: ["path": "\(path)"])
        }
    }

    // MARK: - Service

    /// Watches for a pending key until graceful shutdown (or cancellation), then closes the pool after the work in
    /// flight.
    public func run() async throws {
        if let interval = configuration.keyFileCheckInterval {
            try? await cancelWhenGracefulShutdown { [self] in
                while !Task.isCancelled {
                    try await Task.sleep(for: interval)
                    metrics.readers.record(pool.readerConnectionCount)
                    do {
                        _ = try await rotateIfPending()
                    } catch {
                        // Logged and counted by rotateIfPending; the service goes on with the key that works.
                    }
                }
            }
        } else {
            try? await gracefulShutdown()
        }
        logger.info("closing the database after the work in flight", metadata: ["path": "\(path)"])
        await closeOffCooperativePool { [pool] in pool.close() }
    }

    // MARK: - Live key rotation

    /// Rotates to the key in ``pendingKeyFile`` if there is one; see the type's discussion for the steps.
    ///
    /// - Returns: `true` when a key was rotated, `false` when there was no pending key (or a rotation is running).
    /// - Throws: The error that stopped the rotation; the database then still opens with the current key and the
    ///   pending file is renamed `<pending>.rejected`.
    @discardableResult
    public func rotateIfPending() async throws -> Bool {
        guard keys.hasPendingKey else { return false }
        let isMine = rotationLock.withLock { isRunning in
            defer { isRunning = true }
            return !isRunning
        }
        guard isMine else { return false }
        defer { rotationLock.withLock { $0 = false } }

        let started = ContinuousClock.now
        do {
            try await offCooperativePool { [self] in try rotate() }
            metrics.rotation(succeeded: true, ContinuousClock.now - started)
            logger.notice("rotated the database key live", metadata: ["path": "\(path)", "keyFile": "\(keyFile)"])
            return true
        } catch {
            metrics.rotation(succeeded: false, ContinuousClock.now - started)
            logger.error("live key rotation failed; the database keeps its current key", metadata: [
                "path": "\(path)", "pendingKeyFile": "\(pendingKeyFile)", "error": "\(error)",
            ])
            throw error
        }
    }

    private func rotate() throws {
        let oldKey: EncryptionKey
        let newKey: EncryptionKey
        do {
            oldKey = try keys.currentKey()
            newKey = try keys.pendingKey()
            guard !oldKey.isSameKey(as: newKey) else {
                throw DatabaseError(
                    .invalidKey,
                    "the pending key is the same as the current key")
            }
        } catch {
            keys.reject()
            throw error
        }
        let generation = RotatingKeyFile.Generation(isPending: true)
        do {
            // Behind the pool's barrier: new work waits, work in flight finishes, then rekey + verify + checkpoint.
            try pool.rekey(to: keys.provider(for: generation))
        } catch {
            keys.reject()
            throw error
        }
        // The file is on the new key now; the pending file stays until the new key is proven on fresh connections.
        try verifyOpens(with: newKey)
        guard (try? verifyOpens(with: oldKey)) == nil else {
            throw DatabaseError(
                .verificationFailed,
                "after the rekey the old key still opens \(path); the pending key file was kept")
        }
        try keys.retire(generation)
    }

    private func verifyOpens(with key: EncryptionKey) throws {
        let connection = try Connection(
            path: path, encryption: .key(key, settings: configuration.pool.settings),
            options: OpenOptions(mode: .readOnly))
        defer { connection.close() }
        _ = try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
    }

    // MARK: - Health and backups

    /// Proves the key in ``keyFile`` still opens the database: opens a fresh read-only connection with it and
    /// reads the schema (page 1 decrypted and authenticated), then runs a read through the pool.
    ///
    /// - Throws: ``DatabaseError/wrongKey`` when the key no longer opens the file; the pool's errors
    ///   (``DatabaseError/connectionClosed`` after shutdown).
    public func checkHealth() async throws -> HealthReport {
        let started = ContinuousClock.now
        do {
            let report = try await offCooperativePool { [self] () throws -> HealthReport in
                let connection = try Connection(
                    path: path, encryption: .key(try keys.currentKey(), settings: configuration.pool.settings),
                    options: OpenOptions(mode: .readOnly))
                defer { connection.close() }
                let count = try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) ?? 0
                return HealthReport(
                    path: path, schemaObjectCount: count, readerConnectionCount: pool.readerConnectionCount,
                    engineVersion: SQLCipher.version)
            }
            _ = try await pool.read { db in try db.scalar("SELECT 1", as: Int.self) }
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
            let encryption = Encryption.key(try key ?? keys.currentKey(), settings: configuration.pool.settings)
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
