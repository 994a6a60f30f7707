import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Every subcommand takes `--json` and prints exactly one object with the same top-level keys, on success and on
/// failure (wrong key, missing file, plaintext file).
@Suite("sqlcipherkit --json contract")
struct JSONContractTests {
    static let topLevelKeys: Set<String> = ["ok", "exitStatus", "command", "error", "engine", "result"]

    /// Checks the envelope's shape against the run's exit status.
    func expectEnvelope(
        _ result: CommandResult, command: String, status expected: Int32? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let envelope = jsonEnvelope(result) else {
            Issue.record("not exactly one JSON object: \(result)", sourceLocation: sourceLocation)
            return
        }
        #expect(Set(envelope.keys) == Self.topLevelKeys, "\(envelope.keys)", sourceLocation: sourceLocation)
        #expect(envelope["command"] as? String == command, sourceLocation: sourceLocation)
        #expect(envelope["exitStatus"] as? Int == Int(result.status), sourceLocation: sourceLocation)
        #expect(envelope["ok"] as? Bool == (result.status == 0), sourceLocation: sourceLocation)
        if let expected { #expect(result.status == expected, "\(result)", sourceLocation: sourceLocation) }
        let engine = envelope["engine"] as? [String: Any]
        #expect(engine?["sqlcipherVersion"] as? String == SQLCipher.version, sourceLocation: sourceLocation)
        #expect(engine?["openSSLVersion"] as? String == OpenSSLRuntime.version, sourceLocation: sourceLocation)
        if result.status == 0 {
            #expect(envelope["error"] is NSNull, sourceLocation: sourceLocation)
        } else {
            let error = envelope["error"] as? [String: Any]
            #expect(error?["kind"] is String, "\(envelope)", sourceLocation: sourceLocation)
            #expect(error?["message"] is String, sourceLocation: sourceLocation)
            #expect(error.map { Set($0.keys) } == ["kind", "code", "message"], "\(envelope)", sourceLocation: sourceLocation)
            // The kind is one Docs/CLI.md lists for this exit status.
            let kinds = DocumentedJSONSchema.kindsByStatus[Int(result.status)] ?? []
            #expect(kinds.contains(error?["kind"] as? String ?? ""), "\(envelope)", sourceLocation: sourceLocation)
        }
        // The result, when there is one, is exactly what Docs/CLI.md documents for the subcommand.
        if let value = envelope["result"], !(value is NSNull) {
            let schema = DocumentedJSONSchema.results[command]
            #expect(schema != nil, "no documented result for \(command)", sourceLocation: sourceLocation)
            if let schema {
                let problems = DocumentedJSONSchema.problems(value, schema, at: "result")
                #expect(problems.isEmpty, "\(command): \(problems)\n\(result)", sourceLocation: sourceLocation)
            }
        } else if result.status == 0 {
            Issue.record("\(command) succeeded without a result: \(result)", sourceLocation: sourceLocation)
        }
        #expect(result.isFreeOfKeyMaterial, sourceLocation: sourceLocation)
    }

    struct Fixture {
        let scratch: Scratch
        let keyPath: String
        let otherKeyPath: String
        let newKeyPath: String
        let database: String
        let plaintext: String
        let missing: String

        init() throws {
            scratch = try Scratch()
            let (keyPath, key) = try scratch.sentinelKeyFile("k")
            self.keyPath = keyPath
            otherKeyPath = try scratch.sentinelKeyFile("other", suffix: "-other").path
            newKeyPath = try scratch.rawKeyFile("new").path
            database = try scratch.database("notes.db", key: key, rowCount: 30)
            plaintext = try plaintextDatabase(scratch, "plain.db")
            missing = scratch.path("missing.db")
        }
    }

    @Test("verify: success, wrong key, missing file, plaintext file")
    func verify() throws {
        let f = try Fixture()
        expectEnvelope(runInProcess(["verify", f.database, "--key-file", f.keyPath, "--json"]), command: "verify", status: 0)
        let success = jsonEnvelope(runInProcess(["verify", f.database, "--key-file", f.keyPath, "--json"]))
        let report = success?["result"] as? [String: Any]
        #expect(report?["quickCheckProblems"] as? [String] == [])
        #expect(report?["damagedPages"] as? [Int] == [])
        expectEnvelope(runInProcess(["verify", f.database, "--key-file", f.otherKeyPath, "--json"]), command: "verify", status: 3)
        expectEnvelope(runInProcess(["verify", f.missing, "--key-file", f.keyPath, "--json"]), command: "verify", status: 1)
        expectEnvelope(runInProcess(["verify", f.plaintext, "--key-file", f.keyPath, "--json"]), command: "verify", status: 3)
    }

    @Test("info, exec, backup, decrypt: success, wrong key, missing file, plaintext file")
    func commandsWithOneKey() throws {
        let f = try Fixture()
        let cases: [(String, [String], Int32, Int32)] = [
            // command, arguments after the database, status for a missing file, for a plaintext file
            ("info", [], 1, 3),
            ("exec", ["SELECT count(*) FROM item"], 1, 3),
            ("backup", [f.scratch.path("copy.db")], 1, 3),
            ("decrypt", [f.scratch.path("plain-copy.db"), "--allow-plaintext"], 1, 3),
        ]
        for (command, rest, missingStatus, plaintextStatus) in cases {
            expectEnvelope(
                runInProcess([command, f.database] + rest + ["--key-file", f.keyPath, "--json"]), command: command,
                status: 0)
            for name in ["copy.db", "plain-copy.db"] { try? FileManager.default.removeItem(atPath: f.scratch.path(name)) }
            expectEnvelope(
                runInProcess([command, f.database] + rest + ["--key-file", f.otherKeyPath, "--json"]), command: command,
                status: 3)
            expectEnvelope(
                runInProcess([command, f.missing] + rest + ["--key-file", f.keyPath, "--json"]), command: command,
                status: missingStatus)
            expectEnvelope(
                runInProcess([command, f.plaintext] + rest + ["--key-file", f.keyPath, "--json"]), command: command,
                status: plaintextStatus)
        }
        #expect(!FileManager.default.fileExists(atPath: f.missing))
    }

    @Test("exec --json gives rows as arrays of typed values")
    func execRows() throws {
        let f = try Fixture()
        let result = runInProcess([
            "exec", f.database, "--key-file", f.keyPath, "--json", "SELECT 1, NULL, x'00ff', 2.5, 'text'",
        ])
        expectEnvelope(result, command: "exec", status: 0)
        let results = (jsonEnvelope(result)?["result"] as? [String: Any])?["results"] as? [[String: Any]]
        let row = (results?.first?["rows"] as? [[Any]])?.first
        #expect(row?.count == 5)
        #expect(row?[0] as? Int == 1)
        #expect(row?[1] is NSNull)
        #expect(row?[2] as? String == "x'00ff'")
        #expect(row?[3] as? Double == 2.5)
        #expect(row?[4] as? String == "text")
    }

    @Test("rotate: success, wrong key, missing file, plaintext file; the databases as an array")
    func rotate() throws {
        let f = try Fixture()
        let success = runInProcess([
            "rotate", f.database, "--key-file", f.keyPath, "--new-key-file", f.newKeyPath, "--json",
        ])
        expectEnvelope(success, command: "rotate", status: 0)
        #expect(((jsonEnvelope(success)?["result"] as? [String: Any])?["databases"] as? [Any])?.count == 1)
        for (path, status) in [(f.database, Int32(3)), (f.missing, 1), (f.plaintext, 3)] {
            expectEnvelope(
                runInProcess(["rotate", path, "--key-file", f.keyPath, "--new-key-file", f.otherKeyPath, "--json"]),
                command: "rotate", status: status)
        }
    }

    @Test("encrypt: success, missing source, an encrypted source")
    func encrypt() throws {
        let f = try Fixture()
        expectEnvelope(
            runInProcess(["encrypt", f.plaintext, f.scratch.path("enc.db"), "--new-key-file", f.newKeyPath, "--json"]),
            command: "encrypt", status: 0)
        expectEnvelope(
            runInProcess(["encrypt", f.missing, f.scratch.path("enc2.db"), "--new-key-file", f.newKeyPath, "--json"]),
            command: "encrypt", status: 1)
        let encrypted = runInProcess([
            "encrypt", f.database, f.scratch.path("enc3.db"), "--new-key-file", f.newKeyPath, "--json",
        ])
        expectEnvelope(encrypted, command: "encrypt")
        #expect(encrypted.status != 0)
    }

    @Test("migrate: a SQLCipher 3 file (SQLCipher 4 only), wrong key, missing file, plaintext file")
    func migrate() throws {
        let f = try Fixture()
        if Engine.isVersion4 {
            let key = try EncryptionKey(contentsOf: f.keyPath)
            let legacy = try f.scratch.database("legacy.db", key: key, settings: .sqlcipher3)
            expectEnvelope(runInProcess(["migrate", legacy, "--key-file", f.keyPath, "--json"]), command: "migrate", status: 0)
            expectEnvelope(
                runInProcess(["migrate", f.database, "--key-file", f.otherKeyPath, "--json"]), command: "migrate",
                status: 3)
            expectEnvelope(
                runInProcess(["migrate", f.plaintext, "--key-file", f.keyPath, "--json"]), command: "migrate", status: 3)
        }
        // On SQLCipher 3 every run fails (the engine cannot write the 4 format), still with one object.
        let missing = runInProcess(["migrate", f.missing, "--key-file", f.keyPath, "--json"])
        expectEnvelope(missing, command: "migrate", status: 1)
    }

    @Test("keygen, demo, and a usage error print one object too")
    func others() throws {
        let f = try Fixture()
        expectEnvelope(runInProcess(["keygen", "--out", f.scratch.path("g.key"), "--json"]), command: "keygen", status: 0)
        expectEnvelope(runInProcess(["keygen", "--out", f.keyPath, "--json"]), command: "keygen", status: 1)
        expectEnvelope(try runSubprocess(["demo", "--json"], in: f.scratch), command: "demo", status: 0)
        let usage = runInProcess(["verify", f.database, "--kye-file", f.keyPath, "--json"])
        expectEnvelope(usage, command: "verify", status: 2)
        #expect((jsonEnvelope(usage)?["error"] as? [String: Any])?["kind"] as? String == "usage")
    }

    @Test("--json before the subcommand is the same --json: one object, for success and failure")
    func jsonBeforeSubcommand() throws {
        let f = try Fixture()
        expectEnvelope(runInProcess(["--json", "verify", f.database, "--key-file", f.keyPath]), command: "verify", status: 0)
        expectEnvelope(
            try runSubprocess(["--json", "verify", "notes.db", "--key-file", f.otherKeyPath], in: f.scratch),
            command: "verify", status: 3)
        expectEnvelope(runInProcess(["--json", "info", f.missing]), command: "info", status: 1)
        // Given before and after: one flag, not a usage error.
        expectEnvelope(runInProcess(["--json", "keygen", "--out", f.keyPath, "--json"]), command: "keygen", status: 1)
    }

    @Test("info: success without and with a key, a wrong key, a missing file; shell with statements on standard input")
    func infoAndShell() throws {
        let f = try Fixture()
        expectEnvelope(runInProcess(["info", f.database, "--json"]), command: "info", status: 0)
        expectEnvelope(runInProcess(["info", f.database, "--key-file", f.keyPath, "--json"]), command: "info", status: 0)
        expectEnvelope(runInProcess(["info", f.plaintext, "--json"]), command: "info", status: 0)
        expectEnvelope(runInProcess(["info", f.missing, "--json"]), command: "info", status: 1)
        let wrong = runInProcess(["info", f.database, "--key-file", f.otherKeyPath, "--json"])
        expectEnvelope(wrong, command: "info")
        let shell = try runSubprocess(
            ["shell", f.database, "--key-file", f.keyPath, "--json"], standardInput: Array("SELECT 1;\n".utf8),
            in: f.scratch)
        expectEnvelope(shell, command: "shell", status: 0)
        expectEnvelope(
            try runSubprocess(["shell", f.database, "--key-file", f.otherKeyPath, "--json"], standardInput: [], in: f.scratch),
            command: "shell", status: 3)
    }

    @Test("one kind per condition: a missing database is missingFile, an existing destination destinationExists")
    func oneKindPerCondition() throws {
        let f = try Fixture()
        func kind(_ result: CommandResult) -> String? {
            (jsonEnvelope(result)?["error"] as? [String: Any])?["kind"] as? String
        }
        for arguments in [
            ["verify", f.missing, "--key-file", f.keyPath], ["backup", f.missing, f.scratch.path("c.db"), "--key-file", f.keyPath],
            ["decrypt", f.missing, f.scratch.path("p.db"), "--key-file", f.keyPath, "--allow-plaintext"],
            ["encrypt", f.missing, f.scratch.path("e.db"), "--new-key-file", f.newKeyPath],
            ["exec", f.missing, "--key-file", f.keyPath, "SELECT 1"],
        ] {
            let result = runInProcess(arguments + ["--json"])
            expectEnvelope(result, command: arguments[0], status: 1)
            #expect(kind(result) == "missingFile", "\(result)")
        }
        let rotate = runInProcess(["rotate", f.missing, "--key-file", f.keyPath, "--new-key-file", f.newKeyPath, "--json"])
        let databases = (jsonEnvelope(rotate)?["result"] as? [String: Any])?["databases"] as? [[String: Any]]
        #expect((databases?.first?["error"] as? [String: Any])?["kind"] as? String == "missingFile", "\(rotate)")
        let existing = try f.scratch.database("existing.db", key: try EncryptionKey(contentsOf: f.keyPath))
        for arguments in [
            ["backup", f.database, existing, "--key-file", f.keyPath],
            ["decrypt", f.database, existing, "--key-file", f.keyPath, "--allow-plaintext"],
            ["encrypt", f.plaintext, existing, "--new-key-file", f.newKeyPath],
            ["keygen", "--out", f.keyPath],
        ] {
            let before = try fileBytes(arguments[0] == "keygen" ? f.keyPath : existing)
            let result = runInProcess(arguments + ["--json"])
            expectEnvelope(result, command: arguments[0], status: 1)
            #expect(kind(result) == "destinationExists", "\(result)")
            #expect(try fileBytes(arguments[0] == "keygen" ? f.keyPath : existing) == before)
        }
    }

    @Test("every subcommand has --json")
    func everySubcommand() {
        for command in SQLCipherKitCommand.configuration.subcommands
        where command.configuration.shouldDisplay {
            #expect(command is any OperatorCommand.Type, "\(command.configuration.commandName ?? "")")
            #expect(command.helpMessage().contains("--json"), "\(command.configuration.commandName ?? "")")
        }
    }
}
