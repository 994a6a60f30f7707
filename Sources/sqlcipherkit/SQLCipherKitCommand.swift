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
            4 verification failed.

            Examples:
              sqlcipherkit keygen --out notes.key
              sqlcipherkit rotate notes.db --key-file notes.key --new-key-file notes-new.key
              sqlcipherkit --version
            """,
        version: VersionReport.text,
        subcommands: [
            KeygenCommand.self, RotateCommand.self, VerifyCommand.self, InfoCommand.self, EncryptCommand.self,
            DecryptCommand.self, BackupCommand.self, MigrateCommand.self, ExecCommand.self, DemoCommand.self,
        ]
    )

    /// Replaces ArgumentParser's entry point so usage errors exit with 2 and library errors with their own status.
    static func main() {
        EngineLog.silenceUnlessAsked()
        terminate(run(arguments: Array(CommandLine.arguments.dropFirst())).rawValue)
    }

    /// Parses and runs a command line, reporting any error on standard error. Tests call it in-process.
    static func run(arguments: [String]) -> ExitStatus {
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
            return .success
        } catch {
            return report(error)
        }
    }

    private static func report(_ error: any Error) -> ExitStatus {
        let status = ExitStatus.status(for: error)
        switch error {
        case let error as DatabaseError:
            Output.message("error: \(error.message)" + (error.sql.map { " (while executing `\($0)`)" } ?? ""))
        case let error as CommandFailure:
            Output.message("error: \(error.message)")
        default:
            let text = fullMessage(for: error)
            if text.isEmpty { break }
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
            crypto: \(SQLCipher.cryptoProvider) \(SQLCipher.cryptoProviderVersion)
            """
    }
}

/// `exit(3)`, reachable from commands (ParsableCommand has an `exit` of its own).
func terminate(_ status: Int32) -> Never {
    exit(status)
}

/// SQLCipher 4.6+ logs every failed page HMAC to standard error, so a rotation, which checks that the old key no
/// longer opens the file, would print "ERROR CORE … hmac check failed" on success (SQLCIPHER-FACTS §11). The CLI
/// reports errors itself; SQLCIPHERKIT_ENGINE_LOG=1 keeps the engine's log.
enum EngineLog {
    static func silenceUnlessAsked() {
        guard getenv("SQLCIPHERKIT_ENGINE_LOG").map({ String(cString: $0) }) != "1",
              SQLCipher.supports(.version4Format),
              let connection = try? Connection.inMemory(encryption: .none)
        else { return }
        // The log level is the engine's, process-wide: harmless here, this process is the CLI alone.
        try? connection.execute("PRAGMA cipher_log_level = NONE")
        connection.close()
    }
}
