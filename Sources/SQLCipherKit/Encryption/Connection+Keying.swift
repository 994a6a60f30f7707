import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The first 16 bytes of every plaintext SQLite database.
let sqliteHeaderMagic: [UInt8] = Array("SQLite format 3".utf8) + [0]

/// Whether a file starts with the plaintext SQLite magic (a plaintext database, or one with a plaintext header).
func hasPlaintextSQLiteHeader(atPath path: String) -> Bool {
    readFilePrefix(atPath: path, count: sqliteHeaderMagic.count) == sqliteHeaderMagic
}

extension Encryption {
    /// Whether a file written with this encryption must not start with the plaintext SQLite magic: it has a key
    /// and no plaintext header. The copies the library writes (export, backup, VACUUM INTO) are checked against it.
    var requiresEncryptedHeader: Bool {
        key != nil && (settings.plaintextHeaderSize ?? 0) == 0
    }
}

extension Connection {
    /// Runs right after `sqlite3_open_v2`: key, cipher settings, verification of an existing file, `temp_store`.
    func setUp(encryption: Encryption) throws {
        let sqliteConnection = try checkedConnection()
        let existingSize = regularFileSize(atPath: filePath)

        if let key = encryption.key {
            // The key must be the first thing the handle does (SQLCIPHER-FACTS §11); it is never set twice.
            let code = key.material.withUnsafeBytes { bytes in
                sqlite3_key(sqliteConnection, bytes.baseAddress, CInt(bytes.count))
            }
            guard code == SQLITE_OK else {
                throw DatabaseError(
                    kind: .invalidKey, code: ResultCode(rawValue: code),
                    message: "SQLCipher refused the key (sqlite3_key returned \(code))")
            }
            try applyCipherSettings(encryption.settings, key: key, schema: "main")
        }

        EncryptionGuard.install(on: sqliteConnection)

        if let existingSize, existingSize > 0 {
            try verifyExistingFile(size: existingSize, encryption: encryption)
        }

        if let timeout = options.busyTimeout {
            try setBusyTimeout(timeout)
        }

        // temp_store=FILE writes plaintext temporary files (SQLCIPHER-FACTS §9): force MEMORY and check it took.
        try execute("PRAGMA temp_store = MEMORY")
        guard try pragmaInteger("temp_store") == 2 else {
            throw DatabaseError(
                kind: .verificationFailed, code: DatabaseError.SQLITE_ERROR,
                message: "could not force temp_store to MEMORY; refusing a connection that may write plaintext"
                    + " temporary files")
        }
    }

    /// Applies each cipher setting to a schema (`main` or an attached database) and reads it back: SQLite ignores
    /// PRAGMAs it does not know.
    func applyCipherSettings(_ settings: CipherSettings, key: EncryptionKey, schema: String) throws {
        func applyPragma(_ name: String, value: String, expected: String) throws {
            try self.applyPragma("\(schema).\(name)", value: value, expected: expected)
        }
        let isVersion4 = SQLCipher.supports(.version4Format)

        if let compatibility = settings.compatibility {
            guard compatibility == 3 || compatibility == 4 else {
                throw Self.invalidSetting("compatibility must be 3 or 4, not \(compatibility)")
            }
            if isVersion4 {
                try SQLCipher.require(.compatibility)
                // cipher_compatibility cannot be read back: check the settings it implies instead.
                try execute("PRAGMA \(schema).cipher_compatibility = \(compatibility)")
                let implied = compatibility == 3 ? CipherSettings.sqlcipher3 : CipherSettings.sqlcipher4
                try checkPragma("\(schema).cipher_page_size", expected: String(implied.pageSize!), setting: "compatibility")
                try checkPragma("\(schema).kdf_iter", expected: String(implied.kdfIterations!), setting: "compatibility")
                try checkPragma(
                    "\(schema).cipher_hmac_algorithm", expected: implied.hmacAlgorithm!.rawValue, setting: "compatibility")
            } else if compatibility == 4 {
                try SQLCipher.require(.version4Format)
            }
            // compatibility 3 on SQLCipher 3 is the engine's only format: nothing to set.
        }
        if let pageSize = settings.pageSize {
            guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
                throw Self.invalidSetting("page size must be a power of two from 512 to 65536, not \(pageSize)")
            }
            try applyPragma("cipher_page_size", value: String(pageSize), expected: String(pageSize))
        }
        if let kdfIterations = settings.kdfIterations {
            guard kdfIterations >= 1 else {
                throw Self.invalidSetting("KDF iterations must be at least 1, not \(kdfIterations)")
            }
            try applyPragma("kdf_iter", value: String(kdfIterations), expected: String(kdfIterations))
        }
        if let usesHMAC = settings.usesHMAC {
            try applyPragma("cipher_use_hmac", value: usesHMAC ? "ON" : "OFF", expected: usesHMAC ? "1" : "0")
        }
        if let algorithm = settings.kdfAlgorithm {
            if isVersion4 {
                try applyPragma("cipher_kdf_algorithm", value: algorithm.rawValue, expected: algorithm.rawValue)
            } else if algorithm != .pbkdf2HMACSHA1 {
                try SQLCipher.require(.algorithmSelection)
            }
        }
        if let algorithm = settings.hmacAlgorithm {
            if isVersion4 {
                try applyPragma("cipher_hmac_algorithm", value: algorithm.rawValue, expected: algorithm.rawValue)
            } else if algorithm != .hmacSHA1 {
                try SQLCipher.require(.algorithmSelection)
            }
        }
        if let size = settings.plaintextHeaderSize {
            try SQLCipher.require(.plaintextHeader)
            let pageSize = settings.pageSize ?? (isVersion4 ? 4096 : 1024)
            // An invalid size fails later with a misleading SQLITE_NOMEM (SQLCIPHER-FACTS §7).
            guard size >= 0, size % 16 == 0, size < pageSize - 96 else {
                throw Self.invalidSetting(
                    "plaintext header size must be a multiple of 16 from 0 to \(pageSize - 112), not \(size)")
            }
            try applyPragma("cipher_plaintext_header_size", value: String(size), expected: String(size))
            if size > 0 && settings.salt == nil && key.salt == nil && schema == "main"
                && regularFileSize(atPath: filePath) ?? 0 > 0 {
                throw DatabaseError(
                    kind: .invalidKey, code: DatabaseError.SQLITE_MISUSE,
                    message: "a database with a plaintext header does not store its salt; give it with"
                        + " CipherSettings.salt or a raw key with salt (x'<96 hex>')")
            }
        }
        if let salt = settings.salt {
            try SQLCipher.require(.plaintextHeader)
            guard salt.count == EncryptionKey.saltByteCount else {
                throw Self.invalidSetting("a salt must be \(EncryptionKey.saltByteCount) bytes, not \(salt.count)")
            }
            // The salt is not secret; it is stored in every normal SQLCipher file's first 16 bytes.
            let hex = salt.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            try execute("PRAGMA \(schema).cipher_salt = \"x'\(hex)'\"")
        }
    }

    private func applyPragma(_ name: String, value: String, expected: String) throws {
        try execute("PRAGMA \(name) = \(value)")
        try checkPragma(name, expected: expected, setting: "PRAGMA \(name) = \(value)")
    }

    private func checkPragma(_ name: String, expected: String, setting: String) throws {
        let actual = try pragmaText(name)
        guard actual?.caseInsensitiveEquals(expected) == true else {
            throw DatabaseError(
                kind: .unsupportedByEngine, code: DatabaseError.SQLITE_ERROR,
                message: "SQLCipher \(SQLCipher.version) did not apply \(setting) (\(name) reads back "
                    + "\(actual.map { "`\($0)`" } ?? "nothing")); refusing to open with other settings than asked")
        }
    }

    /// Reads page 1 of an existing file and turns SQLITE_NOTADB into an error that says what the file is.
    private func verifyExistingFile(size: Int, encryption: Encryption) throws {
        // Every page size is a multiple of 512: anything else is a truncated or damaged file.
        let truncated = DatabaseError(
            kind: .notADatabase, code: DatabaseError.SQLITE_CORRUPT,
            message: "the file is \(size) bytes, not a whole number of pages: truncated or damaged (path: \(path))")
        do {
            _ = try scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
        } catch let error as DatabaseError
            where error.resultCode == DatabaseError.SQLITE_NOTADB || error.resultCode == DatabaseError.SQLITE_CORRUPT
                || (encryption.key == nil && hasPlaintextSQLiteHeader(atPath: filePath)) {
            // Without a key, an encrypted page 1 behind a plaintext header reads as corrupt or as an "unsupported
            // file format" rather than as "not a database".
            throw classifyUnreadableFile(size: size, encryption: encryption, underlying: error)
        } catch {
            throw size % 512 != 0 ? truncated : error
        }
        if size % 512 != 0 {
            throw truncated
        }
    }

    private func classifyUnreadableFile(size: Int, encryption: Encryption, underlying: DatabaseError) -> DatabaseError {
        let hasPlaintextMagic = hasPlaintextSQLiteHeader(atPath: filePath)
        let code = underlying.extendedResultCode
        // The magic alone does not make a plaintext database: a plaintext-header database has it too.
        let isPlaintextDatabase = hasPlaintextMagic && Self.opensAsPlaintext(filePath)
        let plaintextHeaderHint = "the file starts with a plaintext SQLite header but its content is encrypted: a"
            + " database with a plaintext header (SQLCipher 4); open it with its key, CipherSettings.plaintextHeaderSize"
            + " and its salt (path: \(path))"
        if encryption.key == nil {
            if hasPlaintextMagic && !isPlaintextDatabase && size % 512 == 0 {
                return DatabaseError(kind: .missingKey, code: code, message: plaintextHeaderHint)
            }
            if hasPlaintextMagic || size < 512 || size % 512 != 0 {
                return DatabaseError(
                    kind: .notADatabase, code: code,
                    message: "the file is not a SQLite database, or it is truncated or damaged (path: \(path))")
            }
            return DatabaseError(
                kind: .missingKey, code: code,
                message: "the file is not a plaintext SQLite database; it is probably encrypted: open it with its key"
                    + " (path: \(path))")
        }
        if hasPlaintextMagic && !isPlaintextDatabase && (encryption.settings.plaintextHeaderSize ?? 0) == 0 {
            return DatabaseError(kind: .wrongKey, code: code, message: plaintextHeaderHint)
        }
        if isPlaintextDatabase && (encryption.settings.plaintextHeaderSize ?? 0) == 0 {
            return DatabaseError(
                kind: .notEncrypted, code: code,
                message: "the file is a plaintext SQLite database, not an encrypted one; open it with"
                    + " Encryption.none, or encrypt it into a new file with an export (path: \(path))")
        }
        if size < 512 || size % 512 != 0 {
            return DatabaseError(
                kind: .notADatabase, code: code,
                message: "the file is \(size) bytes, not a whole number of pages: it is not a database, or it is"
                    + " truncated (path: \(path))")
        }
        return DatabaseError(
            kind: .wrongKey, code: code,
            message: "the key does not open the database: wrong key, wrong cipher settings, or not an SQLCipher"
                + " database (path: \(path))")
    }

    // MARK: - Helpers

    /// Whether a file reads as a plaintext database (its schema, not just its first 16 bytes).
    static func opensAsPlaintext(_ path: String) -> Bool {
        var connection: OpaquePointer?
        defer { sqlite3_close(connection) }
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return false }
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(connection, "SELECT count(*) FROM sqlite_master", -1, &statement, nil) == SQLITE_OK
        else { return false }
        return sqlite3_step(statement) == SQLITE_ROW
    }

    /// Reads a PRAGMA's first value as text; `nil` when it returns no row (unknown PRAGMA).
    func pragmaText(_ name: String) throws -> String? {
        let statement = try prepare("PRAGMA \(name)")
        guard try statement.step() else { return nil }
        return String.decode(sqliteStatement: statement.sqliteStatement, column: 0)
            ?? Int64.decode(sqliteStatement: statement.sqliteStatement, column: 0).map { String($0) }
    }

    /// Reads a PRAGMA's first value as an integer.
    func pragmaInteger(_ name: String) throws -> Int? {
        try pragmaText(name).flatMap { Int($0) }
    }

    static func invalidSetting(_ message: String) -> DatabaseError {
        DatabaseError(kind: .invalidArgument, code: DatabaseError.SQLITE_MISUSE, message: message)
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }

    func caseInsensitiveEquals(_ other: String) -> Bool {
        lowercased() == other.lowercased()
    }
}
