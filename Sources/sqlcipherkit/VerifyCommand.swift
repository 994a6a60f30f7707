import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit verify`: opens with the key and checks every page (``Connection/checkIntegrity()``).
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that a key opens a database and that every page is intact.",
        discussion: """
            Opens the database read-only with the key (a wrong key exits with 3), then runs PRAGMA quick_check \
            (every page is read, so decrypted and its HMAC checked) and, on SQLCipher 4.2 or later, PRAGMA \
            cipher_integrity_check, which must return no rows. A tampered or damaged page exits with 4. Nothing \
            is written.

            Example:
              sqlcipherkit verify notes.db --key-file notes.key
              sqlcipherkit verify legacy.db --key-env LEGACY_KEY --cipher-compatibility 3 --json
            """
    )

    @Argument(help: ArgumentHelp("The database.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings")
    var cipher: CipherOptions

    @Flag(help: "Print the report as JSON.")
    var json = false

    func validate() throws {
        _ = try key.requiredSource()
    }

    func run() throws {
        let encryption = try cipher.encryption(for: try key.loadKey())
        guard FileFacts.isNonEmptyFile(database) else {
            throw CommandFailure("\(database) does not exist or is empty; nothing to verify")
        }
        let connection = try Connection(
            path: database, encryption: encryption, options: OpenOptions(mode: .readOnly))
        let report = try connection.checkIntegrity()
        connection.close()
        if json {
            try Output.json(VerificationReport(path: database, report: report))
        } else {
            Output.result("\(database): the key opens it")
            Output.result("quick_check: " + (report.quickCheckProblems.isEmpty
                ? "ok" : report.quickCheckProblems.prefix(5).joined(separator: "; ")))
            if let problems = report.cipherIntegrityProblems {
                Output.result("cipher_integrity_check: " + (problems.isEmpty
                    ? "ok (no rows)" : problems.prefix(5).joined(separator: "; ")))
            } else {
                Output.result("cipher_integrity_check: not run (needs SQLCipher 4.2; linked: \(SQLCipher.version))")
            }
            Output.result(report.isIntact ? "verified" : "NOT verified")
        }
        guard report.isIntact else {
            throw CommandFailure("\(database) did not verify", status: .verificationFailed)
        }
    }
}

/// `verify --json`.
struct VerificationReport: Encodable {
    let path: String
    let verified: Bool
    let quickCheck: [String]
    let cipherIntegrityCheck: [String]?
    let cipherIntegrityCheckRan: Bool
    let sqlcipherVersion: String

    init(path: String, report: IntegrityReport) {
        self.path = path
        verified = report.isIntact
        quickCheck = report.quickCheckProblems.isEmpty ? ["ok"] : report.quickCheckProblems
        cipherIntegrityCheck = report.cipherIntegrityProblems
        cipherIntegrityCheckRan = report.cipherIntegrityProblems != nil
        sqlcipherVersion = SQLCipher.version
    }
}

/// File-system facts the commands check before calling the library, for clearer messages.
enum FileFacts {
    static func isNonEmptyFile(_ path: String) -> Bool {
        let format = DatabaseFileInspection.inspect(path: path).format
        return format != .missing && format != .empty && format != .notARegularFile
    }
}
