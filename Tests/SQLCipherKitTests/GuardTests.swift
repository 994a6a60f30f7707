import Foundation
import SQLCipherKit
import Testing

/// The SQL guard: cipher and key PRAGMAs are refused in every form, the listed reads stay allowed, `temp_store` is
/// compared exactly. Refusals are proven on the file's bytes and with a fresh connection.
@Suite("SQL guard")
struct GuardTests {
    static let zeroSalt = "\"x'" + String(repeating: "00", count: 16) + "'\""

    /// Every form the guard must refuse: the cipher and key families, with schema prefixes, case, quoting, spacing,
    /// function-call syntax and EXPLAIN.
    static let refusedSQL: [String] = [
        "PRAGMA cipher_use_hmac = OFF", "PRAGMA main.cipher_use_hmac = OFF", "PRAGMA MAIN.CIPHER_USE_HMAC = off",
        "pragma \"cipher_use_hmac\" = 0", "PRAGMA [cipher_use_hmac] = 0", "PRAGMA `Cipher_Use_Hmac`=0",
        "PRAGMA 'cipher_page_size' = 8192", "PRAGMA   cipher_page_size\n =\t 4096", "PRAGMA cipher_page_size(8192)",
        "PRAGMA main . cipher_page_size = 1024", "PRAGMA \"main\".\"cipher_page_size\" = 1024",
        "PRAGMA kdf_iter = 1000", "PRAGMA main.kdf_iter = '1000'", "PRAGMA fast_kdf_iter = 3",
        "PRAGMA cipher_hmac_pgno = be", "PRAGMA cipher_hmac_salt_mask = \"x'00'\"",
        "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA1", "PRAGMA cipher_hmac_algorithm = HMAC_SHA1",
        "PRAGMA cipher_plaintext_header_size = 32", "PRAGMA cipher_salt = \(zeroSalt)",
        "PRAGMA cipher_compatibility = 3", "PRAGMA cipher_default_compatibility = 3",
        "PRAGMA cipher_default_kdf_iter = 1", "PRAGMA cipher_default_page_size = 512",
        "PRAGMA cipher_default_use_hmac = OFF", "PRAGMA cipher_default_plaintext_header_size = 32",
        "PRAGMA cipher_default_kdf_algorithm = PBKDF2_HMAC_SHA1", "PRAGMA cipher_default_hmac_algorithm = HMAC_SHA1",
        "PRAGMA cipher_default_settings", "PRAGMA cipher_log_level = TRACE", "PRAGMA cipher_log_level",
        "PRAGMA cipher_log = stderr", "PRAGMA cipher_log_source = CORE", "PRAGMA cipher_memory_security = ON",
        "PRAGMA cipher_memory_security", "PRAGMA cipher_migrate", "PRAGMA main.cipher_migrate",
        "PRAGMA cipher_add_random = \"x'00'\"", "PRAGMA cipher_profile = 'profile.log'", "PRAGMA cipher_profile",
        "PRAGMA cipher_store_pass = 1", "PRAGMA cipher = 'aes-128-cbc'", "PRAGMA rekey_cipher = 'aes-128-cbc'",
        "PRAGMA rekey_kdf_iter = 1", "PRAGMA cipher_hmac_pgno = be", "PRAGMA fast_kdf_iter = 4000",
        "PRAGMA key = 'SENTINEL-KEY-7f3a9c'", "PRAGMA main.rekey = 'SENTINEL-KEY-7f3a9c'", "PRAGMA KEY",
        "PRAGMA hexkey = '53454e54494e454c'", "PRAGMA hexrekey = '53454e54494e454c'",
        "PRAGMA textkey = 'SENTINEL-KEY-7f3a9c'", "PRAGMA textrekey = 'SENTINEL-KEY-7f3a9c'",
        "PRAGMA page_size = 8192", "PRAGMA main.page_size = 65536",
        "EXPLAIN PRAGMA cipher_use_hmac = OFF", "EXPLAIN QUERY PLAN PRAGMA kdf_iter = 1",
        "EXPLAIN PRAGMA key = 'SENTINEL-KEY-7f3a9c'",
        "PRAGMA temp_store = 'memory '", "PRAGMA temp_store = ' 2'", "PRAGMA temp_store = ' memory'",
        "PRAGMA temp_store = '2 '", "PRAGMA temp_store = 0", "PRAGMA temp_store = 1", "PRAGMA temp_store = FILE",
        "PRAGMA temp_store = DEFAULT", "PRAGMA temp.temp_store = 1", "PRAGMA temp_store = -2",
        "PRAGMA temp_store = 2.0", "PRAGMA temp_store = 'memoryx'",
    ]

    /// The cipher PRAGMAs SQL may read.
    static let allowedReads: [String] = [
        "cipher_version", "cipher_provider", "cipher_provider_version", "cipher_fips_status", "cipher_status",
        "cipher_page_size", "kdf_iter", "cipher_use_hmac", "cipher_kdf_algorithm", "cipher_hmac_algorithm",
        "cipher_plaintext_header_size", "cipher_salt", "cipher_settings", "cipher_integrity_check",
    ]

    /// A database with 3,000 rows, keyed with `key`.
    static func makeDatabase(_ path: String, key: EncryptionKey) throws {
        let db = try Connection(path: path, key: key)
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
        try db.transaction {
            for index in 0..<3000 {
                try db.execute("INSERT INTO t(body) VALUES (?)", "\(EncryptionTests.marker) row \(index)")
            }
        }
        db.close()
    }

    static func expectIntact(_ path: String, key: EncryptionKey, bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try snapshot(path) == bytes, "the file changed", sourceLocation: sourceLocation)
        let fresh = try Connection(path: path, key: key)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 3000, sourceLocation: sourceLocation)
        #expect(try fresh.scalar("SELECT body FROM t WHERE id = 1", as: String.self)
            == "\(EncryptionTests.marker) row 0", sourceLocation: sourceLocation)
    }

    @Test("every refused form fails with SQLITE_AUTH through prepare, execute and executeScript; nothing changes",
          arguments: refusedSQL)
    func refusedForms(sql: String) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("guarded.db")
            try Self.makeDatabase(path, key: TestKeys.passphrase)
            let before = try snapshot(path)
            let db = try Connection(path: path, key: TestKeys.passphrase)
            let attempts: [(String, () throws -> Void)] = [
                ("prepare", { _ = try db.prepare(sql) }),
                ("execute", { try db.execute(sql) }),
                ("script", { try db.execute("SELECT count(*) FROM t; \(sql); UPDATE t SET body = 'X' WHERE id = 1") }),
                ("executeScript", { try db.executeScript("SELECT 1; \(sql); DELETE FROM t") { _, _ in } }),
                ("lookahead", { _ = try db.prepare("SELECT 1; \(sql)") }),
            ]
            for (name, attempt) in attempts {
                let error = #expect(throws: DatabaseError.self, "\(name): \(sql)") { try attempt() }
                guard let error, name != "lookahead" else { continue }
                #expect(DatabaseError.SQLITE_AUTH ~= error.extendedResultCode, "\(name): \(error)")
                #expect(error.message.contains("refused"), "\(name): \(error)")
                #expect(!"\(error)".contains(TestKeys.sentinel), "\(name) echoes the key: \(error)")
                #expect(!"\(error)".contains("53454e54494e454c"), "\(name) echoes the key: \(error)")
            }
            #expect(try db.scalar("PRAGMA temp_store", as: Int.self) == 2)
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 3000)
            db.close()
            try Self.expectIntact(path, key: TestKeys.passphrase, bytes: before)
        }
    }

    @Test("the issue's script (BEGIN; read; cipher PRAGMA; UPDATE; COMMIT) is refused and every row survives",
          arguments: ["PRAGMA cipher_use_hmac = OFF", "PRAGMA cipher_page_size = 4096", "PRAGMA cipher_hmac_pgno = be",
                      "PRAGMA kdf_iter = 1000", "PRAGMA page_size = 8192", "PRAGMA cipher_compatibility = 3"],
          [false, true])
    func issueScript(pragma: String, rawKey: Bool) throws {
        try withTemporaryDirectory { dir in
            let key = rawKey ? TestKeys.raw : TestKeys.passphrase
            let path = dir.path("rows.db")
            try Self.makeDatabase(path, key: key)
            let before = try snapshot(path)
            let db = try Connection(path: path, key: key)
            let error = expectError(code: DatabaseError.SQLITE_AUTH) {
                try db.execute("BEGIN; SELECT count(*) FROM t; \(pragma); UPDATE t SET body='X' WHERE id=1; COMMIT")
            }
            #expect(error?.message.contains("CipherSettings") == true, "\(error.map { "\($0)" } ?? "")")
            db.close()  // rolls back the BEGIN the script left open
            try Self.expectIntact(path, key: key, bytes: before)
        }
    }

    @Test("cipher_plaintext_header_size = 32 followed by an INSERT is refused; the salt stays, the passphrase opens it",
          .enabled(if: Engine.isVersion4, "the plaintext header exists on SQLCipher 4 only"))
    func plaintextHeaderSizeRefused() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("salted.db")
            try Self.makeDatabase(path, key: TestKeys.passphrase)
            let before = try snapshot(path)
            let db = try Connection(path: path, key: TestKeys.passphrase)
            expectError(code: DatabaseError.SQLITE_AUTH) {
                try db.execute("PRAGMA cipher_plaintext_header_size = 32; INSERT INTO t(body) VALUES ('y')")
            }
            try db.execute("INSERT INTO t(body) VALUES ('y'); DELETE FROM t WHERE body = 'y'")
            db.close()
            let after = try fileBytes(path)
            #expect(Array(after.prefix(16)) == Array(before.prefix(16)))
            #expect(Array(after.prefix(16)) != EncryptionTests.magic)
            let fresh = try Connection(path: path, key: TestKeys.passphrase)
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 3000)
        }
    }

    @Test("cipher_log_level = TRACE then cipher_integrity_check is refused without a crash; the check alone runs")
    func logLevelThenIntegrityCheck() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("log.db")
            try Self.makeDatabase(path, key: TestKeys.raw)
            let db = try Connection(path: path, key: TestKeys.raw)
            let error = expectError(code: DatabaseError.SQLITE_AUTH) {
                try db.execute("PRAGMA cipher_log_level=TRACE; PRAGMA cipher_integrity_check")
            }
            #expect(error?.message.contains("cipher_log_level") == true)
            #expect(try db.all("PRAGMA cipher_integrity_check") { try $0[0] as String }.isEmpty)
        }
    }

    @Test("temp_store takes exactly MEMORY or 2 in any quoting; it reads 2 afterwards")
    func tempStoreExact() throws {
        let db = try Connection.inMemory(encryption: .key(TestKeys.raw))
        for sql in ["PRAGMA temp_store = MEMORY", "PRAGMA temp_store = memory", "PRAGMA temp_store = 'memory'",
                    "PRAGMA temp_store = \"MEMORY\"", "PRAGMA temp_store = 2", "PRAGMA temp_store = +2",
                    "PRAGMA temp_store(2)", "PRAGMA main.temp_store = Memory"] {
            try db.execute(sql)
            #expect(try db.scalar("PRAGMA temp_store", as: Int.self) == 2, "\(sql)")
        }
        for sql in ["PRAGMA temp_store = 'memory '", "PRAGMA temp_store = ' 2'", "PRAGMA temp_store = ' memory'"] {
            let error = expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute(sql) }
            #expect(error?.message.contains("temp_store") == true)
            #expect(error?.sql == sql)
        }
        #expect(try db.scalar("PRAGMA temp_store", as: Int.self) == 2)
    }

    @Test("the listed cipher reads work, with or without a schema, and leave the file as it was")
    func allowedReads() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("reads.db")
            try Self.makeDatabase(path, key: TestKeys.passphrase)
            let before = try snapshot(path)
            let db = try Connection(path: path, key: TestKeys.passphrase)
            for name in Self.allowedReads {
                _ = try db.all("PRAGMA \(name)") { try $0[0] as DatabaseValue }
                _ = try db.all("PRAGMA main.\(name)") { try $0[0] as DatabaseValue }
                _ = try db.all("pragma \(name.uppercased())") { try $0[0] as DatabaseValue }
            }
            #expect(try db.scalar("PRAGMA cipher_version", as: String.self) == SQLCipher.version)
            #expect(try db.scalar("PRAGMA cipher_use_hmac", as: String.self) == "1")
            #expect(try db.scalar("PRAGMA kdf_iter", as: String.self) == (Engine.isVersion4 ? "256000" : "64000"))
            #expect(try db.scalar("PRAGMA page_size", as: DatabaseValue.self) != nil)  // 4.x: text, 3.4.1: integer
            if Engine.isVersion4 {
                #expect(try db.scalar("PRAGMA cipher_salt", as: String.self)?.count == 32)
                #expect(try db.scalar("PRAGMA cipher_status", as: String.self) == "1")
            }
            db.close()
            try Self.expectIntact(path, key: TestKeys.passphrase, bytes: before)
        }
    }

    @Test("a caller's authorizer cannot let a cipher PRAGMA through, and denying PRAGMAs does not break the library")
    func userAuthorizerCannotOverride() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            try db.setAuthorizer { _ in .allow }
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA cipher_use_hmac = OFF") }
            // An authorizer that refuses every PRAGMA: the library's own statements still run.
            try db.setAuthorizer { $0.actionCode == 19 ? .deny : .allow }
            let error = expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA user_version") }
            #expect(error?.message.contains("refused") == false, "the caller's refusal is not the guard's")
            let attached = dir.path("attached.db")
            try db.attach(attached, as: "a", encryption: .key(TestKeys.raw, settings: CipherSettings(pageSize: 8192)))
            try db.execute("CREATE TABLE a.t(x); INSERT INTO a.t VALUES (1)")
            try db.detach("a")
            #expect(try Connection(path: attached, key: TestKeys.raw, settings: CipherSettings(pageSize: 8192))
                .scalar("SELECT x FROM t", as: Int.self) == 1)
        }
    }

    @Test("a plaintext connection refuses cipher settings too, including on an encrypted attachment")
    func plaintextConnection() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("plain.db"), encryption: .none)
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA cipher_default_page_size = 512") }
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA key = 'SENTINEL-KEY-7f3a9c'") }
            try db.execute("PRAGMA page_size = 8192")  // plain SQLite: allowed
            try db.attach(dir.path("enc.db"), as: "enc", encryption: .key(TestKeys.raw))
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA enc.page_size = 8192") }
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA enc.cipher_use_hmac = OFF") }
        }
    }

    @Test("a PRAGMA cannot hide in a trigger body")
    func triggers() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("trigger.db")
            try Self.makeDatabase(path, key: TestKeys.raw)
            let db = try Connection(path: path, key: TestKeys.raw)
            // SQLite's grammar has no PRAGMA in a trigger; the attempt fails and writes nothing.
            #expect(throws: DatabaseError.self) {
                try db.execute("CREATE TRIGGER tr AFTER INSERT ON t BEGIN PRAGMA cipher_use_hmac = OFF; END")
            }
            #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'", as: Int.self) == 0)
        }
    }

    @Test("the library's own paths still apply settings: export with settings, attach with settings, the engine log")
    func libraryPaths() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("source.db")
            try Self.makeDatabase(path, key: TestKeys.raw)
            let db = try Connection(path: path, key: TestKeys.raw)
            let copy = dir.path("copy.db")
            try db.exportEncrypted(to: copy, key: TestKeys.passphrase, settings: CipherSettings(pageSize: 8192, kdfIterations: 4000))
            let reopened = try Connection(path: copy, key: TestKeys.passphrase, settings: CipherSettings(pageSize: 8192, kdfIterations: 4000))
            #expect(try reopened.scalar("SELECT count(*) FROM t", as: Int.self) == 3000)
            #expect(try reopened.scalar("PRAGMA cipher_page_size", as: String.self) == "8192")
            try db.silenceEngineLog()
            let plain = dir.path("plain.db")
            try db.exportDecryptedPlaintextCopy(to: plain)
            #expect(Array(try fileBytes(plain).prefix(16)) == EncryptionTests.magic)
        }
    }
}
