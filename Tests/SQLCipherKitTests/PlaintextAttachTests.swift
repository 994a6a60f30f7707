import Foundation
import SQLCipherKit
import Testing

/// `ATTACH` of a plaintext database on a keyed connection, without a KEY (or with one): SQLite says "file is encrypted
/// or is not a database", the opposite of the truth. The error now says the file is plaintext and how to attach it.
@Suite("ATTACH of a plaintext file")
struct PlaintextAttachTests {
    /// An encrypted `main.db` and a plaintext `plain.db` with one row, in `dir`.
    private static func scene(_ dir: borrowing TemporaryDirectory) throws -> Connection {
        let plaintext = try Connection(path: dir.path("plain.db"), encryption: .none)
        try plaintext.execute("CREATE TABLE p(x); INSERT INTO p VALUES ('plain row')")
        plaintext.close()
        return try Connection(path: dir.path("main.db"), key: TestKeys.raw)
    }

    @Test("without KEY, with a wrong KEY, by URI or by a bound name: notEncrypted, with the remedy to attach it as plaintext",
          arguments: SQLPath.allCases)
    func saysPlaintext(path: SQLPath) throws {
        try withTemporaryDirectory { dir in
            let db = try Self.scene(dir)
            let plain = dir.path("plain.db")
            let before = try fileBytes(plain)
            // A URI file name is one on a connection opened with URIs on (SQLCipher 3.4.1 has them off otherwise).
            let uriConnection = try Connection(
                path: "file:" + dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(isURI: true))
            var statements: [(String, StatementArguments, Connection)] = [
                ("ATTACH '\(plain)' AS p", [], db),
                ("ATTACH DATABASE '\(plain)' AS p KEY 'not the key'", [], db),
                ("ATTACH 'file:\(plain)?mode=ro' AS p", [], uriConnection),
                ("ATTACH 'file://localhost\(plain.replacingOccurrences(of: " ", with: "%20"))' AS p", [], uriConnection),
            ]
            if path.takesArguments { statements.append(("ATTACH ? AS p", [plain], db)) }
            for (sql, arguments, db) in statements {
                let error = expectError(.notEncrypted) { try path.run(sql, arguments: arguments, on: db) }
                #expect(error?.remedy == .attachPlaintextWithEmptyKey, "\(sql)")
                #expect(error?.resultCode == DatabaseError.SQLITE_NOTADB)
                #expect(error?.message.contains("plaintext") == true)
                #expect(error?.message.contains("KEY ''") == true)
                #expect(error?.message.contains("encrypted or is not a database") == false)
                #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"])
            }
            #expect(try fileBytes(plain) == before)
        }
    }

    @Test("the remedy works: with plaintext attachments allowed, KEY '' attaches it")
    func remedyWorks() throws {
        try withTemporaryDirectory { dir in
            _ = try Self.scene(dir)
            let db = try Connection(
                path: dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(allowsPlaintextAttachments: true))
            try db.execute("ATTACH '\(dir.path("plain.db"))' AS p KEY ''")
            #expect(try db.scalar("SELECT x FROM p.p", as: String.self) == "plain row")
            try db.execute("DETACH p")
            try db.attach(dir.path("plain.db"), as: "q", encryption: .none)
            #expect(try db.scalar("SELECT x FROM q.p", as: String.self) == "plain row")
        }
    }

    @Test("an encrypted file attached with a wrong key is not called plaintext")
    func wrongKeyStaysWrongKey() throws {
        try withTemporaryDirectory { dir in
            let db = try Self.scene(dir)
            let other = try Connection(path: dir.path("other.db"), key: TestKeys.passphrase)
            try other.execute("CREATE TABLE o(x)")
            other.close()
            let error = expectError(code: DatabaseError.SQLITE_NOTADB) {
                try db.execute("ATTACH '\(dir.path("other.db"))' AS o KEY 'not the key'")
            }
            #expect(error?.kind == .sqlite)
            #expect(error?.remedy == nil)
        }
    }
}
