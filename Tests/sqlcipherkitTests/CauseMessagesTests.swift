import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Mistakes an operator makes in the first hour, each told by its real cause (and the option to use), with the exit
/// status Docs/CLI.md gives it: the other SQLCipher format, key files whose only fault is their shape, a folder for a
/// database, a misspelt or misplaced subcommand, options of another subcommand.
@Suite("sqlcipherkit messages name the cause")
struct CauseMessagesTests {
    /// The commands that check a key before they do anything, with what they need after the database.
    static func keyedCommands(_ scratch: Scratch, keyPath: String) throws -> [[String]] {
        let (newKeyPath, _) = try scratch.rawKeyFile("new-\(UUID().uuidString).key")
        return [
            ["verify"], ["exec", "SELECT count(*) FROM item"], ["backup", scratch.path("copy-\(UUID().uuidString).db")],
            ["rotate", "--new-key-file", newKeyPath],
        ].map { command in
            [command[0], "DB"] + command.dropFirst() + ["--key-file", keyPath]
        }
    }

    static func run(_ command: [String], database: String) -> CommandResult {
        runInProcess(command.map { $0 == "DB" ? database : $0 })
    }

    @Test(
        "a SQLCipher 3 file on SQLCipher 4: verify, exec, backup and rotate say --cipher-compatibility 3; info too",
        .enabled(if: Engine.isVersion4, "SQLCipher 3 opens SQLCipher 3 files with its defaults: nothing to tell"))
    func version3FileOnVersion4() throws {
        let scratch = try Scratch()
        for (name, keyFile) in [("raw", try scratch.rawKeyFile("raw.key")), ("pass", try scratch.sentinelKeyFile("p"))] {
            let database = try scratch.database("\(name).db", key: keyFile.key, settings: .sqlcipher3)
            let before = try fileBytes(database)
            for command in try Self.keyedCommands(scratch, keyPath: keyFile.path) {
                let result = Self.run(command, database: database)
                #expect(result.status == 3, "\(command): \(result)")
                // rotate names each database's failure on standard output, the others on standard error.
                let output = result.standardError + result.standardOutput
                #expect(output.contains("this file opens with --cipher-compatibility 3"), "\(result)")
                #expect(!result.standardError.contains("CipherSettings"), "\(result)")
                #expect(result.isFreeOfKeyMaterial)
            }
            #expect(try fileBytes(database) == before)
            let info = runInProcess(["info", database, "--key-file", keyFile.path])
            #expect(info.status == 0, "\(info)")
            #expect(info.standardOutput.contains("--cipher-compatibility 3"), "\(info)")
            // The option named works.
            let verified = runInProcess(["verify", database, "--key-file", keyFile.path, "--cipher-compatibility", "3"])
            #expect(verified.status == 0, "\(verified)")
        }
    }

    /// The SQLCipher 4 engine `.ci/sqlcipher4` extracts (under .build/sqlcipher4), when it is there.
    static var version4EngineFolder: String? {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let folder = root.appendingPathComponent(".build/sqlcipher4").path
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        guard let version = versions.sorted().last else { return nil }
        let lib = "\(folder)/\(version)/lib"
        return FileManager.default.fileExists(atPath: lib + "/libsqlcipher.so.0") ? lib : nil
    }

    @Test(
        "a SQLCipher 4 file on SQLCipher 3.4.1: verify, exec, backup and rotate say it looks like SQLCipher 4's format",
        .enabled(if: !Engine.isVersion4, "SQLCipher 4 opens SQLCipher 4 files with its defaults: nothing to tell"),
        .enabled(
            if: version4EngineFolder != nil,
            "needs the SQLCipher 4 engine of .ci/sqlcipher4 (run `bash .ci/sqlcipher4 true` once) to write the file"))
    func version4FileOnVersion3() throws {
        let scratch = try Scratch()
        let engine = try #require(Self.version4EngineFolder)
        let libpython = try runSubprocess(
            // The libpython .ci/sqlcipher4 preloads: the engine module refers to its symbols.
            ["python3", "-c", "import sysconfig, os; print(os.path.join(sysconfig.get_config_var('LIBDIR'),"
                + " sysconfig.get_config_var('INSTSONAME')))"], launcherPath: "/usr/bin/env", in: scratch)
        for (name, keyFile) in [("raw", try scratch.rawKeyFile("raw.key")), ("pass", try scratch.sentinelKeyFile("p"))] {
            let database = scratch.path("\(name).db")
            // The real SQLCipher 4 writes the file: this binary, run on the engine .ci/sqlcipher4 runs the suite with.
            let created = try runSubprocess(
                ["exec", database, "--key-file", keyFile.path, "--create",
                 "CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO item(body) VALUES ('a')"],
                environment: [
                    "LD_LIBRARY_PATH": engine,
                    "LD_PRELOAD": libpython.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines),
                ], in: scratch)
            try #require(created.status == 0, "\(created)")
            let before = try fileBytes(database)
            #expect(before.count % 4096 == 0)
            for command in try Self.keyedCommands(scratch, keyPath: keyFile.path) {
                let result = Self.run(command, database: database)
                #expect(result.status == 3, "\(command): \(result)")
                let output = result.standardError + result.standardOutput
                #expect(
                    output.contains(
                        "this file looks like SQLCipher 4's format; the linked engine is SQLCipher \(SQLCipher.version)"),
                    "\(result)")
                #expect(result.isFreeOfKeyMaterial)
            }
            #expect(try fileBytes(database) == before)
            // Another key does not make the claim: the probe checks the page's HMAC with the key given.
            let (otherPath, _) = try scratch.rawKeyFile("other-\(name).key")
            let other = runInProcess(["verify", database, "--key-file", otherPath])
            #expect(other.status == 3, "\(other)")
            #expect(!other.standardError.contains("SQLCipher 4's format"), "\(other)")
        }
    }

    @Test("a key file whose only fault is whitespace after x'…' says so, without showing the key")
    func rawKeyWithWhitespace() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let database = try scratch.database("notes.db", key: key)
        let keyText = try String(contentsOfFile: keyPath, encoding: .utf8).trimmingCharacters(in: .newlines)
        for (name, content) in [("spaces", keyText + "   \n"), ("blank-line", keyText + "\n\n"), ("tab", keyText + "\t")] {
            try scratch.writeFile(name, content, mode: 0o600)
            let result = runInProcess(["verify", database, "--key-file", scratch.path(name)])
            #expect(result.status == 1, "\(name): \(result)")
            #expect(result.standardError.contains("a raw key followed by whitespace"), "\(result)")
            #expect(result.standardError.contains("at most one newline"), "\(result)")
            #expect(!result.standardError.contains(String(keyText.dropFirst(2).prefix(16))), "\(result)")
        }
    }

    @Test("64 hex digits without x'…' are a passphrase that does not open the file: the message says why")
    func hexWithoutQuotes() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let database = try scratch.database("notes.db", key: key)
        let hex = try String(contentsOfFile: keyPath, encoding: .utf8).trimmingCharacters(in: .newlines)
            .dropFirst(2).dropLast()
        try scratch.writeFile("bare", hex + "\n", mode: 0o600)
        let result = runInProcess(["exec", database, "--key-file", scratch.path("bare"), "SELECT 1"])
        #expect(result.status == 3, "\(result)")
        #expect(result.standardError.contains("without x'…' around them"), "\(result)")
        #expect(!result.standardError.contains(String(hex.prefix(16))), "\(result)")
    }

    @Test("a passphrase with a trailing space that does not open the file: the message says so")
    func passphraseWithTrailingSpace() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.sentinelKeyFile("k")
        let database = try scratch.database("notes.db", key: key)
        try scratch.writeFile("spaced", Sentinel.text + " \n", mode: 0o600)
        let result = runInProcess(["verify", database, "--key-file", scratch.path("spaced")])
        #expect(result.status == 3, "\(result)")
        #expect(result.standardError.contains("ends with a space or a tab"), "\(result)")
        #expect(result.isFreeOfKeyMaterial, "\(result)")
        // The right passphrase opens it: the hint is only for a key that failed.
        #expect(runInProcess(["verify", database, "--key-file", scratch.path("k")]).status == 0)
    }

    @Test("a folder given as the database is a folder, not a missing file")
    func folderAsDatabase() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let folder = scratch.path("data")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for command in [["verify", folder], ["exec", folder, "SELECT 1"], ["backup", folder, scratch.path("b.db")]] {
            let result = runInProcess(command + ["--key-file", keyPath])
            #expect(result.status == 1, "\(result)")
            #expect(result.standardError.contains("is a folder, not a database file"), "\(result)")
            #expect(!result.standardError.contains("does not exist"), "\(result)")
        }
        let newKeyPath = try scratch.rawKeyFile("n").path
        let rotate = runInProcess(["rotate", folder, "--key-file", keyPath, "--new-key-file", newKeyPath])
        #expect(rotate.status == 1, "\(rotate)")
        #expect(rotate.standardOutput.contains("is not a regular file (a folder?)"), "\(rotate)")
    }

    @Test("a misspelt subcommand is named (did you mean), not blamed on --key-file")
    func misspeltSubcommand() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let result = runInProcess(["veryfy", scratch.path("x.db"), "--key-file", keyPath])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("unknown subcommand 'veryfy'; did you mean 'verify'?"), "\(result)")
        #expect(!result.standardError.contains("--key-file"), "\(result)")
        let json = runInProcess(["veryfy", scratch.path("x.db"), "--key-file", keyPath, "--json"])
        #expect((jsonEnvelope(json)?["error"] as? [String: Any])?["kind"] as? String == "usage", "\(json)")
        let unknown = runInProcess(["frobnicate", "--key-file", keyPath])
        #expect(unknown.status == 2, "\(unknown)")
        #expect(unknown.standardError.contains("the subcommands are keygen, rotate, verify"), "\(unknown)")
    }

    @Test("the database before the subcommand: the subcommand comes first")
    func databaseBeforeSubcommand() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let database = scratch.path("x.db")
        let result = runInProcess([database, "verify", "--key-file", keyPath])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("the subcommand comes first: sqlcipherkit verify \(database)"), "\(result)")
        #expect(!result.standardError.contains("Unknown option"), "\(result)")
    }

    @Test("encrypt --key-file: did you mean --new-key-file", arguments: ["--key-file", "--key-env"])
    func encryptWithKeyOption(option: String) throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let plain = try plaintextDatabase(scratch, "plain.db")
        let result = runInProcess(["encrypt", plain, scratch.path("enc.db"), option, option == "--key-env" ? "K" : keyPath])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("did you mean --new-\(option.dropFirst(2))"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("enc.db")))
    }

    @Test("encrypt of an encrypted file says so and advises no option encrypt does not take")
    func encryptEncryptedFile() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let database = try scratch.database("notes.db", key: key)
        let result = runInProcess(["encrypt", database, scratch.path("enc.db"), "--new-key-file", keyPath])
        #expect(result.status == 3, "\(result)")
        #expect(result.standardError.contains("probably encrypted already"), "\(result)")
        #expect(result.standardError.contains("sqlcipherkit rotate"), "\(result)")
        #expect(!result.standardError.contains("--key-file"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("enc.db")))
    }

    @Test("exec on a plaintext file without --plaintext says the file is plaintext")
    func execPlaintextWithoutFlag() throws {
        let scratch = try Scratch()
        let plain = try plaintextDatabase(scratch, "plain.db")
        let result = runInProcess(["exec", plain, "SELECT count(*) FROM item"])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("is a plaintext (unencrypted) SQLite database: give --plaintext"), "\(result)")
        #expect(!result.standardError.contains("is missing"), "\(result)")
    }

    @Test("operators read CLI words: a refused key PRAGMA names sqlcipherkit rotate, not Connection.rekey(to:)")
    func guardRefusalInCLIWords() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let database = try scratch.database("notes.db", key: key)
        let result = runInProcess(["exec", database, "--key-file", keyPath, "PRAGMA rekey = 'x'"])
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("sqlcipherkit rotate"), "\(result)")
        for apiName in ["Connection.", "rekey(to:)", "KeyRotation", "CipherSettings"] {
            #expect(!result.standardError.contains(apiName), "\(result)")
        }
    }

    @Test("every message starts with the same `error:`, ArgumentParser's own included")
    func oneCapitalisation() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        for arguments in [["verify", "x.db", "--key-file", keyPath, "--no-such-option"], ["verify"],
                          ["verify", scratch.path("missing.db"), "--key-file", keyPath]] {
            let result = runInProcess(arguments)
            #expect(result.status != 0)
            #expect(result.standardError.hasPrefix("error: "), "\(result)")
            #expect(!result.standardError.contains("Error: "), "\(result)")
        }
    }
}

/// Runs another program (not the CLI) and waits for it.
private func runSubprocess(_ arguments: [String], launcherPath: String, in scratch: Scratch) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: launcherPath)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CommandResult(
        status: process.terminationStatus, standardOutput: String(decoding: data, as: UTF8.self), standardError: "")
}
