import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `sqlcipherkit shell DB … < script.sql`: the real binary with its statements and dot-commands on standard input.
@Suite("sqlcipherkit shell with a script on standard input")
struct ShellScriptTests {
    /// A scratch folder with an encrypted `notes.db` (`item` with 3 rows) and its raw key file.
    struct Fixture {
        let scratch: Scratch
        let keyPath: String
        let key: EncryptionKey
        let database: String

        init(rowCount: Int = 3) throws {
            scratch = try Scratch()
            (keyPath, key) = try scratch.rawKeyFile("k")
            database = try scratch.database("notes.db", key: key, rowCount: rowCount)
        }

        func shell(_ script: String, _ arguments: [String] = []) throws -> CommandResult {
            try runSubprocess(
                ["shell", "notes.db", "--key-file", keyPath] + arguments, standardInput: Array(script.utf8),
                in: scratch)
        }

        func count(_ sql: String) throws -> Int? {
            let db = try Connection(path: database, key: key)
            defer { db.close() }
            return try db.scalar(sql, as: Int.self)
        }
    }

    @Test(".tables, .schema and .indexes, with and without a pattern")
    func schemaCommands() throws {
        let f = try Fixture()
        let result = try f.shell("""
            CREATE TABLE note(id INTEGER PRIMARY KEY, title TEXT UNIQUE);
            CREATE INDEX note_title ON note(title);
            CREATE VIEW item_view AS SELECT id FROM item;
            .tables
            .tables no%
            .schema note
            .indexes
            .indexes ITEM
            """)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == """
            item
            item_view
            note
            note
            CREATE TABLE note(id INTEGER PRIMARY KEY, title TEXT UNIQUE);
            CREATE INDEX note_title ON note(title);
            note_title
            sqlite_autoindex_note_1

            """)
    }

    @Test(".mode, .headers, .nullvalue change the printing; .timer reports on standard error; .help lists the commands")
    func printingCommands() throws {
        let f = try Fixture()
        let result = try f.shell("""
            .headers on
            .mode csv
            SELECT id, NULL AS empty FROM item WHERE id = 1;
            .mode json
            SELECT id FROM item WHERE id <= 2;
            .mode list
            .nullvalue (none)
            .headers off
            SELECT NULL, 'NULL';
            .mode line
            SELECT 1 AS a, 22 AS bb;
            .timer on
            .mode box
            SELECT 'x' AS c;
            .help
            """)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.hasPrefix("""
            id,empty\r
            1,\r
            [{"id":1},
            {"id":2}]
            (none)\tNULL
             a = 1
            bb = 22
            ┌───┐
            │ c │
            ├───┤
            │ x │
            └───┘
            .dump [TABLE]
            """))
        #expect(result.standardOutput.contains(".import [--csv] [--skip N] FILE TABLE"))
        #expect(result.standardError.contains("Run Time: real "), "\(result)")
    }

    @Test("without a terminal the first error stops the shell with its status; what came before stays done")
    func stopsAtFirstError() throws {
        let f = try Fixture()
        let result = try f.shell("""
            INSERT INTO item(body) VALUES ('four');
            SELECT count(*) FROM item;
            INSERT INTO nosuch VALUES (1);
            INSERT INTO item(body) VALUES ('five');
            """)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardOutput == "4\n")
        #expect(result.standardError.contains("nosuch"))
        #expect(try f.count("SELECT count(*) FROM item") == 4)
        let unknown = try f.shell(".frobnicate\nINSERT INTO item(body) VALUES ('six');\n")
        #expect(unknown.status == 2, "\(unknown)")
        #expect(unknown.standardError.contains(".help"))
        #expect(try f.count("SELECT count(*) FROM item") == 4)
        let quit = try f.shell("SELECT 1;\n.quit\nINSERT INTO item(body) VALUES ('seven');\n")
        #expect(quit.status == 0 && quit.standardOutput == "1\n", "\(quit)")
        #expect(try f.count("SELECT count(*) FROM item") == 4)
    }

    @Test("a statement spans lines; the last one needs no semicolon; a semicolon inside a string does not end it")
    func statementsSpanLines() throws {
        let f = try Fixture()
        let result = try f.shell("SELECT 'a;\nb'\n  AS s;\n\nSELECT count(*)\nFROM item")
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == "a;\\nb\n3\n")
    }

    @Test("the guard refuses key and cipher PRAGMAs typed in the shell; the file and the key stay as they were")
    func guardRefusesKeyPragmas() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let database = try scratch.database("notes.db", key: key, rowCount: 3)
        for pragma in ["PRAGMA key = 'other'", "PRAGMA rekey = '\(Sentinel.text)x'", "PRAGMA cipher_page_size = 8192"] {
            let before = try Data(contentsOf: URL(fileURLWithPath: database))
            let result = try runSubprocess(
                ["shell", "notes.db", "--key-file", keyPath],
                standardInput: Array("\(pragma);\nINSERT INTO item(body) VALUES ('x');\n".utf8), in: scratch)
            #expect(result.status == 1, "\(result)")
            #expect(result.standardError.contains("refused"), "\(result)")
            #expect(!result.standardError.contains(Sentinel.text), "\(result)")
            #expect(result.isFreeOfKeyMaterial)
            #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == before)
            #expect(try rowCount(database, key: key) == 3)
        }
    }

    @Test(".read runs a file's statements and dot-commands; a file that reads itself stops")
    func readCommand() throws {
        let f = try Fixture()
        try f.scratch.writeFile("inner.sql", ".mode csv\nSELECT 'in', 'ner';\n", mode: 0o600)
        try f.scratch.writeFile("outer.sql", "SELECT 'outer';\n.read inner.sql\n", mode: 0o600)
        try f.scratch.writeFile("loop.sql", "SELECT 1;\n.read loop.sql\n", mode: 0o600)
        let result = try f.shell(".read outer.sql\nSELECT 'back', 1;\n")
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == "outer\nin,ner\r\nback,1\r\n")
        let loop = try f.shell(".read loop.sql\n")
        #expect(loop.status == 1, "\(loop)")
        #expect(loop.standardError.contains("deep"))
        let missing = try f.shell(".read nosuch.sql\n")
        #expect(missing.status == 1 && missing.standardError.contains("nosuch.sql"), "\(missing)")
    }

    @Test(".output writes a new file with mode 0600 (with --allow-plaintext), then goes back to standard output")
    func outputFile() throws {
        let f = try Fixture()
        let result = try f.shell(
            ".output out.csv\n.mode csv\nSELECT id FROM item;\n.tables\n.output\nSELECT 'back';\n", ["--allow-plaintext"])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == "back\r\n")
        #expect(result.standardError.contains("UNENCRYPTED to out.csv"), "\(result)")
        #expect(try String(contentsOfFile: f.scratch.path("out.csv"), encoding: .utf8) == "1\r\n2\r\n3\r\nitem\n")
        #expect(try fileMode(f.scratch.path("out.csv")) == 0o600)
        // Written again: truncated first.
        _ = try f.shell(".output out.csv\nSELECT 'again';\n", ["--allow-plaintext"])
        #expect(try String(contentsOfFile: f.scratch.path("out.csv"), encoding: .utf8) == "again\n")
    }

    @Test(".output refuses a symbolic link, a file others can read, the database and the key file, and changes none")
    func outputRefusals() throws {
        let f = try Fixture()
        try f.scratch.writeFile("target.txt", "untouched\n", mode: 0o600)
        try FileManager.default.createSymbolicLink(atPath: f.scratch.path("link.txt"), withDestinationPath: "target.txt")
        try f.scratch.writeFile("shared.txt", "shared\n", mode: 0o644)
        let before = try Data(contentsOf: URL(fileURLWithPath: f.database))
        let keyBefore = try Data(contentsOf: URL(fileURLWithPath: f.keyPath))
        var cases = [
            ("link.txt", "symbolic link"), ("shared.txt", "other users"), ("notes.db", "notes.db"), ("k", "k, which"),
        ]
        // A 0600 file another user made (in a shared folder) stays readable by them: refused too. Needs root to make.
        if getuid() == 0 {
            try f.scratch.writeFile("theirs.txt", "theirs\n", mode: 0o600)
            #expect(chown(f.scratch.path("theirs.txt"), 65534, 65534) == 0)
            cases.append(("theirs.txt", "another user"))
        }
        for (path, reason) in cases {
            let result = try f.shell(".output \(path)\nSELECT body FROM item;\n", ["--allow-plaintext"])
            #expect(result.status == 1, "\(result)")
            #expect(result.standardError.contains(reason), "\(result)")
            #expect(result.standardOutput.isEmpty)
        }
        #expect(try String(contentsOfFile: f.scratch.path("target.txt"), encoding: .utf8) == "untouched\n")
        #expect(try String(contentsOfFile: f.scratch.path("shared.txt"), encoding: .utf8) == "shared\n")
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.database)) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: f.keyPath)) == keyBefore)
        #expect(try rowCount(f.database, key: f.key) == 3)
    }

    @Test(".import reads RFC 4180 CSV into a new table made from the header, or into an existing one")
    func importCSV() throws {
        let f = try Fixture()
        let csv = "\u{FEFF}name,\"note, with comma\"\r\nalice,\"says \"\"hi\"\"\"\r\nbob,\"two\r\nlines\"\r\n\r\ncarol,\r\n"
        try f.scratch.writeFile("people.csv", csv, mode: 0o600)
        try f.scratch.writeFile("more.csv", "dave,\"x,y\"\n", mode: 0o600)
        let result = try f.shell("""
            .import people.csv people
            .import more.csv people
            .mode json
            SELECT * FROM people;
            """)
        #expect(result.status == 0, "\(result)")
        let rows = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: String]]
        #expect(rows == [
            ["name": "alice", "note, with comma": "says \"hi\""],
            ["name": "bob", "note, with comma": "two\r\nlines"],
            ["name": "carol", "note, with comma": ""],
            ["name": "dave", "note, with comma": "x,y"],
        ])
    }

    @Test(".import is all or nothing: a record with the wrong field count or a broken quote imports no row")
    func importAllOrNothing() throws {
        let f = try Fixture()
        try f.scratch.writeFile("short.csv", "body\none\ntwo,extra\n", mode: 0o600)
        try f.scratch.writeFile("open.csv", "a,b\n1,\"never closed\n", mode: 0o600)
        try f.scratch.writeFile("rows.csv", "7,seven\n8\n", mode: 0o600)
        let short = try f.shell(".import short.csv fresh\n")
        #expect(short.status == 1 && short.standardError.contains("line 3"), "\(short)")
        let broken = try f.shell(".import open.csv fresh\n")
        #expect(broken.status == 1 && broken.standardError.contains("not closed"), "\(broken)")
        let existing = try f.shell(".import rows.csv item\n")
        #expect(existing.status == 1 && existing.standardError.contains("line 2"), "\(existing)")
        #expect(try f.count("SELECT count(*) FROM sqlite_master WHERE name = 'fresh'") == 0)
        #expect(try f.count("SELECT count(*) FROM item") == 3)
    }

    @Test("--json prints one object holding the output; usage errors for --key-stdin and for no database")
    func jsonAndUsage() throws {
        let f = try Fixture()
        let result = try f.shell("SELECT count(*) FROM item;\n.tables\n", ["--json"])
        #expect(result.status == 0, "\(result)")
        let envelope = jsonEnvelope(result)
        #expect(envelope?["command"] as? String == "shell")
        #expect((envelope?["result"] as? [String: Any])?["output"] as? String == "3\nitem\n")
        let failed = try f.shell("SELECT nosuch;\n", ["--json"])
        #expect(failed.status == 1 && jsonEnvelope(failed)?["ok"] as? Bool == false, "\(failed)")
        #expect(parsingStatus(["shell", f.database, "--key-stdin"]) == .usage)
        let advice = try runSubprocess(["shell", f.database, "--key-stdin"], in: f.scratch)
        #expect(advice.status == 2 && advice.standardError.contains("give the key with --key-file or --key-env"))
        // Its help lists only the key options the shell takes (exec's lists --key-stdin).
        let help = try runSubprocess(["shell", "--help"], in: f.scratch)
        #expect(help.status == 0 && help.standardOutput.contains("--key-file"), "\(help)")
        #expect(!help.standardOutput.contains("--key-stdin"), "\(help)")
        #expect(try runSubprocess(["exec", "--help"], in: f.scratch).standardOutput.contains("--key-stdin"))
        #expect(parsingStatus(["shell", f.database, "--key-file", f.keyPath, "--json", "--mode", "csv"]) == .usage)
        let missing = try runSubprocess(
            ["shell", "missing.db", "--key-file", f.keyPath], standardInput: Array("SELECT 1;".utf8), in: f.scratch)
        #expect(missing.status == 1, "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: f.scratch.path("missing.db")))
        let created = try runSubprocess(
            ["shell", "new.db", "--key-file", f.keyPath, "--create"],
            standardInput: Array("CREATE TABLE t(x);".utf8), in: f.scratch)
        #expect(created.status == 0, "\(created)")
        #expect(try fileMode(f.scratch.path("new.db")) == 0o600)
        #expect(opens(f.scratch.path("new.db"), with: f.key))
    }

    @Test("advice in the shell's words: no --key-stdin (its statements are on standard input), shell --plaintext for a plaintext file")
    func adviceInTheShellsWords() throws {
        let f = try Fixture()
        // No key off a terminal: a usage error naming the key options the shell takes, nothing opened.
        let noKey = try runSubprocess(["shell", "notes.db"], standardInput: Array("SELECT 1;".utf8), in: f.scratch)
        #expect(noKey.status == 2, "\(noKey)")
        #expect(noKey.standardError.contains("give it with --key-file or --key-env"), "\(noKey)")
        #expect(!noKey.standardError.contains("--key-stdin"), "\(noKey)")
        #expect(!noKey.standardError.contains("Usage: sqlcipherkit <subcommand>"), "\(noKey)")
        // A statement that would set a key, refused by the guard: the advice names the shell's key options.
        let keyed = try f.shell("PRAGMA rekey = 'another key';\n")
        #expect(keyed.status == 1, "\(keyed)")
        #expect(keyed.standardError.contains("--key-file or --key-env"), "\(keyed)")
        #expect(!keyed.standardError.contains("--key-stdin"), "\(keyed)")
        #expect(!keyed.standardError.contains("another key"), "\(keyed)")
        #expect(opens(f.database, with: f.key))
        // A plaintext file given a key: open it with shell --plaintext, not exec's.
        let plain = try plaintextDatabase(f.scratch, "plain.db")
        let before = try fileBytes(plain)
        let given = try runSubprocess(
            ["shell", "plain.db", "--key-file", f.keyPath], standardInput: Array("SELECT 1;".utf8), in: f.scratch)
        #expect(given.status == 3, "\(given)")
        #expect(given.standardError.contains("sqlcipherkit shell --plaintext"), "\(given)")
        #expect(!given.standardError.contains("exec --plaintext"), "\(given)")
        #expect(try fileBytes(plain) == before)
    }
}
