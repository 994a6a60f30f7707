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

        if let existingSize, existingSize > 0 {
            try validatePlaintextHeader(encryption: encryption)
        }

        // Before the first read: the key check itself must wait for another process's lock, not fail at once.
        if let timeout = options.busyTimeout {
            try setBusyTimeout(timeout)
        }

        if let key = encryption.key {
            // The key must be the first thing the handle does (Docs/EngineNotes.md#key-first); it is never set twice.
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

        EncryptionGuard.install(on: handle, encryption: encryption, options: options)

        if options.holdsExclusiveLock {
            // Before the first read: only then does a WAL database keep its index in this connection's memory.
            try execute("PRAGMA locking_mode = EXCLUSIVE")
        }

        if let existingSize, existingSize > 0 {
            try verifyExistingFile(size: existingSize, encryption: encryption)
        }

        // temp_store=FILE writes plaintext temp files (Docs/EngineNotes.md#temp-store): force MEMORY, check it took.
        try execute("PRAGMA temp_store = MEMORY")
        guard try pragmaInteger("temp_store") == 2 else {
            throw DatabaseError(
                .verificationFailed,
                "could not force temp_store to MEMORY; refusing a connection that may write plaintext"
                    + " temporary files")
        }
        if options.enforcesForeignKeys {
            try execute("PRAGMA foreign_keys = ON")
            guard try pragmaInteger("foreign_keys") == 1 else {
                throw DatabaseError(.unsupportedByEngine, "the engine did not turn foreign keys on")
            }
        }
    }

    /// Checks the key before a read-write handle exists, when a `-wal` or `-journal` lies beside the file: a
    /// read-write handle would replay a hot journal into the file as it opens, and checkpoint a WAL into it as it
    /// closes, with a wrong key as with the right one, and with a side file that belongs to another database (or is
    /// stale) as with its own.
    ///
    /// The check reads the database as SQLite will after recovery, and writes nothing (``ReadOnlyCheck``): a hot
    /// journal is rolled back in memory, a WAL no connection holds is read through a private index. Pages a hot
    /// journal restores, or an orphan WAL (left by a crash, or brought from elsewhere) brings, may not touch page 1:
    /// then every page is read, so each is authenticated before SQLite may write it into the file. When the key
    /// opens the main file alone but not with its side file, the error says the side file does not belong.
    func verifyKeyBeforeWriting(encryption: Encryption) throws {
        guard options.mode != .readOnly, !options.skipsKeyProbe, !options.isURI, !path.isEmpty, path != ":memory:",
              let size = regularFileSize(atPath: path), size > 0
        else { return }
        let walSize = regularFileSize(atPath: path + "-wal")
        let hasJournal = regularFileSize(atPath: path + "-journal") != nil
        guard walSize != nil || hasJournal else { return }
        // A WAL in use by another connection of this process (a pool's writer, a service's first connection): that
        // connection read the file as it opened, and in WAL mode it holds a SHARED lock on it until it closes, so
        // this handle cannot checkpoint into the file as it closes, whatever its key; the WAL is a live one, not an
        // orphan, and this handle's own first read checks the key. The check would have opened a read-only
        // connection to read page 1 once more, most of the cost of such an open.
        if !hasJournal && OpenFiles.openCount(path: path) > 0 { return }
        // Decided before the check opens: its own connection would count as a holder.
        let check = ReadOnlyCheck(path: path)
        do {
            try check.run(encryption: encryption, busyTimeout: options.busyTimeout) { probe in
                // A WAL of 32 bytes or less has no frame (its header alone).
                guard check.usesOverlay, check.rolledBackJournal || (walSize ?? 0) > 32 else { return }
                do {
                    try probe.quickCheck()
                } catch let error as DatabaseError {
                    throw DatabaseError(kind: .damaged, code: error.extendedResultCode, message: error.message)
                }
                // Page 1 after the rollback must hold the file's own salt: a journal of another database encrypted
                // with the same key would bring its own (and with page HMACs off, nothing else would tell).
                if check.rolledBackJournal, encryption.requiresEncryptedHeader,
                   try probe.mainFilePrefix(count: 16) != readFilePrefix(atPath: path, count: 16) {
                    throw Self.foreignSideFile(
                        path: path, isWAL: false,
                        underlying: DatabaseError(.damaged, "page 1 of the journal holds another salt"))
                }
            }
        } catch let error as DatabaseError
            where [.wrongKey, .notADatabase, .missingKey, .notEncrypted, .damaged].contains(error.kind) {
            let blamesWAL = !check.rolledBackJournal && walSize != nil
            // Does the key open the file without its side file? Then the side file is what does not fit.
            if Self.opensWithoutSideFiles(path: path, encryption: encryption) {
                throw Self.foreignSideFile(path: path, isWAL: blamesWAL, underlying: error)
            }
            guard check.rolledBackJournal else { throw error }
            let what = switch error.kind {
            case .wrongKey: "the key does not open it (wrong key or cipher settings)"
            case .notEncrypted: "it is a plaintext database"
            case .missingKey: "it is encrypted and no key was given"
            case .damaged: "it is damaged"
            default: "it is not a database"
            }
            throw DatabaseError(
                kind: error.kind, code: error.extendedResultCode,
                message: "\(what) as its hot journal would leave it; the journal and the file were left as they are"
                    + " (path: \(path))")
        }
    }

    /// Whether the key opens the main file as it is, every page of it, ignoring its `-wal` and `-journal` (SQLite's
    /// `immutable` URI parameter: no side file is read, nothing is written).
    ///
    /// Every page, not page 1 alone: a rekey killed after it rewrote page 1 leaves a file whose page 1 opens with the
    /// new key and whose other pages need the old one; its journal is its own, and setting it aside would lose the
    /// database.
    static func opensWithoutSideFiles(path: String, encryption: Encryption) -> Bool {
        var options = OpenOptions(mode: .readOnly, isURI: true, busyTimeout: .zero, statementCacheCapacity: 0)
        options.logger = nil
        let uri = "file:" + uriEscaped(path) + "?immutable=1"
        options.namesOtherFormat = false
        guard let connection = try? Connection(path: uri, encryption: encryption, options: options) else { return false }
        defer { connection.close() }
        return (try? connection.quickCheck()) != nil
    }

    private static func foreignSideFile(path: String, isWAL: Bool, underlying: DatabaseError) -> DatabaseError {
        let sideFile = path + (isWAL ? "-wal" : "-journal")
        return DatabaseError(
            kind: .damaged, code: underlying.extendedResultCode,
            message: "the key opens \(path) on its own, but not together with \(sideFile): that "
                + (isWAL ? "write-ahead log" : "journal") + " belongs to another database, is stale or is damaged."
                + " Nothing was changed. To open the database as of its last "
                + (isWAL ? "checkpoint" : "commit") + ", move \(sideFile) aside (keep it until you know what it is)")
    }

    /// The page-size and reserved-bytes fields of a plaintext header are read by the engine before anything is
    /// authenticated, and a page size smaller than the cipher's makes SQLCipher 4 read past its buffer and crash
    /// (found by fuzzing; Docs/Fuzzing.md). They are checked here, before the engine sees the file.
    func validatePlaintextHeader(encryption: Encryption) throws {
        guard encryption.key != nil, let headerSize = encryption.settings.plaintextHeaderSize, headerSize >= 24,
              !path.isEmpty
        else { return }
        let header = readFilePrefix(atPath: filePath.isEmpty ? path : filePath, count: 24)
        guard header.count == 24 else { return }
        let field = Int(header[16]) << 8 | Int(header[17])
        let pageSize = field == 1 ? 65536 : field
        let expected = encryption.settings.pageSize ?? (SQLCipher.supports(.version4Format) ? 4096 : 1024)
        let reserved = Int(header[20])
        guard pageSize == expected, reserved >= 16, reserved <= 255 else {
            throw DatabaseError(
                .damaged,
                "the plaintext header says page size \(pageSize) with \(reserved) reserved bytes, but the"
                    + " cipher page size is \(expected): the header was changed, or other cipher settings are needed;"
                    + " the file was not opened (path: \(path))")
        }
    }

    /// Applies each cipher setting to a schema (`main` or an attached database) and reads it back: SQLite ignores
    /// PRAGMAs it does not know.
    func applyCipherSettings(_ settings: CipherSettings, key: EncryptionKey, schema: String) throws {
        // The guard refuses these PRAGMAs in SQL; this is the library's own door (an attached schema's settings).
        try withLibraryStatements { try applyCipherSettingsUnguarded(settings, key: key, schema: schema) }
    }

    private func applyCipherSettingsUnguarded(_ settings: CipherSettings, key: EncryptionKey, schema: String) throws {
        func applyPragma(_ name: String, value: String, expected: String) throws {
            try self.applyPragma("\(schema).\(name)", value: value, expected: expected)
        }
        let isVersion4 = SQLCipher.supports(.version4Format)
        if let violation = settings.rangeViolation {
            throw Self.invalidSetting(violation.message(naming: violation.setting.name))
        }

        var settings = settings
        if let compatibility = settings.compatibility, let implied = CipherSettings.defaults(ofMajorVersion: compatibility) {
            if isVersion4 {
                try SQLCipher.require(.compatibility)
                // cipher_compatibility cannot be read back: check the settings it implies instead.
                try execute("PRAGMA \(schema).cipher_compatibility = \(compatibility)")
                let setting = "compatibility \(compatibility)"
                try checkPragma("\(schema).cipher_page_size", expected: String(implied.pageSize!), setting: setting)
                try checkPragma("\(schema).kdf_iter", expected: String(implied.kdfIterations!), setting: setting)
                try checkPragma("\(schema).cipher_use_hmac", expected: implied.usesHMAC! ? "1" : "0", setting: setting)
                try checkPragma(
                    "\(schema).cipher_hmac_algorithm", expected: implied.hmacAlgorithm!.rawValue, setting: setting)
            } else if compatibility == 4 {
                try SQLCipher.require(.version4Format)
            } else {
                // SQLCipher 3 has no cipher_compatibility: apply the explicit settings it stands for (each read back).
                settings = settings.resolvingCompatibility
            }
        }
        if let pageSize = settings.pageSize {
            try applyPragma("cipher_page_size", value: String(pageSize), expected: String(pageSize))
        }
        if let kdfIterations = settings.kdfIterations {
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
            try applyPragma("cipher_plaintext_header_size", value: String(size), expected: String(size))
            if size > 0 && settings.salt == nil && key.salt == nil && schema == "main"
                && regularFileSize(atPath: filePath) ?? 0 > 0 {
                throw DatabaseError(
                    .invalidKey, "a database with a plaintext header does not store its salt", remedy: .giveSalt)
            }
        }
        if let salt = settings.salt {
            try SQLCipher.require(.plaintextHeader)
            // The salt is not secret; it is stored in every normal SQLCipher file's first 16 bytes.
            let hex = Hex.string(salt)
            try execute("PRAGMA \(schema).cipher_salt = \"x'\(hex)'\"")
        }
        // The three settings below are deprecated since SQLCipher 4.1 (setting them returns a notice row) but are
        // still needed for SQLCipher 2.0 files; each is read back.
        if let encoding = settings.hmacPageNumberEncoding {
            try applyPragma("cipher_hmac_pgno", value: encoding.rawValue, expected: encoding.rawValue)
        }
        if let iterations = settings.fastKDFIterations {
            try applyPragma("fast_kdf_iter", value: String(iterations), expected: String(iterations))
        }
        if let mask = settings.hmacSaltMask {
            // Process-wide in both engines: only the scope of SQLCipher.withHMACSaltMask may change it.
            try HMACSaltMaskScope.checkAllowed(mask)
            let hex = Hex.string([mask])
            try self.applyPragma("cipher_hmac_salt_mask", value: "\"x'\(hex)'\"", expected: hex)
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
                .unsupportedByEngine,
                "SQLCipher \(SQLCipher.version) did not apply \(setting) (\(name) reads back "
                    + "\(actual.map { "`\($0)`" } ?? "nothing")); refusing to open with other settings than asked")
        }
    }

    /// Reads page 1 of an existing file and turns a failure into an error that says what the file is.
    ///
    /// With the right key, a damaged or truncated file reads as SQLITE_CORRUPT, a wrong key as SQLITE_NOTADB: the
    /// two are told apart, and a partial last page is damage (named with its page), not a key problem.
    private func verifyExistingFile(size: Int, encryption: Encryption) throws {
        do {
            _ = try scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
        } catch let error as DatabaseError
            where error.resultCode == DatabaseError.SQLITE_NOTADB || error.resultCode == DatabaseError.SQLITE_CORRUPT
                || (encryption.key == nil && hasPlaintextSQLiteHeader(atPath: filePath)) {
            // Without a key, an encrypted page 1 behind a plaintext header reads as corrupt or as an "unsupported
            // file format" rather than as "not a database".
            if error.resultCode == DatabaseError.SQLITE_CORRUPT && size >= 512
                && (encryption.key != nil ? !hasPlaintextSQLiteHeader(atPath: filePath)
                    || (encryption.settings.plaintextHeaderSize ?? 0) > 0 : Self.opensAsPlaintext(filePath)) {
                throw DatabaseError(
                    kind: .damaged, code: error.extendedResultCode,
                    message: "the key opens the database, but the file is damaged or truncated (\(size) bytes):"
                        + " \(error.message) (path: \(path))")
            }
            throw classifyUnreadableFile(size: size, encryption: encryption, underlying: error)
        } catch let error as DatabaseError where error.resultCode == DatabaseError.SQLITE_BUSY {
            throw DatabaseError(
                kind: .busy, code: error.extendedResultCode,
                message: "the database is locked by another connection or process, and the lock was not released"
                    + " within the busy timeout; the key was not checked (path: \(path))")
        }
        let pageSize = try pragmaInteger("page_size") ?? 512
        if pageSize > 0 && size % pageSize != 0 {
            let wholePages = size / pageSize
            throw DatabaseError(
                .damaged,
                "the key opens the database, but the file is \(size) bytes: \(size - wholePages * pageSize)"
                    + " bytes of a partial page \(wholePages + 1) follow the last whole page (page size \(pageSize));"
                    + " it is truncated or has bytes appended (path: \(path))")
        }
    }

    private func classifyUnreadableFile(size: Int, encryption: Encryption, underlying: DatabaseError) -> DatabaseError {
        let format = DatabaseFileFormat.detect(atPath: filePath)
        let hasPlaintextMagic = format == .plaintext || format == .plaintextHeader
        let code = underlying.extendedResultCode
        // The magic alone does not make a plaintext database: a plaintext-header database has it too.
        let isPlaintextDatabase = format == .plaintext
        let plaintextHeaderHint = "the file starts with a plaintext SQLite header but its content is encrypted: a"
            + " database with a plaintext header (SQLCipher 4) (path: \(path))"
        if encryption.key == nil {
            if hasPlaintextMagic && !isPlaintextDatabase && size % 512 == 0 {
                return DatabaseError(
                    kind: .missingKey, code: code, message: plaintextHeaderHint, remedy: .openWithPlaintextHeaderSettings)
            }
            if hasPlaintextMagic || size < 512 || size % 512 != 0 {
                return DatabaseError(
                    kind: .notADatabase, code: code,
                    message: "the file is not a SQLite database, or it is truncated or damaged (path: \(path))")
            }
            return DatabaseError(
                kind: .missingKey, code: code,
                message: "the file is not a plaintext SQLite database; it is probably encrypted (path: \(path))",
                remedy: .openWithKey)
        }
        if hasPlaintextMagic && !isPlaintextDatabase && (encryption.settings.plaintextHeaderSize ?? 0) == 0 {
            return DatabaseError(
                kind: .wrongKey, code: code, message: plaintextHeaderHint, remedy: .openWithPlaintextHeaderSettings)
        }
        if isPlaintextDatabase && (encryption.settings.plaintextHeaderSize ?? 0) == 0 {
            return DatabaseError(
                kind: .notEncrypted, code: code,
                message: "the file is a plaintext SQLite database, not an encrypted one (path: \(path))",
                remedy: .openWithoutKeyOrEncrypt)
        }
        if size < 512 || size % 512 != 0 {
            return DatabaseError(
                kind: .notADatabase, code: code,
                message: "the file is \(size) bytes, not a whole number of pages: it is not a database, or it is"
                    + " truncated (path: \(path))")
        }
        // A key that looks mistyped is the likelier cause; otherwise the file may be in the other SQLCipher format.
        if let hint = encryption.key?.mistakeHint {
            return DatabaseError(
                kind: .wrongKey, code: code, message: "the key does not open the database (path: \(path))",
                remedy: hint)
        }
        if options.namesOtherFormat, let remedy = OtherFormatProbe.remedy(path: filePath, encryption: encryption) {
            let reason = remedy == .openWithSQLCipher4
                ? "the key does not open the database: this file looks like SQLCipher 4's format; the linked engine"
                    + " is SQLCipher \(SQLCipher.version)"
                : "the key does not open the database with SQLCipher \(SQLCipher.version)'s default settings"
            return DatabaseError(kind: .wrongKey, code: code, message: "\(reason) (path: \(path))", remedy: remedy)
        }
        return DatabaseError(
            kind: .wrongKey, code: code,
            message: "the key does not open the database: wrong key, wrong cipher settings, or not an SQLCipher"
                + " database (path: \(path))")
    }

    // MARK: - Helpers

    /// Whether a file reads as a plaintext database (its schema, not just its first 16 bytes), on a read-only handle
    /// that writes nothing (waiting up to 2 s for another process's lock).
    static func opensAsPlaintext(_ path: String) -> Bool {
        var connection: OpaquePointer?
        defer { sqlite3_close(connection) }
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return false }
        sqlite3_busy_timeout(connection, 2000)
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
        let column = DatabaseColumn(statement.sqliteStatement, 0)
        return String.decode(from: column) ?? Int64.decode(from: column).map { String($0) }
    }

    /// Reads a PRAGMA's first value as an integer.
    func pragmaInteger(_ name: String) throws -> Int? {
        try pragmaText(name).flatMap { Int($0) }
    }

    static func invalidSetting(_ message: String) -> DatabaseError {
        DatabaseError(.invalidArgument, message)
    }
}

/// A path as the path part of a `file:` URI: `%`, `?` and `#` escaped.
func uriEscaped(_ path: String) -> String {
    var escaped = ""
    for character in path.unicodeScalars {
        switch character {
        case "%": escaped += "%25"
        case "?": escaped += "%3f"
        case "#": escaped += "%23"
        default: escaped.unicodeScalars.append(character)
        }
    }
    return escaped
}

extension String {
    func caseInsensitiveEquals(_ other: String) -> Bool {
        lowercased() == other.lowercased()
    }
}
