#if SQLKit  // trait SQLKit (Package.swift)
import CoreMetrics

/// swift-metrics instruments for ``SQLCipherSQLDatabase`` (and the Fluent driver over it).
///
/// | Name | Type | Dimensions | Meaning |
/// |---|---|---|---|
/// | `sqlcipherkit_sql_wait_seconds` | Timer | `operation` = `read`, `write`, `transaction` | from the call until a connection runs the statement (admission, reader, writer queue) |
/// | `sqlcipherkit_sql_duration_seconds` | Timer | `operation` | how long the statement ran on its connection |
/// | `sqlcipherkit_sql_failures_total` | Counter | `operation` | statements that threw |
///
/// The dimensions hold only these fixed words and the `database` label you give: never SQL text, a bound value or
/// key material.
public struct SQLCipherSQLMetrics: Sendable {
    /// What a statement ran as.
    public enum Operation: String, Sendable, CaseIterable {
        /// On a reader connection.
        case read
        /// On the writer, outside a transaction.
        case write
        /// On the writer, inside ``SQLCipherSQLDatabase/transaction(_:)``.
        case transaction
    }

    private let waits: [Operation: Timer]
    private let durations: [Operation: Timer]
    private let failures: [Operation: Counter]

    /// Instruments labelled with `database` (a name you choose, such as `"app"`; not a path or a key).
    ///
    /// - Parameters:
    ///   - database: The `database` dimension.
    ///   - factory: The metrics backend; by default the one bootstrapped with `MetricsSystem.bootstrap`.
    public init(database: String = "default", factory: any MetricsFactory = MetricsSystem.factory) {
        func dimensions(_ operation: Operation) -> [(String, String)] {
            [("database", database), ("operation", operation.rawValue)]
        }
        var waits: [Operation: Timer] = [:]
        var durations: [Operation: Timer] = [:]
        var failures: [Operation: Counter] = [:]
        for operation in Operation.allCases {
            waits[operation] = Timer(label: "sqlcipherkit_sql_wait_seconds", dimensions: dimensions(operation), factory: factory)
            durations[operation] = Timer(
                label: "sqlcipherkit_sql_duration_seconds", dimensions: dimensions(operation), factory: factory)
            failures[operation] = Counter(label: "sqlcipherkit_sql_failures_total", dimensions: dimensions(operation), factory: factory)
        }
        self.waits = waits
        self.durations = durations
        self.failures = failures
    }

    func recordWait(_ operation: Operation, _ duration: Duration) {
        waits[operation]?.recordNanoseconds(Self.nanoseconds(duration))
    }

    func recordDuration(_ operation: Operation, _ duration: Duration) {
        durations[operation]?.recordNanoseconds(Self.nanoseconds(duration))
    }

    func recordFailure(_ operation: Operation) {
        failures[operation]?.increment()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
#endif
