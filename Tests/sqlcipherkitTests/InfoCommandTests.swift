import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit info")
struct InfoCommandTests {
    /// The envelope's `result`, with the envelope's `engine` and `error` beside its fields.
    private func json(_ result: CommandResult) throws -> [String: Any] {
        let envelope = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any] ?? [:]
        var report = envelope["result"] as? [String: Any] ?? [:]
        report["engine"] = envelope["engine"]
        report["error"] = envelope["error"]
        return report
    }

    @Test("without a key: engine versions and the file's format")
    func withoutKey() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let encrypted = try scratch.database("enc.db", key: key)
        let plain = try Connection(path: scratch.path("plain.db"), encryption: .none)
        try plain.execute("CREATE TABLE t(x); PRAGMA user_version = 5")
        plain.close()
        _ = FileManager.default.createFile(atPath: scratch.path("empty.db"), contents: nil)
        // A missing file or a folder is described, then exits 1: `info typo.db && …` must not go on.
        let cases: [(String, String, Int32)] = [
            (encrypted, "encrypted", 0), (scratch.path("plain.db"), "plaintext", 0),
            (scratch.path("empty.db"), "empty", 0), (scratch.path("missing.db"), "missing", 1),
            (scratch.url.path, "not-a-regular-file", 1),
        ]
        for (path, format, status) in cases {
            let result = try runSubprocess(["info", path, "--json"], in: scratch)
            #expect(result.status == status, "\(result)")
            let report = try json(result)
            #expect(report["format"] as? String == format)
            #expect((report["engine"] as? [String: Any])?["sqlcipherVersion"] as? String == SQLCipher.version)
        }
        let plainReport = try json(runInProcess(["info", scratch.path("plain.db"), "--json"]))
        #expect((plainReport["database"] as? [String: Any])?["userVersion"] as? Int == 5)
        let text = runInProcess(["info", encrypted])
        #expect(text.standardOutput.contains("SQLCipher \(SQLCipher.version)"))
    }

    @Test("with the key: page size, cipher settings, journal mode, header fields")
    func withKey() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("enc.db", key: key, rowCount: 100, journalMode: "WAL")
        let result = runInProcess(["info", db, "--key-file", keyPath, "--json"])
        #expect(result.status == 0, "\(result)")
        let report = try json(result)
        let database = report["database"] as? [String: Any]
        let cipher = report["cipher"] as? [String: Any]
        #expect(database?["journalMode"] as? String == "wal")
        #expect((database?["pageCount"] as? Int ?? 0) > 1)
        #expect(cipher?["pageSize"] as? Int == (Engine.isVersion4 ? 4096 : 1024))
        #expect(cipher?["kdfIterations"] as? Int == (Engine.isVersion4 ? 256_000 : 64_000))
        #expect(cipher?["usesHMAC"] as? Bool == true)
        #expect(cipher?["formatMajorVersion"] as? Int == (Engine.isVersion4 ? 4 : 3))
        if Engine.isVersion4 {
            #expect(cipher?["hmacAlgorithm"] as? String == "HMAC_SHA512")
            #expect(cipher?["plaintextHeaderSize"] as? Int == 0)
        }
        #expect(!result.standardOutput.contains(String(decoding: try fileBytes(keyPath).dropFirst(2).prefix(20), as: UTF8.self)))
    }

    @Test("a wrong key still reports the file, then exits 3")
    func wrongKey() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let db = try scratch.database("enc.db", key: key)
        let result = try runSubprocess(["info", db, "--key-file", otherPath, "--json"], in: scratch)
        #expect(result.status == 3, "\(result)")
        let report = try json(result)
        #expect(report["format"] as? String == "encrypted")
        #expect((report["error"] as? [String: Any])?["kind"] as? String == "wrongKey")
    }

    @Test("a plaintext-header database is recognised (SQLCipher 4)", .enabled(if: Engine.isVersion4,
        "needs SQLCipher 4: SQLCipher 3.4.1 cannot create a plaintext-header database"))
    func plaintextHeader() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k", withSalt: true)
        let db = try scratch.database("hdr.db", key: key, settings: .plaintextHeader(size: 32, salt: key.salt))
        let withoutKey = try json(runInProcess(["info", db, "--json"]))
        #expect(withoutKey["format"] as? String == "plaintext-header")
        #expect((withoutKey["suggestedOptions"] as? [String])?.contains("--plaintext-header-size") == true)
        // The default settings do not open it; info recognises the format (the key carries the salt) and says how.
        let recognised = runInProcess(["info", db, "--key-file", keyPath])
        #expect(recognised.status == 0, "\(recognised)")
        #expect(recognised.standardOutput.contains("open with"), "\(recognised)")
        #expect(recognised.standardOutput.contains("--plaintext-header-size 32"))
        let opened = runInProcess(["info", db, "--key-file", keyPath, "--plaintext-header-size", "32", "--json"])
        #expect(opened.status == 0, "\(opened)")
        #expect((try json(opened)["cipher"] as? [String: Any])?["plaintextHeaderSize"] as? Int == 32)
    }
}
