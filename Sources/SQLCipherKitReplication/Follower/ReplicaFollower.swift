#if Replication  // trait Replication (Package.swift)
import CoreMetrics
import Foundation
import Logging
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A local copy of a replica's database that follows the primary: restored once, then kept current by applying each
/// new log segment as it appears in the store, and each new generation (a rotation, a gap, a restarted replicator,
/// a promotion) by its snapshot. It never writes to the store.
///
/// Readers of the copy (a ``DatabasePool`` of this process, `sqlcipherkit exec` in another) see one shipped commit
/// at a time: a segment's frames are appended to the copy's write-ahead log and published together, the way SQLite's
/// own writer publishes a transaction, so a read transaction sees the state before the segment or after it, never a
/// mix. Nothing else may write to the copy: the next segment then stops with ``DatabaseError/Kind/invalidState``.
///
/// Every object is authenticated with the key (its MAC) and checked against its SHA-256, every frame against the
/// log's checksums. A damaged or unauthentic object stops the applying at the last good point: the copy keeps
/// serving that state, and ``status`` says what went wrong and how long ago the copy was last known current.
///
/// ```swift
/// let key = VerificationKey(name: "notes.key", key: try EncryptionKey(contentsOf: "/etc/notes/notes.key"))
/// let follower = ReplicaFollower(
///     replica: Replica(store: try replicaStore(for: "s3://backups/notes")), path: "/srv/notes-follower.db", key: key)
/// try await follower.start()
/// let reads = try DatabasePool(path: "/srv/notes-follower.db", key: key.key)
/// let following = Task { try await follower.run() }
/// // … serve reads from `reads`; when the primary is gone:
/// following.cancel()
/// let replicator = try await follower.promote(configuration: ReplicatorConfiguration())
/// // the copy is the primary now: open it for writing, and run `replicator`
/// _ = replicator
/// ```
public actor ReplicaFollower {
    /// How a follower polls and reports.
    public struct Configuration: Sendable {
        /// How long it waits between two looks at the store.
        package var pollInterval: Duration
        /// Where it reports (never key material).
        package var logger: Logger
        /// The `database` dimension of its metrics.
        package var metricsName: String
        /// The metrics backend (a service passes its own).
        package var metricsFactory: any MetricsFactory
        var now: @Sendable () -> Date
        var wait: @Sendable (Duration) async throws -> Void

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - pollInterval: How long to wait between two looks at the store.
        ///   - logger: Where the follower reports.
        ///   - metricsName: The `database` dimension of its metrics.
        public init(
            pollInterval: Duration = .seconds(1), logger: Logger = Logger(label: "sqlcipherkit.follower"),
            metricsName: String = "default"
        ) {
            self.pollInterval = pollInterval
            self.logger = logger
            self.metricsName = metricsName
            metricsFactory = MetricsSystem.factory
            now = { Date() }
            wait = { try await Task.sleep(for: $0) }
        }
    }

    /// Where a follower stands.
    public struct Status: Sendable, Hashable {
        /// The restore point the copy holds: the primary's state at its last shipped commit applied.
        public var point: RestorePoint?
        /// When the store was last read completely and everything it held was applied (by this host's clock): the
        /// copy was current then. `nil` before the first such look. Not moved while a new generation is being
        /// started (the primary's writes since are in it, not restorable yet): the copy's staleness grows until its
        /// first snapshot is complete and the follower follows it.
        public var lastCaughtUp: Date?
        /// Restore points the store holds past ``point`` that are not applied (after a failure).
        package var pointsBehind: Int
        /// The last failure's message, until a look at the store succeeds again.
        public var lastError: String?
        /// The newest generation, when the last look at the store found the primary still starting it (its first
        /// `snapshot.json` not in the store yet): not an error; the copy holds the end of the generation before it
        /// meanwhile. `nil` after a look that failed.
        package var startingGeneration: String?
        /// Whether the follower was promoted (it follows no more).
        public var isPromoted: Bool

        init() {
            point = nil
            lastCaughtUp = nil
            pointsBehind = 0
            lastError = nil
            startingGeneration = nil
            isPromoted = false
        }

        /// How stale the copy may be at `now`: zero right after it caught up, then the time since. A copy that
        /// never caught up is as stale as the time since its restore point.
        public func staleness(at now: Date = Date()) -> Duration {
            guard let since = lastCaughtUp ?? point?.time else { return .seconds(Int64.max / 2) }
            return .milliseconds(max(0, Int64(now.timeIntervalSince(since) * 1000)))
        }
    }

    /// The replica followed.
    package nonisolated let replica: Replica
    /// The copy's path.
    package nonisolated let path: String
    let key: VerificationKey
    let configuration: Configuration
    let logger: Logger
    let metrics: FollowerMetrics
    var statusValue = Status()
    var state: FollowerState?
    var copy: FollowerCopy?
    var isStopped = false
    /// The descriptor holding the copy's follower lock (`path` + `.follower-lock`, `flock`): one follower per copy.
    var lockDescriptor: CInt = -1
    private var tail: Task<Void, Never>?

    /// A follower of `replica` whose copy is at `path`.
    ///
    /// - Parameters:
    ///   - replica: The replica the primary writes.
    ///   - path: The copy. ``start()`` restores it when neither it nor its state file (`path` + `.follower`)
    ///     exists, and goes on from its state file when both do.
    ///   - key: The database's key: it authenticates the replica's objects and opens the copy.
    ///   - configuration: How it polls and reports.
    public init(replica: Replica, path: String, key: VerificationKey, configuration: Configuration = Configuration()) {
        self.replica = replica
        self.path = path
        self.key = key
        self.configuration = configuration
        var logger = configuration.logger
        logger[metadataKey: "replica"] = "\(replica.store.description)"
        self.logger = logger
        metrics = FollowerMetrics(database: configuration.metricsName, factory: configuration.metricsFactory)
    }

    /// Where it stands.
    public var status: Status { statusValue }

    /// The state file beside the copy: which generation and point it holds, and where in the primary's log.
    package nonisolated var statePath: String { path + ".follower" }

    // MARK: - Start, follow, stop

    /// Makes the copy ready to read: restores the replica's newest point into `path`, or opens the copy a follower
    /// left there (its state file says where it stands), then applies what is new.
    ///
    /// - Returns: Where it stands.
    /// - Throws: ``ReplicationError``: `destinationExists` when `path` exists without a follower's state file (a
    ///   file this follower did not restore is never written to); what ``Replica/restore(to:at:options:)`` throws.
    ///   ``DatabaseError``: `wrongKey` when the key does not open the copy; `busy` when another follower (of any
    ///   process) has the copy.
    @discardableResult
    public func start() async throws -> Status {
        try await serialized { try await self.startNow() }
    }

    /// Looks at the store once and applies everything new, in order.
    ///
    /// - Returns: Where it stands.
    /// - Throws: What stopped the applying: ``ReplicationError`` (`damaged`, `notAuthentic` naming the object and the
    ///   last good point; the store's errors), ``DatabaseError`` (`invalidState` when another connection wrote to the
    ///   copy or the replica now holds another database). The copy keeps the last state applied.
    @discardableResult
    package func catchUp() async throws -> Status {
        try await serialized { try await self.catchUpNow() }
    }

    /// Looks at the store every poll interval (the configuration's) and applies what is new, until cancelled.
    ///
    /// A failure of the store (an outage) or of an object (damage) is recorded in ``status`` and logged, and the
    /// follower looks again at the next interval: the copy serves its last state meanwhile, and ``Status/staleness(at:)``
    /// says how stale it may be.
    ///
    /// - Throws: ``DatabaseError`` when the copy itself cannot go on (another connection wrote to it, the replica
    ///   holds another database now, the key no longer opens it); `CancellationError` never (a cancelled run returns).
    public func run() async throws {
        while !Task.isCancelled && !isStopped && !statusValue.isPromoted {
            do {
                try await catchUp()
            } catch let error as DatabaseError where Self.stopsFollowing(error) {
                throw error
            } catch is CancellationError {
                return
            } catch {
                // Recorded by catchUp; look again later.
            }
            do {
                try await configuration.wait(configuration.pollInterval)
            } catch {
                return
            }
        }
    }

    /// Whether an error means the copy cannot go on following (it was written to, the replica holds another
    /// database, the key no longer opens it), rather than a condition that passes (the store, a busy lock).
    package static func stopsFollowing(_ error: DatabaseError) -> Bool {
        [.invalidState, .wrongKey, .notADatabase, .invalidKey, .notEncrypted, .missingKey].contains(error.kind)
    }

    /// Closes the copy (the state file stays: a follower started later goes on from it).
    public func stop() async {
        _ = try? await serialized { await self.closeCopy() }
        isStopped = true
    }

    // MARK: - Promotion

    /// Makes the copy the primary: takes the replica's lease whoever holds it (an old primary that comes back stops
    /// at its next sync, naming the new holder), applies everything the old primary shipped until then, closes the
    /// copy, and returns a started ``Replicator`` for it, whose first generation follows the last point applied
    /// (reason ``GenerationReason/promoted``).
    ///
    /// Open the copy for writing after this returns (the follower no longer touches it) and run the replicator.
    /// Commits the old primary made but had not shipped are lost, as with any asynchronous replica; a segment the old
    /// primary stores after the lease changed hands is not part of the replica's history (a restore never uses it).
    ///
    /// - Parameter configuration: The new primary's replicator settings.
    /// - Returns: The replicator, started (its lease taken, its first generation begun).
    /// - Throws: What a look at the store and ``Replicator`` throw; the follower stays as it was when it cannot promote.
    public func promote(
        pool: DatabasePool, configuration replicatorConfiguration: ReplicatorConfiguration = ReplicatorConfiguration()
    ) async throws -> Replicator {
        try await promote { Replicator(pool: pool, store: self.replica.store, configuration: replicatorConfiguration) }
    }

    /// ``promote(pool:configuration:)`` for a copy another process writes next (the command-line sidecar), or whose
    /// writes the caller unlocks once the follower has let go of the copy (a service in follower mode):
    /// `makeReplicator` runs after the copy is closed and before the replicator starts; when it throws, the follower
    /// takes the copy back and nothing is promoted.
    package func promote(makeReplicator: @escaping @Sendable () throws -> Replicator) async throws -> Replicator {
        try await serialized { try await self.promoteNow(makeReplicator: makeReplicator) }
    }

    // MARK: - Serialising

    /// Runs `body` after every call before it has ended (a poll, a promotion, a stop never overlap).
    private func serialized<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tail
        let task = Task {
            _ = await previous?.value
            return try await body()
        }
        tail = Task { _ = try? await task.value }
        return try await task.value
    }
}

/// The copy's connection and log appender: used only by the follower's serialised calls, one at a time, off the
/// cooperative pool.
final class FollowerCopy: @unchecked Sendable {
    let connection: Connection
    let appender: WriteAheadLogAppender

    init(path: String, key: VerificationKey, state: FollowerState) throws {
        var settings = key.settings
        if (state.plaintextHeaderSize ?? 0) > 0 {
            if settings.plaintextHeaderSize == nil { settings.plaintextHeaderSize = state.plaintextHeaderSize }
            if settings.salt == nil { settings.salt = state.salt.flatMap(Hex.bytes) }
        }
        connection = try Connection(
            path: path, encryption: .key(key.key, settings: settings), options: OpenOptions(mode: .readWrite))
        do {
            appender = try WriteAheadLogAppender(connection: connection)
        } catch {
            connection.close()
            throw error
        }
    }

    func close() {
        connection.close()
    }
}

/// What the state file holds: which point of which generation the copy is at, and where that is in the primary's
/// log (to check that the next segment follows on). Nothing secret: generation names, salts and checksums are
/// plaintext in the store too.
struct FollowerState: Codable, Sendable, Equatable {
    var format = 1
    /// A restore into the copy began and may not have ended: the copy is discarded and restored again.
    var isRestoring: Bool
    var generation: String
    var sequence: Int
    var index: Int
    var position: WALPosition?
    var pageSize: Int
    var plaintextHeaderSize: Int?
    var salt: String?
    var replicaIdentity: String?

    static func read(_ path: String) throws -> FollowerState? {
        try SideFile.read(FollowerState.self, at: path, expected: "a follower's state file", left: "nothing was changed")
    }

    /// Writes the state under a temporary name, flushes it, renames it into place and flushes the folder.
    func write(_ path: String) throws {
        try SideFile.write(self, to: path)
    }
}

/// The swift-metrics instruments of a ``ReplicaFollower``, each with the dimension `database`.
///
/// | Name | Type | Meaning |
/// |---|---|---|
/// | `sqlcipherkit_follower_staleness_seconds` | Gauge | time since the copy was last known current (0 right after) |
/// | `sqlcipherkit_follower_points_behind` | Gauge | restore points in the store not yet applied |
/// | `sqlcipherkit_follower_applied_bytes_total` | Counter | bytes of segments and snapshots applied |
/// | `sqlcipherkit_follower_failures_total` | Counter | looks at the store that failed |
/// | `sqlcipherkit_follower_generations_total` | Counter | generations followed (restored from their snapshot) |
struct FollowerMetrics: Sendable {
    let staleness: Gauge
    let pointsBehind: Gauge
    let appliedBytes: Counter
    let failures: Counter
    let generations: Counter

    init(database: String, factory: any MetricsFactory) {
        let dimensions = [("database", database)]
        staleness = Gauge(label: "sqlcipherkit_follower_staleness_seconds", dimensions: dimensions, factory: factory)
        pointsBehind = Gauge(label: "sqlcipherkit_follower_points_behind", dimensions: dimensions, factory: factory)
        appliedBytes = Counter(
            label: "sqlcipherkit_follower_applied_bytes_total", dimensions: dimensions, factory: factory)
        failures = Counter(label: "sqlcipherkit_follower_failures_total", dimensions: dimensions, factory: factory)
        generations = Counter(
            label: "sqlcipherkit_follower_generations_total", dimensions: dimensions, factory: factory)
    }
}
#endif
