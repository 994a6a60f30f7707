import Foundation
import SQLCipherKit
import Testing

@Suite("Cipher settings")
struct CipherSettingsTests {
    @Test("a page size is applied, read back and needed again at the next open")
    func pageSize() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("pages.db")
            let settings = CipherSettings(pageSize: 8192)
            do {
                let db = try Connection(path: path, key: TestKeys.raw, settings: settings)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
                #expect(try db.pragmaValue("page_size") == "8192")   // SQLCipher 4 answers as TEXT
            }
            #expect((try fileBytes(path)).count % 8192 == 0)
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.raw) }
            #expect(try Connection(path: path, key: TestKeys.raw, settings: settings)
                .scalar("SELECT x FROM t", as: Int.self) == 1)
        }
    }

    @Test("KDF iterations and HMAC off round-trip")
    func kdfAndHMAC() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("kdf.db")
            let settings = CipherSettings(kdfIterations: 4000, usesHMAC: false)
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
            #expect(try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                .scalar("SELECT x FROM t", as: Int.self) == 1)
        }
    }

    @Test("invalid values are refused before anything is written", arguments: [
        CipherSettings(pageSize: 1000), CipherSettings(pageSize: 256), CipherSettings(pageSize: 131_072),
        CipherSettings(kdfIterations: 0), CipherSettings(compatibility: 5),
    ])
    func invalidValues(_ settings: CipherSettings) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("invalid.db")
            expectError(.invalidArgument) { try Connection(path: path, key: TestKeys.raw, settings: settings) }
            #expect(!FileManager.default.fileExists(atPath: path), "a failed open must not leave the file it created")
        }
    }

    @Test("the SQLCipher 3 preset works on every engine and gives a file SQLCipher 3 can read")
    func sqlcipher3Preset() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("v3.db")
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase, settings: .sqlcipher3)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
                #expect(try db.pragmaValue("page_size") == "1024")
            }
            #expect(try Connection(path: path, key: TestKeys.passphrase, settings: .sqlcipher3)
                .scalar("SELECT x FROM t", as: Int.self) == 1)
        }
    }

    @Test("SQLCipher 4 settings on SQLCipher 3 fail with the feature, the version needed and the version linked",
          .enabled(if: !Engine.isVersion4, "checks the SQLCipher 3 engine's refusal; SQLCipher 4 supports these"))
    func version4SettingsOnVersion3() throws {
        for settings in [CipherSettings.sqlcipher4, CipherSettings(kdfAlgorithm: .pbkdf2HMACSHA256),
                         CipherSettings(hmacAlgorithm: .hmacSHA512), CipherSettings(compatibility: 4),
                         CipherSettings.plaintextHeader(size: 32)] {
            let error = expectError(.unsupportedByEngine) {
                try Connection(path: ":memory:", key: TestKeys.raw, settings: settings)
            }
            #expect(error?.message.contains("4.0") == true)
            #expect(error?.message.contains(SQLCipher.version) == true)
        }
    }

    @Test("KDF and HMAC algorithms round-trip on SQLCipher 4",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: SQLCipher 3 has SHA1 only"))
    func algorithms() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("algorithms.db")
            let settings = CipherSettings(kdfAlgorithm: .pbkdf2HMACSHA256, hmacAlgorithm: .hmacSHA256)
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
            #expect(try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                .scalar("SELECT x FROM t", as: Int.self) == 1)
            #expect(try Connection(path: ":memory:", key: TestKeys.raw, settings: .sqlcipher4)
                .scalar("SELECT 1", as: Int.self) == 1)
        }
    }
}
