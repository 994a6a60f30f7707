/// What a database file is and, when it can be opened, how it is laid out: the library behind `sqlcipherkit info`.
///
/// ```swift
/// let file = DatabaseFileInspection.inspect(path: "notes.db")               // no key: what the bytes say
/// print(file.format)                                                        // .encrypted
/// let opened = try DatabaseFileInspection.inspect(path: "notes.db", encryption: .key(key))
/// print(opened.cipher?.kdfIterations, opened.database?.pageCount)
/// ```
///
/// Without a key only the file's first bytes are read (and a plaintext database is opened read-only). With a key the
/// database is opened read-only and its cipher settings are read back from the engine. Either way the database is
/// read as SQLite will read it after recovery and nothing is written (a hot journal is rolled back in memory; see
/// ``hasHotJournal``). Key material is never part of the result.
public struct DatabaseFileInspection: Sendable, Hashable {
    /// Facts every opened database has.
    public struct DatabaseDetails: Sendable, Hashable {
        /// `PRAGMA page_size`: the usable page size SQLite sees (SQLCipher's page size minus nothing; the reserve
        /// for IV and HMAC is inside each page).
        public let pageSize: Int
        /// `PRAGMA page_count`.
        public let pageCount: Int
        /// `PRAGMA journal_mode`, lower case (`delete`, `wal`, …).
        public let journalMode: String
        /// `PRAGMA user_version`.
        public let userVersion: Int64
        /// `PRAGMA application_id`.
        public let applicationID: Int64
        /// The number of tables, indexes, views and triggers (`sqlite_master` rows).
        public let schemaObjectCount: Int
    }

    /// The cipher settings an encrypted database opened with, read back from the engine.
    public struct CipherDetails: Sendable, Hashable {
        /// The settings that opened it (the caller's, or ``CipherSettings/sqlcipher3`` when SQLCipher 3's format was
        /// detected).
        public let settings: CipherSettings
        /// `cipher_page_size`.
        public let pageSize: Int?
        /// `kdf_iter` (used for passphrases only).
        public let kdfIterations: Int?
        /// `cipher_use_hmac`.
        public let usesHMAC: Bool?
        /// `cipher_kdf_algorithm` (SQLCipher 4; `nil` on SQLCipher 3, which has PBKDF2-HMAC-SHA1 only).
        public let kdfAlgorithm: String?
        /// `cipher_hmac_algorithm` (SQLCipher 4; `nil` on SQLCipher 3, which has HMAC-SHA1 only).
        public let hmacAlgorithm: String?
        /// `cipher_plaintext_header_size` (SQLCipher 4; `nil` on SQLCipher 3).
        public let plaintextHeaderSize: Int?
        /// 1 to 4 when the settings are that major version's defaults; `nil` for custom settings.
        public let formatMajorVersion: Int?
    }

    /// The path inspected.
    public let path: String
    /// What the bytes say.
    public let format: DatabaseFileFormat
    /// The file's size, `nil` when there is no regular file.
    public let byteCount: Int?
    /// The size of the `-wal` file beside it, `nil` when there is none.
    public let walByteCount: Int?
    /// `true` when the database has a hot journal: a transaction did not finish (a crash, a killed process), and the
    /// next read-write open rolls it back. The details are read as that rollback will leave the database (the
    /// rollback is played in memory; the file and its journal are not changed).
    public let hasHotJournal: Bool
    /// Set when the database was opened: a plaintext one without a key, an encrypted one with its key.
    public let database: DatabaseDetails?
    /// Set when an encrypted database was opened with its key.
    public let cipher: CipherDetails?

    // MARK: - Inspecting

    /// Inspects a file without a key: its format from the first bytes; for a plaintext database also its details.
    ///
    /// Never throws: a file that cannot be read is reported as what its bytes look like.
    public static func inspect(path: String) -> DatabaseFileInspection {
        let format = fileFormat(atPath: path)
        let check = ReadOnlyCheck(path: path)
        var details: DatabaseDetails?
        if format == .plaintext {
            details = try? withConnection(check, encryption: .none) { try readDetails($0) }
        } else if format != .missing && format != .empty && format != .notARegularFile
            && regularFileSize(atPath: path + "-journal") != nil {
            // Without the key only the rollback tells whether the journal is hot (it happens before page 1 is read).
            _ = try? withConnection(check, encryption: .none) { _ in }
        }
        return DatabaseFileInspection(
            path: path, format: format, byteCount: regularFileSize(atPath: path),
            walByteCount: regularFileSize(atPath: path + "-wal"), hasHotJournal: check.rolledBackJournal,
            database: details, cipher: nil)
    }

    /// Inspects a file with a key: opens it read-only and reads its details and cipher settings.
    ///
    /// On SQLCipher 4, when the engine's default settings do not open the file and `detectsSQLCipher3Format` is set,
    /// SQLCipher 3's settings are tried too (``CipherDetails/formatMajorVersion`` is then 3).
    ///
    /// - Parameters:
    ///   - path: The database file; it must exist (nothing is created).
    ///   - encryption: The key and settings; with ``Encryption/none`` this is ``inspect(path:)`` for a plaintext
    ///     file and throws ``DatabaseError/missingKey`` for an encrypted one.
    ///   - detectsSQLCipher3Format: Whether to try SQLCipher 3's settings after the engine's defaults.
    /// - Throws: ``DatabaseError/wrongKey`` (also for a plaintext-header file opened without its header size),
    ///   ``DatabaseError/notEncrypted``, ``DatabaseError/notADatabase``, or `SQLITE_CANTOPEN` for a missing file.
    public static func inspect(
        path: String, encryption: Encryption, detectsSQLCipher3Format: Bool = true
    ) throws -> DatabaseFileInspection {
        let format = fileFormat(atPath: path)
        if format == .missing || format == .notARegularFile {
            throw DatabaseError(
                .fileSystem,
                "\(path) is \(format == .missing ? "missing" : "not a regular file"); nothing to inspect")
        }
        if format == .plaintextHeader, encryption.key != nil, (encryption.settings.plaintextHeaderSize ?? 0) == 0 {
            throw DatabaseError(
                .wrongKey,
                "\(path) has a plaintext SQLite header: open it with its plaintext header size (usually 32)"
                    + " and its salt (a raw key with salt, x'<96 hex>')")
        }
        let check = ReadOnlyCheck(path: path)
        var opened: (DatabaseDetails, CipherDetails?)
        do {
            opened = try withConnection(check, encryption: encryption, read: readAll)
        } catch DatabaseError.wrongKey where detectsSQLCipher3Format && encryption.settings.isEngineDefault
            && SQLCipher.supports(.version4Format) && encryption.key != nil
        {
            // SQLCipher 4 opens SQLCipher 3 files only with 3's settings (Docs/EngineNotes.md#compatibility): try them.
            let version3 = Encryption.key(encryption.key!, settings: .sqlcipher3)
            guard let retried = try? withConnection(check, encryption: version3, read: readAll) else {
                throw DatabaseError(
                    .wrongKey,
                    "the key opens \(path) neither with SQLCipher 4's default settings nor with SQLCipher"
                        + " 3's: wrong key, other cipher settings, or not an SQLCipher database")
            }
            opened = retried
        }
        return DatabaseFileInspection(
            path: path, format: format, byteCount: regularFileSize(atPath: path),
            walByteCount: regularFileSize(atPath: path + "-wal"), hasHotJournal: check.rolledBackJournal,
            database: opened.0, cipher: opened.1)
    }

    // MARK: - Internals

    private init(
        path: String, format: DatabaseFileFormat, byteCount: Int?, walByteCount: Int?, hasHotJournal: Bool,
        database: DatabaseDetails?, cipher: CipherDetails?
    ) {
        self.path = path
        self.format = format
        self.byteCount = byteCount
        self.walByteCount = walByteCount
        self.hasHotJournal = hasHotJournal
        self.database = database
        self.cipher = cipher
    }

    static func fileFormat(atPath path: String) -> DatabaseFileFormat {
        DatabaseFileFormat.detect(atPath: path)
    }

    private static func withConnection<T>(
        _ check: ReadOnlyCheck, encryption: Encryption, read: (Connection) throws -> T
    ) throws -> T {
        try check.run(encryption: encryption, busyTimeout: .seconds(2), read)
    }

    private static func readAll(_ connection: Connection) throws -> (DatabaseDetails, CipherDetails?) {
        (try readDetails(connection), try CipherDetails(readingFrom: connection))
    }

    private static func readDetails(_ connection: Connection) throws -> DatabaseDetails {
        DatabaseDetails(
            pageSize: try connection.pragmaInteger("page_size") ?? 0,
            pageCount: try connection.pragmaInteger("page_count") ?? 0,
            journalMode: (try connection.pragmaText("journal_mode") ?? "").lowercased(),
            userVersion: try connection.scalar("PRAGMA user_version", as: Int64.self) ?? 0,
            applicationID: try connection.scalar("PRAGMA application_id", as: Int64.self) ?? 0,
            schemaObjectCount: try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) ?? 0)
    }

    /// The format a file opened with `settings` has, ignoring the plaintext header (it does not change the format).
    static func formatMajorVersion(of settings: CipherSettings, isVersion4Engine: Bool) -> Int? {
        var layout = settings
        layout.plaintextHeaderSize = nil
        layout.salt = nil
        for version in 1...4 {
            if layout == CipherSettings.defaults(ofMajorVersion: version)
                || layout == CipherSettings(compatibility: version) { return version }
        }
        if layout.isEngineDefault { return isVersion4Engine ? 4 : 3 }
        return nil
    }
}

extension DatabaseFileInspection.CipherDetails {
    /// Reads the cipher PRAGMAs of a connection's main database: the one reader of them, for inspection and for the
    /// backup's layout comparison. `nil` for a plaintext connection.
    init?(readingFrom connection: Connection) throws {
        guard connection.isEncrypted else { return nil }
        let isVersion4 = SQLCipher.supports(.version4Format)
        settings = connection.cipherSettings
        pageSize = try connection.pragmaInteger("cipher_page_size")
        kdfIterations = try connection.pragmaInteger("kdf_iter")
        usesHMAC = try connection.pragmaInteger("cipher_use_hmac").map { $0 != 0 }
        kdfAlgorithm = isVersion4 ? try connection.pragmaText("cipher_kdf_algorithm") : nil
        hmacAlgorithm = isVersion4 ? try connection.pragmaText("cipher_hmac_algorithm") : nil
        plaintextHeaderSize = isVersion4 ? try connection.pragmaInteger("cipher_plaintext_header_size") : nil
        formatMajorVersion = DatabaseFileInspection.formatMajorVersion(of: settings, isVersion4Engine: isVersion4)
    }
}
