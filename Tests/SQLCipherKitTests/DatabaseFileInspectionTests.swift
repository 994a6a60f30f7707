import Foundation
import SQLCipherKit
import Testing

@Suite("DatabaseFileInspection, IntegrityReport, executeScript, keys from text and descriptors")
struct DatabaseFileInspectionTests {
    @Test("without a key: missing, folder, empty, plaintext, encrypted")
    func formatsWithoutKey() throws {
        try withTemporaryDirectory { directory in
            #expect(DatabaseFileInspection.inspect(path: directory.path("missing.db")).format == .missing)
            #expect(DatabaseFileInspection.inspect(path: directory.url.path).format == .notARegularFile)
            _ = FileManager.default.createFile(atPath: directory.path("empty.db"), contents: nil)
            #expect(DatabaseFileInspection.inspect(path: directory.path("empty.db")).format == .empty)
            let plain = try openPlain(directory.path("plain.db"))
            try plain.execute("CREATE TABLE t(x); PRAGMA user_version = 9")
            plain.close()
            let plainInspection = DatabaseFileInspection.inspect(path: directory.path("plain.db"))
            #expect(plainInspection.format == .plaintext)
            #expect(plainInspection.database?.userVersion == 9)
            #expect(plainInspection.cipher == nil)
            let encrypted = try Connection(path: directory.path("enc.db"), key: TestKeys.raw)
            try encrypted.execute("CREATE TABLE t(x)")
            encrypted.close()
            let encryptedInspection = DatabaseFileInspection.inspect(path: directory.path("enc.db"))
            #expect(encryptedInspection.format == .encrypted)
            #expect(encryptedInspection.database == nil)
        }
    }

    @Test("with the key: details and cipher settings read back; a WAL database opens read-only")
    func withKey() throws {
        try withTemporaryDirectory { directory in
            let path = directory.path("enc.db")
            let db = try Connection(path: path, key: TestKeys.raw)
            _ = try db.scalar("PRAGMA journal_mode = WAL", as: String.self)
            try db.execute("CREATE TABLE t(x); PRAGMA user_version = 4; PRAGMA application_id = 77")
            db.close()
            let inspection = try DatabaseFileInspection.inspect(path: path, encryption: .key(TestKeys.raw))
            #expect(inspection.format == .encrypted)
            #expect(inspection.database?.journalMode == "wal")
            #expect(inspection.database?.userVersion == 4)
            #expect(inspection.database?.applicationID == 77)
            #expect(inspection.cipher?.pageSize == (Engine.isVersion4 ? 4096 : 1024))
            #expect(inspection.cipher?.kdfIterations == (Engine.isVersion4 ? 256_000 : 64_000))
            #expect(inspection.cipher?.usesHMAC == true)
            #expect(inspection.cipher?.formatMajorVersion == (Engine.isVersion4 ? 4 : 3))
            #expect((inspection.cipher?.hmacAlgorithm != nil) == Engine.isVersion4)
            expectError(.wrongKey) { try DatabaseFileInspection.inspect(path: path, encryption: .key(TestKeys.passphrase)) }
            expectError(.fileSystem) {
                try DatabaseFileInspection.inspect(path: directory.path("nope.db"), encryption: .key(TestKeys.raw))
            }
            #expect(!FileManager.default.fileExists(atPath: directory.path("nope.db")))
        }
    }

    @Test("SQLCipher 4 recognises a SQLCipher 3 file", .enabled(if: Engine.isVersion4,
        "needs SQLCipher 4: on SQLCipher 3.4.1 the SQLCipher 3 format is the only one"))
    func detectsVersion3() throws {
        try withTemporaryDirectory { directory in
            let path = directory.path("v3.db")
            let db = try Connection(path: path, key: TestKeys.raw, settings: .sqlcipher3)
            try db.execute("CREATE TABLE t(x)")
            db.close()
            let inspection = try DatabaseFileInspection.inspect(path: path, encryption: .key(TestKeys.raw))
            #expect(inspection.cipher?.formatMajorVersion == 3)
            #expect(inspection.cipher?.settings == .sqlcipher3)
            expectError(.wrongKey) {
                try DatabaseFileInspection.inspect(
                    path: path, encryption: .key(TestKeys.raw), detectsSQLCipher3Format: false)
            }
        }
    }

    @Test("a plaintext-header file is recognised and needs its header size", .enabled(if: Engine.isVersion4,
        "needs SQLCipher 4: SQLCipher 3.4.1 cannot create a plaintext-header database"))
    func plaintextHeader() throws {
        try withTemporaryDirectory { directory in
            let path = directory.path("hdr.db")
            let key = try EncryptionKey.generateRaw(withSalt: true)
            let settings = CipherSettings.plaintextHeader(size: 32, salt: key.salt)
            let db = try Connection(path: path, key: key, settings: settings)
            try db.execute("CREATE TABLE t(x)")
            db.close()
            #expect(DatabaseFileInspection.inspect(path: path).format == .plaintextHeader)
            expectError(.wrongKey) { try DatabaseFileInspection.inspect(path: path, encryption: .key(key)) }
            let inspection = try DatabaseFileInspection.inspect(path: path, encryption: .key(key, settings: settings))
            #expect(inspection.cipher?.plaintextHeaderSize == 32)
            #expect(inspection.cipher?.formatMajorVersion == 4)
        }
    }

    @Test("checkIntegrity reports a tampered page instead of throwing")
    func integrity() throws {
        try withTemporaryDirectory { directory in
            let path = directory.path("enc.db")
            let db = try Connection(path: path, key: TestKeys.raw)
            try db.execute("CREATE TABLE t(x TEXT)")
            try db.transaction { for index in 0..<400 { try db.execute("INSERT INTO t VALUES (?)", "row \(index)") } }
            let intact = try db.checkIntegrity()
            #expect(intact.isIntact)
            #expect((intact.cipherIntegrityProblems != nil) == SQLCipher.supports(.cipherIntegrityCheck))
            db.close()
            var bytes = try fileBytes(path)
            for index in (bytes.count - 200)..<(bytes.count - 190) { bytes[index] ^= 0x5A }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let reopened = try Connection(path: path, key: TestKeys.raw)
            let report = try reopened.checkIntegrity()
            #expect(!report.isIntact)
            reopened.close()
        }
    }

    @Test("executeScript runs statements in order and hands over each row")
    func script() throws {
        let db = try Connection.inMemory()
        var rows: [[DatabaseValue]] = []
        try db.executeScript("CREATE TABLE t(x); INSERT INTO t VALUES (1), (NULL); -- comment\n SELECT x FROM t; ") {
            _, row in rows.append(try row.databaseValues)
        }
        #expect(rows == [[.integer(1)], [.null]])
        expectError(code: DatabaseError.SQLITE_ERROR) { try db.executeScript("SELECT 1; SELEC 2") { _, _ in } }
    }

    @Test("keys from text and from a file descriptor follow the key-file format; errors never show the key")
    func keyText() throws {
        let rawText = TestKeys.rawText + "\n"
        let raw = try Array(rawText.utf8).withUnsafeBytes { try EncryptionKey(keyText: $0, source: "test") }
        #expect(raw.isSameKey(as: TestKeys.raw))
        let passphrase = try Array("\(TestKeys.sentinel)-passphrase\r\n".utf8).withUnsafeBytes {
            try EncryptionKey(keyText: $0, source: "test")
        }
        #expect(passphrase.isSameKey(as: TestKeys.passphrase))
        let empty = expectError(.invalidKey) { try Array("\n".utf8).withUnsafeBytes { try EncryptionKey(keyText: $0, source: "VAR") } }
        #expect(empty?.message.contains("VAR") == true)
        let malformed = expectError(.invalidKey) {
            try Array("x'\(TestKeys.sentinel)'".utf8).withUnsafeBytes { try EncryptionKey(keyText: $0, source: "VAR") }
        }
        #expect(malformed?.message.contains(TestKeys.sentinel) == false)

        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        _ = Array(rawText.utf8).withUnsafeBytes { write(descriptors[1], $0.baseAddress, $0.count) }
        close(descriptors[1])
        let fromPipe = try EncryptionKey(readingFileDescriptor: descriptors[0], source: "pipe")
        close(descriptors[0])
        #expect(fromPipe.isSameKey(as: TestKeys.raw))
    }
}
