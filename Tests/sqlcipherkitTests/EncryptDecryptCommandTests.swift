import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit encrypt and decrypt")
struct EncryptDecryptCommandTests {
    private func plaintextDatabase(_ scratch: Scratch) throws -> String {
        let db = try Connection(path: scratch.path("plain.db"), encryption: .none)
        try db.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT); PRAGMA user_version = 3")
        try db.execute("INSERT INTO item(body) VALUES ('visible secret'), ('two')")
        db.close()
        return scratch.path("plain.db")
    }

    @Test("encrypt copies a plaintext database into an encrypted one; the original is unchanged")
    func encrypt() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let plain = try plaintextDatabase(scratch)
        let before = try fileBytes(plain)
        let result = try runSubprocess(["encrypt", "plain.db", "enc.db", "--new-key-file", keyPath], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(try fileBytes(plain) == before)
        let encrypted = scratch.path("enc.db")
        #expect(try rowCount(encrypted, key: key) == 2)
        #expect(try fileMode(encrypted) == 0o600)
        let bytes = try fileBytes(encrypted)
        #expect(!String(decoding: bytes, as: UTF8.self).contains("visible secret"))
        #expect(Array(bytes.prefix(15)) != Array("SQLite format 3".utf8))
    }

    @Test("encrypt refuses an existing output, an encrypted input, and a header without a salted key")
    func encryptBadInput() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let plain = try plaintextDatabase(scratch)
        let encrypted = try scratch.database("enc.db", key: key)
        #expect(runInProcess(["encrypt", plain, encrypted, "--new-key-file", keyPath]).status == 1)
        #expect(runInProcess(["encrypt", encrypted, scratch.path("x.db"), "--new-key-file", keyPath]).status == 3)
        #expect(runInProcess(["encrypt", scratch.path("nope.db"), scratch.path("y.db"), "--new-key-file", keyPath]).status == 1)
        let header = runInProcess(
            ["encrypt", plain, scratch.path("z.db"), "--new-key-file", keyPath, "--plaintext-header-size", "32"])
        #expect(header.status == 2, "\(header)")
        #expect(parsingStatus(["encrypt", plain, "z.db", "--new-key-file", keyPath, "--plaintext-header-size", "7"]) == .usage)
    }

    @Test("encrypt with a plaintext header takes the salt from an x'<96 hex>' key", .enabled(if: Engine.isVersion4,
        "needs SQLCipher 4: SQLCipher 3.4.1 has no plaintext header (its refusal is checked below)"))
    func encryptWithPlaintextHeader() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k", withSalt: true)
        let plain = try plaintextDatabase(scratch)
        let output = scratch.path("hdr.db")
        let result = runInProcess(["encrypt", plain, output, "--new-key-file", keyPath, "--plaintext-header-size", "32"])
        #expect(result.status == 0, "\(result)")
        #expect(Array(try fileBytes(output).prefix(15)) == Array("SQLite format 3".utf8))
        #expect(try rowCount(output, key: key, settings: .plaintextHeader(size: 32, salt: key.salt)) == 2)
        let exec = runInProcess(
            ["exec", output, "--key-file", keyPath, "--plaintext-header-size", "32", "SELECT count(*) FROM item"])
        #expect(exec.standardOutput == "2\n", "\(exec)")
    }

    @Test("encrypt on SQLCipher 3 refuses a plaintext header, naming the versions", .enabled(if: !Engine.isVersion4,
        "checks SQLCipher 3's refusal; SQLCipher 4 supports the header (checked above)"))
    func encryptWithPlaintextHeaderOnVersion3() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k", withSalt: true)
        let plain = try plaintextDatabase(scratch)
        let result = runInProcess(
            ["encrypt", plain, scratch.path("hdr.db"), "--new-key-file", keyPath, "--plaintext-header-size", "32"])
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("4.0.0"))
    }

    @Test("decrypt without --allow-plaintext exits 2 and writes nothing")
    func decryptRefused() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("enc.db", key: key)
        let result = try runSubprocess(["decrypt", db, "out.db", "--key-file", keyPath], in: scratch)
        #expect(result.status == 2, "\(result)")
        #expect(result.standardError.contains("--allow-plaintext"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path("out.db")))
    }

    @Test("decrypt --allow-plaintext writes a plaintext copy (mode 0600) and warns; a wrong key exits 3")
    func decrypt() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let db = try scratch.database("enc.db", key: key)
        let output = scratch.path("out.db")
        #expect(runInProcess(["decrypt", db, output, "--key-file", otherPath, "--allow-plaintext"]).status == 3)
        let result = runInProcess(["decrypt", db, output, "--key-file", keyPath, "--allow-plaintext"])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardError.contains("NOT encrypted"))
        #expect(try fileMode(output) == 0o600)
        let plain = try Connection(path: output, encryption: .none)
        #expect(try plain.scalar("SELECT count(*) FROM item", as: Int.self) == 20)
        plain.close()
    }
}
