import CSQLCipher
import Foundation
import SQLCipherKit
import Testing

/// A key with a sentinel value goes through every failing path; no message, description, SQL text or file may
/// contain the sentinel.
@Suite("Key hygiene")
struct KeyHygieneTests {
    /// Collects the SQL text of every statement a connection runs (`SQLITE_TRACE_STMT`, unexpanded: the text as
    /// written, so a key spliced into SQL would show here).
    final class SQLTrace {
        var statements: [String] = []

        func install(on connection: Connection) {
            let context = Unmanaged.passUnretained(self).toOpaque()
            sqlite3_trace_v2(connection.sqliteConnection, UInt32(SQLITE_TRACE_STMT), { _, context, statement, text in
                let trace = Unmanaged<SQLTrace>.fromOpaque(context!).takeUnretainedValue()
                if let text {
                    trace.statements.append(String(cString: text.assumingMemoryBound(to: CChar.self)))
                } else if let statement, let sql = sqlite3_sql(OpaquePointer(statement)) {
                    trace.statements.append(String(cString: sql))
                }
                return 0
            }, context)
        }
    }

    static let sentinelHex = "5e" + String(repeating: "a1", count: 31)   // a raw key whose hex is recognisable

    @Test("errors, descriptions and traced SQL never contain the key")
    func noKeyInMessages() throws {
        try withTemporaryDirectory { dir in
            let passphrase = TestKeys.passphrase          // contains TestKeys.sentinel
            let raw = try EncryptionKey(sqlcipherRawKeyText: "x'\(Self.sentinelHex)'")
            var texts: [String] = ["\(passphrase)", "\(raw)", String(reflecting: raw), "\(Encryption.key(raw))"]
            func record(_ body: () throws -> Void) {
                do { try body() } catch {
                    texts.append("\(error)")
                    texts.append(String(reflecting: error))
                    if let error = error as? DatabaseError {
                        texts.append(error.message)
                        texts.append(error.sql ?? "")
                    }
                }
            }

            let path = dir.path("hygiene.db")
            let trace = SQLTrace()
            do {
                let db = try Connection(path: path, key: passphrase)
                trace.install(on: db)
                try db.execute("CREATE TABLE t(x)")
                try db.execute("INSERT INTO t VALUES (?)", "value")
                texts.append("\(db)")
                try db.exportEncrypted(to: dir.path("export.db"), key: raw)
                try db.exportEncrypted(to: dir.path("export2.db"), key: passphrase)
                trace.install(on: db)                                   // SQLCipher 3's export needs it removed
                record { try db.exportEncrypted(to: dir.path("export.db"), key: raw) }   // exists
                record { try db.execute("PRAGMA key = 'x'") }
                try db.rekey(to: raw)
                trace.install(on: db)                                   // the rekey reopened the handle
                record { try db.rekey(to: passphrase) }
            }
            record { _ = try Connection(path: path, key: passphrase) }                 // wrong key now
            record { _ = try Connection(path: path, encryption: .none) }
            let keyFile = dir.path("loose.key")
            try writePrivate(TestKeys.sentinel, to: keyFile)
            chmod(keyFile, 0o644)
            record { _ = try EncryptionKey(contentsOf: keyFile) }
            try writePrivate("x'\(Self.sentinelHex)00'", to: keyFile)
            record { _ = try EncryptionKey(contentsOf: keyFile) }
            record { _ = try EncryptionKey(sqlcipherRawKeyText: "x'\(Self.sentinelHex)0'") }

            #expect(texts.count > 10)
            #expect(!trace.statements.isEmpty)
            for text in texts + trace.statements {
                #expect(!text.contains(TestKeys.sentinel), "key material in: \(text)")
                #expect(!text.lowercased().contains(Self.sentinelHex), "raw key material in: \(text)")
            }
            // Nothing the library wrote to disk holds the key either.
            for file in try FileManager.default.contentsOfDirectory(atPath: dir.url.path) where file.hasSuffix(".db") {
                let bytes = try fileBytes(dir.path(file))
                #expect(!contains(bytes, TestKeys.sentinel))
                #expect(!contains(bytes, Self.sentinelHex))
            }
        }
    }
}
