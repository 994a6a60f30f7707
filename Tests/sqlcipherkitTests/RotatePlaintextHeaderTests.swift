import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Rotating a plaintext-header database (SQLCipher 4), whose salt is not in the file: each salt stays where the
/// command line gave it, and the database keeps its rows. Behaviour pinned as the command had it before the key options
/// produced the library's `KeyProvider`.
@Suite("sqlcipherkit rotate with a plaintext header")
struct RotatePlaintextHeaderTests {
    static let header = Array("SQLite format 3".utf8) + [0]

    @Test("keys with salt: the new key's salt opens the rotated file, the old key no longer does",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header"),
          arguments: [("in-place", true), ("copy", true), ("copy", false)])
    func saltedKeys(method: String, sameSalt: Bool) throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key", withSalt: true)
        let newKey = try EncryptionKey.generateRaw(withSalt: !sameSalt)
        let salted = sameSalt ? try newKey.withSalt(oldKey.salt!) : newKey
        try salted.write(toKeyFile: scratch.path("new.key"))
        let db = try scratch.database("hdr.db", key: oldKey, settings: .plaintextHeader(size: 32), rowCount: 40)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", scratch.path("new.key"), "--method", method,
             "--plaintext-header-size", "32"])
        #expect(result.status == 0, "\(result)")
        #expect(Array(try fileBytes(db).prefix(16)) == Self.header)
        #expect(try rowCount(db, key: salted, settings: .plaintextHeader(size: 32)) == 40)
        #expect(!opens(db, with: oldKey, settings: .plaintextHeader(size: 32)))
        let verify = runInProcess(
            ["verify", db, "--key-file", scratch.path("new.key"), "--plaintext-header-size", "32"])
        #expect(verify.status == 0, "\(verify)")
    }

    @Test("a new key file without the salt is refused: alone it could never open the database",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header"),
          arguments: ["in-place", "copy"])
    func unsaltedNewKeyIsRefused(method: String) throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key", withSalt: true)
        let (newPath, _) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("hdr.db", key: oldKey, settings: .plaintextHeader(size: 32), rowCount: 30)
        let before = try fileBytes(db)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--method", method,
             "--plaintext-header-size", "32"])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("keygen --out NEW.key --salt-from OLD.key"), "\(result)")
        #expect(try fileBytes(db) == before)
        #expect(try rowCount(db, key: oldKey, settings: .plaintextHeader(size: 32)) == 30)

        // keygen --salt-from writes a new key with the database's salt: that key file alone opens the result.
        let keygen = runInProcess(["keygen", "--out", scratch.path("salted.key"), "--salt-from", oldPath])
        #expect(keygen.status == 0, "\(keygen)")
        let salted = try EncryptionKey(contentsOf: scratch.path("salted.key"))
        #expect(salted.salt == oldKey.salt)
        #expect(!salted.isSameKey(as: oldKey))
        let rotated = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", scratch.path("salted.key"), "--method", method,
             "--plaintext-header-size", "32"])
        #expect(rotated.status == 0, "\(rotated)")
        let verify = runInProcess(
            ["verify", db, "--key-file", scratch.path("salted.key"), "--plaintext-header-size", "32"])
        #expect(verify.status == 0, "\(verify)")
        #expect(!opens(db, with: oldKey, settings: .plaintextHeader(size: 32)))
    }

    @Test("in place, a new key with another salt is refused: the rekey keeps the database's salt",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header"))
    func inPlaceWithAnotherSalt() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key", withSalt: true)
        let (newPath, _) = try scratch.rawKeyFile("new.key", withSalt: true)
        let db = try scratch.database("hdr.db", key: oldKey, settings: .plaintextHeader(size: 32), rowCount: 10)
        let before = try fileBytes(db)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--method", "in-place",
             "--plaintext-header-size", "32"])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("--method copy"), "\(result)")
        #expect(try fileBytes(db) == before)
    }

    @Test("with the salt in a --salt-file, a new key without salt is fine: the salt file and the key open it",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header"),
          arguments: ["in-place", "copy"])
    func saltFile(method: String) throws {
        let scratch = try Scratch()
        let salt = (0..<16).map { UInt8($0 * 7 + 3) }
        try scratch.writeFile("salt", salt.map { String(format: "%02x", $0) }.joined() + "\n", mode: 0o644)
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database(
            "hdr.db", key: oldKey, settings: .plaintextHeader(size: 32, salt: salt), rowCount: 30)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--method", method,
             "--plaintext-header-size", "32", "--salt-file", scratch.path("salt")])
        #expect(result.status == 0, "\(result)")
        #expect(try rowCount(db, key: newKey, settings: .plaintextHeader(size: 32, salt: salt)) == 30)
    }
}
