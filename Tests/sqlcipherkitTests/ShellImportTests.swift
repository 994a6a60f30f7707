import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `.import [--csv] [--skip N] FILE TABLE` decides what is a header as the sqlite3 shell (3.40) does, compared on the
/// same files: into a missing table the first record (after the skipped ones) is the header; into an existing table
/// every record is a row.
@Suite("sqlcipherkit shell .import against sqlite3's")
struct ShellImportTests {
    static let csv = "junk,line\nname,age\nann,3\nbob,4\n"

    /// The same `.import` (after `setup` SQL) by sqlite3 into a plaintext file and by this shell into an encrypted
    /// one; the two databases' content, and this shell's result.
    static func both(
        _ f: ShellScriptTests.Fixture, setup: String, importArguments: String, name: String
    ) throws -> (ours: ShellDumpDifferentialTests.Snapshot, theirs: ShellDumpDifferentialTests.Snapshot, CommandResult) {
        let script = setup + "\n.import \(importArguments)\n"
        let sqlite3 = try ShellDumpDifferentialTests.sqlite3(f.scratch.path("\(name)-sqlite3.db"), script: Array(script.utf8))
        #expect(sqlite3.status == 0, "sqlite3: \(script)")
        let result = try runSubprocess(
            ["shell", "\(name).db", "--key-file", f.keyPath, "--create"], standardInput: Array(script.utf8), in: f.scratch)
        return (
            try ShellDumpDifferentialTests.encrypted(f.scratch.path("\(name).db"), key: f.key),
            try ShellDumpDifferentialTests.plaintext(f.scratch.path("\(name)-sqlite3.db")), result)
    }

    @Test("header or row, with and without --skip, into a missing or an existing table: as sqlite3 imports it")
    func sameAsSQLite3() throws {
        let f = try ShellScriptTests.Fixture()
        try f.scratch.writeFile("people.csv", Self.csv, mode: 0o600)
        let existing = "CREATE TABLE t(name, age);"
        let cases: [(setup: String, arguments: String, rowCount: Int)] = [
            ("", "--csv people.csv t", 3),
            ("", "--csv --skip 1 people.csv t", 2),
            (existing, "--csv people.csv t", 4),
            (existing, "--csv --skip 2 people.csv t", 2),
            (existing, "--skip 9 --csv people.csv t", 0),
        ]
        for (index, entry) in cases.enumerated() {
            let (ours, theirs, result) = try Self.both(
                f, setup: entry.setup, importArguments: entry.arguments, name: "case\(index)")
            #expect(result.status == 0, "\(entry.arguments): \(result)")
            #expect(ours == theirs, "\(entry.setup) .import \(entry.arguments)")
            #expect(ours.rows["t"]?.count == entry.rowCount, "\(entry.arguments)")
        }
    }

    @Test("into an existing table, a first record that holds the column names is imported, with a warning naming --skip 1")
    func headerIntoExistingTableWarns() throws {
        let f = try ShellScriptTests.Fixture()
        try f.scratch.writeFile("items.csv", "id,BODY\n7,seven\n", mode: 0o600)
        let result = try f.shell(".import items.csv item\nSELECT count(*) FROM item WHERE body = 'BODY';\n")
        #expect(result.status == 1, "the header's 'id' is no integer for the primary key: \(result)")
        try f.scratch.writeFile("notes.csv", "body\nfirst\n", mode: 0o600)
        let notes = try f.shell("CREATE TABLE note(body);\n.import notes.csv note\nSELECT count(*) FROM note;\n")
        #expect(notes.status == 0 && notes.standardOutput == "2\n", "\(notes)")
        #expect(notes.standardError.contains("--skip 1"), "\(notes)")
        let skipped = try f.shell(".import --skip 1 notes.csv note\nSELECT count(*) FROM note;\n")
        #expect(skipped.status == 0 && skipped.standardOutput == "3\n" && !skipped.standardError.contains("warning"))
    }

    @Test(".import options: an unknown one, --skip without a count, a count past the end into a missing table")
    func options() throws {
        let f = try ShellScriptTests.Fixture()
        try f.scratch.writeFile("people.csv", Self.csv, mode: 0o600)
        for (arguments, message) in [
            ("--ascii people.csv t", "--ascii is not an option"), ("--skip x people.csv t", "--skip takes"),
            ("--skip -1 people.csv t", "--skip takes"), ("--csv people.csv", "usage: .import"),
        ] {
            let result = try f.shell(".import \(arguments)\n")
            #expect(result.status == 2 && result.standardError.contains(message), "\(arguments): \(result)")
        }
        let past = try f.shell(".import --skip 4 people.csv t\n")
        #expect(past.status == 1 && past.standardError.contains("no record left"), "\(past)")
        #expect(try f.count("SELECT count(*) FROM sqlite_master WHERE name = 't'") == 0)
    }
}
