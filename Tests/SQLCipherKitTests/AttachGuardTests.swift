import Foundation
import SQLCipherKit
import Testing

/// ATTACH on an encrypted connection needs a key unless plaintext was asked for; files ATTACH creates are private.
@Suite("ATTACH guard")
struct AttachGuardTests {
    /// A file no one may find plaintext in: missing, empty, or neither the SQLite magic nor the marker.
    static func expectNoPlaintext(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let bytes = try fileBytes(path)
        #expect(Array(bytes.prefix(16)) != EncryptionTests.magic, "\(path) is plaintext", sourceLocation: sourceLocation)
        #expect(!contains(bytes, EncryptionTests.marker), "\(path) holds the marker", sourceLocation: sourceLocation)
    }

    static let refusedScripts: [String] = [
        "ATTACH '{O}' AS o; CREATE TABLE o.t(x); INSERT INTO o.t VALUES ('\(EncryptionTests.marker)')",
        "ATTACH DATABASE '{O}' AS o KEY ''; CREATE TABLE o.t(x); INSERT INTO o.t VALUES ('\(EncryptionTests.marker)')",
        "ATTACH '{O}' AS \"o\" KEY x''; CREATE TABLE o.t(x); INSERT INTO o.t VALUES ('\(EncryptionTests.marker)')",
        "attach '{O}' as o key \"\"; create table o.t(x)",
        "ATTACH '{O}' AS o KEY ''; SELECT sqlcipher_export('o')",
        "BEGIN; ATTACH '{O}' AS o KEY ''; CREATE TABLE o.t(x); INSERT INTO o.t VALUES ('\(EncryptionTests.marker)'); COMMIT",
    ]

    @Test("ATTACH without a key (or with an empty one) leaves no plaintext file, through execute and executeScript",
          arguments: refusedScripts, [false, true])
    func refusedAttach(script: String, existingMain: Bool) throws {
        try withTemporaryDirectory { dir in
            let mainPath = dir.path("main.db")
            if existingMain {
                try EncryptionTests.makeDatabase(mainPath, key: TestKeys.raw)
            }
            let attachedPath = dir.path("o.db")
            let script = script.replacingOccurrences(of: "{O}", with: attachedPath)
            for runner in ["execute", "executeScript"] {
                let db = try Connection(path: mainPath, key: TestKeys.raw)
                do {
                    if runner == "execute" {
                        try db.execute(script)
                    } else {
                        try db.executeScript(script) { _, _ in }
                    }
                    // Only an ATTACH without KEY that inherited the main key may pass: then o.db is encrypted.
                    #expect(!script.lowercased().contains("key"), "\(runner) let `\(script)` through")
                } catch let error as DatabaseError {
                    if DatabaseError.SQLITE_AUTH ~= error.extendedResultCode {
                        #expect(error.message.contains("allowsPlaintextAttachments"), "\(runner): \(error)")
                        #expect(!FileManager.default.fileExists(atPath: attachedPath), "the empty file stays")
                    } else {
                        // SQLCipher 3.4.1 refuses ATTACH inside a transaction by itself.
                        #expect(error.message.contains("within transaction"), "\(runner): \(error)")
                    }
                }
                #expect(try db.all("PRAGMA database_list") { try $0[1] as String }.filter { $0 == "o" }.count <= 1)
                db.close()
                try Self.expectNoPlaintext(attachedPath)
                try? FileManager.default.removeItem(atPath: attachedPath)
            }
            #expect(Array(try fileBytes(mainPath).prefix(16)) != EncryptionTests.magic)
        }
    }

    @Test("a bound empty key (text or blob) is refused too; a bound key is not")
    func boundKeys() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(x)")
            let attachedPath = dir.path("bound.db")
            for empty in [DatabaseValue.text(""), .blob([])] {
                expectError(code: DatabaseError.SQLITE_AUTH) {
                    try db.execute("ATTACH ? AS b KEY ?", arguments: [attachedPath, empty])
                }
                #expect(!FileManager.default.fileExists(atPath: attachedPath))
                #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"])
            }
            try db.execute("ATTACH ? AS b KEY ?", arguments: [attachedPath, "SENTINEL-KEY-7f3a9c-attached"])
            try db.execute("CREATE TABLE b.t(x); INSERT INTO b.t VALUES ('\(EncryptionTests.marker)')")
            try db.detach("b")
            try Self.expectNoPlaintext(attachedPath)
            #expect(try fileMode(attachedPath) == 0o600)
        }
    }

    @Test("an existing plaintext file attached without a key is detached and left as it was")
    func existingPlaintextFile() throws {
        try withTemporaryDirectory { dir in
            let plainPath = dir.path("plain.db")
            let plain = try Connection(path: plainPath, encryption: .none)
            try plain.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            plain.close()
            let before = try snapshot(plainPath)
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            _ = try db.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
            expectError(code: DatabaseError.SQLITE_AUTH) {
                try db.execute("ATTACH ? AS p KEY ''", plainPath)
            }
            #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"])
            #expect(try snapshot(plainPath) == before)
        }
    }

    @Test("with allowsPlaintextAttachments, KEY '' attaches a plaintext file, created with mode 0600")
    func allowedPlaintext() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(
                path: dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(allowsPlaintextAttachments: true))
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES ('\(EncryptionTests.marker)')")
            let plainPath = dir.path("p.db")
            try db.execute("ATTACH '\(plainPath)' AS p KEY ''; SELECT sqlcipher_export('p'); DETACH p")
            #expect(Array(try fileBytes(plainPath).prefix(16)) == EncryptionTests.magic)
            #expect(try fileMode(plainPath) == 0o600)
        }
    }

    @Test("files created through ATTACH, and their journal and WAL, are mode 0600", arguments: ["DELETE", "WAL"])
    func privateModes(journalMode: String) throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            let attachedPath = dir.path("new.db")
            try db.execute("ATTACH '\(attachedPath)' AS n KEY 'SENTINEL-KEY-7f3a9c-other'")
            #expect(try fileMode(attachedPath) == 0o600)
            _ = try db.scalar("PRAGMA n.journal_mode = \(journalMode)", as: String.self)
            try db.execute("CREATE TABLE n.t(x)")
            try db.execute("BEGIN; INSERT INTO n.t VALUES (1)")
            let sideFile = attachedPath + (journalMode == "WAL" ? "-wal" : "-journal")
            #expect(FileManager.default.fileExists(atPath: sideFile))
            #expect(try fileMode(sideFile) == 0o600)
            try db.execute("COMMIT")
            #expect(try fileMode(attachedPath) == 0o600)
        }
    }

    @Test("Connection.attach with .none and the plaintext export still work without the option")
    func explicitPlaintextPaths() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            let plainPath = dir.path("plain.db")
            try db.attach(plainPath, as: "plain", encryption: .none)
            try db.execute("CREATE TABLE plain.t(x); INSERT INTO plain.t VALUES (1)")
            try db.detach("plain")
            #expect(Array(try fileBytes(plainPath).prefix(16)) == EncryptionTests.magic)
            #expect(try fileMode(plainPath) == 0o600)
            let copy = dir.path("copy.db")
            try db.exportDecryptedPlaintextCopy(to: copy)
            #expect(Array(try fileBytes(copy).prefix(16)) == EncryptionTests.magic)
            // The allowance ends with the call: SQL is refused again.
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("ATTACH '\(dir.path("x.db"))' AS x KEY ''") }
        }
    }

    @Test("a plaintext connection attaches plaintext files as before; memory attachments pass")
    func plaintextConnection() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), encryption: .none)
            let other = dir.path("other.db")
            try db.execute("ATTACH '\(other)' AS o; CREATE TABLE o.t(x); DETACH o")
            #expect(try fileMode(other) == 0o600)
            let keyed = try Connection(path: dir.path("keyed.db"), key: TestKeys.raw)
            try keyed.execute("ATTACH ':memory:' AS m KEY ''; CREATE TABLE m.t(x); DETACH m")
        }
    }
}
