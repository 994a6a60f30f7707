import Foundation
import SQLCipherKit
import Testing

@Suite("Export")
struct ExportTests {
    /// A database with header fields the engine's export would drop.
    static func makeSource(_ db: Connection, journalMode: String = "WAL") throws {
        try db.pragmaValue("journal_mode = \(journalMode)")
        try db.execute("""
            CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
            CREATE INDEX t_body ON t(body);
            CREATE VIEW v AS SELECT body FROM t;
            PRAGMA user_version = 42;
            PRAGMA application_id = 12345;
            """)
        try db.transaction {
            for index in 0..<300 {
                try db.execute("INSERT INTO t(body) VALUES (?)", "\(EncryptionTests.marker) \(index)")
            }
        }
    }

    static func checkCopy(_ copy: Connection, journalMode: String = "wal") throws {
        #expect(try copy.scalar("PRAGMA user_version", as: Int.self) == 42)
        #expect(try copy.scalar("PRAGMA application_id", as: Int.self) == 12345)
        #expect(try copy.pragmaValue("journal_mode") == journalMode)
        #expect(try copy.scalar("SELECT count(*) FROM v", as: Int.self) == 300)
        #expect(try copy.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) == 3)
    }

    @Test("encrypt a plaintext database: header fields kept, no marker in the output, mode 0600")
    func encryptPlaintext() throws {
        try withTemporaryDirectory { dir in
            let plain = try openPlain(dir.path("plain.db"))
            try Self.makeSource(plain)
            let destination = dir.path("encrypted.db")
            try plain.exportEncrypted(to: destination, key: TestKeys.passphrase)
            #expect(!contains(try fileBytes(destination), EncryptionTests.marker))
            #expect(Array(try fileBytes(destination).prefix(16)) != EncryptionTests.magic)
            #expect(try fileMode(destination) == 0o600)
            try Self.checkCopy(try Connection(path: destination, key: TestKeys.passphrase))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
                .filter { $0.contains("sqlcipherkit-tmp") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test("re-encrypt with another key and other settings")
    func reencrypt() throws {
        try withTemporaryDirectory { dir in
            let source = try Connection(path: dir.path("source.db"), key: TestKeys.raw)
            try Self.makeSource(source, journalMode: "DELETE")
            let destination = dir.path("reencrypted.db")
            let settings = CipherSettings(pageSize: 8192, kdfIterations: 10_000)
            try source.exportEncrypted(to: destination, key: TestKeys.otherPassphrase, settings: settings)
            #expect(!contains(try fileBytes(destination), EncryptionTests.marker))
            expectError(.wrongKey) { try Connection(path: destination, key: TestKeys.otherPassphrase) }
            try Self.checkCopy(
                try Connection(path: destination, key: TestKeys.otherPassphrase, settings: settings),
                journalMode: "delete")
        }
    }

    @Test("decrypt into a plaintext copy only through the loudly named method")
    func decrypt() throws {
        try withTemporaryDirectory { dir in
            let source = try Connection(path: dir.path("source.db"), key: TestKeys.raw)
            try Self.makeSource(source)
            let destination = dir.path("plain-copy.db")
            try source.exportDecryptedPlaintextCopy(to: destination)
            #expect(Array(try fileBytes(destination).prefix(16)) == EncryptionTests.magic)
            try Self.checkCopy(try openPlain(destination))
        }
    }

    @Test("a non-empty destination is refused with nothing written; a missing folder too")
    func refusesExistingDestination() throws {
        try withTemporaryDirectory { dir in
            let source = try Connection(path: dir.path("source.db"), key: TestKeys.raw)
            try Self.makeSource(source)
            let destination = dir.path("existing.db")
            try Data("precious".utf8).write(to: URL(fileURLWithPath: destination))
            expectError(.fileSystem) { try source.exportEncrypted(to: destination, key: TestKeys.raw) }
            #expect(try fileBytes(destination) == Array("precious".utf8))
            expectError(.fileSystem) {
                try source.exportEncrypted(to: dir.path("missing/out.db"), key: TestKeys.raw)
            }
            let files = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
            #expect(files.allSatisfy { !$0.contains("sqlcipherkit-tmp") })
        }
    }

    @Test("export inside a transaction is refused")
    func refusedInTransaction() throws {
        try withTemporaryDirectory { dir in
            let source = try Connection(path: dir.path("source.db"), key: TestKeys.raw)
            try Self.makeSource(source)
            try source.beginTransaction()
            expectError(.invalidState) { try source.exportEncrypted(to: dir.path("out.db"), key: TestKeys.raw) }
            try source.rollback()
        }
    }

    @Test("a SQLCipher 3 database is exported to the SQLCipher 4 format",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: the 3.4.1 engine cannot write the SQLCipher 4 format"))
    func migrateThreeToFour() throws {
        try withTemporaryDirectory { dir in
            let v3Path = dir.path("v3.db")
            let v3 = try Connection(path: v3Path, key: TestKeys.passphrase, settings: .sqlcipher3)
            try Self.makeSource(v3)
            v3.close()
            expectError(.wrongKey) { try Connection(path: v3Path, key: TestKeys.passphrase) }
            let source = try Connection(path: v3Path, key: TestKeys.passphrase, settings: CipherSettings(compatibility: 3))
            let v4Path = dir.path("v4.db")
            try source.exportEncrypted(to: v4Path, key: TestKeys.passphrase)
            try Self.checkCopy(try Connection(path: v4Path, key: TestKeys.passphrase))
            expectError(.wrongKey) { try Connection(path: v4Path, key: TestKeys.passphrase, settings: .sqlcipher3) }
        }
    }
}
