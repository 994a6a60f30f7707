import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The shell's `.dump`: refused without `--allow-plaintext`, and a logical export that another SQLite reads back
/// into the same rows.
@Suite("sqlcipherkit shell .dump")
struct ShellDumpTests {
    /// A database with what a dump must carry: awkward text (quotes, a newline, a carriage return, an escape
    /// sequence, NUL, non-ASCII), blobs, NULL, integer limits, reals, an AUTOINCREMENT table, a WITHOUT ROWID
    /// table, an index, a view, a trigger, an FTS4 table, statistics, user_version and application_id.
    static func makeSource(_ path: String, key: EncryptionKey) throws {
        let db = try Connection(path: path, key: key)
        defer { db.close() }
        try db.execute(#"""
            PRAGMA user_version = 42; PRAGMA application_id = 7;
            CREATE TABLE "odd ""name"""(id INTEGER PRIMARY KEY AUTOINCREMENT, v);
            CREATE TABLE pair(k TEXT PRIMARY KEY, n REAL) WITHOUT ROWID;
            CREATE INDEX pair_n ON pair(n);
            CREATE VIEW pair_view AS SELECT k FROM pair;
            CREATE TRIGGER pair_touch AFTER INSERT ON pair BEGIN SELECT 1; END;
            CREATE VIRTUAL TABLE search USING fts4(body);
            INSERT INTO search(body) VALUES ('encrypted at rest'), ('keys never in argv');
            """#)
        let values: [DatabaseValue] = [
            .text("it's"), .text("line one\nline two\ttabbed"), .text("cr\rhere"), .text("\u{1B}[2Jcleared"),
            .text("nul\u{0}inside"), .text("ünïcødé ✓ 🔐"), .text(""), .text("NULL"), .null, .blob([]),
            .blob([0, 1, 0xFE, 0xFF]), .integer(.min), .integer(.max), .integer(0), .real(0.1), .real(1.0 / 3),
            .real(-2.5e-300), .real(1e300), .real(.leastNonzeroMagnitude), .real(123456789.125), .real(.infinity), .real(-.infinity),
        ]
        for value in values { try db.execute(#"INSERT INTO "odd ""name"""(v) VALUES (?)"#, value) }
        try db.execute(#"DELETE FROM "odd ""name""" WHERE id = 3"#)
        try db.execute("INSERT INTO pair VALUES ('a', 1.5), ('b', 3.141592653589793), ('c', NULL); ANALYZE")
    }

    /// Every row of every table and the schema's user-visible objects, with reals compared bit for bit.
    static func contents(of db: Connection) throws -> [String] {
        var lines = try db.all(
            // sqlite_stat4 (SQLCipher 4's builds have it) is left to ANALYZE: Debian's sqlite3 cannot create it.
            "SELECT type || ' ' || name FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex%'"
                + " AND name NOT IN ('sqlite_stat3', 'sqlite_stat4') ORDER BY 1",
            as: String.self)
        for table in [#""odd ""name""""#, "pair", "search", "sqlite_sequence"] {
            try db.cursor("SELECT * FROM \(table) ORDER BY 1").forEach { row in
                lines.append(table + ": " + (try row.databaseValues.map(describe).joined(separator: " | ")))
            }
        }
        lines.append("user_version \(try db.scalar("PRAGMA user_version", as: Int.self) ?? -1)")
        lines.append("application_id \(try db.scalar("PRAGMA application_id", as: Int.self) ?? -1)")
        lines.append("stat rows \(try db.scalar("SELECT count(*) FROM sqlite_stat1", as: Int.self) ?? -1)")
        return lines
    }

    static func describe(_ value: DatabaseValue) -> String {
        switch value {
        case .real(let real): "real \(real.bitPattern)"
        case .text(let text): "text \(Array(text.utf8))"
        case .blob(let bytes): "blob \(bytes)"
        case .integer(let integer): "integer \(integer)"
        case .null: "null"
        }
    }

    @Test(".dump without --allow-plaintext is refused (exit 2) and writes nothing, and no .output file is made")
    func refusedWithoutPermission() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("notes.db", key: key, rowCount: 3)
        for script in [".dump\n", ".output d.sql\n.dump\n"] {
            let result = try runSubprocess(
                ["shell", "notes.db", "--key-file", keyPath], standardInput: Array(script.utf8), in: scratch)
            #expect(result.status == 2, "\(result)")
            #expect(result.standardError.contains("--allow-plaintext"))
            #expect(result.standardOutput.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: scratch.path("d.sql")))
        }
    }

    @Test("a CREATE whose text ends inside a comment is ended so that the dump loads back (sqlite3's own does not)")
    func statementsEndingInComments() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try Connection(path: scratch.path("source.db"), key: key)
        // One statement per call: SQLite keeps each text up to its last token, the comment at its end included.
        for statement in [
            "CREATE TABLE t(x)", "INSERT INTO t VALUES (1)", "CREATE VIEW v_line AS SELECT x FROM t -- ends here",
            "CREATE VIEW v_open AS SELECT 2 AS two /* never closed", "CREATE INDEX t_x ON t(x) -- no line end",
            "CREATE VIEW v_star AS SELECT 3 AS three /* ends in a star *",
        ] {
            try db.execute(statement)
        }
        let schema = try db.all("SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name") { row in
            try row["sql"] as String
        }
        db.close()
        #expect(schema.last == "CREATE VIEW v_star AS SELECT 3 AS three /* ends in a star *", "kept as typed")
        let result = try runSubprocess(
            ["shell", "source.db", "--key-file", keyPath, "--allow-plaintext"],
            standardInput: Array(".output dump.sql\n.dump\n.output schema.sql\n.schema\n".utf8), in: scratch)
        #expect(result.status == 0, "\(result)")
        let dump = try String(contentsOfFile: scratch.path("dump.sql"), encoding: .utf8)
        #expect(dump.contains("CREATE VIEW v_line AS SELECT x FROM t -- ends here\n;\n"), "\(dump)")
        #expect(dump.contains("CREATE VIEW v_open AS SELECT 2 AS two /* never closed*/;\n"), "\(dump)")
        #expect(dump.contains("CREATE VIEW v_star AS SELECT 3 AS three /* ends in a star */;\n"), "\(dump)")
        #expect(dump.hasSuffix("\nCOMMIT;\n"))
        // The dump and .schema load back, by sqlite3 and by this shell, with every object.
        let schemaText = try String(contentsOfFile: scratch.path("schema.sql"), encoding: .utf8)
        try SQLCipherShell.run(scratch.path("by-sqlite3.db"), script: dump, shell: SQLCipherShell.stockSQLitePath)
        try SQLCipherShell.run(scratch.path("schema-by-sqlite3.db"), script: schemaText, shell: SQLCipherShell.stockSQLitePath)
        let loaded = try runSubprocess(
            ["shell", "by-shell.db", "--key-file", keyPath, "--create"], standardInput: Array(dump.utf8), in: scratch)
        #expect(loaded.status == 0, "\(loaded)")
        for copy in [
            try Connection(path: scratch.path("by-sqlite3.db"), encryption: .none),
            try Connection(path: scratch.path("schema-by-sqlite3.db"), encryption: .none),
            try Connection(path: scratch.path("by-shell.db"), key: key),
        ] {
            #expect(try copy.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) == 5)
            #expect(try copy.scalar("SELECT two + three FROM v_open, v_star", as: Int.self) == 5)
            copy.close()
        }
        // sqlite3's own dump of the same (decrypted) file puts COMMIT inside the open comment: nothing loads.
        _ = try runSubprocess(
            ["decrypt", "source.db", "plain.db", "--key-file", keyPath, "--allow-plaintext"], in: scratch)
        let theirs = try ShellDumpDifferentialTests.sqlite3(scratch.path("plain.db"), script: Array(".dump\n".utf8))
        _ = try ShellDumpDifferentialTests.sqlite3(scratch.path("theirs.db"), script: Array(theirs.output))
        let theirsLoaded = try Connection(path: scratch.path("theirs.db"), encryption: .none)
        #expect(try theirsLoaded.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) == 0)
        theirsLoaded.close()
    }

    @Test("the stock sqlite3 shell reads the dump back into a plaintext database with the same rows and schema")
    func stockShellReadsItBack() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        try Self.makeSource(scratch.path("source.db"), key: key)
        let result = try runSubprocess(
            ["shell", "source.db", "--key-file", keyPath, "--allow-plaintext"],
            standardInput: Array(".output dump.sql\n.dump\n".utf8), in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardError.contains("UNENCRYPTED"))
        #expect(try fileMode(scratch.path("dump.sql")) == 0o600)
        let dump = try String(contentsOfFile: scratch.path("dump.sql"), encoding: .utf8)
        #expect(dump.hasPrefix("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n") && dump.hasSuffix("COMMIT;\n"))
        #expect(!dump.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" && $0 != "\t" }, "no terminal control")
        try SQLCipherShell.run(scratch.path("plain.db"), script: dump, shell: SQLCipherShell.stockSQLitePath)
        let source = try Connection(path: scratch.path("source.db"), key: key)
        let copy = try Connection(path: scratch.path("plain.db"), encryption: .none)
        #expect(try Self.contents(of: copy) == Self.contents(of: source))
        #expect(try copy.scalar("SELECT count(*) FROM search WHERE search MATCH 'argv'", as: Int.self) == 1)
    }

    @Test(".dump TABLE writes that table, its index and trigger only (not a view, which is a table of its own)")
    func oneTable() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        try Self.makeSource(scratch.path("source.db"), key: key)
        let result = try runSubprocess(
            ["shell", "source.db", "--key-file", keyPath, "--allow-plaintext"],
            standardInput: Array(".dump PAIR\n".utf8), in: scratch)
        #expect(result.status == 0, "\(result)")
        // The rows come in the order the engine scans the table (here perhaps through the index on n).
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 9, "\(lines)")
        #expect(Array(lines.prefix(3)) == [
            "PRAGMA foreign_keys=OFF;", "BEGIN TRANSACTION;", "CREATE TABLE pair(k TEXT PRIMARY KEY, n REAL) WITHOUT ROWID;",
        ])
        #expect(Set(lines.dropFirst(3).prefix(3)) == [
            #"INSERT INTO "pair" VALUES('a',1.5);"#, #"INSERT INTO "pair" VALUES('b',3.141592653589793);"#,
            #"INSERT INTO "pair" VALUES('c',NULL);"#,
        ])
        #expect(Array(lines.suffix(3)) == [
            "CREATE INDEX pair_n ON pair(n);", "CREATE TRIGGER pair_touch AFTER INSERT ON pair BEGIN SELECT 1; END;",
            "COMMIT;",
        ])
    }

    @Test("reals of every magnitude come back bit for bit when the dump is read into a new encrypted database")
    func realsRoundTrip() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let reals = RandomReals.sample(count: 3000)
        let source = try Connection(path: scratch.path("reals.db"), key: key)
        try source.execute("CREATE TABLE r(id INTEGER PRIMARY KEY, x REAL)")
        try source.transaction {
            for (index, real) in reals.enumerated() { try source.execute("INSERT INTO r VALUES (?, ?)", index, real) }
        }
        source.close()
        let dumped = try runSubprocess(
            ["shell", "reals.db", "--key-file", keyPath, "--allow-plaintext"],
            standardInput: Array(".output reals.sql\n.dump\n".utf8), in: scratch)
        #expect(dumped.status == 0, "\(dumped)")
        let read = try runSubprocess(
            ["exec", "copy.db", "--key-file", keyPath, "--create", "--file", "reals.sql"], in: scratch)
        #expect(read.status == 0, "\(read)")
        let copy = try Connection(path: scratch.path("copy.db"), key: key)
        let values = try copy.all("SELECT x FROM r ORDER BY id", as: Double.self)
        #expect(values.map(\.bitPattern) == reals.map(\.bitPattern))
    }
}

/// Doubles from random bit patterns (every exponent, subnormals included), from a fixed seed.
enum RandomReals {
    static func sample(count: Int) -> [Double] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var reals: [Double] = [0.1, 0.2, 0.30000000000000004, 1e23, .leastNonzeroMagnitude, 2.2250738585072014e-308, -0.5]
        while reals.count < count {
            // SplitMix64.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            let real = Double(bitPattern: z ^ (z >> 31))
            if real.isFinite && real != 0 { reals.append(real) }
        }
        return reals
    }
}
