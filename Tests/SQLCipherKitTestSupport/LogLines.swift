import Logging

/// Log lines kept in memory, for a test that reads what was logged (and checks that no secret was).
///
/// Each line is the level, the message, the metadata (the logger's merged with the event's, sorted by key) and the
/// event's error, if any. ``onMessage``, when set, runs on the thread that logs, with the message alone: a
/// deterministic hook into the code under test (do something exactly when it says it reached a point).
public final class LogLines: Sendable {
    private struct State {
        var lines: [String] = []
        var messages: [String] = []
        var onMessage: (@Sendable (String) -> Void)?
    }

    private let state = Shared(State())

    public init(onMessage: (@Sendable (String) -> Void)? = nil) {
        state.withLock { $0.onMessage = onMessage }
    }

    /// Every line so far, in order.
    public var all: [String] { state.withLock { $0.lines } }

    /// Every message so far (without level and metadata), in order.
    public var messages: [String] { state.withLock { $0.messages } }

    /// Runs on the logging thread for each message from now on; `nil` for none.
    public var onMessage: (@Sendable (String) -> Void)? {
        get { state.withLock { $0.onMessage } }
        set { state.withLock { $0.onMessage = newValue } }
    }

    /// Every line so far, joined by line breaks.
    public var text: String { all.joined(separator: "\n") }

    /// A logger at level trace whose lines are kept here.
    public func logger(_ label: String = "test") -> Logger {
        var logger = Logger(label: label) { _ in Handler(lines: self) }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ line: String, message: String) {
        let hook = state.withLock { state in
            state.lines.append(line)
            state.messages.append(message)
            return state.onMessage
        }
        hook?(message)
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
            lines.append("\(event.level) \(event.message) \(shown)\(error)", message: "\(event.message)")
        }
    }
}
