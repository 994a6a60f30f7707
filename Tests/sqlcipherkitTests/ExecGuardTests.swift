import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `exec` under the SQL guard: cipher PRAGMAs and key-less ATTACH are refused, `--allow-plaintext` opts in.
@Suite("sqlcipherkit exec guard")
struct ExecGuardTests {
    @Test("the issue's script with a cipher PRAGMA exits 1, names the PRAGMA, and the file keeps all 3,000 rows",
          arguments: ["PRAGMA cipher_use_hmac = OFF", "PRAGMA cipher_page_size = 4096", "PRAGMA cipher_hmac_pgno = be",
                      "PRAGMA main.page_size = 8192"])
    func cipherPragmaScript(pragma: String) throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("rows.db", key: key, rowCount: 3000)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        let result = try runSubprocess(
            ["exec", "rows.db", "--key-file", keyPath,
             "BEGIN; SELECT count(*) FROM item; \(pragma); UPDATE item SET body='X' WHERE id=1; COMMIT"],
            in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("refused"), "\(result)")
        #expect(result.standardError.contains(pragma.contains("page_size") ? "page_size" : "cipher_"), "\(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: db)) == before)
        #expect(try rowCount(db, key: key) == 3000)
    }

    @Test("cipher_log_level = TRACE then cipher_integrity_check exits 1 without a crash")
    func logLevelTrace() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("log.db", key: key)
        let result = try runSubprocess(
            ["exec", "log.db", "--key-file", keyPath, "PRAGMA cipher_log_level=TRACE; PRAGMA cipher_integrity_check"],
            in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("cipher_log_level"), "\(result)")
    }

    @Test("ATTACH without a key leaves no plaintext file; KEY '' + sqlcipher_export makes no plaintext copy")
    func attachWithoutKey() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let attach = try runSubprocess(
            ["exec", "new.db", "--create", "--key-file", keyPath,
             "ATTACH 'o.db' AS o; CREATE TABLE o.t(x); INSERT INTO o.t VALUES ('MARKER-PLAIN-31')"],
            in: scratch)
        let attached = scratch.path("o.db")
        if attach.status == 0 {
            // SQLCipher 4 keys an ATTACH without KEY with the main database's key: the file is encrypted.
            let bytes = try fileBytes(attached)
            #expect(!bytes.starts(with: Array("SQLite format 3\0".utf8)))
            #expect(!contains(bytes, "MARKER-PLAIN-31"))
        } else {
            #expect(attach.status == 1, "\(attach)")
            #expect(attach.standardError.contains("--allow-plaintext"), "\(attach)")
            #expect(!FileManager.default.fileExists(atPath: attached))
        }
        let export = try runSubprocess(
            ["exec", "new.db", "--create", "--key-file", keyPath,
             "CREATE TABLE IF NOT EXISTS s(x); ATTACH 'p.db' AS p KEY ''; SELECT sqlcipher_export('p')"],
            in: scratch)
        #expect(export.status == 1, "\(export)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("p.db")))
    }

    @Test("--allow-plaintext lets KEY '' attach a plaintext file (mode 0600); --help shows the flag")
    func allowPlaintext() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let result = runInProcess(
            ["exec", scratch.path("new.db"), "--create", "--key-file", keyPath, "--allow-plaintext",
             "CREATE TABLE s(x); INSERT INTO s VALUES (1); ATTACH '\(scratch.path("p.db"))' AS p KEY '';"
                + " SELECT sqlcipher_export('p'); DETACH p"])
        #expect(result.status == 0, "\(result)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: scratch.path("p.db")))
        #expect(bytes.prefix(16) == Data("SQLite format 3\0".utf8))
        #expect(try fileMode(scratch.path("p.db")) == 0o600)
        let help = try runSubprocess(["exec", "--help"], in: scratch)
        #expect(help.standardOutput.contains("--allow-plaintext"), "\(help)")
    }

    @Test("the engine's log stays silent through the guard: a wrong key prints no engine lines",
          .enabled(if: SQLCipher.supports(.version4Format), "SQLCipher 3 has no engine log"))
    func engineLogSilenced() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        _ = try scratch.database("notes.db", key: key)
        let result = try runSubprocess(["exec", "notes.db", "--key-file", otherPath, "SELECT 1"], in: scratch)
        #expect(result.status == 3, "\(result)")
        #expect(!result.standardError.contains("ERROR CORE"), "\(result)")
    }
    @Test("VACUUM INTO exits 1, names the library call and the CLI command, and writes no copy (0644 or otherwise)",
          .enabled(if: SQLCipher.sqliteVersionNumber >= 3_027_000,
                   "VACUUM INTO exists from SQLite 3.27; SQLCipher 3.4.1 is SQLite 3.15"),
          arguments: ["VACUUM INTO 'copy.db'", "VACUUM main INTO 'copy.db'", "VACUUM INTO 'file:copy.db?hexkey=00'",
                      "SELECT 1; VACUUM INTO 'copy.db'"],
          [CipherSettings.engineDefault, CipherSettings(compatibility: 3), CipherSettings(pageSize: 1024, usesHMAC: false)])
    func vacuumInto(sql: String, settings: CipherSettings) throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("rows.db", key: key, settings: settings, rowCount: 300)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        let listing = try folderListing(scratch.url.path)
        var arguments = ["exec", "rows.db", "--key-file", keyPath, sql]
        if settings.compatibility == 3 { arguments += ["--cipher-compatibility", "3"] }
        if settings.pageSize == 1024 { arguments += ["--page-size", "1024", "--no-hmac"] }
        let result = try runSubprocess(arguments, in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(!result.standardError.contains("vacuum(into:)"), "\(result)")  // CLI words, not the API
        #expect(result.standardError.contains("sqlcipherkit backup"), "\(result)")
        #expect(!result.standardError.contains("hexkey"), "\(result)")
        #expect(try folderListing(scratch.url.path) == listing)
        #expect(try Data(contentsOf: URL(fileURLWithPath: db)) == before)
        #expect(try rowCount(db, key: key, settings: settings) == 300)
    }

    @Test("ATTACH with a key in a URI file name exits 1 and creates nothing",
          arguments: ["ATTACH 'file:x.db?key=abc' AS x", "ATTACH 'file:x.db?hexkey=00' AS x",
                      "ATTACH 'file:x.db?%74extkey=abc' AS x", "ATTACH 'file:x.db?key=' AS x"])
    func attachURIKey(sql: String) throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("rows.db", key: key)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        let listing = try folderListing(scratch.url.path)
        let result = try runSubprocess(["exec", "rows.db", "--key-file", keyPath, sql], in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("key in a file name"), "\(result)")
        #expect(!result.standardError.contains("abc") && !result.standardError.contains("hexkey=00"), "\(result)")
        #expect(try folderListing(scratch.url.path) == listing)
        #expect(try Data(contentsOf: URL(fileURLWithPath: db)) == before)
    }

    @Test("a failed ATTACH (KEY 0, KEY 1.5) exits 1 and leaves no empty file behind",
          arguments: ["ATTACH 'x.db' AS x KEY 0", "ATTACH 'x.db' AS x KEY 1.5; CREATE TABLE x.t(v)"])
    func failedAttach(sql: String) throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("rows.db", key: key)
        let listing = try folderListing(scratch.url.path)
        let result = try runSubprocess(["exec", "rows.db", "--key-file", keyPath, sql], in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("Invalid key value"), "\(result)")
        #expect(try folderListing(scratch.url.path) == listing)
        #expect(try rowCount(db, key: key) == 20)
    }
}
