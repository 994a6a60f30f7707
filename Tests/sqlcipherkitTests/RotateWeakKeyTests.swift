import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Any text that is not `x'…'` is a passphrase: a broken secret agent that writes an error message into the new key
/// file would have the database rekeyed to it. `rotate` refuses a new passphrase below the floor unless asked.
@Suite("sqlcipherkit rotate with a new key that is more likely a mistake than a key")
struct RotateWeakKeyTests {
    @Test("a short passphrase, or text with a line break, is refused and the database is left as it was",
          arguments: ["not a key\n", "short\n", "Error: secret\nnot found in vault today\n"])
    func refused(text: String) throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        try scratch.writeFile("new.key", text, mode: 0o600)
        let db = try scratch.database("w.db", key: oldKey, rowCount: 12)
        let before = try fileBytes(db)
        let result = runInProcess(["rotate", db, "--key-file", oldPath, "--new-key-file", scratch.path("new.key")])
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("--allow-weak-passphrase"), "\(result)")
        #expect(!result.standardError.contains(text.split(separator: "\n")[0]), "the key text is never shown")
        #expect(try fileBytes(db) == before)
        #expect(try rowCount(db, key: oldKey) == 12)
    }

    @Test("--allow-weak-passphrase rotates to it")
    func optIn() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        try scratch.writeFile("new.key", "short pass\n", mode: 0o600)
        let db = try scratch.database("w.db", key: oldKey, rowCount: 12)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", scratch.path("new.key"), "--allow-weak-passphrase"])
        #expect(result.status == 0, "\(result)")
        #expect(try rowCount(db, key: try EncryptionKey(passphrase: "short pass")) == 12)
        #expect(!opens(db, with: oldKey))
    }
}
