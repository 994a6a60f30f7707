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

    @Test("a new key without salt: the file keeps the old key's salt, opened with --salt-file",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header"),
          arguments: ["in-place", "copy"])
    func unsaltedNewKey(method: String) throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key", withSalt: true)
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("hdr.db", key: oldKey, settings: .plaintextHeader(size: 32), rowCount: 30)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--method", method,
             "--plaintext-header-size", "32"])
        #expect(result.status == 0, "\(result)")
        let salt = oldKey.salt!
        #expect(try rowCount(db, key: newKey, settings: .plaintextHeader(size: 32, salt: salt)) == 30)
        try scratch.writeFile("salt", salt.map { String(format: "%02x", $0) }.joined() + "\n", mode: 0o644)
        let verify = runInProcess(
            ["verify", db, "--key-file", newPath, "--plaintext-header-size", "32", "--salt-file", scratch.path("salt")])
        #expect(verify.status == 0, "\(verify)")
    }
}
