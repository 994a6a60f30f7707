import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The passphrase floor is for a key chosen now, on every command that sets one: `encrypt`'s key and `backup`'s
/// destination key, as `rotate`'s new key. A key a database already has is never judged.
@Suite("sqlcipherkit: a new key below the passphrase floor needs --allow-weak-passphrase")
struct NewKeyFloorTests {
    @Test("encrypt refuses a short new passphrase before writing anything, and takes it with the option")
    func encrypt() throws {
        let scratch = try Scratch()
        let plain = try plaintextDatabase(scratch, "plain.db")
        try scratch.writeFile("short.key", "testkey\n", mode: 0o600)
        let refused = try runSubprocess(
            ["encrypt", "plain.db", "enc.db", "--new-key-file", "short.key", "--json"], in: scratch)
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.standardError.contains("passphrase of 7 bytes"), "\(refused)")
        #expect(refused.standardError.contains("--allow-weak-passphrase"), "\(refused)")
        #expect((jsonEnvelope(refused)?["error"] as? [String: Any])?["kind"] as? String == "usage")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("enc.db")))
        let allowed = runInProcess(
            ["encrypt", plain, scratch.path("enc.db"), "--new-key-file", scratch.path("short.key"),
             "--allow-weak-passphrase"])
        #expect(allowed.status == 0, "\(allowed)")
        #expect(opens(scratch.path("enc.db"), with: try EncryptionKey(passphrase: "testkey")))
    }

    @Test("backup refuses a short destination passphrase, but copies under a source's own short key")
    func backup() throws {
        let scratch = try Scratch()
        let testkey = try EncryptionKey(passphrase: "testkey")
        try scratch.writeFile("short.key", "testkey\n", mode: 0o600)
        try scratch.writeFile("other-short.key", "hunter2\n", mode: 0o600)
        let db = try scratch.database("notes.db", key: testkey, rowCount: 7)
        // The source's own key, kept by the copy: not judged.
        let kept = runInProcess(["backup", db, scratch.path("same.db"), "--key-file", scratch.path("short.key")])
        #expect(kept.status == 0, "\(kept)")
        #expect(try rowCount(scratch.path("same.db"), key: testkey) == 7)
        // A destination key chosen now: refused without the option, nothing written.
        let refused = runInProcess(
            ["backup", db, scratch.path("other.db"), "--key-file", scratch.path("short.key"), "--dest-key-file",
             scratch.path("other-short.key")])
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.standardError.contains("--allow-weak-passphrase"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("other.db")))
        let allowed = runInProcess(
            ["backup", db, scratch.path("other.db"), "--key-file", scratch.path("short.key"), "--dest-key-file",
             scratch.path("other-short.key"), "--allow-weak-passphrase"])
        #expect(allowed.status == 0, "\(allowed)")
        #expect(try rowCount(scratch.path("other.db"), key: try EncryptionKey(passphrase: "hunter2")) == 7)
    }
}
