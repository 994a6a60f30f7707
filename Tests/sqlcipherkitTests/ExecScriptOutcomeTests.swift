import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `exec` with several statements: its exit status and its JSON say the same thing, say which statements ran and which
/// were kept, and a real JSON cannot hold has an encoding of its own (Docs/CLI.md, "exec").
@Suite("sqlcipherkit exec: what a script ran and kept")
struct ExecScriptOutcomeTests {
    /// The `result` of a `--json` run, with the envelope's status checked against the exit status.
    func result(_ run: CommandResult, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        let envelope = jsonEnvelope(run)
        #expect(envelope != nil, "not one JSON object: \(run)", sourceLocation: sourceLocation)
        #expect(envelope?["exitStatus"] as? Int == Int(run.status), "\(run)", sourceLocation: sourceLocation)
        #expect(envelope?["ok"] as? Bool == (run.status == 0), "\(run)", sourceLocation: sourceLocation)
        return envelope?["result"] as? [String: Any] ?? [:]
    }

    @Test("infinite reals exit 0 and encode as {\"real\": \"Infinity\"} in exec --json and --mode json, not as numbers")
    func infiniteReals() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 3)
        let sql = "INSERT INTO item(body) VALUES ('four'); SELECT 1e999, -1e999, 'Infinity', 0.5"
        // The red team's case: before, the process exited 0 and its JSON said ok: false, exitStatus: 1.
        for run in [runInProcess(["exec", db, "--key-file", keyPath, "--json", sql]),
                    try runSubprocess(["exec", "notes.db", "--key-file", keyPath, "--json", sql], in: scratch)] {
            #expect(run.status == 0, "\(run)")
            let report = result(run)
            let rows = (report["results"] as? [[String: Any]])?.first?["rows"] as? [[Any]]
            let values = rows?.first
            #expect((values?[0] as? [String: String]) == ["real": "Infinity"], "\(run)")
            #expect((values?[1] as? [String: String]) == ["real": "-Infinity"])
            #expect(values?[2] as? String == "Infinity", "text stays a string")
            #expect((values?[3] as? NSNumber)?.doubleValue == 0.5)
            #expect(report["completedStatementCount"] as? Int == 2)
            #expect(report["failedStatement"] is NSNull)
            #expect(report["rolledBackFrom"] is NSNull)
            #expect((report["results"] as? [[String: Any]])?.first?["statement"] as? Int == 2)
        }
        // Two runs, one INSERT each, both committed: what exit 0 says.
        #expect(try rowCount(db, key: key) == 5)
        let modeJSON = runInProcess(["exec", db, "--key-file", keyPath, "--mode", "json", "SELECT 1e999 AS a, -1e999 AS b"])
        #expect(modeJSON.status == 0, "\(modeJSON)")
        #expect(modeJSON.standardOutput == #"[{"a":{"real":"Infinity"},"b":{"real":"-Infinity"}}]"# + "\n")
        let parsed = try JSONSerialization.jsonObject(with: Data(modeJSON.standardOutput.utf8)) as? [[String: Any]]
        #expect((parsed?.first?["a"] as? [String: String]) == ["real": "Infinity"])
        let list = runInProcess(["exec", db, "--key-file", keyPath, "SELECT 1e999, -1e999"])
        #expect(list.standardOutput == "1e999\t-1e999\n", "list mode keeps the SQL literal that reads back")
        // The shell's json mode writes them the same way.
        let shell = try runSubprocess(
            ["shell", "notes.db", "--key-file", keyPath], standardInput: Array(".mode json\nSELECT 1e999 AS a;\n".utf8),
            in: scratch)
        #expect(shell.status == 0, "\(shell)")
        #expect(shell.standardOutput == #"[{"a":{"real":"Infinity"}}]"# + "\n", "\(shell)")
    }

    @Test("a later statement's error: the ones before it ran and stay committed, and the JSON says which")
    func laterStatementFails() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 3)
        let sql = "INSERT INTO item(body) VALUES ('a'); SELECT count(*) FROM item; SELECT nosuch FROM item;"
            + " INSERT INTO item(body) VALUES ('never')"
        let run = runInProcess(["exec", db, "--key-file", keyPath, "--json", sql])
        #expect(run.status == 1, "\(run)")
        let report = result(run)
        #expect(report["completedStatementCount"] as? Int == 2)
        #expect(report["failedStatement"] as? Int == 3)
        #expect(report["rolledBackFrom"] is NSNull)
        #expect((report["results"] as? [[String: Any]])?.map { $0["statement"] as? Int } == [2])
        #expect(try rowCount(db, key: key) == 4, "statement 1 committed, statement 4 never ran")
        let text = runInProcess(["exec", db, "--key-file", keyPath, "INSERT INTO item(body) VALUES ('b'); SELEC 1"])
        #expect(text.status == 1)
        #expect(text.standardError.contains("statement 2 failed; statement 1 ran and stays committed"), "\(text)")
        #expect(try rowCount(db, key: key) == 5)
    }

    @Test("an error inside a transaction the SQL began rolls it back, and the JSON names the statement it began at")
    func failureInsideTransaction() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 3)
        let sql = "INSERT INTO item(body) VALUES ('kept'); BEGIN; INSERT INTO item(body) VALUES ('lost');"
            + " SELECT nosuch FROM item; COMMIT"
        let run = try runSubprocess(["exec", "notes.db", "--key-file", keyPath, "--json", sql], in: scratch)
        #expect(run.status == 1, "\(run)")
        let report = result(run)
        #expect(report["completedStatementCount"] as? Int == 3)
        #expect(report["failedStatement"] as? Int == 4)
        #expect(report["rolledBackFrom"] as? Int == 2)
        #expect(run.standardError.contains("statement 4 failed inside the transaction statement 2 began"), "\(run)")
        let fresh = try Connection(path: db, key: key)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM item WHERE body = 'kept'", as: Int.self) == 1)
        #expect(try fresh.scalar("SELECT count(*) FROM item WHERE body = 'lost'", as: Int.self) == 0)
    }

    @Test("a script that leaves its transaction open is an error, not exit 0 with its writes silently dropped")
    func transactionLeftOpen() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 3)
        let sql = "INSERT INTO item(body) VALUES ('kept'); BEGIN; INSERT INTO item(body) VALUES ('lost')"
        let run = runInProcess(["exec", db, "--key-file", keyPath, "--json", sql])
        #expect(run.status == 1, "\(run)")
        let envelope = jsonEnvelope(run)
        #expect((envelope?["error"] as? [String: Any])?["kind"] as? String == "invalidState")
        let report = result(run)
        #expect(report["completedStatementCount"] as? Int == 3)
        #expect(report["failedStatement"] is NSNull)
        #expect(report["rolledBackFrom"] as? Int == 2)
        #expect(try rowCount(db, key: key) == 4)
        let committed = runInProcess(["exec", db, "--key-file", keyPath, "BEGIN; INSERT INTO item(body) VALUES ('x'); COMMIT"])
        #expect(committed.status == 0, "\(committed)")
        #expect(try rowCount(db, key: key) == 5)
    }
}

/// An answer written nowhere is not a success: a command whose standard output is full (`/dev/full`) ends with 1.
@Suite("sqlcipherkit: results that cannot be written")
struct LostOutputTests {
    /// Runs the binary with standard output on `/dev/full` (every write fails with ENOSPC), standard error to a file.
    func runIntoFullDevice(_ arguments: [String], in scratch: Scratch) throws -> (status: Int32, standardError: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binaryPath)
        process.arguments = arguments
        process.currentDirectoryURL = scratch.url
        let errorPath = scratch.path(".stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        let error = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        process.standardOutput = full
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try error.close()
        try full.close()
        defer { try? FileManager.default.removeItem(atPath: errorPath) }
        return (process.terminationStatus, try String(contentsOfFile: errorPath, encoding: .utf8))
    }

    @Test("rows, a JSON object or a report that cannot be written to standard output exit 1 and say so",
          .enabled(if: FileManager.default.isWritableFile(atPath: "/dev/full"), "needs /dev/full"))
    func fullStandardOutput() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("notes.db", key: key, rowCount: 3)
        for arguments in [
            ["exec", "notes.db", "--key-file", keyPath, "SELECT * FROM item"],
            ["exec", "notes.db", "--key-file", keyPath, "--json", "SELECT count(*) FROM item"],
            ["verify", "notes.db", "--key-file", keyPath, "--json"],
            ["info", "notes.db"],
        ] {
            let run = try runIntoFullDevice(arguments, in: scratch)
            #expect(run.status == 1, "\(arguments): \(run)")
            #expect(run.standardError.contains("could not be written to standard output"), "\(run)")
        }
        // A failure keeps its own status (the key's 3), with the same note.
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let wrong = try runIntoFullDevice(["verify", "notes.db", "--key-file", otherPath, "--json"], in: scratch)
        #expect(wrong.status == 3, "\(wrong)")
    }
}
