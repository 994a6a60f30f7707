import Logging

/// Log lines kept in memory, for a test that reads what was logged (and checks that no secret was).
///
/// Each line is the level, the message, the metadata (the logger's merged with the event's, sorted by key) and the
/// event's error, if any.
public final class LogLines: Sendable {
    private let lines = Shared<[String]>([])

    public init() {}

    /// Every line so far, in order.
    public var all: [String] { lines.withLock { $0 } }

    /// Every line so far, joined by line breaks.
    public var text: String { all.joined(separator: "\n") }

    /// A logger at level trace whose lines are kept here.
    public func logger(_ label: String = "test") -> Logger {
        var logger = Logger(label: label) { _ in Handler(lines: self) }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let lines: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let shown = all.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
            let error = event.error.map { " error=\($0)" } ?? ""
            lines.append("\(event.level) \(event.message) \(shown)\(error)")
        }
    }
}
