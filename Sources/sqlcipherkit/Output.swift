import Foundation
import SQLCipherKit
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

    /// Tests set it to see progress in captured output, as a terminal would.
    @TaskLocal static var treatsCaptureAsTerminal = false

    /// Tests set it so that `--progress plain` prints a line at every update, not every few seconds.
    @TaskLocal static var progressPrintsEveryUpdate = false

    /// The JSON report of a command run with `--json`; `nil` for text output.
    @TaskLocal static var jsonReport: JSONReport?

    /// Whether the running command prints JSON.
    static var isJSON: Bool { jsonReport != nil }

    /// In `--json` mode, records the command's result (printed in the one JSON object at the end); otherwise does
    /// nothing.
    static func setJSONResult(_ value: some Encodable & Sendable) {
        jsonReport?.setResult(value)
    }

    /// Writes a result line to standard output.
    static func result(_ text: String) {
        write(text + "\n", toStandardError: false)
    }

    /// Writes a message line to standard error.
    static func message(_ text: String) {
        write(text + "\n", toStandardError: true)
    }

    /// `status`, unless the results could not be written to standard output: then 1 and a message, since a
    /// script reading them got nothing (or half) and exit 0 would say all is well.
    static func finalStatus(_ status: ExitStatus) -> ExitStatus {
        guard let failure = standardOutputFailure.withLock({ $0 }) else { return status }
        message("error: the results could not be written to standard output (\(failure)); they are lost")
        return status == .success ? .failure : status
    }

    /// Whether standard error is a terminal (progress bars and prompts are shown only then).
    static var isStandardErrorTerminal: Bool {
        if capture != nil { return treatsCaptureAsTerminal }
        return isatty(STDERR_FILENO) == 1
    }

    /// Whether progress is drawn: on a terminal, and never in `--json` mode.
    static var showsProgress: Bool {
        isStandardErrorTerminal && !isJSON
    }

    static func write(_ text: String, toStandardError: Bool) {
        write(text, toStandardError: toStandardError, capture: capture)
    }

    /// For threads that do not inherit the task-local ``capture`` (the progress ticker).
    static func write(_ text: String, toStandardError: Bool, capture: OutputCapture?) {
        if let capture {
            capture.append(text, toStandardError: toStandardError)
            return
        }
        if let failure = write(text, to: toStandardError ? STDERR_FILENO : STDOUT_FILENO), !toStandardError {
            standardOutputFailure.withLock { $0 = $0 ?? failure }
        }
    }

    /// Why a result could not be written to standard output (`/dev/full`, a closed pipe with SIGPIPE ignored), or
    /// `nil`: the command then ends with status 1, never 0 with its answer lost.
    static let standardOutputFailure = Locked<String?>(nil)

    /// Writes to a descriptor, retrying partial writes (also the shell's prompts and line editing, on the terminal).
    /// Returns why it could not write everything, or `nil`.
    @discardableResult
    static func write(_ text: String, to descriptor: CInt) -> String? {
        var text = text
        return text.withUTF8 { bytes -> String? in
            var offset = 0
            while offset < bytes.count {
                let written = systemWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written < 0 { return String(cString: strerror(errno)) }
                if written == 0 { return "nothing was written" }
                offset += written
            }
            return nil
        }
    }
}

/// What an in-process run wrote.
final class OutputCapture: Sendable {
    private let streams = Locked<(standardOutput: String, standardError: String)>(("", ""))

    func append(_ text: String, toStandardError: Bool) {
        streams.withLock { streams in
            if toStandardError { streams.standardError += text } else { streams.standardOutput += text }
        }
    }

    var standardOutput: String { streams.withLock { $0.standardOutput } }
    var standardError: String { streams.withLock { $0.standardError } }
}

/// `write(2)`, reachable from types that have a `write` method of their own.
func systemWrite(_ descriptor: CInt, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(descriptor, bytes, count)
    #else
    Darwin.write(descriptor, bytes, count)
    #endif
}

/// `read(2)`, reachable from types that have a `read` method of their own.
func systemRead(_ descriptor: CInt, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.read(descriptor, bytes, count)
    #else
    Darwin.read(descriptor, bytes, count)
    #endif
}
