import ArgumentParser
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct SQLCipherKitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sqlcipherkit",
        abstract: "Operator tools for SQLCipher-encrypted SQLite databases.",
        discussion: """
            Keys are never accepted as argument values: they come from key files (--key-file, mode 0600), \
            environment variables (--key-env NAME), standard input (--key-stdin), or a prompt without echo when \
            standard input is a terminal.

            Exit status: 0 success, 1 failure, 2 usage error, 3 the key does not open the database, \
            4 verification failed or the file is damaged. Every subcommand takes --json (before or after its \
            name): one JSON object on standard output, on success and on failure, whose exitStatus is the exit status. Core dumps are turned off before any key is read.

            Examples:
              sqlcipherkit keygen --out notes.key
              sqlcipherkit rotate notes.db --key-file notes.key \\
                  --new-key-file notes-new.key
              sqlcipherkit --version
            """,
        version: VersionReport.text,
        subcommands: [
            KeygenCommand.self, RotateCommand.self, VerifyCommand.self, InfoCommand.self, EncryptCommand.self,
            DecryptCommand.self, BackupCommand.self, MigrateCommand.self, ExecCommand.self, ShellCommand.self, DemoCommand.self,
            DebugProcessStateCommand.self,
        ] + replicationCommands
    )

    /// `replicate`, `restore`, `snapshots` and `promote` come with the package trait Replication (off by default).
    #if Replication  // trait Replication (Package.swift)
    static let replicationCommands: [any ParsableCommand.Type] = [
        ReplicateCommand.self, RestoreCommand.self, SnapshotsCommand.self, PromoteCommand.self,
    ]
    #else
    /// Hidden commands that say how to get them (ReplicationNotInThisBuild.swift).
    static let replicationCommands = ReplicationNotInThisBuild.commands
    #endif

    /// Replaces ArgumentParser's entry point so usage errors exit with 2 and library errors with their own status.
    static func main() {
        // First, before any key is read: no core file, no ptrace by other processes of this user.
        ProcessHardening.disableCoreDumps()
        // Ctrl-C or a TERM during a copy removes its temporary file (possibly plaintext, for `decrypt`); a run
        // killed outright has its leftovers removed by the next run.
        ProcessHardening.installSignalCleanup()
        // SIGKILL (or a crash) runs no handler: a guardian process removes what is left when this process ends.
        _ = try? TemporaryFiles.startGuardian()
        EngineLog.silenceUnlessAsked()
        let status = run(arguments: Array(CommandLine.arguments.dropFirst()))
        terminate(Output.finalStatus(status).rawValue)
    }

    /// Parses and runs a command line, reporting any error on standard error (and, with `--json`, in the one JSON
    /// object on standard output). Tests call it in-process.
    static func run(arguments: [String]) -> ExitStatus {
        let arguments = joiningNegativeNumbers(movingLeadingJSONFlag(arguments))
        var command: any ParsableCommand
        do {
            if let mistake = commandLineMistake(in: arguments) { throw mistake }
            command = try parseAsRoot(arguments)
        } catch {
            let status = report(error)
            if status != .success && arguments.contains("--json") {
                return JSONEnvelope(command: commandName(in: arguments), status: status, error: error, result: nil)
                    .print()
            }
            return status
        }
        let operatorCommand = command as? any OperatorCommand
        let jsonReport = operatorCommand?.output.json == true
            ? JSONReport(command: type(of: command).configuration.commandName ?? "sqlcipherkit") : nil
        var failure: (any Error)?
        Output.$jsonReport.withValue(jsonReport) {
            do {
                if let mask = operatorCommand?.cipherOptionsForRun?.hmacSaltMaskValue {
                    // Process-wide in SQLCipher: held for the whole run, the default restored afterwards.
                    try SQLCipher.withHMACSaltMask(mask) { try command.run() }
                } else {
                    try command.run()
                }
            } catch {
                failure = error
            }
        }
        let status = failure.map { report($0) } ?? .success
        if let jsonReport {
            return JSONEnvelope(
                command: jsonReport.command, status: status, error: failure, result: jsonReport.recordedResult
            ).print()
        }
        return status
    }

    /// `sqlcipherkit --json verify …`: `--json` belongs to every subcommand, so given before one it is moved after it.
    static func movingLeadingJSONFlag(_ arguments: [String]) -> [String] {
        let leading = arguments.prefix { $0 == "--json" }
        guard !leading.isEmpty, arguments.count > leading.count,
              subcommandNames.contains(arguments[leading.count]), arguments[leading.count] != "help"
        else { return arguments }
        let rest = arguments[(leading.count + 1)...]
        return [arguments[leading.count]] + (rest.contains("--json") ? [] : ["--json"]) + rest
    }

    /// The subcommand names, `help` included.
    private static var subcommandNames: [String] {
        configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"]
    }

    /// Mistakes ArgumentParser would blame on something else (an unknown `--key-file` for a misspelt subcommand):
    /// a misspelt or misplaced subcommand, and `encrypt` given the options of the key it does not take.
    static func commandLineMistake(in arguments: [String]) -> CommandFailure? {
        guard let first = arguments.first, !first.hasPrefix("-") else { return nil }
        let names = subcommandNames
        if names.contains(first) {
            guard first == "encrypt" else { return nil }
            for option in ["--key-file", "--key-env", "--key-stdin"]
            where arguments.contains(where: { $0 == option || $0.hasPrefix(option + "=") }) {
                return CommandFailure(
                    "`encrypt` takes no \(option): its source is a plaintext database, which has no key; did you mean"
                        + " --new-\(option.dropFirst(2)) (the key of the encrypted copy)?", status: .usage)
            }
            return nil
        }
        let shown = KeyMaterialRedaction.shown(first, as: "argument")
        if let subcommand = arguments.dropFirst().first(where: names.contains) {
            return CommandFailure(
                "the subcommand comes first: sqlcipherkit \(subcommand) \(shown) … (`\(shown)` is not a subcommand)",
                status: .usage)
        }
        let closest = names.map { ($0, editDistance(first.lowercased(), $0)) }.min { $0.1 < $1.1 }
        if let closest, closest.1 <= 2 {
            return CommandFailure(
                "unknown subcommand '\(shown)'; did you mean '\(closest.0)'? (sqlcipherkit \(closest.0) --help)",
                status: .usage)
        }
        return CommandFailure(
            "unknown subcommand '\(shown)'; the subcommands are \(names.joined(separator: ", "))", status: .usage)
    }

    /// The Levenshtein distance between two words.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// The subcommand a command line names (for the JSON object of a usage error).
    private static func commandName(in arguments: [String]) -> String {
        let names = configuration.subcommands.compactMap { $0.configuration.commandName }
        return arguments.first(where: names.contains) ?? "sqlcipherkit"
    }

    /// Prints the message of an error on standard error and returns its exit status (the shell prints an error
    /// this way and goes on).
    @discardableResult
    static func report(_ error: any Error) -> ExitStatus {
        let status = ExitStatus.status(for: error)
        switch error {
        case let error as DatabaseError:
            Output.message(
                "error: \(ErrorWording.message(for: error))" + (error.sql.map { " (while executing `\($0)`)" } ?? ""))
        case let error as CommandFailure:
            Output.message("error: \(error.message)")
        default:
            var text = fullMessage(for: error)
            if text.isEmpty { break }
            // One capitalisation for every message: ArgumentParser's own start with "Error: ".
            if text.hasPrefix("Error: ") { text = "error: " + text.dropFirst(7) }
            if status == .success { Output.result(text) } else { Output.message(text) }
        }
        return status
    }
}

enum VersionReport {
    static var text: String {
        let engine = SQLCipher.isSQLCipher ? "SQLCipher \(SQLCipher.version)" : "not SQLCipher (plain SQLite)"
        return """
            sqlcipherkit \(SQLCipherKitVersion.string)
            engine: \(engine), SQLite \(SQLCipher.sqliteVersion), \
            crypto provider (as the engine reports it): \(SQLCipher.cryptoProvider) \(SQLCipher.cryptoProviderVersion)
            OpenSSL loaded: \(OpenSSLRuntime.version)
            """
    }
}

/// `exit(3)`, reachable from commands (ParsableCommand has an `exit` of its own).
func terminate(_ status: Int32) -> Never {
    exit(status)
}

/// SQLCipher 4.6+ logs every failed page HMAC to standard error, so a rotation, which checks that the old key no
/// longer opens the file, would print "… hmac check failed" errors on success (Docs/EngineNotes.md#logging). The CLI
/// reports errors itself; SQLCIPHERKIT_ENGINE_LOG=1 keeps the engine's log.
enum EngineLog {
    static func silenceUnlessAsked() {
        guard getenv("SQLCIPHERKIT_ENGINE_LOG").map({ String(cString: $0) }) != "1",
              SQLCipher.supports(.version4Format),
              let connection = try? Connection.inMemory(encryption: .none)
        else { return }
        // The log level is the engine's, process-wide: harmless here, this process is the CLI alone.
        try? connection.silenceEngineLog()
        connection.close()
    }
}
