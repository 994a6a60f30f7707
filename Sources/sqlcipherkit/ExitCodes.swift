import ArgumentParser
import SQLCipherKit

/// The exit statuses of `sqlcipherkit`, documented in Docs/CLI.md; scripts rely on them.
enum ExitStatus: Int32, CaseIterable {
    /// Done.
    case success = 0
    /// Anything not listed below: a missing file, an unreadable key file, an engine too old, a busy database, …
    case failure = 1
    /// The command line is wrong (ArgumentParser's own default for this is 64).
    case usage = 2
    /// The key (or the cipher settings) does not open the database, or the file is not what the key expects.
    case keyDoesNotOpenDatabase = 3
    /// A check failed: the database (or a copy of it) did not verify.
    case verificationFailed = 4

    /// The status for an error thrown by a command or by argument parsing.
    static func status(for error: any Error) -> ExitStatus {
        if let error = error as? CommandFailure { return error.status }
        if let error = error as? DatabaseError { return status(for: error) }
        let code = SQLCipherKitCommand.exitCode(for: error)
        if code == .success { return .success }
        if code == .validationFailure { return .usage }
        return ExitStatus(rawValue: code.rawValue) ?? .failure
    }

    static func status(for error: DatabaseError) -> ExitStatus {
        switch error.kind {
        case .wrongKey, .notEncrypted, .missingKey, .notADatabase: .keyDoesNotOpenDatabase
        case .verificationFailed, .damaged: .verificationFailed
        // Disk full and busy are conditions of the machine, not of the key or the file: status 1 like any other.
        case .diskFull, .busy: .failure
        default: .failure
        }
    }

    /// One status for several failures: theirs when they agree, ``failure`` otherwise.
    static func combined(_ statuses: [ExitStatus]) -> ExitStatus {
        let failures = Set(statuses.filter { $0 != .success })
        guard let first = failures.first else { return .success }
        return failures.count == 1 ? first : .failure
    }
}

/// A failure a command detected itself, with the exit status it maps to. The message never holds key material.
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    let status: ExitStatus
    /// The `error.kind` of `--json` output (`missingFile`, `destinationExists`, `usage`, …).
    let kind: String

    init(_ message: String, status: ExitStatus = .failure, kind: String? = nil) {
        self.message = message
        self.status = status
        let defaultKind = switch status {
        case .usage: "usage"
        case .keyDoesNotOpenDatabase: "wrongKey"
        case .verificationFailed: "verificationFailed"
        case .success, .failure: "failure"
        }
        self.kind = kind ?? defaultKind
    }

    var description: String { message }
}
