import Foundation
import SQLCipherKit
import Testing

@Suite("Attach")
struct AttachTests {
    @Test("an attached database gets its own key, bound, and stays encrypted")
    func attachEncrypted() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            let archivePath = dir.path("archive.db")
            try db.attach(archivePath, as: "archive", encryption: .key(TestKeys.otherPassphrase))
            try db.execute("CREATE TABLE archive.note(body TEXT)")
            try db.execute("INSERT INTO archive.note VALUES (?)", EncryptionTests.marker)
            try db.detach("archive")
            #expect(!contains(try fileBytes(archivePath), EncryptionTests.marker))
            #expect(try fileMode(archivePath) == 0o600)
            expectError(.wrongKey) { try Connection(path: archivePath, key: TestKeys.raw) }
            #expect(try Connection(path: archivePath, key: TestKeys.otherPassphrase)
                .scalar("SELECT body FROM note", as: String.self) == EncryptionTests.marker)
        }
    }

    @Test("attaching with a wrong key fails at once; a plaintext file only with .none")
    func attachFailures() throws {
        try withTemporaryDirectory { dir in
            let otherPath = dir.path("other.db")
            try EncryptionTests.makeDatabase(otherPath, key: TestKeys.passphrase)
            let before = try snapshot(otherPath)
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            expectError(.wrongKey) { try db.attach(otherPath, as: "other", encryption: .key(TestKeys.raw)) }
            expectError(.missingKey) { try db.attach(otherPath, as: "other", encryption: .none) }
            #expect(try snapshot(otherPath) == before)
            #expect(try db.all("PRAGMA database_list", map: { try $0[1] as String }) == ["main"])

            expectError(.invalidArgument) {
                try db.attach(otherPath, as: "other", encryption: .key(TestKeys.passphrase, settings: CipherSettings(pageSize: 4096)))
            }
            let newPath = dir.path("new-with-settings.db")
            try db.attach(newPath, as: "fresh", encryption: .key(TestKeys.raw, settings: CipherSettings(pageSize: 8192)))
            try db.execute("CREATE TABLE fresh.t(x); INSERT INTO fresh.t VALUES (1)")
            try db.detach("fresh")
            #expect(try Connection(path: newPath, key: TestKeys.raw, settings: CipherSettings(pageSize: 8192))
                .scalar("SELECT x FROM t", as: Int.self) == 1)

            let plainPath = dir.path("plain.db")
            try db.attach(plainPath, as: "plain", encryption: .none)
            try db.execute("CREATE TABLE plain.t(x); INSERT INTO plain.t VALUES (1)")
            try db.detach("plain")
            #expect(Array(try fileBytes(plainPath).prefix(16)) == EncryptionTests.magic)
        }
    }
}
