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
