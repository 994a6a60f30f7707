import Foundation
import SQLCipherKit
import Testing

@Suite("Plaintext header", .enabled(if: Engine.isVersion4,
    "needs SQLCipher 4.0 or later: SQLCipher 3 cannot leave a header unencrypted (the refusal is checked in Cipher settings)"))
struct PlaintextHeaderTests {
    static let salt: [UInt8] = (0..<16).map { UInt8($0 * 7 + 1) }

    static func fill(_ db: Connection) throws {
        try db.pragmaValue("journal_mode = WAL")
        try db.execute("CREATE TABLE secret_table(body TEXT)")
        try db.transaction {
            for index in 0..<100 {
                try db.execute("INSERT INTO secret_table VALUES (?)", "\(EncryptionTests.marker) \(index)")
            }
        }
    }

    @Test("only the first 32 bytes are plaintext; the salt comes from a raw key with salt")
    func rawKeyWithSalt() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("header.db")
            let key = try TestKeys.raw.withSalt(Self.salt)
            let settings = CipherSettings.plaintextHeader(size: 32)
            do {
                let db = try Connection(path: path, key: key, settings: settings)
                try Self.fill(db)
                #expect(try db.cipherSalt == Self.salt)
            }
            let bytes = try fileBytes(path)
            #expect(Array(bytes.prefix(16)) == EncryptionTests.magic)
            #expect(bytes[18] == 2 && bytes[19] == 2, "WAL marker bytes stay readable by the OS")
            #expect(!contains(Array(bytes[32..<4096]), "secret_table"), "the schema must stay encrypted")
            #expect(!contains(bytes, EncryptionTests.marker))
            #expect(try Connection(path: path, key: key, settings: settings)
                .scalar("SELECT count(*) FROM secret_table", as: Int.self) == 100)
            // Without the header size it is not taken for a plaintext database.
            let noSize = expectError(.wrongKey) { try Connection(path: path, key: key) }
            #expect(noSize?.message.contains("plaintext header") == true)
            let noKey = expectError(.missingKey) { try Connection(path: path, encryption: .none) }
            #expect(noKey?.message.contains("plaintext header") == true)
            // Without the salt the file cannot be opened.
            expectError(.invalidKey) { try Connection(path: path, key: TestKeys.raw, settings: settings) }
            let otherSalt = try TestKeys.raw.withSalt([UInt8](repeating: 9, count: 16))
            expectError(.wrongKey) { try Connection(path: path, key: otherSalt, settings: settings) }
        }
    }

    @Test("a page-size field changed in the plaintext header is a typed error, not an engine crash",
          arguments: [0x02, 0x04, 0x08, 0x20])
    func tamperedPageSize(highByte: UInt8) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("header.db")
            let key = try TestKeys.raw.withSalt(Self.salt)
            let settings = CipherSettings.plaintextHeader(size: 32)
            do {
                let db = try Connection(path: path, key: key, settings: settings)
                try Self.fill(db)
                db.close()
            }
            var bytes = try fileBytes(path)
            bytes[16] = highByte
            bytes[17] = 0
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let before = try snapshot(path)
            let error = expectError(.damaged) { try Connection(path: path, key: key, settings: settings) }
            #expect(error?.message.contains("page size") == true)
            #expect(try snapshot(path) == before)
        }
    }

    @Test("with a passphrase the generated salt is returned and required at every open")
    func passphraseSalt() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("passphrase-header.db")
            let salt: [UInt8]
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase, settings: .plaintextHeader(size: 32))
                try Self.fill(db)
                salt = try #require(try db.cipherSalt)
            }
            #expect(salt.count == 16)
            #expect(Array(try fileBytes(path).prefix(16)) == EncryptionTests.magic)
            expectError(.invalidKey) {
                try Connection(path: path, key: TestKeys.passphrase, settings: .plaintextHeader(size: 32))
            }
            #expect(try Connection(path: path, key: TestKeys.passphrase, settings: .plaintextHeader(size: 32, salt: salt))
                .scalar("SELECT count(*) FROM secret_table", as: Int.self) == 100)
        }
    }

    @Test("an invalid header size is refused", arguments: [24, 100, -16, 4096])
    func invalidSizes(_ size: Int) {
        expectError(.invalidArgument) {
            try Connection(path: ":memory:", key: TestKeys.raw, settings: .plaintextHeader(size: size, salt: Self.salt))
        }
    }

    @Test("export converts a database to and from a plaintext header")
    func convert() throws {
        try withTemporaryDirectory { dir in
            let source = try Connection(path: dir.path("normal.db"), key: TestKeys.raw)
            try Self.fill(source)
            let withHeader = dir.path("with-header.db")
            let headerSettings = CipherSettings.plaintextHeader(size: 32, salt: Self.salt)
            try source.exportEncrypted(to: withHeader, key: TestKeys.raw, settings: headerSettings)
            #expect(Array(try fileBytes(withHeader).prefix(16)) == EncryptionTests.magic)
            #expect(!contains(try fileBytes(withHeader), EncryptionTests.marker))

            let headered = try Connection(path: withHeader, key: TestKeys.raw, settings: headerSettings)
            let back = dir.path("back.db")
            try headered.exportEncrypted(to: back, key: TestKeys.raw)
            #expect(Array(try fileBytes(back).prefix(16)) != EncryptionTests.magic)
            #expect(try Connection(path: back, key: TestKeys.raw).scalar("SELECT count(*) FROM secret_table", as: Int.self) == 100)
        }
    }
}
