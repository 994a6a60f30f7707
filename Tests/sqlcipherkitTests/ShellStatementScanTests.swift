import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// How the shell finds where a statement ends, and whether it holds key material: the same answer as
/// `sqlite3_complete`, one look at each byte (a statement of 2N lines costs twice the work of N lines, not four
/// times), and no key left in the history.
@Suite("sqlcipherkit shell: where statements end")
struct ShellStatementScanTests {
    /// Pieces that exercise every state of `sqlite3_complete`: quotes of each kind, comments of both kinds and
    /// their halves, the keywords of its state machine in both cases, SQLite's spaces and a vertical tab (not a
    /// space to it), identifier bytes beyond ASCII.
    static let pieces = [
        ";", " ", "\n", "\t", "\r", "\u{0C}", "\u{0B}", "'", "\"", "`", "[", "]", "/*", "*/", "*", "/", "--", "-",
        "CREATE", "create", "TEMP", "temporary", "TRIGGER", "trigger", "END", "end", "EXPLAIN", "explain", "BEGIN",
        "SELECT 1", "x", "é", "$a", "_1", "(", ")", "'it''s'", "tr", "ENDx", "createx",
    ]

    /// A fixed sequence of pseudo-random numbers (SplitMix64).
    struct Numbers {
        var state: UInt64
        mutating func next(below bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    @Test("the answer is sqlite3_complete's for 20,000 random texts, after every piece appended")
    func sameAnswerAsSQLite() {
        var numbers = Numbers(state: 0x5EED)
        var checked = 0
        for _ in 0..<20_000 {
            var buffer = StatementBuffer()
            var text = ""
            for _ in 0..<(1 + numbers.next(below: 24)) {
                let piece = Self.pieces[numbers.next(below: Self.pieces.count)]
                buffer.append(piece)
                text += piece
                let expected = Connection.isCompleteStatement(text)
                #expect(buffer.isComplete == expected, "\(text.debugDescription)")
                if buffer.isComplete != expected { return }
                checked += 1
            }
        }
        #expect(checked > 200_000)
    }

    @Test("statements sqlite3 users type: trigger bodies, comments after the semicolon, strings over lines")
    func knownStatements() {
        let cases: [(String, Bool)] = [
            ("SELECT 1;", true), ("SELECT 1", false), ("SELECT 1; -- done", true), ("SELECT 1; /* open", false),
            ("SELECT 'a;\nb';", true), ("SELECT 'a;\nb'", false), ("CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1;", false),
            ("CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END;", true),
            ("CREATE TEMP TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END -- c\n;", true),
            ("EXPLAIN CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END;", true),
            ("CREATE TABLE end(x);", true), (";", true), ("", false), ("   \n", false), ("SELECT [a;b];", true),
        ]
        for (text, expected) in cases {
            var buffer = StatementBuffer()
            buffer.append(text)
            #expect(buffer.isComplete == expected, "\(text.debugDescription)")
            #expect(Connection.isCompleteStatement(text) == expected, "\(text.debugDescription): sqlite3_complete")
        }
    }

    /// `lineCount` lines of 39 characters in one string literal, as a dump with multi-line text has them.
    static func longStatement(lineCount: Int) -> [UInt8] {
        let body = Array(repeating: String(repeating: "x", count: 39), count: lineCount).joined(separator: "\n")
        return Array("SELECT length('\(body)');\n".utf8)
    }

    /// Runs `script` through a shell session on an in-memory database; returns what it printed and how many bytes
    /// it looked at to find the ends of statements.
    static func session(_ script: [UInt8]) throws -> (output: String, scannedByteCount: Int) {
        let db = try Connection.inMemory()
        defer { db.close() }
        let sink = CollectingSink()
        let session = ShellSession(
            connection: db, databasePath: ":memory:", filesInUse: [], allowsPlaintext: false, style: ResultStyle(),
            sink: sink)
        try session.run(TextLines(script, source: "script"), stopsAtFirstError: true)
        return (sink.text, session.scannedByteCount)
    }

    @Test("a statement of 2N lines is looked at byte by byte once: twice the work of N lines, not four times")
    func linearInLines() throws {
        let small = Self.longStatement(lineCount: 2_000)
        let large = Self.longStatement(lineCount: 4_000)
        let (smallOutput, smallWork) = try Self.session(small)
        let (largeOutput, largeWork) = try Self.session(large)
        #expect(smallOutput == "79999\n" && largeOutput == "159999\n")
        // Every byte of every line, and its line end, once (sqlite3_complete after every line: N²/2 lines' worth).
        #expect(smallWork == small.count, "\(smallWork) bytes looked at for \(small.count)")
        #expect(largeWork == large.count, "\(largeWork) bytes looked at for \(large.count)")
        #expect(Double(largeWork) / Double(smallWork) < 2.01)
    }

    @Test("standard input is searched for line ends once, for one long line and for many short ones")
    func descriptorLinesSearchOnce() throws {
        let scratch = try Scratch()
        let longLine = Array(repeating: UInt8(ascii: "a"), count: 1_000_000) + [UInt8(ascii: "\n")]
        let shortLines = Array(repeating: Array("SELECT 1;\n".utf8), count: 50_000).flatMap { $0 }
        for (name, bytes, lineCount) in [("long", longLine, 1), ("short", shortLines, 50_000)] {
            #expect(FileManager.default.createFile(atPath: scratch.path(name), contents: Data(bytes)))
            let descriptor = open(scratch.path(name), O_RDONLY)
            #expect(descriptor >= 0)
            defer { close(descriptor) }
            let lines = DescriptorLines(descriptor: descriptor, promptDescriptor: nil)
            var count = 0
            while case .line = try lines.readLine(prompt: "") { count += 1 }
            #expect(count == lineCount)
            #expect(lines.scannedByteCount == bytes.count, "\(name): \(lines.scannedByteCount) for \(bytes.count)")
        }
    }

    @Test("key material is found in every spelling that can carry a key, and not in everyday SQL")
    func keyMaterial() {
        let secret = [
            "PRAGMA key = 'secret';", "PRAGMA key 'secret';", "pragma KEY=\"secret\"", "PRAGMA main.key = 'secret'",
            "PRAGMA rekey = x'00112233'", "PRAGMA hexkey = '0011'", "PRAGMA hexrekey='0011'", "PRAGMA textkey = 's'",
            "PRAGMA \"key\" = 'secret'", "PRAGMA key = secret", "PRAGMA key = 12345",
            "ATTACH 'o.db' AS o KEY 'secret'", "attach database 'o.db' as o key char(115)", "ATTACH 'o.db' AS o KEY s",
            "EXPLAIN ATTACH 'o.db' AS o KEY 'secret'", "ATACH 'o.db' AS o KEY 'secret'", "SELECT 1; ATTACH 'o' AS o KEY 'k'",
            "ATTACH 'file:o.db?key=secret' AS o", "ATTACH 'file:o.db?hexkey=00' AS o", "ATTACH 'file:o.db?k%65y=s' AS o",
            "VACUUM INTO 'file:c.db?textkey=s'", "ATTACH \"file:o.db?key=s\" AS o", "SELECT 1 WHERE key = -5",
            "ATTACH 'o.db' AS o KEY\n'secret'", "PRAGMA key = /* c */ 'secret'", "ATTACH 'file:o.db?key=never closed",
        ]
        let everyday = [
            "CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT)", "CREATE TABLE c(a, FOREIGN KEY (a) REFERENCES t(id))",
            "PRAGMA foreign_keys = ON", "PRAGMA foreign_key_check", "SELECT key, value FROM json_each('[1]')",
            "ATTACH 'o.db' AS o", "SELECT 'keyboard'", "INSERT INTO t(k) VALUES ('monkey')", "PRAGMA user_version = 3",
            "SELECT 1; PRAGMA table_info('key')", "CREATE TABLE kv(key PRIMARY KEY, v)",
        ]
        for text in secret {
            var buffer = StatementBuffer()
            buffer.append(text)
            #expect(buffer.holdsKeyMaterial, "\(text)")
        }
        for text in everyday {
            var buffer = StatementBuffer()
            buffer.append(text)
            #expect(!buffer.holdsKeyMaterial, "\(text)")
        }
    }
}
