import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The CLI speaks in its own words: its options and subcommands, not the library's API.
@Suite("sqlcipherkit messages")
struct MessagesTests {
    @Test("a misspelt option is an unknown option, not a missing key", arguments: ["--kye-file", "--key", "--keyfile"])
    func misspeltOption(option: String) throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        for command in [["verify", "x.db"], ["exec", "x.db", "SELECT 1"], ["rotate", "x.db", "--new-key-file", keyPath]] {
            let result = runInProcess(command + [option, keyPath])
            #expect(result.status == 2, "\(result)")
            #expect(result.standardError.contains("Unknown option '\(option)'"), "\(result)")
            #expect(!result.standardError.contains("is missing"), "\(result)")
        }
    }

    @Test("a key given for a plaintext file points to `sqlcipherkit encrypt` and `exec --plaintext`")
    func plaintextFileHint() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let plain = try plaintextDatabase(scratch, "plain.db")
        for command in [["verify", plain], ["exec", plain, "SELECT 1"], ["backup", plain, scratch.path("b.db")]] {
            let result = runInProcess(command + ["--key-file", keyPath])
            #expect(result.status == 3, "\(result)")
            #expect(result.standardError.contains("sqlcipherkit encrypt"), "\(result)")
            #expect(result.standardError.contains("exec --plaintext"), "\(result)")
            for apiName in ["Encryption.none", "CipherSettings", "export (path"] {
                #expect(!result.standardError.contains(apiName), "\(result)")
            }
        }
    }

    /// Every remedy the library can attach, in the CLI's words: no API name, and the option or subcommand to use.
    static let remedies: [DatabaseError.Remedy] = [
        .openWithoutKeyOrEncrypt, .openWithKey, .openWithPlaintextHeaderSettings, .giveSalt, .encryptIntoNewFile,
        .decryptIntoNewFile, .matchSourceCipherSettings, .copyWithBackup, .copyWithVacuumInto, .keyThroughAPI,
        .cipherSettingsWhenOpening, .pageSizeWhenCreating, .migrateWithExport, .attachWithKey, .stopOtherProcesses,
        .openWithCompatibility(3), .openWithSQLCipher4, .removeWhitespaceAfterRawKey, .writeRawKeyWithQuotes,
        .checkTrailingSpaceInPassphrase, .checkLeadingSpaceInPassphrase, .readKeyFileInsteadOfPath,
        .allowWeakPassphrase,
    ]

    @Test("every remedy is worded with the CLI's options and subcommands, never the library's API")
    func remedyWording() {
        for remedy in Self.remedies {
            let text = remedy.cliWording
            for apiName in ["Encryption.", "CipherSettings", "exportEncrypted(", "exportDecryptedPlaintextCopy(",
                            "backup(toPath:", "Connection.", "KeyRotation", "OpenOptions", "rekey(to:"] {
                #expect(!text.contains(apiName), "\(remedy) → \(text)")
            }
            #expect(!text.isEmpty)
        }
        #expect(DatabaseError.Remedy.giveSalt.cliWording.contains("--salt-file"))
        #expect(DatabaseError.Remedy.openWithCompatibility(3).cliWording.contains("--cipher-compatibility 3"))
        // The library's own message keeps its API words; the CLI renders the same error with its options.
        let error = DatabaseError(.invalidKey, "no salt", remedy: .giveSalt)
        #expect(error.message.contains("CipherSettings.salt"))
        #expect(ErrorWording.message(for: error) == "no salt; " + DatabaseError.Remedy.giveSalt.cliWording)
    }

    @Test("exec --plaintext opens a plaintext database; without it, no key is a usage error")
    func execPlaintext() throws {
        let scratch = try Scratch()
        let plain = try plaintextDatabase(scratch, "plain.db")
        let result = runInProcess(["exec", plain, "--plaintext", "SELECT count(*) FROM item"])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == "1\n")
        let (keyPath, _) = try scratch.rawKeyFile("k")
        #expect(runInProcess(["exec", plain, "--plaintext", "--key-file", keyPath, "SELECT 1"]).status == 2)
        #expect(runInProcess(["exec", plain, "SELECT 1"]).status == 2)
    }

    @Test("exec does not create a missing database unless --create is given")
    func execCreate() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let typo = scratch.path("notse.db")
        let result = runInProcess(["exec", typo, "--key-file", keyPath, "SELECT 1"])
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("--create"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: typo))
        let created = runInProcess(["exec", typo, "--key-file", keyPath, "--create", "CREATE TABLE t(x)"])
        #expect(created.status == 0, "\(created)")
        #expect(opens(typo, with: key))
        #expect(try fileMode(typo) == 0o600)
    }

    @Test("backup onto an existing destination exits 1 (as documented) and leaves it byte-identical")
    func backupExisting() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let existing = try scratch.database("existing.db", key: key, rowCount: 3)
        let before = try fileBytes(existing)
        let result = runInProcess(["backup", db, existing, "--key-file", keyPath, "--json"])
        #expect(result.status == 1, "\(result)")
        #expect((jsonEnvelope(result)?["error"] as? [String: Any])?["kind"] as? String == "destinationExists")
        #expect(try fileBytes(existing) == before)
    }

    @Test("--version and info name the OpenSSL library loaded at run time")
    func loadedOpenSSL() throws {
        let scratch = try Scratch()
        let version = try runSubprocess(["--version"], in: scratch)
        #expect(version.status == 0)
        #expect(version.standardOutput.contains("OpenSSL loaded: \(OpenSSLRuntime.version)"), "\(version)")
        let info = runInProcess(["info", scratch.path("none.db")])
        #expect(info.standardOutput.contains("loaded: \(OpenSSLRuntime.version)"), "\(info)")
    }

    @Test("info says the key opened an encrypted file, not 'encrypted (or not a database)'")
    func infoAfterKeyOpened() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let withoutKey = runInProcess(["info", db])
        #expect(withoutKey.standardOutput.contains("or not a database"))
        let withKey = runInProcess(["info", db, "--key-file", keyPath])
        #expect(withKey.status == 0, "\(withKey)")
        #expect(!withKey.standardOutput.contains("or not a database"), "\(withKey)")
        #expect(withKey.standardOutput.contains("the key opens it"), "\(withKey)")
    }

    @Test("info recognises a SQLCipher 2 file opened without options and prints the options that open it")
    func infoSuggestsOptions() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let db = try scratch.database("v2.db", key: key, settings: CipherSettings(compatibility: 2))
        let result = runInProcess(["info", db, "--key-file", keyPath, "--json"])
        #expect(result.status == 0, "\(result)")
        let report = jsonEnvelope(result)?["result"] as? [String: Any]
        #expect(report?["suggestedOptions"] as? [String] == ["--cipher-compatibility", "2"], "\(result)")
        let text = runInProcess(["info", db, "--key-file", keyPath])
        let line = text.standardOutput.split(separator: "\n").first { $0.hasPrefix("open with") }
        #expect(line?.hasSuffix(" --cipher-compatibility 2") == true, "\(text)")
        // The suggestion works.
        #expect(runInProcess(["verify", db, "--key-file", keyPath, "--cipher-compatibility", "2"]).status == 0)
    }

    @Test("verify names the damaged pages and keeps the report short")
    func verifyDamagedPages() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 2000)
        var bytes = try fileBytes(db)
        let pageSize = Engine.isVersion4 ? 4096 : 1024
        let pageCount = bytes.count / pageSize
        // Damage the middle of the last three pages.
        for page in (pageCount - 2)...pageCount {
            let offset = (page - 1) * pageSize + pageSize / 2
            for index in offset..<(offset + 8) { bytes[index] ^= 0x5A }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: db))
        let result = runInProcess(["verify", db, "--key-file", keyPath])
        #expect(result.status == 4, "\(result)")
        #expect(result.standardOutput.split(separator: "\n").count <= 25, "\(result)")
        #expect(result.standardOutput.contains("NOT verified"))
        let json = runInProcess(["verify", db, "--key-file", keyPath, "--json"])
        let report = jsonEnvelope(json)?["result"] as? [String: Any]
        if SQLCipher.supports(.cipherIntegrityCheck) {
            // cipher_integrity_check names every page whose HMAC fails.
            let pages = report?["damagedPages"] as? [Int] ?? []
            #expect(Set((pageCount - 2)...pageCount).isSubset(of: Set(pages)), "\(json)")
            #expect(result.standardOutput.contains("damaged pages"), "\(result)")
            #expect(result.standardError.contains("damaged page(s)"), "\(result)")
        }
    }

    @Test("page numbers are read from problem lines and listed as ranges")
    func pageParsing() {
        #expect(VerificationReport.pageNumbers(in: "HMAC verification failed for page 7") == [7])
        #expect(VerificationReport.pageNumbers(in: "*** in database main ***\nPage 12: btreeInitPage() returns error")
            == [12])
        #expect(VerificationReport.pageNumbers(in: "On tree page 3 cell 2: invalid page number 99") == [3])
        #expect(VerifyCommand.pageList([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10")
    }
}
