#if Replication  // trait Replication (Package.swift)
import CoreMetrics
import Foundation
import Logging

/// How a ``Replicator`` ships, snapshots, keeps its replica and rides out an outage of its store.
///
/// These are the knobs a service sets. How the replicator checkpoints, cuts log segments and snapshot parts, backs
/// off and renews its lease keeps the defaults Docs/Replication.md gives (the command-line tool and the tests set some
/// of them).
public struct ReplicatorConfiguration: Sendable {
    /// How often ``Replicator/run()`` ships new commits (Litestream's default too). A commit is in the replica at
    /// most about this long, plus the upload, after it was made.
    public var syncInterval: Duration
    /// The replicator checkpoints once the log holds this many shipped frames (SQLite's own automatic checkpoint
    /// threshold, which the replicator replaces).
    package var checkpointFrameCount: Int
    /// …or when it holds any and the last checkpoint is this old.
    package var checkpointInterval: Duration
    /// A new snapshot is taken when the last one is this old (a restore applies every segment since the snapshot
    /// it starts from); `nil` takes one per generation only.
    public var snapshotInterval: Duration?
    /// What the replica keeps; applied after each snapshot. `nil` keeps everything.
    public var retention: ReplicaRetention?
    /// While the store fails, the log grows (nothing is checkpointed before it is shipped). Past this size the
    /// replicator gives up continuity: it checkpoints, records a gap, and starts a new generation once the store is
    /// back. The database keeps serving throughout.
    public var maximumWALByteCount: Int64
    /// Log segments are cut at the first commit past this size (a single larger transaction makes one larger
    /// segment).
    package var segmentByteCount: Int64
    /// Snapshots are stored in parts of this size (memory in use while one is uploaded or restored).
    package var snapshotPartByteCount: Int
    /// The longest wait between retries while the store fails (the wait doubles from ``syncInterval``).
    package var maximumRetryInterval: Duration
    /// How long ``Replicator/run()`` may spend shipping what is left once it is cancelled. Past it, the last ship is
    /// cancelled and given as long again to end; one that still has not (a store call that ignores cancellation)
    /// is abandoned, and the replica's lease is left to expire as a killed process's would. So a stop takes at
    /// most twice this.
    public var shutdownTimeout: Duration
    /// As a sidecar: how long the replicator waits for the other process's writer when it takes the write lock.
    package var busyTimeout: Duration
    /// How long the replica's lease lasts without being renewed. A replicator renews it every third of this while it
    /// runs; one that finds the lease of a replicator on another machine waits this long for it to be renewed before
    /// it takes it over (a holder on the same machine is known alive or dead at once).
    package var leaseDuration: Duration
    /// Where shipping, gaps, new generations and failures are reported (never key material).
    public var logger: Logger
    /// The `database` dimension of every metric: a name, not a path.
    public var metricsName: String
    /// The metrics backend; by default the one bootstrapped with `MetricsSystem.bootstrap`.
    package var metricsFactory: any MetricsFactory
    /// The clock for the times recorded in the replica and for ages (tests give their own).
    package var now: @Sendable () -> Date
    /// How ``Replicator/run()`` waits between syncs and before a retry, and how a replicator waits for another's
    /// lease to be renewed, given the interval it wants (by default `Task.sleep(for:)`). Tests give their own to
    /// see the back-off and to drive the loop without waiting for time.
    package var wait: @Sendable (Duration) async throws -> Void

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - syncInterval: How often new commits are shipped.
    ///   - snapshotInterval: How old the last snapshot may get before a new one is taken; `nil`: one per generation.
    ///   - retention: What the replica keeps; `nil` keeps everything.
    ///   - maximumWALByteCount: How large the log may grow while the store fails before continuity is given up.
    ///   - shutdownTimeout: How long shipping what is left may take when the replicator stops.
    ///   - logger: Where the replicator reports (never key material).
    ///   - metricsName: The `database` dimension of its metrics.
    public init(
        syncInterval: Duration = .seconds(1),
        snapshotInterval: Duration? = .seconds(24 * 3600),
        retention: ReplicaRetention? = ReplicaRetention(),
        maximumWALByteCount: Int64 = 256 << 20,
        shutdownTimeout: Duration = .seconds(30),
        logger: Logger = Logger(label: "sqlcipherkit.replication"),
        metricsName: String = "default"
    ) {
        self.syncInterval = syncInterval
        checkpointFrameCount = 1000
        checkpointInterval = .seconds(60)
        self.snapshotInterval = snapshotInterval
        self.retention = retention
        self.maximumWALByteCount = maximumWALByteCount
        segmentByteCount = 16 << 20
        snapshotPartByteCount = 16 << 20
        maximumRetryInterval = .seconds(60)
        self.shutdownTimeout = shutdownTimeout
        busyTimeout = .seconds(5)
        leaseDuration = .seconds(15)
        self.logger = logger
        self.metricsName = metricsName
        metricsFactory = MetricsSystem.factory
        now = { Date() }
        wait = { try await Task.sleep(for: $0) }
    }
}

/// Where a ``Replicator`` stands.
public struct ReplicationStatus: Sendable, Hashable {
    /// The generation being written; `nil` before the first one, and during a gap.
    public var generation: String?
    /// The last restore point shipped in it.
    public var lastIndex: Int?
    /// When a sync last succeeded.
    public var lastSuccessfulSync: Date?
    /// How long commits have been waiting to be shipped: 0 when the last sync found nothing left.
    public var lag: Duration
    /// Committed frames not yet in the replica (counted when a sync failed or stopped early).
    package var unshippedFrameCount: Int
    /// Syncs failed in a row.
    package var consecutiveFailureCount: Int
    /// The last failure's message.
    public var lastError: String?
    /// Gaps recorded since the replicator started (the log outgrew ``ReplicatorConfiguration/maximumWALByteCount``
    /// while the store failed).
    public var gapCount: Int
    /// Bytes shipped since the replicator started.
    package var shippedByteCount: Int64

    /// Nothing shipped yet.
    package init() {
        generation = nil
        lastIndex = nil
        lastSuccessfulSync = nil
        lag = .zero
        unshippedFrameCount = 0
        consecutiveFailureCount = 0
        lastError = nil
        gapCount = 0
        shippedByteCount = 0
    }

    /// Whether commits have waited longer than `threshold` (for a health check).
    package func isLagging(over threshold: Duration) -> Bool {
        lag > threshold
    }
}
#endif
