import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the commands write: results to standard output, messages and progress to standard error. Tests running a
/// command in-process capture both through ``capture``.
enum Output {
    /// Captured output of in-process runs (tests); `nil` writes to the real streams.
    @TaskLocal static var capture: OutputCapture?

    /// Writes a result line to standard output.
    static func result(_ text: String) {
        write(text + "\n", toStandardError: false)
    }

    /// Writes a message line to standard error.
    static func message(_ text: String) {
        write(text + "\n", toStandardError: true)
    }

    /// Writes a value as pretty-printed JSON (sorted keys) to standard output.
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        result(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// Whether standard error is a terminal (progress bars and prompts are shown only then).
    static var isStandardErrorTerminal: Bool {
        capture == nil && isatty(STDERR_FILENO) == 1
    }

    static func write(_ text: String, toStandardError: Bool) {
        if let capture {
            capture.append(text, toStandardError: toStandardError)
            return
        }
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = systemWrite(
                    toStandardError ? STDERR_FILENO : STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }
}

/// What an in-process run wrote.
final class OutputCapture: Sendable {
    private let streams = Mutex<(standardOutput: String, standardError: String)>(("", ""))

    func append(_ text: String, toStandardError: Bool) {
        streams.withLock { streams in
            if toStandardError { streams.standardError += text } else { streams.standardOutput += text }
        }
    }

    var standardOutput: String { streams.withLock { $0.standardOutput } }
    var standardError: String { streams.withLock { $0.standardError } }
}

/// A one-line progress bar on standard error, drawn only when standard error is a terminal.
final class ProgressBar {
    private let label: String
    private let isEnabled: Bool
    private var lastDrawn: ContinuousClock.Instant?
    private var hasDrawn = false

    init(label: String) {
        self.label = label
        self.isEnabled = Output.isStandardErrorTerminal
    }

    /// Redraws the bar (at most every 50 ms, and always at completion).
    func update(done: Int, total: Int) {
        guard isEnabled else { return }
        let now = ContinuousClock.now
        let isComplete = total > 0 && done >= total
        if let lastDrawn, now - lastDrawn < .milliseconds(50), !isComplete { return }
        lastDrawn = now
        hasDrawn = true
        let width = 30
        let fraction = total == 0 ? 1 : min(1, Double(done) / Double(total))
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        Output.write(
            "\r\(label) [\(bar)] \(done)/\(total) pages (\(Int(fraction * 100))%)", toStandardError: true)
    }

    /// Ends the line the bar was drawn on.
    func finish() {
        guard isEnabled, hasDrawn else { return }
        hasDrawn = false
        Output.write("\n", toStandardError: true)
    }

    /// An indeterminate status line for work without page counts (an export).
    func announce(_ text: String) {
        guard isEnabled else { return }
        Output.write("\(label): \(text)\n", toStandardError: true)
    }
}

/// `write(2)`, reachable from types that have a `write` method of their own.
func systemWrite(_ descriptor: CInt, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(descriptor, bytes, count)
    #else
    Darwin.write(descriptor, bytes, count)
    #endif
}
