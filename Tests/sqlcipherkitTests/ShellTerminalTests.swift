import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `sqlcipherkit shell` on a pseudo-terminal: line editing, the in-memory history, errors that do not end the
/// session, and a key that never shows (argv, output, history).
@Suite("sqlcipherkit shell on a terminal")
struct ShellTerminalTests {
    /// A new, empty prompt: drawn after a line end (every key redraws the prompt, but after the keys before it).
    static let prompt = "\n\rsqlcipherkit> \u{1B}[0K"
    static let continuation = "\n\r        ...> \u{1B}[0K"

    @Test("a left-arrow edit runs the edited statement; up-arrow recalls it; an error does not end the session")
    func editAndRecall() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("notes.db", key: key, rowCount: 3)
        let terminal = try PseudoTerminal(["shell", "notes.db", "--key-file", keyPath], in: scratch)
        try terminal.waitFor(Self.prompt)
        // Typed "SELECT 'wrld';", then five times left (before "rld';") and "o".
        terminal.send("SELECT 'wrld';" + String(repeating: PseudoTerminal.left, count: 5) + "o\r")
        let first = try terminal.waitFor(Self.prompt)
        #expect(first.contains("\r\nworld\r\n"), "\(first.debugDescription)")
        terminal.send("SELEC nonsense;\r")
        let error = try terminal.waitFor(Self.prompt)
        #expect(error.contains("error:") && error.contains("SELEC"), "\(error.debugDescription)")
        // Up twice: past the failed statement to the edited one, which runs again.
        terminal.send(PseudoTerminal.up + PseudoTerminal.up + "\r")
        let recalled = try terminal.waitFor(Self.prompt)
        #expect(recalled.contains("SELECT 'world';"), "\(recalled.debugDescription)")
        #expect(recalled.contains("\r\nworld\r\n"), "\(recalled.debugDescription)")
        // A statement over two lines, with the continuation prompt.
        terminal.send("SELECT count(*)\r")
        try terminal.waitFor(Self.continuation)
        terminal.send("FROM item;\r")
        let count = try terminal.waitFor(Self.prompt)
        #expect(count.contains("\r\n3\r\n"), "\(count.debugDescription)")
        // Ctrl-A then Ctrl-K clear a line, Backspace and Ctrl-W (three words) delete backwards, Ctrl-U clears to
        // the start; Ctrl-C drops a half-typed statement.
        terminal.send("SELECT 1\u{01}\u{0B}SELECT 'keptx\u{7F}' || 'gone gone'\u{17}\u{17}\u{17};\r")
        let edited = try terminal.waitFor(Self.prompt)
        #expect(edited.contains("\r\nkept\r\n"), "\(edited.debugDescription)")
        terminal.send("SELECT 'dropped'\r")
        try terminal.waitFor(Self.continuation)
        terminal.send("\u{03}")
        try terminal.waitFor(Self.prompt)
        terminal.send("xx\u{15}SELECT 'after';\r")
        let after = try terminal.waitFor(Self.prompt)
        #expect(after.contains("\r\nafter\r\n") && !after.contains("dropped"), "\(after.debugDescription)")
        terminal.send("\u{04}")
        #expect(terminal.finish() == 0)
    }

    @Test("SIGINT while a statement runs interrupts it, and the shell goes on")
    func interruptsRunningStatement() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("notes.db", key: key, rowCount: 1)
        let terminal = try PseudoTerminal(["shell", "notes.db", "--key-file", keyPath], in: scratch)
        try terminal.waitFor(Self.prompt)
        // Endless rows: output arriving proves the statement is running (rows are written in 64 KiB blocks).
        terminal.send("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c;\r")
        try terminal.waitFor("\r\n1000\r\n")
        kill(terminal.pid, SIGINT)
        let interrupted = try terminal.waitFor(Self.prompt)
        #expect(interrupted.contains("interrupt"), "\(interrupted.suffix(300).debugDescription)")
        terminal.send("SELECT 'still here';\r")
        #expect(try terminal.waitFor(Self.prompt).contains("\r\nstill here\r\n"))
        terminal.send(".quit\r")
        #expect(terminal.finish() == 0)
    }

    @Test("the key typed at the prompt is not echoed, not in argv, not in the history; PRAGMA key is refused and forgotten")
    func keyNeverShows() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.sentinelKeyFile("k")
        _ = try scratch.database("notes.db", key: key, rowCount: 2)
        let terminal = try PseudoTerminal(["shell", "notes.db"], in: scratch)
        let asked = try terminal.waitFor("Enter the database key: ")
        terminal.send(Sentinel.text + "\n")
        var seen = asked + (try terminal.waitFor(Self.prompt))
        let commandLine = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(terminal.pid)/cmdline"))
        #expect(!String(decoding: commandLine, as: UTF8.self).contains(Sentinel.text))
        #expect(String(decoding: commandLine, as: UTF8.self).contains("notes.db"))
        terminal.send("SELECT count(*) FROM item;\r")
        seen += try terminal.waitFor(Self.prompt)
        #expect(seen.contains("\r\n2\r\n"), "\(seen.debugDescription)")
        // Up-arrow recalls the statement, never the key.
        terminal.send(PseudoTerminal.up + PseudoTerminal.up + PseudoTerminal.up + "\r")
        seen += try terminal.waitFor(Self.prompt)
        #expect(!seen.contains(Sentinel.text), "\(seen.debugDescription)")
        // A key typed in SQL is refused, and the line leaves the history: up-arrow finds the SELECT before it.
        terminal.send("PRAGMA key = '\(Sentinel.text)';\r")
        let refused = try terminal.waitFor(Self.prompt)
        #expect(refused.contains("refused"), "\(refused.debugDescription)")
        terminal.send(PseudoTerminal.up + "\r")
        let recalled = try terminal.waitFor(Self.prompt)
        #expect(!recalled.contains(Sentinel.text), "\(recalled.debugDescription)")
        #expect(recalled.contains("SELECT count(*) FROM item;"), "\(recalled.debugDescription)")
        #expect(recalled.contains("\r\n2\r\n"), "\(recalled.debugDescription)")
        terminal.send(".quit\r")
        #expect(terminal.finish() == 0)
        #expect(opens(scratch.path("notes.db"), with: key))
        #expect(try rowCount(scratch.path("notes.db"), key: key) == 2)
    }
}
