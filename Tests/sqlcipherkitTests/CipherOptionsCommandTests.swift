import ArgumentParser
import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Files made with other settings, by another tool (the SQLCipher 3.4.1 shell) and by the library, open, verify,
/// back up and rotate through the CLI with the matching options, and do not open without them.
@Suite("sqlcipherkit cipher options")
struct CipherOptionsCommandTests {
    /// A format: the SQL that makes it in the SQLCipher 3 shell, and the CLI options that open it.
    struct ShellFormat: CustomStringConvertible, Sendable {
        let name: String
        let pragmas: String
        let options: [String]
        /// Runs only in a subprocess: the option changes a process-wide engine setting.
        var needsSubprocess = false

        var description: String { name }
    }

    static let shellFormats: [ShellFormat] = [
        ShellFormat(name: "SQLCipher 1.1 (no HMAC)", pragmas: "PRAGMA kdf_iter = 4000; PRAGMA cipher_use_hmac = OFF;",
                    options: ["--cipher-compatibility", "1"]),
        ShellFormat(name: "SQLCipher 2.0", pragmas: "PRAGMA kdf_iter = 4000;", options: ["--cipher-compatibility", "2"]),
        ShellFormat(name: "SQLCipher 2.0 big-endian", pragmas: "PRAGMA kdf_iter = 4000; PRAGMA cipher_hmac_pgno = be;",
                    options: ["--cipher-compatibility", "2", "--hmac-pgno", "be"]),
        ShellFormat(
            name: "SQLCipher 2.0 beta",
            pragmas: "PRAGMA kdf_iter = 4000; PRAGMA fast_kdf_iter = 4000; PRAGMA cipher_hmac_salt_mask = \"x'00'\";",
            options: ["--cipher-compatibility", "2", "--fast-kdf-iterations", "4000", "--hmac-salt-mask", "00"],
            needsSubprocess: true),
        ShellFormat(
            name: "page 8192, kdf_iter 10000", pragmas: "PRAGMA cipher_page_size = 8192; PRAGMA kdf_iter = 10000;",
            options: ["--cipher-compatibility", "3", "--page-size", "8192", "--kdf-iterations", "10000"]),
        ShellFormat(
            name: "no HMAC, page 4096", pragmas: "PRAGMA cipher_page_size = 4096; PRAGMA cipher_use_hmac = OFF;",
            options: ["--cipher-compatibility", "3", "--page-size", "4096", "--no-hmac"]),
    ]

    func run(_ arguments: [String], subprocess: Bool, in scratch: Scratch) throws -> CommandResult {
        subprocess ? try runSubprocess(arguments, in: scratch) : runInProcess(arguments)
    }

    @Test("a file made by the SQLCipher 3.4.1 shell opens, verifies, backs up and rotates with its options",
          .enabled(if: SQLCipherShell.isAvailable, "needs the sqlcipher shell (Debian package sqlcipher)"),
          arguments: shellFormats)
    func shellMadeFile(format: ShellFormat) throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.sentinelKeyFile("k")
        let (newKeyPath, _) = try scratch.rawKeyFile("new")
        let db = scratch.path("shell.db")
        // The passphrase reaches the shell on standard input, never in argv.
        try SQLCipherShell.run(db, script: """
            PRAGMA key = '\(Sentinel.text)';
            \(format.pragmas)
            CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
            INSERT INTO item(body) SELECT 'row ' || i FROM n;
            """)
        let subprocess = format.needsSubprocess
        let without = try run(["verify", db, "--key-file", keyPath], subprocess: subprocess, in: scratch)
        #expect(without.status == 3, "\(format): \(without)")

        let verify = try run(
            ["verify", db, "--key-file", keyPath] + format.options, subprocess: subprocess, in: scratch)
        #expect(verify.status == 0, "\(format): \(verify)")
        let count = try run(
            ["exec", db, "--key-file", keyPath, "SELECT count(*) FROM item"] + format.options, subprocess: subprocess,
            in: scratch)
        #expect(count.standardOutput == "200\n", "\(format): \(count)")

        // A database without page HMACs backs up and rotates: the engine's "HMAC is not enabled" notice is not damage.
        do {
            let copy = scratch.path("copy.db")
            let backup = try run(
                ["backup", db, copy, "--key-file", keyPath] + format.options, subprocess: subprocess, in: scratch)
            #expect(backup.status == 0, "\(format): \(backup)")
            let verifyCopy = try run(
                ["verify", copy, "--key-file", keyPath] + format.options, subprocess: subprocess, in: scratch)
            #expect(verifyCopy.status == 0, "\(format): \(verifyCopy)")
            if format.options.contains("--no-hmac") && SQLCipher.supports(.cipherIntegrityCheck) {
                // The engine's notice is shown as a notice, not as damage and not dropped.
                let report = try run(
                    ["verify", copy, "--key-file", keyPath, "--json"] + format.options, subprocess: subprocess,
                    in: scratch)
                let object = try JSONSerialization.jsonObject(with: Data(report.standardOutput.utf8)) as? [String: Any]
                let result = object?["result"] as? [String: Any]
                #expect((result?["cipherIntegrityNotices"] as? [String])?.first?.hasPrefix("HMAC is not enabled") == true,
                        "\(report)")
                #expect((result?["cipherIntegrityProblems"] as? [String]) == [], "\(report)")
            }

            let rotate = try run(
                ["rotate", db, "--key-file", keyPath, "--new-key-file", newKeyPath] + format.options,
                subprocess: subprocess, in: scratch)
            #expect(rotate.status == 0, "\(format): \(rotate)")
            let rotated = try run(
                ["verify", db, "--key-file", newKeyPath] + format.options, subprocess: subprocess, in: scratch)
            #expect(rotated.status == 0, "\(format): \(rotated)")
            #expect(try run(["verify", db, "--key-file", keyPath] + format.options, subprocess: subprocess, in: scratch)
                .status == 3)
            for result in [backup, rotate, rotated] { #expect(result.isFreeOfKeyMaterial) }
        }
        for result in [verify, count] { #expect(result.isFreeOfKeyMaterial) }
    }

    @Test("SQLCipher 4 settings made by the library open with --page-size, --kdf-iterations and the algorithms",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has SHA1 only"))
    func libraryMadeVersion4File() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let settings = CipherSettings(
            pageSize: 8192, kdfIterations: 10000, kdfAlgorithm: .pbkdf2HMACSHA256, hmacAlgorithm: .hmacSHA256)
        let db = try scratch.database("v4.db", key: key, settings: settings, rowCount: 100)
        let options = ["--page-size", "8192", "--kdf-iterations", "10000", "--kdf-algorithm", "sha256",
                       "--hmac-algorithm", "sha256"]
        #expect(runInProcess(["verify", db, "--key-file", keyPath]).status == 3)
        #expect(runInProcess(["verify", db, "--key-file", keyPath] + options).status == 0)
        let copy = scratch.path("copy.db")
        #expect(runInProcess(["backup", db, copy, "--key-file", keyPath] + options).status == 0)
        #expect(try rowCount(copy, key: key, settings: settings) == 100)
    }

    @Test("a plaintext-header file keyed with a passphrase opens with --plaintext-header-size and --salt-file",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header"))
    func plaintextHeaderWithSaltFile() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let salt: [UInt8] = (0..<16).map { UInt8($0 * 7 + 1) }
        let db = try scratch.database(
            "hdr.db", key: key, settings: .plaintextHeader(size: 32, salt: salt), rowCount: 50)
        try scratch.writeFile("salt", salt.map { String(format: "%02x", $0) }.joined() + "\n", mode: 0o644)
        let options = ["--plaintext-header-size", "32", "--salt-file", scratch.path("salt")]
        #expect(runInProcess(["verify", db, "--key-file", keyPath, "--plaintext-header-size", "32"]).status == 2)
        #expect(runInProcess(["verify", db, "--key-file", keyPath] + options).status == 0)
        let (newKeyPath, _) = try scratch.sentinelKeyFile("new", suffix: "-new")
        let rotate = runInProcess(["rotate", db, "--key-file", keyPath, "--new-key-file", newKeyPath] + options)
        #expect(rotate.status == 0, "\(rotate)")
        #expect(runInProcess(["verify", db, "--key-file", newKeyPath] + options).status == 0)
        #expect(try fileBytes(db).prefix(16) == ArraySlice(Array("SQLite format 3".utf8) + [0]))
    }

    @Test("compatibility 1 and 2 work on both engines through the library-made files", arguments: [1, 2])
    func compatibility(version: Int) throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let db = try scratch.database("old.db", key: key, settings: CipherSettings(compatibility: version))
        #expect(runInProcess(["verify", db, "--key-file", keyPath, "--cipher-compatibility", "\(version)"]).status == 0)
        #expect(runInProcess(["verify", db, "--key-file", keyPath, "--cipher-compatibility", "5"]).status == 2)
    }

    @Test("bad option values are usage errors", arguments: [
        ["--page-size", "1000"], ["--kdf-iterations", "0"], ["--kdf-algorithm", "md5"], ["--hmac-pgno", "middle"],
        ["--hmac-salt-mask", "zz"], ["--plaintext-header-size", "7"], ["--fast-kdf-iterations", "0"],
    ])
    func badValues(options: [String]) throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        #expect(parsingStatus(["verify", "x.db", "--key-file", keyPath] + options) == .usage)
    }

    @Test("every subcommand that opens a file has the whole cipher option group (folded: --help-hidden), with an example")
    func everywhere() {
        let opensFiles: [any ParsableCommand.Type] = [
            RotateCommand.self, VerifyCommand.self, InfoCommand.self, EncryptCommand.self, DecryptCommand.self,
            BackupCommand.self, MigrateCommand.self, ExecCommand.self,
        ]
        for command in opensFiles {
            let help = command.helpMessage(includeHidden: true)
            for option in ["--page-size", "--kdf-iterations", "--hmac", "--no-hmac", "--kdf-algorithm",
                           "--hmac-algorithm", "--salt-file", "--plaintext-header-size", "--cipher-compatibility",
                           "--hmac-pgno", "--fast-kdf-iterations", "--hmac-salt-mask"] {
                #expect(help.contains(option), "\(command.configuration.commandName ?? ""): \(option)")
            }
            #expect(command.configuration.discussion.contains("Example"))
        }
    }
}


@Suite("sqlcipherkit --salt-file")
struct SaltFileTests {
    @Test("32 hex digits or x'<32 hex>' are read; a FIFO, a wrong length and bad digits are refused without blocking")
    func saltFiles() throws {
        let scratch = try Scratch()
        let hex = "000102030405060708090a0b0c0d0e0f"
        try scratch.writeFile("plain", hex + "\n", mode: 0o644)
        try scratch.writeFile("quoted", "x'\(hex.uppercased())'", mode: 0o644)
        #expect(try SaltFile.read(scratch.path("plain")) == Array(0...15))
        #expect(try SaltFile.read(scratch.path("quoted")) == Array(0...15))
        try scratch.writeFile("short", "0001", mode: 0o644)
        try scratch.writeFile("bad", String(repeating: "zz", count: 16), mode: 0o644)
        #expect(mkfifo(scratch.path("fifo"), 0o600) == 0)
        for name in ["short", "bad", "fifo", "missing"] {
            #expect(throws: CommandFailure.self, "\(name)") { try SaltFile.read(scratch.path(name)) }
        }
    }
}
