#if LiveRotation  // trait LiveRotation (Package.swift)
import CoreMetrics

/// The swift-metrics instruments of a ``LiveKeyRotation`` (their table is in Docs/Services.md, "Metrics").
struct KeyRotationMetrics: Sendable {
    private let rotations: [Bool: Counter]
    let rotationDuration: CoreMetrics.Timer

    init(database: String, factory: any MetricsFactory) {
        let base = [("database", database)]
        let label = "sqlcipherkit_key_rotations_total"
        rotations = [
            true: Counter(label: label, dimensions: base + [("result", "success")], factory: factory),
            false: Counter(label: label, dimensions: base + [("result", "failure")], factory: factory),
        ]
        rotationDuration = Timer(
            label: "sqlcipherkit_key_rotation_duration_seconds", dimensions: base, factory: factory)
    }

    func rotation(succeeded: Bool, _ duration: Duration) {
        rotations[succeeded]?.increment()
        rotationDuration.recordDuration(duration)
    }
}

extension Timer {
    /// Records `duration` in nanoseconds (what swift-metrics' `Timer` takes).
    package func recordDuration(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
#endif
