import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit migrate")
struct MigrateCommandTests {
    @Test("converts a SQLCipher 3 file to the 4 format with the same key", .enabled(if: Engine.isVersion4,
        "needs SQLCipher 4: migration writes the SQLCipher 4 format, which SQLCipher 3.4.1 cannot"))
    func migrates() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let db = try scratch.database("legacy.db", key: key, settings: .sqlcipher3, rowCount: 100)
        let result = try runSubprocess(["migrate", "legacy.db", "--key-file", keyPath], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.isFreeOfKeyMaterial)
        #expect(try rowCount(db, key: key) == 100)
        #expect(!opens(db, with: key, settings: .sqlcipher3))
        let again = runInProcess(["migrate", db, "--key-file", keyPath])
        #expect(again.status == 0, "\(again)")
        #expect(again.standardOutput.contains("already"))
    }

    @Test("--plaintext-header-size gives the migrated file a plaintext header, with the salt from the key",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: plaintext headers and the 4 format"))
    func migratesWithPlaintextHeader() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k", withSalt: true)
        let db = try scratch.database("legacy.db", key: key, settings: .sqlcipher3, rowCount: 60)
        let result = runInProcess(["migrate", db, "--key-file", keyPath, "--plaintext-header-size", "32", "--json"])
        #expect(result.status == 0, "\(result)")
        #expect((jsonEnvelope(result)?["result"] as? [String: Any])?["migrated"] as? Bool == true)
        #expect(try fileBytes(db).prefix(16) == ArraySlice(Array("SQLite format 3".utf8) + [0]))
        #expect(try rowCount(db, key: key, settings: .plaintextHeader(size: 32, salt: key.salt)) == 60)
        #expect(runInProcess(["verify", db, "--key-file", keyPath, "--plaintext-header-size", "32"]).status == 0)
    }

    @Test("a wrong key exits 3 and leaves the file as it was", .enabled(if: Engine.isVersion4,
        "needs SQLCipher 4: on SQLCipher 3.4.1 migrate refuses before it reads the key (checked below)"))
    func wrongKey() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let db = try scratch.database("legacy.db", key: key, settings: .sqlcipher3)
        let before = try fileBytes(db)
        #expect(runInProcess(["migrate", db, "--key-file", otherPath]).status == 3)
        #expect(try fileBytes(db) == before)
    }

    /// SQLCipher's own fixtures are keyed `testkey` (7 bytes): migrate keeps a key, so the floor for new passphrases
    /// is not its business. The database is made by the sqlcipher 3.4.1 shell, an independent SQLCipher 3.
    static func testkeyDatabase(_ scratch: Scratch) throws -> (path: String, keyPath: String, key: EncryptionKey) {
        try scratch.writeFile("testkey.key", "testkey\n", mode: 0o600)
        let path = scratch.path("fixture.db")
        try SQLCipherShell.run(path, script: """
            PRAGMA key = 'testkey';
            CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
            INSERT INTO t(body) SELECT 'row ' || i FROM n;
            """)
        return (path, scratch.path("testkey.key"), try EncryptionKey(passphrase: "testkey"))
    }

    @Test("a SQLCipher 3 database keyed with the 7-byte passphrase testkey migrates, keeping its key, silently", .enabled(if: Engine.isVersion4 && SQLCipherShell.isAvailable,
        "needs SQLCipher 4 to write the 4 format, and the sqlcipher 3.4.1 shell to make the fixture"))
    func keepsShortPassphrase() throws {
        let scratch = try Scratch()
        let (db, keyPath, key) = try Self.testkeyDatabase(scratch)
        #expect(try rowCount(db, key: key, settings: .sqlcipher3, table: "t") == 300)
        // Before: "the new key is a passphrase of 7 bytes", exit 2, and no option to go on.
        let result = try runSubprocess(["migrate", "fixture.db", "--key-file", keyPath, "--json"], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect((jsonEnvelope(result)?["result"] as? [String: Any])?["migrated"] as? Bool == true)
        for word in ["passphrase", "weak", "bytes", "allowsWeakPassphrase"] {
            #expect(!result.standardError.contains(word), "\(result)")
        }
        #expect(try rowCount(db, key: key, table: "t") == 300)
        #expect(!opens(db, with: key, settings: .sqlcipher3))
        // A database the library made in SQLCipher 3's format (cipher_compatibility 3) alike, in-process.
        try scratch.writeFile("lib.key", "testkey\n", mode: 0o600)
        let library = scratch.path("lib.db")
        let made = try Connection(path: library, key: key, settings: .sqlcipher3)
        try made.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        made.close()
        let again = runInProcess(["migrate", library, "--key-file", scratch.path("lib.key")])
        #expect(again.status == 0, "\(again)")
        #expect(try rowCount(library, key: key, table: "t") == 1)
    }

    @Test("on SQLCipher 3 a testkey database is refused for the engine, not for its key", .enabled(
        if: !Engine.isVersion4 && SQLCipherShell.isAvailable, "checks SQLCipher 3's refusal; SQLCipher 4 migrates"))
    func shortPassphraseOnVersion3() throws {
        let scratch = try Scratch()
        let (db, keyPath, key) = try Self.testkeyDatabase(scratch)
        let before = try fileBytes(db)
        let result = try runSubprocess(["migrate", "fixture.db", "--key-file", keyPath, "--json"], in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect((jsonEnvelope(result)?["error"] as? [String: Any])?["kind"] as? String == "unsupportedByEngine")
        #expect(result.standardError.contains("4.0.0") && !result.standardError.contains("passphrase"), "\(result)")
        #expect(try fileBytes(db) == before)
        #expect(try rowCount(db, key: key, table: "t") == 300)
    }

    @Test("on SQLCipher 3 it refuses with an error naming both versions", .enabled(if: !Engine.isVersion4,
        "checks SQLCipher 3's refusal; SQLCipher 4 migrates (checked above)"))
    func unsupportedOnVersion3() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("legacy.db", key: key)
        let before = try fileBytes(db)
        let result = try runSubprocess(["migrate", db, "--key-file", keyPath], in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("4.0.0") && result.standardError.contains(SQLCipher.version))
        #expect(try fileBytes(db) == before)
    }
}
