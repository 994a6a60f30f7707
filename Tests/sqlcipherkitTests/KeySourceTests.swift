import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("Key sources: --key-file, --key-env, --key-stdin")
struct KeySourceTests {
    @Test("a key given twice is a usage error (exit 2)")
    func keyGivenTwice() throws {
        #expect(parsingStatus(["verify", "x.db", "--key-file", "a", "--key-env", "B"]) == .usage)
        #expect(parsingStatus(["verify", "x.db", "--key-file", "a", "--key-stdin"]) == .usage)
        #expect(parsingStatus(["rotate", "x.db", "--key-file", "a", "--new-key-file", "b", "--new-key-stdin"]) == .usage)
        let scratch = try Scratch()
        let result = try runSubprocess(["verify", "x.db", "--key-file", "a", "--key-file", "b"], in: scratch)
        #expect(result.status == 2, "\(result)")
    }

    @Test("a missing key is a usage error when standard input is not a terminal")
    func missingKey() {
        // Checked when the command runs, after ArgumentParser has reported any unknown option.
        #expect(runInProcess(["verify", "x.db"]).status == 2)
        #expect(runInProcess(["rotate", "x.db", "--key-file", "a"]).status == 2)
        #expect(runInProcess(["exec", "x.db", "SELECT 1"]).status == 2)
    }

    @Test("two keys from standard input are refused")
    func twoKeysFromStandardInput() {
        #expect(parsingStatus(["rotate", "x.db", "--key-stdin", "--new-key-stdin"]) == .usage)
        #expect(parsingStatus(["backup", "x.db", "y.db", "--key-stdin", "--dest-key-stdin"]) == .usage)
    }

    @Test("an unset or empty --key-env variable is a usage error")
    func environmentVariableUnsetOrEmpty() throws {
        let scratch = try Scratch()
        let name = "SQLCIPHERKIT_TEST_KEY_\(UUID().uuidString.prefix(8))"
        let unset = try runSubprocess(["verify", "x.db", "--key-env", name], environment: [name: nil], in: scratch)
        #expect(unset.status == 2, "\(unset)")
        #expect(unset.standardError.contains("not set"))
        let empty = try runSubprocess(["verify", "x.db", "--key-env", name], environment: [name: ""], in: scratch)
        #expect(empty.status == 2, "\(empty)")
        #expect(empty.standardError.contains("empty"))
    }

    @Test("--key-env and --key-stdin read the key-file format, a trailing newline stripped")
    func environmentAndStandardInput() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.sentinelKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let fromEnvironment = try runSubprocess(
            ["exec", db, "--key-env", "NOTES_KEY", "SELECT count(*) FROM item"],
            environment: ["NOTES_KEY": Sentinel.text + "\n"], in: scratch)
        #expect(fromEnvironment.status == 0, "\(fromEnvironment)")
        #expect(fromEnvironment.standardOutput == "20\n")
        let fromStandardInput = try runSubprocess(
            ["exec", db, "--key-stdin", "SELECT count(*) FROM item"], standardInput: Array((Sentinel.text + "\n").utf8),
            in: scratch)
        #expect(fromStandardInput.status == 0, "\(fromStandardInput)")
        #expect(fromStandardInput.standardOutput == "20\n")
        #expect(fromEnvironment.isFreeOfKeyMaterial && fromStandardInput.isFreeOfKeyMaterial)
    }

    @Test("a raw key on standard input; empty standard input is an error")
    func rawKeyOnStandardInput() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let text = try fileBytes(keyPath)
        let result = try runSubprocess(
            ["exec", db, "--key-stdin", "SELECT count(*) FROM item"], standardInput: text, in: scratch)
        #expect(result.status == 0, "\(result)")
        let empty = try runSubprocess(["exec", db, "--key-stdin", "SELECT 1"], standardInput: [], in: scratch)
        #expect(empty.status == 1, "\(empty)")
        #expect(empty.standardError.contains("empty"))
        let malformed = try runSubprocess(
            ["exec", db, "--key-stdin", "SELECT 1"], standardInput: Array("x'abc'".utf8), in: scratch)
        #expect(malformed.status == 1, "\(malformed)")
        #expect(malformed.standardError.contains("hex"))
    }

    @Test("a missing key file and a loose-permission key file are refused")
    func badKeyFiles() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let missing = runInProcess(["verify", db, "--key-file", scratch.path("nope.key")])
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.standardError.contains("nope.key"))
        try scratch.writeFile("loose.key", Sentinel.text + "\n", mode: 0o644)
        let loose = runInProcess(["verify", db, "--key-file", scratch.path("loose.key")])
        #expect(loose.status == 1, "\(loose)")
        #expect(loose.standardError.contains("chmod 600"))
        #expect(loose.isFreeOfKeyMaterial)
    }

    @Test("a key is never accepted as an argument value: there is no --key option")
    func noKeyArgument() {
        #expect(parsingStatus(["verify", "x.db", "--key", "secret"]) == .usage)
        #expect(parsingStatus(["rotate", "x.db", "--key-file", "a", "--new-key", "secret"]) == .usage)
    }
}

@Suite("Exit statuses")
struct ExitStatusTests {
    @Test("library error kinds map to 3 (key) and 4 (verification), the rest to 1")
    func mapping() {
        func status(_ kind: DatabaseError.Kind) -> CLIExitStatus {
            CLIExitStatus.status(for: DatabaseError(kind: kind, code: DatabaseError.SQLITE_ERROR, message: ""))
        }
        for kind in [DatabaseError.wrongKey, .notEncrypted, .missingKey, .notADatabase] {
            #expect(status(kind) == .keyDoesNotOpenDatabase)
        }
        #expect(status(.verificationFailed) == .verificationFailed)
        #expect(status(.invalidKey) == .failure)
        #expect(status(.fileSystem) == .failure)
        #expect(CLIExitStatus.combined([.success, .keyDoesNotOpenDatabase]) == .keyDoesNotOpenDatabase)
        #expect(CLIExitStatus.combined([.keyDoesNotOpenDatabase, .failure]) == .failure)
        #expect(CLIExitStatus.combined([.success]) == .success)
    }

    @Test("--help exits 0 and every subcommand's help has an abstract, a discussion and an example")
    func help() throws {
        let scratch = try Scratch()
        for command in SQLCipherKitCommand.configuration.subcommands {
            let configuration = command.configuration
            #expect(!configuration.abstract.isEmpty)
            #expect(configuration.discussion.contains("Example"), "\(configuration.commandName ?? "")")
        }
        let help = try runSubprocess(["rotate", "--help"], in: scratch)
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("--new-key-file"))
        let unknown = try runSubprocess(["frobnicate"], in: scratch)
        #expect(unknown.status == 2, "\(unknown)")
    }
}
