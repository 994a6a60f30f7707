import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// A NUL byte ends the text SQLite reads, and bytes that are not UTF-8 would be replaced: either would run something
/// other than what the script says, with exit 0. The shell stops at such a line instead, naming it.
@Suite("sqlcipherkit shell and lines it cannot read as SQL")
struct ShellUnreadableInputTests {
    func shell(_ f: ShellScriptTests.Fixture, _ bytes: [UInt8]) throws -> CommandResult {
        try runSubprocess(["shell", "notes.db", "--key-file", f.keyPath], standardInput: bytes, in: f.scratch)
    }

    @Test("a NUL byte anywhere in a line is an error (exit 1) naming the line; nothing from its statement on runs")
    func nulByte() throws {
        let scripts: [[UInt8]] = [
            // Between statements: SQLite would have seen the end of the text there and run nothing more.
            Array("INSERT INTO item(body) VALUES ('one');\n".utf8) + [0] + Array("INSERT INTO item(body) VALUES ('two');\nINSERT INTO item(body) VALUES ('three');\n".utf8),
            // Inside a string literal, on the second line of a statement.
            Array("INSERT INTO item(body) VALUES ('one');\nINSERT INTO item(body)\nVALUES ('t".utf8) + [0] + Array("wo');\nINSERT INTO item(body) VALUES ('three');\n".utf8),
        ]
        for (index, script) in scripts.enumerated() {
            let f = try ShellScriptTests.Fixture()
            let result = try shell(f, script)
            #expect(result.status == 1, "\(result)")
            #expect(result.standardError.contains("standard input, line \(index + 2)"), "\(result)")
            #expect(result.standardError.contains("NUL"), "\(result)")
            #expect(try f.count("SELECT count(*) FROM item") == 4, "only 'one' was added")
        }
        // In a .read file: the file and line are named.
        let f = try ShellScriptTests.Fixture()
        #expect(FileManager.default.createFile(
            atPath: f.scratch.path("nul.sql"), contents: Data(Array("SELECT 1;\nSELECT 2;".utf8) + [0] + Array(" SELECT 3;\n".utf8))))
        let read = try shell(f, Array(".read nul.sql\nINSERT INTO item(body) VALUES ('after');\n".utf8))
        #expect(read.status == 1 && read.standardError.contains("nul.sql, line 2"), "\(read)")
        #expect(read.standardOutput == "1\n", "\(read)")
        #expect(try f.count("SELECT count(*) FROM item") == 3)
    }

    @Test("a line that is not UTF-8 is an error (exit 1), not text silently changed to U+FFFD")
    func notUTF8() throws {
        let f = try ShellScriptTests.Fixture()
        let script = Array("INSERT INTO item(body) VALUES ('ok');\nINSERT INTO item(body) VALUES ('".utf8) + [0xFF, 0x41]
            + Array("');\nINSERT INTO item(body) VALUES ('after');\n".utf8)
        let result = try shell(f, script)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("line 2") && result.standardError.contains("not UTF-8"), "\(result)")
        #expect(try f.count("SELECT count(*) FROM item") == 4)
        #expect(try f.count("SELECT count(*) FROM item WHERE body LIKE '%' || char(65533) || '%'") == 0)
        // The dump's way of writing such text works.
        let written = try shell(
            f, Array("INSERT INTO item(body) VALUES (CAST(X'FF41' AS TEXT));\nSELECT hex(body) FROM item WHERE id = 5;\n".utf8))
        #expect(written.status == 0 && written.standardOutput == "FF41\n", "\(written)")
    }
}
