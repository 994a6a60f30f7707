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

    @Test("one range check names the setting, what it must be and what it is; the open's error says the same",
          arguments: [
            (CipherSettings(compatibility: 5), CipherSettings.RangeViolation.Setting.compatibility, "1, 2, 3 or 4"),
            (CipherSettings(pageSize: 1000), .pageSize, "a power of two from 512 to 65536"),
            (CipherSettings(kdfIterations: 0), .kdfIterations, "at least 1"),
            (CipherSettings(compatibility: 3, plaintextHeaderSize: 1024), .plaintextHeaderSize,
             "a multiple of 16 from 0 to 912"),
            (CipherSettings(pageSize: 4096, plaintextHeaderSize: 20), .plaintextHeaderSize,
             "a multiple of 16 from 0 to 3984"),
            (CipherSettings(salt: [1, 2, 3]), .salt, "16 bytes"),
            (CipherSettings(fastKDFIterations: -1), .fastKDFIterations, "at least 1"),
          ])
    func rangeCheck(_ settings: CipherSettings, setting: CipherSettings.RangeViolation.Setting, requirement: String) throws {
        let violation = try #require(settings.rangeViolation)
        #expect(violation.setting == setting)
        #expect(violation.requirement == requirement)
        try withTemporaryDirectory { dir in
            let error = expectError(.invalidArgument) {
                try Connection(path: dir.path("ranges.db"), key: TestKeys.raw, settings: settings)
            }
            #expect(error?.message == violation.message(naming: setting.name))
        }
    }

    @Test("settings within their ranges pass the range check", arguments: [
        CipherSettings.engineDefault, .sqlcipher1, .sqlcipher3, .sqlcipher4, CipherSettings(compatibility: 2),
        CipherSettings(pageSize: 65536, plaintextHeaderSize: 32, salt: Array(0..<16), fastKDFIterations: 1),
    ])
    func withinRanges(_ settings: CipherSettings) {
        #expect(settings.rangeViolation == nil)
    }

    @Test("a salt file holds 32 hex digits or x'<32 hex>'; a FIFO, a wrong length and bad digits are refused at once")
    func saltFile() throws {
        try withTemporaryDirectory { dir in
            let hex = "000102030405060708090a0b0c0d0e0f"
            try Data((" " + hex + "\n").utf8).write(to: URL(fileURLWithPath: dir.path("plain")))
            try Data("x'\(hex.uppercased())'".utf8).write(to: URL(fileURLWithPath: dir.path("quoted")))
            #expect(try CipherSettings.salt(contentsOfFile: dir.path("plain")) == Array(0...15))
            #expect(try CipherSettings.salt(contentsOfFile: dir.path("quoted")) == Array(0...15))
            try Data("0001".utf8).write(to: URL(fileURLWithPath: dir.path("short")))
            try Data(String(repeating: "zz", count: 16).utf8).write(to: URL(fileURLWithPath: dir.path("bad")))
            try Data(String(repeating: "0", count: 300).utf8).write(to: URL(fileURLWithPath: dir.path("long")))
            #expect(mkfifo(dir.path("fifo"), 0o600) == 0)
            for name in ["short", "bad", "long", "fifo", "missing"] {
                let error = expectError(.invalidArgument) { try CipherSettings.salt(contentsOfFile: dir.path(name)) }
                #expect(error?.message.contains(dir.path(name)) == true, "\(name): \(error.map { "\($0)" } ?? "")")
            }
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
