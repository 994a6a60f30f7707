#if Services  // trait Services (Package.swift)
import CoreMetrics

/// The swift-metrics instruments of a ``DatabaseService``. Every instrument carries one dimension, `database`, the
/// name given in ``DatabaseService/Configuration/metricsName`` (never a path or a key); outcomes carry `result` =
/// `success` or `failure`.
///
/// | Name | Type | Meaning |
/// |---|---|---|
/// | `sqlcipherkit_pool_readers` | Gauge | reader connections open (sampled at each key-file check and health check) |
/// | `sqlcipherkit_key_rotations_total` | Counter (`result`) | live key rotations (``LiveKeyRotation`` records them) |
/// | `sqlcipherkit_key_rotation_duration_seconds` | Timer | rekey + verification + key-file rename (the same) |
/// | `sqlcipherkit_backups_total` | Counter (`result`) | backups through ``DatabaseService/backup(toPath:key:)`` |
/// | `sqlcipherkit_backup_duration_seconds` | Timer | backup, verified |
/// | `sqlcipherkit_health_checks_total` | Counter (`result`) | ``DatabaseService/checkHealth()`` calls |
/// | `sqlcipherkit_health_check_duration_seconds` | Timer | a health check (includes key derivation for a passphrase) |
struct DatabaseServiceMetrics: Sendable {
    let readers: Gauge
    private let backups: [Bool: Counter]
    let backupDuration: Timer
    private let healthChecks: [Bool: Counter]
    let healthCheckDuration: Timer

    init(database: String, factory: any MetricsFactory) {
        let base = [("database", database)]
        func outcomes(_ label: String) -> [Bool: Counter] {
            [true: Counter(label: label, dimensions: base + [("result", "success")], factory: factory),
             false: Counter(label: label, dimensions: base + [("result", "failure")], factory: factory)]
        }
        readers = Gauge(label: "sqlcipherkit_pool_readers", dimensions: base, factory: factory)
        backups = outcomes("sqlcipherkit_backups_total")
        backupDuration = Timer(label: "sqlcipherkit_backup_duration_seconds", dimensions: base, factory: factory)
        healthChecks = outcomes("sqlcipherkit_health_checks_total")
        healthCheckDuration = Timer(
            label: "sqlcipherkit_health_check_duration_seconds", dimensions: base, factory: factory)
    }

    func backup(succeeded: Bool, _ duration: Duration) {
        backups[succeeded]?.increment()
        backupDuration.recordDuration(duration)
    }

    func healthCheck(succeeded: Bool, _ duration: Duration) {
        healthChecks[succeeded]?.increment()
        healthCheckDuration.recordDuration(duration)
    }
}
#endif
