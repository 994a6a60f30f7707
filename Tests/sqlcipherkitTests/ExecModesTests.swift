import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `exec --mode`, `--null-value`, and SQL from a file or standard input.
@Suite("sqlcipherkit exec: output modes and SQL from a file or standard input")
struct ExecModesTests {
    /// A database whose values are the hard cases: NULL and the text 'NULL', a tab and newlines in a value, quotes
    /// and commas, an escape sequence, a blob, the empty text, integers at their limits, reals.
    static func trickyDatabase(_ scratch: Scratch) throws -> (database: String, keyPath: String) {
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try Connection(path: scratch.path("tricky.db"), key: key)
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v)")
        let values: [DatabaseValue] = [
            .null, .text("NULL"), .text("a\tb\nc\r\nd"), .text(#"say "hi", ok"#), .text("\u{1B}[31mred\\"),
            .blob([0x00, 0xFF, 0x10]), .text(""), .integer(.min), .integer(.max), .real(0.1), .real(-2.5e-300),
            .text(#"\N"#),
        ]
        for (index, value) in values.enumerated() {
            try db.execute("INSERT INTO t VALUES (?, ?)", Int64(index + 1), value)
        }
        db.close()
        return (scratch.path("tricky.db"), keyPath)
    }

    @Test("list mode: one line per row, NULL differs from 'NULL' and from the text \\N, no control character printed")
    func listMode() throws {
        let scratch = try Scratch()
        let (db, keyPath) = try Self.trickyDatabase(scratch)
        let result = runInProcess(["exec", db, "--key-file", keyPath, "--header", "SELECT id, v FROM t ORDER BY id"])
        #expect(result.status == 0, "\(result)")
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 14)  // header, 12 rows, the empty string after the last newline
        #expect(Array(lines.prefix(13)) == [
            "id\tv", "1\t\\N", "2\tNULL", "3\ta\\tb\\nc\\r\\nd", #"4\#tsay "hi", ok"#, "5\t\\u001b[31mred\\\\",
            "6\t\\x00ff10", "7\t", "8\t-9223372036854775808", "9\t9223372036854775807", "10\t0.1", "11\t-2.5e-300",
            "12\t\\\\N",
        ])
        #expect(!result.standardOutput.unicodeScalars.contains { $0.value < 0x20 && $0 != "\t" && $0 != "\n" })
        let custom = runInProcess([
            "exec", db, "--key-file", keyPath, "--null-value", "(null)", "SELECT v FROM t WHERE id <= 2 ORDER BY id",
        ])
        #expect(custom.standardOutput == "(null)\nNULL\n")
    }

    @Test("csv mode is RFC 4180: quoted where needed, quotes doubled, CRLF, NULL empty and '' quoted")
    func csvMode() throws {
        let scratch = try Scratch()
        let (db, keyPath) = try Self.trickyDatabase(scratch)
        let result = runInProcess([
            "exec", db, "--key-file", keyPath, "--mode", "csv", "--header", "SELECT id, v AS \"the, value\" FROM t",
        ])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.hasPrefix("id,\"the, value\"\r\n1,\r\n2,NULL\r\n3,\"a\tb\nc\r\nd\"\r\n"))
        #expect(result.standardOutput.contains("\r\n4,\"say \"\"hi\"\", ok\"\r\n"))
        #expect(result.standardOutput.contains("\r\n7,\"\"\r\n"))
        // Python's csv module, an independent RFC 4180 reader, gets the values back.
        let parsed = try python(
            "import csv, sys; rows = list(csv.reader(sys.stdin, strict=True)); print(repr(rows[3][1]), len(rows))",
            input: result.standardOutput)
        #expect(parsed == "'a\\tb\\nc\\r\\nd' 13\n")
    }

    @Test("json mode: one array of objects per statement, integers, reals, strings, null and blobs as base64")
    func jsonMode() throws {
        let scratch = try Scratch()
        let (db, keyPath) = try Self.trickyDatabase(scratch)
        let result = runInProcess([
            "exec", db, "--key-file", keyPath, "--mode", "json", "SELECT id, v FROM t ORDER BY id; SELECT 1 AS one",
        ])
        #expect(result.status == 0, "\(result)")
        let arrays = result.standardOutput.split(separator: "]\n").map { String($0) + "]" }
        #expect(arrays.count == 2)
        let rows = try JSONSerialization.jsonObject(with: Data(arrays[0].utf8)) as? [[String: Any]] ?? []
        #expect(rows.count == 12)
        #expect(rows[0]["v"] is NSNull)
        #expect(rows[1]["v"] as? String == "NULL")
        #expect(rows[2]["v"] as? String == "a\tb\nc\r\nd")
        #expect(rows[4]["v"] as? String == "\u{1B}[31mred\\")
        #expect((rows[5]["v"] as? [String: String])?["base64"] == Data([0x00, 0xFF, 0x10]).base64EncodedString())
        #expect((rows[7]["v"] as? NSNumber)?.int64Value == .min)
        #expect((rows[8]["v"] as? NSNumber)?.int64Value == .max)
        #expect((rows[9]["v"] as? Double) == 0.1)
        #expect((rows[10]["v"] as? Double) == -2.5e-300)
        let second = try JSONSerialization.jsonObject(with: Data(arrays[1].utf8)) as? [[String: Int]]
        #expect(second == [["one": 1]])
    }

    @Test("table, box and line modes keep every value on its line")
    func gridModes() throws {
        let scratch = try Scratch()
        let (db, keyPath) = try Self.trickyDatabase(scratch)
        let sql = "SELECT id, v FROM t WHERE id IN (1, 3, 6) ORDER BY id"
        let table = runInProcess(["exec", db, "--key-file", keyPath, "--mode", "table", sql])
        #expect(table.standardOutput == #"""
            +----+--------------+
            | id | v            |
            +----+--------------+
            | 1  | \N           |
            | 3  | a\tb\nc\r\nd |
            | 6  | \x00ff10     |
            +----+--------------+

            """#)
        let box = runInProcess(["exec", db, "--key-file", keyPath, "--mode", "box", sql])
        #expect(box.standardOutput.hasPrefix("┌────┬──────────────┐\n│ id │ v            │\n├────┼"))
        #expect(box.standardOutput.split(separator: "\n").count == 7)
        let line = runInProcess(["exec", db, "--key-file", keyPath, "--mode", "line", sql])
        #expect(line.standardOutput == "id = 1\n v = \\N\n\nid = 3\n v = a\\tb\\nc\\r\\nd\n\nid = 6\n v = \\x00ff10\n")
    }

    @Test("SQL from --file and from standard input (-), run as real processes; a script stops at its first error")
    func scriptSources() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let script = "CREATE TABLE note(body);\nINSERT INTO note VALUES ('from a script');\nSELECT body FROM note;\n"
        try scratch.writeFile("script.sql", script, mode: 0o600)
        let fromFile = try runSubprocess(
            ["exec", "a.db", "--key-file", keyPath, "--create", "--file", "script.sql"], in: scratch)
        #expect(fromFile.status == 0, "\(fromFile)")
        #expect(fromFile.standardOutput == "from a script\n")
        let fromStandardInput = try runSubprocess(
            ["exec", "b.db", "--key-file", keyPath, "--create", "-"], standardInput: Array(script.utf8), in: scratch)
        #expect(fromStandardInput.status == 0, "\(fromStandardInput)")
        #expect(fromStandardInput.standardOutput == "from a script\n")
        #expect(try Connection(path: scratch.path("b.db"), key: key).scalar("SELECT count(*) FROM note", as: Int.self) == 1)
        let failing = try runSubprocess(
            ["exec", "b.db", "--key-file", keyPath, "-"],
            standardInput: Array("INSERT INTO note VALUES (2);\nSELEC 1;\nINSERT INTO note VALUES (3);\n".utf8),
            in: scratch)
        #expect(failing.status == 1, "\(failing)")
        #expect(failing.standardError.contains("SELEC"))
        #expect(try Connection(path: scratch.path("b.db"), key: key).scalar("SELECT count(*) FROM note", as: Int.self) == 2)
        let missing = try runSubprocess(["exec", "b.db", "--key-file", keyPath, "--file", "nosuch.sql"], in: scratch)
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.standardError.contains("nosuch.sql"))
    }

    @Test("usage errors: no SQL, SQL twice, - with --key-stdin, --mode or --null-value with --json")
    func usageErrors() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let db = scratch.path("x.db")
        #expect(parsingStatus(["exec", db, "--key-file", keyPath]) == .usage)
        #expect(parsingStatus(["exec", db, "--key-file", keyPath, "SELECT 1", "--file", "s.sql"]) == .usage)
        #expect(parsingStatus(["exec", db, "--key-stdin", "-"]) == .usage)
        #expect(parsingStatus(["exec", db, "--key-file", keyPath, "--json", "--mode", "csv", "SELECT 1"]) == .usage)
        #expect(parsingStatus(["exec", db, "--key-file", keyPath, "--json", "--null-value", "x", "SELECT 1"]) == .usage)
        #expect(parsingStatus(["exec", db, "--key-file", keyPath, "--mode", "xml", "SELECT 1"]) == .usage)
        #expect(parsingStatus(["exec", db, "--key-file", keyPath, "--mode", "box", "SELECT 1"]) == .success)
    }

    /// Runs a Python one-liner with `input` on standard input and returns its standard output.
    private func python(_ code: String, input: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", code]
        let standardInput = Pipe()
        let standardOutput = Pipe()
        process.standardInput = standardInput
        process.standardOutput = standardOutput
        try process.run()
        standardInput.fileHandleForWriting.write(Data(input.utf8))
        try standardInput.fileHandleForWriting.close()
        let output = standardOutput.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self)
    }
}
