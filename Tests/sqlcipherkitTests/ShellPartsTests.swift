import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The shell's parts without a process: the line editor's state, the CSV reader, dot-command words, SQL literals.
@Suite("sqlcipherkit shell parts")
struct ShellPartsTests {
    func typed(_ keys: [EditKey], history: [String] = []) -> EditState {
        var state = EditState(prompt: "> ", history: history)
        for key in keys { state.apply(key) }
        return state
    }

    func text(_ string: String) -> [EditKey] { string.map { .insert($0) } }

    @Test("editing keys: arrows, Home/End, Backspace, Delete, Ctrl-U, Ctrl-K, Ctrl-W")
    func editing() {
        #expect(String(typed(text("SELECT 'wrld'") + [.left, .left, .left, .left] + text("o")).buffer) == "SELECT 'world'")
        #expect(String(typed(text("abc") + [.home, .delete, .end, .backspace]).buffer) == "b")
        #expect(String(typed(text("one two  three") + [.deleteWord]).buffer) == "one two  ")
        #expect(String(typed(text("one two  three") + [.deleteWord, .deleteWord]).buffer) == "one ")
        #expect(String(typed(text("one two") + [.left, .left, .left, .deleteToStart]).buffer) == "two")
        #expect(String(typed(text("one two") + [.left, .left, .left, .deleteToEnd]).buffer) == "one ")
        #expect(typed(text("ab") + [.left, .left, .left, .backspace]).cursor == 0)
        #expect(typed(text("ab") + [.right, .right]).cursor == 2)
        #expect(String(typed(text("ab") + [.left, .endOfFile]).buffer) == "a")
    }

    @Test("up and down browse the history and give back the line being typed")
    func history() {
        let history = ["first", "second"]
        #expect(String(typed([.up], history: history).buffer) == "second")
        #expect(String(typed([.up, .up, .up], history: history).buffer) == "first")
        #expect(String(typed(text("draft") + [.up, .up, .down, .down], history: history).buffer) == "draft")
        #expect(String(typed([.up, .insert("!"), .down, .up], history: history).buffer) == "second")
        #expect(String(typed([.down], history: history).buffer) == "")
    }

    @Test("CSV: quoted separators, doubled quotes, line ends inside quotes, CRLF, a BOM, blank lines, line numbers")
    func csvRecords() throws {
        let bytes = Array("\u{FEFF}a,\"b,c\"\r\n\"say \"\"x\"\"\",\"two\nlines\"\n\n,\"\"\nlast".utf8)
        let records = try CSVReader.records(bytes, source: "t.csv")
        #expect(records == [
            CSVReader.Record(fields: ["a", "b,c"], line: 1),
            CSVReader.Record(fields: ["say \"x\"", "two\nlines"], line: 2),
            CSVReader.Record(fields: ["", ""], line: 5),
            CSVReader.Record(fields: ["last"], line: 6),
        ])
        #expect(throws: CommandFailure.self) { try CSVReader.records(Array("a,\"b\"c\n".utf8), source: "t.csv") }
        #expect(throws: CommandFailure.self) { try CSVReader.records(Array("a,\"b\n".utf8), source: "t.csv") }
        #expect(try CSVReader.records([], source: "t.csv").isEmpty)
    }

    @Test("dot-command words: quotes hold spaces, an unclosed quote is an error")
    func dotCommandWords() throws {
        #expect(try DotCommand(parsing: ".import 'my file.csv'  \"a table\"") ==
            DotCommand(name: "import", arguments: ["my file.csv", "a table"]))
        #expect(try DotCommand(parsing: ".tables\r") == DotCommand(name: "tables", arguments: []))
        #expect(throws: CommandFailure.self) { try DotCommand(parsing: ".output 'unclosed") }
        #expect(throws: CommandFailure.self) { try DotCommand(parsing: ".") }
        #expect(try DotCommand(name: "timer", arguments: ["ON"]).switchArgument())
        #expect(throws: CommandFailure.self) { try DotCommand(name: "timer", arguments: ["maybe"]).switchArgument() }
    }

    @Test("the exact product of a real is computed back to the same double by the engine, at every magnitude")
    func exactProducts() throws {
        let db = try Connection.inMemory()
        for real in RandomReals.sample(count: 500) + [1.0, -1.5, .leastNonzeroMagnitude, .greatestFiniteMagnitude] {
            let sql = "SELECT " + SQLLiteral.exactProduct(real)
            #expect(try db.scalar(sql, as: Double.self)?.bitPattern == real.bitPattern, "\(sql)")
        }
    }

    @Test("text literals: quotes doubled, control characters other than newline and tab as UTF-8 bytes")
    func textLiterals() throws {
        #expect(SQLLiteral.literal("it's") == "'it''s'")
        #expect(SQLLiteral.literal("a\nb\tc") == "'a\nb\tc'")
        #expect(SQLLiteral.literal("a\rb") == "CAST(X'610d62' AS TEXT)")
        let db = try Connection.inMemory()
        for text in ["\u{1B}[0m", "nul\u{0}x", "\u{9B}c1", "ok ✓"] {
            #expect(try db.scalar("SELECT " + SQLLiteral.literal(text), as: String.self) == text)
        }
    }
}
