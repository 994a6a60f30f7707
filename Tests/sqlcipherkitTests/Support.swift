import Foundation
import SQLCipherKit
@_exported import SQLCipherKitTestSupport
import Testing
@testable import sqlcipherkit

/// A fresh temporary directory for one test, always removed afterwards.
final class Scratch {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("sqlcipherkitTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    /// A new random raw key file (mode 0600).
    @discardableResult
    func rawKeyFile(_ name: String, withSalt: Bool = false) throws -> (path: String, key: EncryptionKey) {
        let key = try EncryptionKey.generateRaw(withSalt: withSalt)
        try key.write(toKeyFile: path(name))
        return (path(name), key)
    }

    /// A passphrase key file holding ``Sentinel/text`` (mode 0600).
    @discardableResult
    func sentinelKeyFile(_ name: String, suffix: String = "") throws -> (path: String, key: EncryptionKey) {
        try writeFile(name, Sentinel.text + suffix + "\n", mode: 0o600)
        return (path(name), try EncryptionKey(contentsOf: path(name)))
    }

    func writeFile(_ name: String, _ text: String, mode: Int) throws {
        _ = FileManager.default.createFile(
            atPath: path(name), contents: Data(text.utf8), attributes: [.posixPermissions: mode])
    }

    /// An encrypted database with `rowCount` rows in `item(id, body)`.
    func database(
        _ name: String, key: EncryptionKey, settings: CipherSettings = .engineDefault, rowCount: Int = 20,
        journalMode: String = "DELETE"
    ) throws -> String {
        let db = try Connection(path: path(name), key: key, settings: settings)
        _ = try db.scalar("PRAGMA journal_mode = \(journalMode)", as: String.self)
        try db.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        try db.transaction {
            let insert = try db.prepare("INSERT INTO item(id, body) VALUES (?, ?)")
            for id in 1...max(rowCount, 1) {
                try insert.run(id, "row \(id) " + String(repeating: "abcdefghij", count: 8))
            }
        }
        db.close()
        return path(name)
    }
}

/// The text hidden in test keys; no output may ever contain it.
enum Sentinel {
    static let text = "SENTINEL-CLI-9d41e2b7"
}

// MARK: - Running the command

struct CommandResult: CustomStringConvertible {
    let status: Int32
    let standardOutput: String
    let standardError: String

    var description: String { "status \(status)\nstdout: \(standardOutput)\nstderr: \(standardError)" }

    /// Neither stream holds the sentinel.
    var isFreeOfKeyMaterial: Bool {
        !standardOutput.contains(Sentinel.text) && !standardError.contains(Sentinel.text)
    }
}

/// The command's exit status type (Swift Testing has an `ExitStatus` of its own).
typealias CLIExitStatus = sqlcipherkit.ExitStatus

/// The `sqlcipherkit` binary beside the test bundle.
let binaryPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("sqlcipherkit").path

/// Runs the real binary as a subprocess and waits for it.
func runSubprocess(
    _ arguments: [String], environment: [String: String?] = [:], standardInput: [UInt8]? = nil,
    in scratch: Scratch
) throws -> CommandResult {
    try RunningCommand(arguments, environment: environment, standardInput: standardInput, in: scratch).finish()
}

/// The binary started without waiting for it.
final class RunningCommand {
    private let process = Process()
    private let outputPath: String
    private let errorPath: String
    private let output: FileHandle
    private let error: FileHandle

    /// Starts the binary; with `nohup`, through `/usr/bin/nohup` (which ignores SIGHUP, then runs it in its place);
    /// with a `launcher`, through that command (its arguments, then the binary's path and arguments).
    /// `environment` adds or (with `nil`) removes variables; `standardInput` is written to it and closed.
    init(
        _ arguments: [String], nohup: Bool = false, launcher: [String] = [], environment: [String: String?] = [:],
        standardInput: [UInt8]? = nil, in scratch: Scratch
    ) throws {
        let launcher = nohup ? ["/usr/bin/nohup"] : launcher
        process.executableURL = URL(fileURLWithPath: launcher.first ?? binaryPath)
        process.arguments = launcher.isEmpty ? arguments : launcher.dropFirst() + [binaryPath] + arguments
        process.currentDirectoryURL = scratch.url
        var variables = ProcessInfo.processInfo.environment
        for (name, value) in environment { variables[name] = value }
        process.environment = variables
        let token = UUID().uuidString
        outputPath = scratch.path(".running-stdout-\(token)")
        errorPath = scratch.path(".running-stderr-\(token)")
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        error = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        process.standardOutput = output
        process.standardError = error
        let input = Pipe()
        process.standardInput = standardInput == nil ? FileHandle.nullDevice : input
        try process.run()
        if let standardInput {
            input.fileHandleForWriting.write(Data(standardInput))
            try input.fileHandleForWriting.close()
        }
    }

    var isRunning: Bool { process.isRunning }
    var pid: pid_t { process.processIdentifier }

    /// The signal that ended the process, or 0.
    var endedBySignal: Int32 { process.terminationReason == .uncaughtSignal ? process.terminationStatus : 0 }

    /// Sends SIGTERM.
    func terminate() { process.terminate() }

    /// Waits for the end (no bound: a hang fails the run through the suite's own limit) and collects the output.
    func finish() throws -> CommandResult {
        process.waitUntilExit()
        try output.close()
        try error.close()
        defer {
            try? FileManager.default.removeItem(atPath: outputPath)
            try? FileManager.default.removeItem(atPath: errorPath)
        }
        return CommandResult(
            status: process.terminationStatus,
            standardOutput: try String(contentsOfFile: outputPath, encoding: .utf8),
            standardError: try String(contentsOfFile: errorPath, encoding: .utf8))
    }
}

/// Runs the command in this process, capturing its output. Relative paths are made absolute in `scratch`.
func runInProcess(_ arguments: [String]) -> CommandResult {
    let capture = OutputCapture()
    let status = Output.$capture.withValue(capture) {
        SQLCipherKitCommand.run(arguments: arguments)
    }
    return CommandResult(
        status: status.rawValue, standardOutput: capture.standardOutput, standardError: capture.standardError)
}

/// The exit status parsing (and validating) a command line gives, without running it.
func parsingStatus(_ arguments: [String]) -> CLIExitStatus {
    do {
        _ = try Output.$capture.withValue(OutputCapture()) { try SQLCipherKitCommand.parseAsRoot(arguments) }
        return .success
    } catch {
        return CLIExitStatus.status(for: error)
    }
}

/// Whether `key` opens the database and passes quick_check.
func opens(_ path: String, with key: EncryptionKey, settings: CipherSettings = .engineDefault) -> Bool {
    guard let db = try? Connection(path: path, key: key, settings: settings, options: OpenOptions(mode: .readWrite))
    else { return false }
    defer { db.close() }
    return (try? db.quickCheck()) != nil
}

/// The number of rows in `item` (or `table`), read through a fresh connection.
func rowCount(
    _ path: String, key: EncryptionKey, settings: CipherSettings = .engineDefault, table: String = "item"
) throws -> Int {
    let db = try Connection(path: path, key: key, settings: settings)
    defer { db.close() }
    return try db.scalar("SELECT count(*) FROM \(table)", as: Int.self) ?? -1
}

// MARK: - Other tools and bounded runs

/// The SQLCipher 3.4.1 shell (Debian package `sqlcipher`), an independent maker of test files; with
/// ``stockSQLitePath``, the stock `sqlite3` shell (Debian package `sqlite3`), an independent reader of SQL text.
enum SQLCipherShell {
    static let path = "/usr/bin/sqlcipher"
    static let stockSQLitePath = "/usr/bin/sqlite3"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: path) }

    /// Runs `script` (fed on standard input, never in argv) on `database`; throws when the shell fails.
    static func run(_ database: String, script: String, shell: String = path) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = [database]
        // The shell must load its own engine, not the SQLCipher 4 library a test run may have preloaded.
        var environment = ProcessInfo.processInfo.environment
        environment["LD_LIBRARY_PATH"] = nil
        environment["LD_PRELOAD"] = nil
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(script.utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "sqlcipher shell failed"])
        }
    }
}

/// Runs the binary, failing (and killing it) if it has not ended after `limit`: only to turn a hang into a failure.
func runSubprocessBounded(
    _ arguments: [String], limit: Duration = .seconds(60), in scratch: Scratch
) throws -> CommandResult? {
    let run = try RunningCommand(arguments, in: scratch)
    let deadline = ContinuousClock.now + limit
    while run.isRunning && ContinuousClock.now < deadline {
        Thread.sleep(forTimeInterval: 0.05)
    }
    let hung = run.isRunning
    if hung { run.terminate() }
    let result = try run.finish()
    return hung ? nil : result
}

/// The one JSON object a `--json` run printed, or `nil` when standard output is not exactly one object.
func jsonEnvelope(_ result: CommandResult) -> [String: Any]? {
    guard let object = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) else { return nil }
    return object as? [String: Any]
}

/// A plaintext SQLite database with `item(id, body)`.
func plaintextDatabase(_ scratch: Scratch, _ name: String) throws -> String {
    let db = try Connection(path: scratch.path(name), encryption: .none)
    try db.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL); INSERT INTO item(body) VALUES ('a')")
    db.close()
    return scratch.path(name)
}

/// The temporary files (`*.sqlcipherkit-tmp-*`) in a folder.
func temporaryFiles(in folder: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.contains(".sqlcipherkit-tmp-") }
}
