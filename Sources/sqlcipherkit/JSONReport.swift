import ArgumentParser
import Foundation
import SQLCipherKit

/// The result a command run with `--json` records; the root command prints it, success or failure, in exactly one
/// ``JSONEnvelope`` on standard output.
final class JSONReport: Sendable {
    let command: String
    private let result = Locked<(any Encodable & Sendable)?>(nil)

    init(command: String) {
        self.command = command
    }

    func setResult(_ value: some Encodable & Sendable) {
        result.withLock { $0 = value }
    }

    var recordedResult: (any Encodable & Sendable)? {
        result.withLock { $0 }
    }
}

/// The one JSON object every subcommand prints with `--json`, on success and on failure alike (Docs/CLI.md):
///
/// ```json
/// {"ok": true, "exitStatus": 0, "command": "verify", "error": null, "engine": {…}, "result": {…}}
/// ```
///
/// Every key is always present; `error` and `result` are `null` when there is none.
struct JSONEnvelope: Encodable {
    let status: ExitStatus
    let ok: Bool
    let exitStatus: Int32
    let command: String
    let error: ErrorReport?
    let engine: EngineReport
    let result: (any Encodable)?

    init(command: String, status: ExitStatus, error: (any Error)?, result: (any Encodable)?) {
        self.status = status
        ok = status == .success
        exitStatus = status.rawValue
        self.command = command
        self.error = error.map { ErrorReport($0, status: status) }
        engine = EngineReport()
        self.result = result
    }

    private enum CodingKeys: String, CodingKey {
        case ok, exitStatus, command, error, engine, result
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ok, forKey: .ok)
        try container.encode(exitStatus, forKey: .exitStatus)
        try container.encode(command, forKey: .command)
        if let error { try container.encode(error, forKey: .error) } else { try container.encodeNil(forKey: .error) }
        try container.encode(engine, forKey: .engine)
        if let result {
            try result.encode(to: container.superEncoder(forKey: .result))
        } else {
            try container.encodeNil(forKey: .result)
        }
    }

    /// Prints the envelope on standard output (or into the test capture) and returns the exit status it states: the
    /// command's, or ``ExitStatus/failure`` when the result could not be encoded (then the object printed says
    /// that, so the exit status and the JSON never disagree).
    func print() -> ExitStatus {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            Output.result(String(decoding: try encoder.encode(self), as: UTF8.self))
            return status
        } catch {
            let failure = CommandFailure(
                "the JSON report could not be encoded (\(error)); the command itself ended with exit status"
                    + " \(status.rawValue)")
            Output.message("error: \(failure.message)")
            let fallback = JSONEnvelope(command: command, status: .failure, error: failure, result: nil)
            let text = (try? encoder.encode(fallback)).map { String(decoding: $0, as: UTF8.self) }
                ?? #"{"ok": false, "exitStatus": 1, "command": "\#(command)", "error": {"kind": "failure", "#
                + #""code": null, "message": "the JSON report could not be encoded"}, "engine": null, "result": null}"#
            Output.result(text)
            return .failure
        }
    }
}

/// An error in JSON output: a stable kind, the SQLite extended result code when the engine gave one (else `null`),
/// and the message in the CLI's words. Never key material: neither the library nor the CLI puts it in messages.
struct ErrorReport: Encodable, Sendable {
    let kind: String
    let code: Int32?
    let message: String

    init(kind: String, code: Int32?, message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    init(_ error: DatabaseError) {
        self.init(
            kind: error.kind.name, code: error.extendedResultCode.rawValue, message: ErrorWording.message(for: error))
    }

    /// A library error about one database: a file-system error for a database that is missing or empty has the
    /// kind the other subcommands give that condition (`missingFile`), found from the file, not from the message.
    init(_ error: DatabaseError, database: String) {
        let report = ErrorReport(error)
        let format = error.kind == .fileSystem ? DatabaseFileInspection.inspect(path: database).format : nil
        let isMissing = format == .missing || format == .empty
        self.init(kind: isMissing ? "missingFile" : report.kind, code: report.code, message: report.message)
    }

    init(_ error: any Error, status: ExitStatus) {
        switch error {
        case let error as DatabaseError:
            self.init(error)
        case let error as CommandFailure:
            self.init(kind: error.kind, code: nil, message: error.message)
        default:
            let firstLine = SQLCipherKitCommand.fullMessage(for: error)
                .split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init)
            let message = firstLine.map { $0.hasPrefix("Error: ") ? String($0.dropFirst(7)) : $0 }
            self.init(kind: status == .usage ? "usage" : "failure", code: nil, message: message ?? "\(status)")
        }
    }

    private enum CodingKeys: String, CodingKey { case kind, code, message }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind, forKey: .kind)
        if let code { try container.encode(code, forKey: .code) } else { try container.encodeNil(forKey: .code) }
        try container.encode(message, forKey: .message)
    }
}

/// The engine the command ran with. `cryptoProviderVersion` is what SQLCipher reports (for some builds the version
/// it was compiled against); `openSSLVersion` is the libcrypto loaded into this process, asked at run time.
struct EngineReport: Encodable, Sendable {
    let sqlcipherVersion: String
    let sqliteVersion: String
    let cryptoProvider: String
    let cryptoProviderVersion: String
    let openSSLVersion: String
    let openSSLVersionNumber: UInt

    init() {
        sqlcipherVersion = SQLCipher.version
        sqliteVersion = SQLCipher.sqliteVersion
        cryptoProvider = SQLCipher.cryptoProvider
        cryptoProviderVersion = SQLCipher.cryptoProviderVersion
        openSSLVersion = OpenSSLRuntime.version
        openSSLVersionNumber = OpenSSLRuntime.versionNumber
    }
}

/// `--json`, on every subcommand.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print exactly one JSON object on standard output, on success and on failure (see Docs/CLI.md).")
    var json = false
}

/// A subcommand: every one takes `--json`; those that open databases name their cipher options, whose HMAC salt
/// mask (process-wide in SQLCipher) the root command holds for the whole run.
protocol OperatorCommand: ParsableCommand {
    var output: OutputOptions { get }
    var cipherOptionsForRun: CipherOptions? { get }
}

extension OperatorCommand {
    var cipherOptionsForRun: CipherOptions? { nil }
}

/// An optional that `--json` writes as `null` when it has no value. Swift's synthesized `Encodable` leaves such a key
/// out; Docs/CLI.md promises every key, `null` when absent.
@propertyWrapper
struct Nullable<Value: Encodable & Sendable>: Encodable, Sendable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}
