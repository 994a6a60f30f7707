import Foundation
import SQLCipherKit
import Testing

/// `VACUUM INTO` in SQL is refused (the engine would write a 0644 copy without the source's cipher settings, and a
/// URI could choose its key); ``Connection/vacuum(into:)`` writes the copy the library's way.
@Suite("VACUUM INTO guard")
struct VacuumIntoGuardTests {
    static let needsVacuumInto = Testing.ConditionTrait.enabled(
        if: SQLCipher.sqliteVersionNumber >= 3_027_000,
        "VACUUM INTO exists from SQLite 3.27; SQLCipher 3.4.1 is SQLite 3.15, where it is a syntax error")

    /// Every form of VACUUM INTO an attacker or a careless script would try; `{C}` is the copy's path.
    static let forms: [String] = [
        "VACUUM INTO '{C}'",
        "vacuum into '{C}'",
        "VACUUM main INTO '{C}'",
        "VACUUM \"main\" INTO '{C}'",
        "VACUUM [main] INTO '{C}'",
        "VACUUM `main` INTO '{C}'",
        "VACUUM 'main' INTO '{C}'",
        "VACUUM temp INTO '{C}'",
        "/* comment */ VACUUM -- comment\n INTO '{C}'",
        ";; VACUUM INTO '{C}'",
        "VACUUM\tINTO\n'{C}';",
        "VACUUM INTO '{C}' || ''",
        "VACUUM INTO 'file:{C}'",
        "VACUUM INTO 'file:{C}?hexkey=00'",
        "VACUUM INTO 'file:{C}?key=SENTINEL-KEY-7f3a9c-sql'",
        "VACUUM INTO 'file:{C}?textkey=SENTINEL-KEY-7f3a9c-sql'",
        "VACUUM INTO 'file:{C}?%6Bey=SENTINEL-KEY-7f3a9c-sql'",
    ]

    @Test("VACUUM INTO in SQL is refused in every form and through every path; no file appears, the source is intact",
          needsVacuumInto, arguments: forms, SQLPath.allCases)
    func refusedForms(form: String, path: SQLPath) throws {
        try withTemporaryDirectory { dir in
            let source = dir.path("source.db")
            try EncryptionTests.makeDatabase(source, rows: 50)
            let copy = dir.path("copy.db")
            let listing = try folderListing(dir.url.path)
            let bytes = try snapshot(source)
            let db = try Connection(path: source, key: TestKeys.raw)
            let error = expectError(code: DatabaseError.SQLITE_AUTH) {
                try path.run(form.replacingOccurrences(of: "{C}", with: copy), on: db)
            }
            #expect(error?.message.contains("vacuum(into:)") == true, "\(error.map { "\($0)" } ?? "")")
            #expect(error?.sql == nil, "the SQL may hold a key")
            #expect(error.map { "\($0)" }?.contains(TestKeys.sentinel) == false)
            db.close()
            #expect(try folderListing(dir.url.path) == listing)
            #expect(try snapshot(source) == bytes)
            #expect(try Connection(path: source, key: TestKeys.raw).scalar("SELECT count(*) FROM t", as: Int.self) == 50)
        }
    }

    @Test("a bound target is refused too")
    func boundTarget() throws {
        try withTemporaryDirectory { dir in
            let source = dir.path("source.db")
            try EncryptionTests.makeDatabase(source, rows: 5)
            let db = try Connection(path: source, key: TestKeys.raw)
            let listing = try folderListing(dir.url.path)
            for target in [dir.path("copy.db"), "file:\(dir.path("copy.db"))?hexkey=00"] {
                // SQLite 3.15 does not know VACUUM INTO: a syntax error there, a refusal on SQLCipher 4.
                #expect(throws: DatabaseError.self) { try db.execute("VACUUM INTO ?", target) }
                #expect(throws: DatabaseError.self) { try db.execute("VACUUM main INTO :target", arguments: [":target": target]) }
            }
            #expect(try folderListing(dir.url.path) == listing)
        }
    }

    @Test("VACUUM and VACUUM schema still run, through every path", arguments: SQLPath.allCases)
    func plainVacuum(path: SQLPath) throws {
        try withTemporaryDirectory { dir in
            let source = dir.path("source.db")
            try EncryptionTests.makeDatabase(source, rows: 50)
            let db = try Connection(path: source, key: TestKeys.raw)
            try db.execute("DELETE FROM t WHERE id > 10")
            for sql in ["VACUUM", "vacuum main;", "/* c */ VACUUM \"main\" -- c", "VACUUM; VACUUM main"]
            where path == .execute || !sql.contains("; VACUUM") {
                try path.run(sql, on: db)
            }
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 10)
            #expect(Array(try snapshot(source).prefix(16)) != EncryptionTests.magic)
        }
    }

    @Test("a script stops at VACUUM INTO: the statements before it ran, none after", needsVacuumInto)
    func scriptStops() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("source.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(x)")
            expectError(code: DatabaseError.SQLITE_AUTH) {
                try db.execute(
                    "INSERT INTO t VALUES (1); VACUUM INTO '\(dir.path("copy.db"))'; INSERT INTO t VALUES (2)")
            }
            #expect(try db.scalar("SELECT group_concat(x) FROM t", as: String.self) == "1")
        }
    }

    /// Settings a source may have; the copy must open with exactly these.
    static let sourceSettings: [CipherSettings] = [
        .engineDefault, CipherSettings(compatibility: 3), CipherSettings(pageSize: 1024, usesHMAC: false),
    ]

    @Test("vacuum(into:) writes a 0600 copy with the source's key and settings, with every row", needsVacuumInto,
          arguments: sourceSettings)
    func libraryCopy(settings: CipherSettings) throws {
        try withTemporaryDirectory { dir in
            let source = dir.path("source.db")
            let encryption = Encryption.key(TestKeys.passphrase, settings: settings)
            let db = try Connection(path: source, encryption: encryption)
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT); PRAGMA user_version = 7")
            try db.transaction {
                for index in 0..<300 { try db.execute("INSERT INTO t(body) VALUES (?)", "\(EncryptionTests.marker) \(index)") }
            }
            let copy = dir.path("copy.db")
            try db.vacuum(into: copy)
            db.close()

            #expect(try folderListing(dir.url.path) == ["source.db": 0o600, "copy.db": 0o600])
            let bytes = try snapshot(copy)
            #expect(Array(bytes.prefix(16)) != EncryptionTests.magic)
            #expect(!contains(bytes, EncryptionTests.marker))
            let reopened = try Connection(path: copy, encryption: encryption)
            #expect(try reopened.scalar("SELECT count(*) FROM t", as: Int.self) == 300)
            #expect(try reopened.scalar("PRAGMA user_version", as: Int.self) == 7)
            reopened.close()
            #expect(throws: DatabaseError.self) {
                try Connection(path: copy, encryption: .key(TestKeys.otherPassphrase, settings: settings))
            }
            if !settings.isEngineDefault {
                #expect(throws: DatabaseError.self) { try Connection(path: copy, key: TestKeys.passphrase) }
            }
        }
    }
}
