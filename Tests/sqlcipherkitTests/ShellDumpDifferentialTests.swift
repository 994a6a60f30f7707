import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The shell's `.dump` against the stock sqlite3 shell's `.dump` of the same content (a copy made by `sqlcipherkit
/// decrypt`): each dump is loaded into a new database by sqlite3 and by this shell, and what each load holds is
/// compared with the source row by row, value by value (storage class and bytes; reals bit for bit), with the
/// schema, `sqlite_sequence`, `user_version` and `application_id`.
@Suite("sqlcipherkit shell .dump against sqlite3's .dump")
struct ShellDumpDifferentialTests {
    /// The schema, one statement per call so that SQLite keeps each text as written: comments before, inside and
    /// after statements (a `--` comment at the very end of a view's or index's text is what a dump must not end on
    /// the same line), names that are keywords or hold quotes, AUTOINCREMENT, WITHOUT ROWID, a partial index, a
    /// trigger whose body holds comments and semicolons.
    static let schema = [
        "PRAGMA user_version = 7", "PRAGMA application_id = 1234",
        "CREATE TABLE \"select\"( -- a keyword as a table name\n  \"from\" INTEGER PRIMARY KEY AUTOINCREMENT, /* and as"
            + " column names */\n  \"where\" -- untyped\n)",
        "CREATE TABLE \"we\"\"ird 'name'\"(k TEXT, n INTEGER, v, PRIMARY KEY (k, n)) WITHOUT ROWID",
        "CREATE TABLE plain(a, r REAL, t TEXT, b BLOB, i INTEGER)",
        "/* before */ CREATE TABLE lead(x) -- after the statement",
        "CREATE INDEX plain_r ON plain(r) -- an index that ends in a comment",
        "CREATE UNIQUE INDEX weird_v ON \"we\"\"ird 'name'\"(v) WHERE v IS NOT NULL /* partial */",
        "CREATE VIEW v_line AS SELECT a FROM plain -- a view that ends in a comment",
        "CREATE VIEW v_lines AS SELECT 1 AS one -- first\n-- second",
        "CREATE VIEW \"v;quoted\" AS SELECT ';' AS semi, '--' AS dashes /* c */",
        "CREATE TRIGGER plain_ai AFTER INSERT ON plain BEGIN\n  -- in the body; a semicolon\n  SELECT 1; /* ; */\nEND",
        "CREATE TRIGGER lead_ai AFTER INSERT ON lead WHEN new.x > 0 BEGIN SELECT 2; END -- after END",
    ]

    /// One value of each storage class and its awkward cases. NaN cannot be stored (SQLite makes it NULL): it is
    /// here to show that the NULL it becomes comes back as NULL.
    static let values: [DatabaseValue] = [
        .null, .integer(.min), .integer(.max), .integer(0), .integer(-1), .real(-0.0), .real(1e308), .real(-1e308),
        .real(.leastNonzeroMagnitude), .real(2.2250738585072014e-308), .real(0.1), .real(1.0 / 3), .real(.infinity),
        .real(-.infinity), .real(.nan), .real(123456789.125), .real(9007199254740992), .real(0.30000000000000004), .text("it's"),
        .text("two\nlines\r\nand\ttab"), .text("nul\u{0}inside"), .text(""), .text("NULL"), .text("ünï 🔐"),
        .text("back\\slash"), .text("-- not a comment; /* nor this */"), .text("\u{1B}[2J"), .text("12"),
        .blob([]), .blob([0, 0xFF, 0x27]),
    ]

    /// Text whose bytes are not valid UTF-8 (a lone 0xFF, a cut sequence, an encoded surrogate).
    static let invalidText = ["FF41", "C3", "EDA080", "41FE42"]

    static func makeSource(_ path: String, key: EncryptionKey) throws {
        let db = try Connection(path: path, key: key)
        defer { db.close() }
        for statement in schema { try db.execute(statement) }
        try db.transaction {
            for value in values {
                try db.execute("INSERT INTO plain VALUES (?, ?, ?, ?, ?)", value, value, value, value, value)
            }
            for hex in invalidText {
                let text = "CAST(X'\(hex)' AS TEXT)"
                try db.execute("INSERT INTO plain VALUES (\(text), \(text), \(text), \(text), \(text))")
            }
            for index in 1...5 { try db.execute("INSERT INTO \"select\"(\"where\") VALUES (?)", index * 10) }
            try db.execute("DELETE FROM \"select\" WHERE \"from\" > 3")
            try db.execute(
                "INSERT INTO \"we\"\"ird 'name'\" VALUES ('a', 1, 'x'), ('a', 2, NULL), ('b', 1, X'00'),"
                    + " (CAST(X'FF' AS TEXT), 3, 1.5)")
            try db.execute("INSERT INTO lead VALUES (1), (-1)")
        }
    }

    /// What a database holds, in a form two databases can be compared by.
    struct Snapshot: Equatable {
        /// `type name tbl_name sql` of every schema object.
        var schema: [String]
        /// Each table's rows, each cell as its storage class and bytes (reals as their bit pattern), sorted.
        var rows: [String: [String]]
        var userVersion: Int
        var applicationID: Int

        init(_ db: Connection) throws {
            schema = try db.all(
                "SELECT type || ' ' || name || ' ' || tbl_name || ' ' || coalesce(sql, '-') FROM sqlite_master ORDER BY"
                    + " type, name", as: String.self)
            rows = [:]
            let tables = try db.all("SELECT name FROM sqlite_master WHERE type = 'table'", as: String.self)
            for table in tables {
                // SQLite 3.15 has PRAGMA table_info, not its table-valued function.
                let columns = try db.all("PRAGMA table_info(\(Connection.quoteIdentifier(table)))") { row in
                    Connection.quoteIdentifier(try row["name"] as String)
                }
                let selected = columns.map { "typeof(\($0)), CASE WHEN typeof(\($0)) = 'text' THEN CAST(\($0) AS BLOB) ELSE \($0) END" }
                var cells: [String] = []
                try db.cursor("SELECT \(selected.joined(separator: ", ")) FROM \(Connection.quoteIdentifier(table))")
                    .forEach { row in
                        let values = try row.databaseValues
                        cells.append(stride(from: 0, to: values.count, by: 2).map { index in
                            Snapshot.describe(values[index], values[index + 1])
                        }.joined(separator: " | "))
                    }
                rows[table] = cells.sorted()
            }
            userVersion = try db.scalar("PRAGMA user_version", as: Int.self) ?? -1
            applicationID = try db.scalar("PRAGMA application_id", as: Int.self) ?? -1
        }

        static func describe(_ type: DatabaseValue, _ value: DatabaseValue) -> String {
            let name = if case .text(let name) = type { name } else { "?" }
            switch value {
            case .null: return name
            case .integer(let integer): return "\(name) \(integer)"
            case .real(let real): return "\(name) \(String(real.bitPattern, radix: 16))"
            case .blob(let bytes): return "\(name) \(Hex.string(bytes))"
            case .text(let text): return "\(name) ?\(text)"
            }
        }

        /// The cells of `table` in `self` that `other` lacks, and the ones it has instead.
        func rowDifference(_ other: Snapshot, table: String) -> (missing: [String], extra: [String]) {
            let mine = rows[table] ?? [], theirs = other.rows[table] ?? []
            return (mine.filter { !theirs.contains($0) }, theirs.filter { !mine.contains($0) })
        }
    }

    /// Runs the stock sqlite3 shell on `database` (in its folder, where relative names in the script lead) with
    /// `script` on standard input; its status and standard output.
    static func sqlite3(_ database: String, script: [UInt8], arguments: [String] = []) throws -> (status: Int32, output: Data) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: SQLCipherShell.stockSQLitePath)
        process.arguments = [database] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: database).deletingLastPathComponent()
        var environment = ProcessInfo.processInfo.environment
        // sqlite3 must load its own engine, not the SQLCipher 4 library a test run may have preloaded.
        environment["LD_LIBRARY_PATH"] = nil
        environment["LD_PRELOAD"] = nil
        process.environment = environment
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(script))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, data)
    }

    static func plaintext(_ path: String) throws -> Snapshot {
        let db = try Connection(path: path, encryption: .none)
        defer { db.close() }
        return try Snapshot(db)
    }

    static func encrypted(_ path: String, key: EncryptionKey) throws -> Snapshot {
        let db = try Connection(path: path, key: key)
        defer { db.close() }
        return try Snapshot(db)
    }

    @Test("both dumps load back by both shells; ours to exactly the source, sqlite3's with the losses it is known for")
    func differential() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        try Self.makeSource(scratch.path("source.db"), key: key)
        let source = try Self.encrypted(scratch.path("source.db"), key: key)
        #expect(source.rows["plain"]?.count == Self.values.count + Self.invalidText.count)
        #expect(source.rows["plain"]?.contains { $0.hasPrefix("text 4141") } == false, "the invalid text is stored")

        // Our dump, and sqlite3's of a decrypted copy (which must hold exactly the source).
        let dumped = try runSubprocess(
            ["shell", "source.db", "--key-file", keyPath, "--allow-plaintext"],
            standardInput: Array(".output ours.sql\n.dump\n".utf8), in: scratch)
        #expect(dumped.status == 0, "\(dumped)")
        let decrypted = try runSubprocess(
            ["decrypt", "source.db", "plain.db", "--key-file", keyPath, "--allow-plaintext"], in: scratch)
        #expect(decrypted.status == 0, "\(decrypted)")
        #expect(try Self.plaintext(scratch.path("plain.db")) == source, "decrypt copies everything")
        let theirs = try Self.sqlite3(scratch.path("plain.db"), script: Array(".dump\n".utf8))
        #expect(theirs.status == 0)
        let ours = try Data(contentsOf: URL(fileURLWithPath: scratch.path("ours.sql")))

        // Ours, loaded by sqlite3 and by this shell: exactly the source.
        let bySQLite3 = try Self.sqlite3(scratch.path("ours-by-sqlite3.db"), script: Array(ours), arguments: ["-bail"])
        #expect(bySQLite3.status == 0)
        #expect(try Self.plaintext(scratch.path("ours-by-sqlite3.db")) == source.withIndexTextsAsReloaded)
        let byShell = try runSubprocess(
            ["shell", "ours-by-shell.db", "--key-file", keyPath, "--create"], standardInput: Array(ours), in: scratch)
        #expect(byShell.status == 0, "\(byShell)")
        #expect(try Self.encrypted(scratch.path("ours-by-shell.db"), key: key) == source.withIndexTextsAsReloaded)

        // sqlite3's, loaded by sqlite3: the source but for what its dump loses.
        let theirsBySQLite3 = try Self.sqlite3(scratch.path("theirs-by-sqlite3.db"), script: Array(theirs.output))
        #expect(theirsBySQLite3.status == 0)
        let theirsLoaded = try Self.plaintext(scratch.path("theirs-by-sqlite3.db"))
        #expect(theirsLoaded.schema == source.withIndexTextsAsReloaded.schema)
        #expect(theirsLoaded.userVersion == 0 && theirsLoaded.applicationID == 0, "sqlite3's dump leaves them out")
        for table in source.rows.keys where table != "plain" {
            #expect(theirsLoaded.rows[table] == source.rows[table], "\(table)")
        }
        // The rows sqlite3 3.40's dump changes, named by their first cell (the column without affinity): text with
        // a NUL (cut at it), -0.0 (written 0.0), the least subnormal (written 4.94065645841247e-324, read as 0).
        let (lost, changed) = source.rowDifference(theirsLoaded, table: "plain")
        let knownLosses: Set = ["text 6e756c00696e73696465", "real 8000000000000000", "real 1"]
        #expect(Set(lost.map { $0.components(separatedBy: " | ")[0] }) == knownLosses, "\(lost)")
        #expect(changed.count == lost.count, "\(changed)")

        // sqlite3's, loaded by this shell: its raw invalid UTF-8 is refused, naming the line, and nothing stays
        // (the dump's transaction never commits).
        let refused = try runSubprocess(
            ["shell", "theirs-by-shell.db", "--key-file", keyPath, "--create"], standardInput: Array(theirs.output),
            in: scratch)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.standardError.contains("not UTF-8") && refused.standardError.contains("line "), "\(refused)")
        #expect(try Self.encrypted(scratch.path("theirs-by-shell.db"), key: key).rows.isEmpty)
        // Without those lines, both shells load the same text into the same content.
        let validLines = theirs.output.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .filter { String(validating: $0, as: UTF8.self) != nil }
        let filtered = Array(validLines.joined(separator: [UInt8(ascii: "\n")]))
        let filteredByShell = try runSubprocess(
            ["shell", "filtered-by-shell.db", "--key-file", keyPath, "--create"], standardInput: filtered, in: scratch)
        #expect(filteredByShell.status == 0, "\(filteredByShell)")
        #expect(try Self.sqlite3(scratch.path("filtered-by-sqlite3.db"), script: filtered).status == 0)
        var byShellFiltered = try Self.encrypted(scratch.path("filtered-by-shell.db"), key: key)
        var bySQLite3Filtered = try Self.plaintext(scratch.path("filtered-by-sqlite3.db"))
        // Except where the engines' decimal parsers differ: SQLite 3.40 reads 4.94065645841247e-324 as 0, the
        // SQLite of SQLCipher 4.19 (3.43 and later) as the least subnormal it was written from.
        let (readAsZero, readExactly) = bySQLite3Filtered.rowDifference(byShellFiltered, table: "plain")
        if SQLCipher.sqliteVersionNumber >= 3_043_000 {
            #expect(readAsZero.map { $0.components(separatedBy: " | ")[0] } == ["real 0"], "\(readAsZero)")
            #expect(readExactly.map { $0.components(separatedBy: " | ")[0] } == ["real 1"], "\(readExactly)")
        }
        byShellFiltered.rows["plain"] = nil
        bySQLite3Filtered.rows["plain"] = nil
        #expect(byShellFiltered == bySQLite3Filtered)
        if SQLCipher.sqliteVersionNumber < 3_043_000 {
            #expect(readAsZero.isEmpty && readExactly.isEmpty, "\(readAsZero)\n\(readExactly)")
        }
    }
}

extension ShellDumpDifferentialTests.Snapshot {
    /// The source as a database loaded from a dump holds it: SQLite keeps an index's text up to the semicolon that
    /// ended it, so the line end a dump puts before the semicolon after a trailing `--` comment stays in the text.
    /// (A view's text is kept without it.)
    var withIndexTextsAsReloaded: Self {
        var copy = self
        copy.schema = schema.map { line in
            line.hasPrefix("index ") && line.hasSuffix("-- an index that ends in a comment") ? line + "\n" : line
        }
        return copy
    }
}
