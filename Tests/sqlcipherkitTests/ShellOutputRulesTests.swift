import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `.output FILE` and `.once FILE` write the results in plaintext, as `.dump` does: the same rule (only with
/// `--allow-plaintext`), files of mode 0600, and a refused target leaves nothing behind.
@Suite("sqlcipherkit shell .output and .once")
struct ShellOutputRulesTests {
    typealias Fixture = ShellScriptTests.Fixture

    /// The names in the scratch folder, but the key file and the database.
    static func leftovers(_ f: Fixture) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: f.scratch.url.path)
            .filter { !["k", "notes.db"].contains($0) && !$0.hasPrefix(".running-") }.sorted()
    }

    @Test(".output FILE and .once FILE without --allow-plaintext are refused (exit 2), create nothing, run nothing after")
    func refusedWithoutPermission() throws {
        let f = try Fixture()
        for command in [".output out.txt", ".once out.txt", ".output './out.txt'"] {
            let result = try f.shell("\(command)\nSELECT body FROM item;\nINSERT INTO item(body) VALUES ('x');\n")
            #expect(result.status == 2, "\(result)")
            #expect(result.standardError.contains("--allow-plaintext"), "\(result)")
            #expect(result.standardError.contains("UNENCRYPTED"), "\(result)")
            #expect(result.standardOutput.isEmpty)
            #expect(try Self.leftovers(f).isEmpty, "\(command)")
        }
        #expect(try f.count("SELECT count(*) FROM item") == 3)
        // Standard output needs nothing.
        let stdout = try f.shell(".output stdout\nSELECT count(*) FROM item;\n.output\nSELECT 1;\n")
        #expect(stdout.status == 0 && stdout.standardOutput == "3\n1\n", "\(stdout)")
        // A pipe to a program and sqlite3's options are refused as such.
        for command in [".output |cat", ".once -x", ".output --bom x.txt"] {
            let result = try f.shell("\(command)\n", ["--allow-plaintext"])
            #expect(result.status == 2, "\(command): \(result)")
        }
        #expect(try Self.leftovers(f).isEmpty)
    }

    @Test(".once FILE takes the next statement's results only, in a new 0600 file; the rest goes to standard output")
    func once() throws {
        let f = try Fixture()
        let result = try f.shell(
            ".once first.txt\nSELECT count(*) FROM item;\nSELECT 'after';\n.output all.txt\nSELECT 'in all';\n"
                + ".once second.txt\n.tables\nSELECT 'back';\n", ["--allow-plaintext"])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == "after\nback\n", "\(result)")
        #expect(try String(contentsOfFile: f.scratch.path("first.txt"), encoding: .utf8) == "3\n")
        #expect(try String(contentsOfFile: f.scratch.path("second.txt"), encoding: .utf8) == "item\n")
        // .once ends the .output file before it (as sqlite3 does): 'back' went to standard output.
        #expect(try String(contentsOfFile: f.scratch.path("all.txt"), encoding: .utf8) == "in all\n")
        for name in ["first.txt", "second.txt", "all.txt"] { #expect(try fileMode(f.scratch.path(name)) == 0o600) }
    }

    @Test("a refused target leaves no file: the database's -journal, -wal and -shm by any spelling, and the rest")
    func refusalsLeaveNothing() throws {
        let f = try Fixture()
        try FileManager.default.createDirectory(atPath: f.scratch.path("sub"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: f.scratch.path("dir-link"), withDestinationPath: ".")
        let targets = [
            "notes.db-journal", "notes.db-wal", "notes.db-shm", "./notes.db-journal", "sub/../notes.db-journal",
            "dir-link/notes.db-wal", f.scratch.path("notes.db-shm"), "notes.db", "k", "sub", "missing/out.txt",
        ]
        for target in targets {
            let result = try f.shell(".output '\(target)'\nSELECT body FROM item;\n", ["--allow-plaintext"])
            #expect(result.status == 1, "\(target): \(result)")
            #expect(result.standardError.contains("cannot write to"), "\(target): \(result)")
            #expect(try Self.leftovers(f) == ["dir-link", "sub"], "\(target)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: f.scratch.path("sub")).isEmpty)
        }
        #expect(try rowCount(f.database, key: f.key) == 3)
    }
}
