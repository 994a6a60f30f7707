#if Replication  // trait Replication (Package.swift)
import Foundation
import CoreMetrics

/// The swift-metrics instruments of a ``Replicator``. Every instrument carries one dimension, `database` (the name
/// in ``ReplicatorConfiguration/metricsName``, never a path or a key).
///
/// | Name | Type | Meaning |
/// |---|---|---|
/// | `sqlcipherkit_replication_lag_seconds` | Gauge | how long commits have waited to be shipped (0 when caught up) |
/// | `sqlcipherkit_replication_lag_frames` | Gauge | committed log frames not yet shipped (after a failed sync) |
/// | `sqlcipherkit_replication_shipped_bytes_total` | Counter | bytes of segments and snapshots stored |
/// | `sqlcipherkit_replication_failures_total` | Counter | syncs that failed |
/// | `sqlcipherkit_replication_last_success_timestamp_seconds` | Gauge | when a sync last succeeded (Unix time) |
/// | `sqlcipherkit_replication_generations_total` | Counter | generations started, with a second dimension `reason` (``GenerationReason``) |
/// | `sqlcipherkit_replication_gaps_total` | Counter | gaps recorded after an outage |
struct ReplicationMetrics: Sendable {
    let lagSeconds: Gauge
    let lagFrames: Gauge
    let shippedBytes: Counter
    let failures: Counter
    let lastSuccess: Gauge
    let gaps: Counter
    private let database: String
    private let factory: any MetricsFactory

    init(database: String, factory: any MetricsFactory) {
        self.database = database
        self.factory = factory
        let dimensions = [("database", database)]
        lagSeconds = Gauge(label: "sqlcipherkit_replication_lag_seconds", dimensions: dimensions, factory: factory)
        lagFrames = Gauge(label: "sqlcipherkit_replication_lag_frames", dimensions: dimensions, factory: factory)
        shippedBytes = Counter(
            label: "sqlcipherkit_replication_shipped_bytes_total", dimensions: dimensions, factory: factory)
        failures = Counter(label: "sqlcipherkit_replication_failures_total", dimensions: dimensions, factory: factory)
        lastSuccess = Gauge(
            label: "sqlcipherkit_replication_last_success_timestamp_seconds", dimensions: dimensions, factory: factory)
        gaps = Counter(label: "sqlcipherkit_replication_gaps_total", dimensions: dimensions, factory: factory)
    }

    /// Counts a generation started, by why.
    func generationStarted(reason: GenerationReason) {
        Counter(
            label: "sqlcipherkit_replication_generations_total",
            dimensions: [("database", database), ("reason", reason.rawValue)], factory: factory
        ).increment()
    }

    func record(_ status: ReplicationStatus) {
        lagSeconds.record(status.lag.seconds)
        lagFrames.record(status.unshippedFrameCount)
        if let last = status.lastSuccessfulSync { lastSuccess.record(last.timeIntervalSince1970) }
    }
}
#endif
