import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// A statement that mentions key material (PRAGMA key/rekey in any spelling, ATTACH … KEY, a URI `key=`) is never
/// printed back by the shell, in an error or in `--json`, and never kept in its history; nor is the text SQLite
/// quotes near an error in it.
@Suite("sqlcipherkit shell and key material in SQL")
struct ShellKeyMaterialTests {
    /// Statements that carry ``Sentinel/text`` as a key, each failing in its own way: a syntax error quoting the
    /// text, the guard's refusal, a file that cannot be opened, a misspelled verb.
    static var failingStatements: [String] {
        let secret = Sentinel.text
        let hex = Hex.string(Array(secret.utf8))
        return [
            "PRAGMA key '\(secret)';", "PRAGMA rekey = '\(secret)';", "PRAGMA hexkey = '\(hex)';",
            "PRAGMA main.textkey = '\(secret)';", "pragma KEY = \(secret);",
            "ATTACH 'missing/o.db' AS o KEY '\(secret)';", "ATTACH 'missing/o.db' AS o KEY x'\(hex)';",
            "ATTACH 'o.db' AS o KEY '\(secret)' garbage;", "ATACH 'o.db' AS o KEY '\(secret)';",
            "ATTACH 'file:o.db?key=\(secret)' AS o;", "ATTACH 'file:missing/o.db?hexkey=\(hex)' AS o;",
            "ATTACH 'missing/o.db'\nAS o\nKEY '\(secret)';", "ATTACH 'o.db' AS o KEY \(secret);",
            "SELECT nosuch FROM item WHERE key = '\(secret)';",
        ]
    }

    @Test("a failing statement that holds a key is reported without the statement and without SQLite's quote")
    func errorsDoNotEchoTheKey() throws {
        let f = try ShellScriptTests.Fixture()
        for statement in Self.failingStatements {
            for json in [false, true] {
                let result = try f.shell(
                    "SELECT 1;\n\(statement)\nSELECT 2;\n", json ? ["--json", "--allow-plaintext"] : ["--allow-plaintext"])
                #expect(result.status != 0, "\(statement): \(result)")
                #expect(result.isFreeOfKeyMaterial, "\(statement): \(result)")
                #expect(!result.standardError.contains("while executing"), "\(statement): \(result)")
                #expect(!result.standardOutput.contains("2\n"), "nothing after it ran: \(result)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: f.scratch.path("o.db")))
        // The guard's refusal keeps its own words (which never hold the SQL).
        let refused = try f.shell("PRAGMA rekey = '\(Sentinel.text)';\n")
        #expect(refused.standardError.contains("refused") && refused.isFreeOfKeyMaterial, "\(refused)")
        // A statement without key material still names itself.
        let plain = try f.shell("SELECT nosuch FROM item;\n")
        #expect(plain.standardError.contains("while executing `SELECT nosuch FROM item;`"), "\(plain)")
    }

    @Test("statements with a key leave the history: failed, refused, run, typed over lines, or dropped with Ctrl-C")
    func historyForgetsKeys() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("notes.db", key: key, rowCount: 1)
        let terminal = try PseudoTerminal(["shell", "notes.db", "--key-file", keyPath], in: scratch)
        let (prompt, continuation) = (ShellTerminalTests.prompt, ShellTerminalTests.continuation)
        try terminal.waitFor(prompt)
        terminal.send("SELECT 'benign';\r")
        #expect(try terminal.waitFor(prompt).contains("\r\nbenign\r\n"))
        /// Up-arrow must find the benign SELECT, right before the statements that held the key.
        func expectBenignRecalled(_ step: String) throws {
            terminal.send(PseudoTerminal.up + "\r")
            let recalled = try terminal.waitFor(prompt)
            #expect(!recalled.contains(Sentinel.text), "\(step): \(recalled.debugDescription)")
            #expect(recalled.contains("SELECT 'benign';") && recalled.contains("\r\nbenign\r\n"), "\(step)")
        }
        for statement in ["ATTACH 'missing/o.db' AS o KEY '\(Sentinel.text)';", "PRAGMA key '\(Sentinel.text)';"] {
            terminal.send(statement + "\r")
            #expect(try terminal.waitFor(prompt).contains("error:"))
            try expectBenignRecalled(statement)
        }
        // Run: an ATTACH with a key literal succeeds, and still leaves the history.
        terminal.send("ATTACH 'other.db' AS other KEY '\(Sentinel.text)';\r")
        let attached = try terminal.waitFor(prompt)
        #expect(!attached.contains("error:"), "\(attached.debugDescription)")
        try expectBenignRecalled("a successful ATTACH")
        // Over two lines: both lines leave.
        terminal.send("ATTACH 'missing/o.db' AS o\r")
        try terminal.waitFor(continuation)
        terminal.send("KEY '\(Sentinel.text)';\r")
        try terminal.waitFor(prompt)
        try expectBenignRecalled("two lines")
        terminal.send(PseudoTerminal.up + PseudoTerminal.up + "\r")
        #expect(!(try terminal.waitFor(prompt)).contains(Sentinel.text), "nothing older either")
        // Dropped with Ctrl-C before its end.
        terminal.send("PRAGMA rekey = '\(Sentinel.text)'\r")
        try terminal.waitFor(continuation)
        terminal.send("\u{03}")
        try terminal.waitFor(prompt)
        try expectBenignRecalled("Ctrl-C")
        terminal.send(".quit\r")
        #expect(terminal.finish() == 0)
        #expect(try rowCount(scratch.path("notes.db"), key: key) == 1)
    }
}
