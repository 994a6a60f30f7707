import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// What sqlite3 users type: `.mode column`, `.width`, `.separator`, `.once`, `.show`, compared byte for byte with
/// the stock sqlite3 shell (3.40) running the same script; `.backup` and `.open` point to what to use instead.
@Suite("sqlcipherkit shell and sqlite3 habits")
struct ShellSQLite3HabitsTests {
    static let setup = """
        CREATE TABLE t(id INTEGER, name TEXT, score REAL);
        INSERT INTO t VALUES (1, 'alice', 3.5), (22, 'bob the builder', NULL), (333, 'ünï', -1.25),
          (4, 'a-much-longer-name-that-goes-past-sixty-characters-so-that-the-column-wraps', 0.5);
        .nullvalue NULL

        """

    /// Runs `script` (after ``setup``) in sqlite3 on a new plaintext file and in this shell on a new encrypted
    /// one (`--allow-plaintext` for `.once`); both standard outputs.
    /// `WHO` in the script is `ours` or `theirs`, for file names.
    static func both(_ script: String, in f: ShellScriptTests.Fixture, name: String) throws -> (ours: String, theirs: String) {
        let theirs = try ShellDumpDifferentialTests.sqlite3(
            f.scratch.path("\(name)-sqlite3.db"),
            script: Array((setup + script.replacingOccurrences(of: "WHO", with: "theirs")).utf8))
        #expect(theirs.status == 0)
        let ours = try runSubprocess(
            ["shell", "\(name).db", "--key-file", f.keyPath, "--create", "--allow-plaintext"],
            standardInput: Array((setup + script.replacingOccurrences(of: "WHO", with: "ours")).utf8), in: f.scratch)
        #expect(ours.status == 0, "\(ours)")
        return (ours.standardOutput, String(decoding: theirs.output, as: UTF8.self))
    }

    @Test(".mode column with and without headers, .width (cut, right-aligned, 0 to fit), long values over lines")
    func columnMode() throws {
        let f = try ShellScriptTests.Fixture()
        let (ours, theirs) = try Self.both("""
            .mode column
            SELECT * FROM t;
            .headers off
            SELECT * FROM t WHERE id < 100;
            .headers on
            .width 2 -8 5
            SELECT * FROM t;
            .width
            SELECT id, name AS "a name longer than the values" FROM t WHERE id = 1;
            .width 0 -3
            SELECT id, name FROM t WHERE id = 1;
            SELECT 1 AS x WHERE 0;
            SELECT 'x' AS only;

            """, in: f, name: "column")
        #expect(ours == theirs, "ours:\n\(ours)\ntheirs:\n\(theirs)")
        #expect(ours.contains("id   name"), "\(ours)")
    }

    @Test(".separator in list and csv modes, reset by .mode, with escapes")
    func separators() throws {
        let f = try ShellScriptTests.Fixture()
        let (ours, theirs) = try Self.both(#"""
            .headers on
            .mode list
            .separator ;
            SELECT * FROM t;
            .separator , !
            SELECT * FROM t WHERE id = 1;
            .separator "\t" "\n--\n"
            SELECT * FROM t WHERE id < 100;
            .mode csv
            .separator ;
            SELECT id, name FROM t WHERE id = 1;
            .mode list
            .separator |
            SELECT id, name FROM t WHERE id = 1;

            """#, in: f, name: "separator")
        #expect(ours == theirs, "ours:\n\(ours.debugDescription)\ntheirs:\n\(theirs.debugDescription)")
    }

    @Test(".once writes the next statement's output to a file, then standard output again; .show prints the settings")
    func onceAndShow() throws {
        let f = try ShellScriptTests.Fixture()
        let (ours, theirs) = try Self.both("""
            .headers on
            .mode list
            .separator |
            .once WHO-once.txt
            SELECT id, name FROM t WHERE id = 1;
            SELECT 'after';
            .width 2 -8 5
            .show

            """, in: f, name: "once")
        let oursOnce = try String(contentsOfFile: f.scratch.path("ours-once.txt"), encoding: .utf8)
        let theirsOnce = try String(contentsOfFile: f.scratch.path("theirs-once.txt"), encoding: .utf8)
        #expect(oursOnce == "id|name\n1|alice\n" && oursOnce == theirsOnce, "\(oursOnce) \(theirsOnce)")
        #expect(try fileMode(f.scratch.path("ours-once.txt")) == 0o600)
        // The settings both shells have, in the same words; sqlite3 has some this shell has not (echo, eqp, …).
        let shared = ["headers", "mode", "nullvalue", "output", "colseparator", "rowseparator", "width"]
        func settings(_ text: String) -> [String] {
            text.split(separator: "\n").map(String.init).filter { line in
                shared.contains { line.trimmingCharacters(in: .whitespaces).hasPrefix($0 + ":") }
            }
        }
        #expect(settings(ours).count == shared.count, "\(ours)")
        #expect(settings(ours) == settings(theirs), "ours:\n\(ours)\ntheirs:\n\(theirs)")
        #expect(ours.hasPrefix("'after'\nafter\n") && theirs.hasPrefix("'after'\nafter\n"), "\(ours)\n\(theirs)")
        #expect(ours.contains("   plaintext: allowed (--allow-plaintext)\n"), "\(ours)")
    }

    @Test(".backup, .save, .restore, .open, .shell and the like say what to use instead (exit 2 in a script)")
    func pointers() throws {
        let f = try ShellScriptTests.Fixture()
        for (command, pointer) in [
            (".backup copy.db", "sqlcipherkit backup"), (".save copy.db", "sqlcipherkit backup"),
            (".restore copy.db", "--replace"), (".open other.db", "sqlcipherkit shell OTHER.db"),
            (".shell ls", "runs no other program"), (".system ls", "runs no other program"),
            (".load ext", "loads no extension"),
        ] {
            let result = try f.shell("\(command)\n")
            #expect(result.status == 2, "\(command): \(result)")
            #expect(result.standardError.contains(pointer), "\(command): \(result)")
            #expect(!result.standardError.contains("unknown command"), "\(command): \(result)")
        }
        #expect(!FileManager.default.fileExists(atPath: f.scratch.path("copy.db")))
        #expect(!FileManager.default.fileExists(atPath: f.scratch.path("other.db")))
    }
}
