import CSQLCipher

extension Connection {
    /// Copies the whole database into a new encrypted file with `sqlcipher_export`: encrypts a plaintext database,
    /// or re-encrypts an encrypted one with another key and/or other cipher settings (page size, KDF, SQLCipher 3 →
    /// 4 format, plaintext header).
    ///
    /// ```swift
    /// let plain = try Connection(path: "legacy.db", encryption: .none)
    /// try plain.exportEncrypted(to: "notes.db", key: key)
    /// ```
    ///
    /// The engine's export drops `user_version`, `application_id` and the WAL journal mode; they are carried across
    /// here. The copy is written under a temporary name beside the destination (mode 0600), verified by opening it
    /// with the new key (`PRAGMA quick_check`, same number of schema objects, header fields, not plaintext), flushed
    /// to disk, and only then renamed into place. The source is never modified.
    ///
    /// - Warning: On SQLCipher 3, a trace callback installed on the raw handle is removed first: that engine's
    ///   export crashes the process when tracing is on.
    ///
    /// - Parameters:
    ///   - destination: A path that does not exist yet (or an empty file).
    ///   - key: The destination's key.
    ///   - settings: The destination's cipher settings; the engine's defaults unless given.
    /// - Throws: ``DatabaseError/fileSystem`` when the destination exists with content or its folder is missing or
    ///   not writable (nothing is written); ``DatabaseError/invalidState`` inside a transaction;
    ///   ``DatabaseError/verificationFailed`` when the copy does not check out (it is removed).
    public func exportEncrypted(to destination: String, key: EncryptionKey, settings: CipherSettings = .engineDefault)
        throws
    {
        try export(to: destination, encryption: .key(key, settings: settings))
    }

    /// Writes a **plaintext, unencrypted** copy of the database: anyone who can read the file can read the data.
    ///
    /// The name is loud on purpose: this is the only way SQLCipherKit produces plaintext from an encrypted database.
    /// Same guarantees as ``exportEncrypted(to:key:settings:)`` (temporary name, verification, `user_version`,
    /// `application_id` and journal mode carried, mode 0600).
    ///
    /// - Warning: The copy is not encrypted. Delete it as soon as it has served its purpose.
    public func exportDecryptedPlaintextCopy(to destination: String) throws {
        try export(to: destination, encryption: .none)
    }

    private func export(to destination: String, encryption target: Encryption) throws {
        let sqliteConnection = try checkedConnection()
        guard !isInsideTransaction else {
            throw DatabaseError(
                kind: .invalidState, code: DatabaseError.SQLITE_MISUSE,
                message: "export cannot run inside a transaction; commit or roll back first")
        }
        try Self.checkDestination(destination)
        if !SQLCipher.supports(.version4Format) {
            // SQLCipher 3.4.1's sqlcipher_export clears the trace callback but not its mask, and the next traced
            // statement calls a NULL function pointer (measured: SIGSEGV). Remove any trace first.
            sqlite3_trace_v2(sqliteConnection, 0, nil, nil)
        }

        let temporaryPath = destination + ".sqlcipherkit-tmp-" + randomSuffix()
        FileCreation.createPrivateFileIfMissing(atPath: temporaryPath)
        var attached = false
        do {
            let userVersion = try scalar("PRAGMA main.user_version", as: Int64.self) ?? 0
            let applicationID = try scalar("PRAGMA main.application_id", as: Int64.self) ?? 0
            let journalMode = try pragmaText("main.journal_mode") ?? "delete"
            let schemaCount = try scalar("SELECT count(*) FROM main.sqlite_master", as: Int.self) ?? 0

            try attach(path: temporaryPath, as: "sqlcipherkit_export", key: target.key)
            attached = true
            if let key = target.key {
                try applyCipherSettings(target.settings, key: key, schema: "sqlcipherkit_export")
            }
            _ = try scalar("SELECT sqlcipher_export('sqlcipherkit_export')", as: DatabaseValue.self)
            // Integers only: header fields, never key material.
            try execute("PRAGMA sqlcipherkit_export.user_version = \(userVersion)")
            try execute("PRAGMA sqlcipherkit_export.application_id = \(applicationID)")
            try execute("DETACH DATABASE sqlcipherkit_export")
            attached = false

            try Self.verifyCopy(
                at: temporaryPath, encryption: target, userVersion: userVersion, applicationID: applicationID,
                journalMode: journalMode, schemaCount: schemaCount)
            try syncToDisk(atPath: temporaryPath)
            try atomicRename(from: temporaryPath, to: destination)
        } catch {
            if attached {
                try? execute("DETACH DATABASE sqlcipherkit_export")
            }
            removeDatabaseFiles(atPath: temporaryPath)
            throw error
        }
    }

    /// Attaches a database with an explicit key, bound as a parameter (never spliced into SQL). `nil` attaches a
    /// plaintext database (`KEY ''`).
    ///
    /// A raw key is bound as its `x'…'` text (bound as a blob, SQLCipher would take it as a passphrase); a
    /// passphrase as a blob, so any byte, NUL included, counts.
    func attach(path: String, as schema: String, key: EncryptionKey?) throws {
        let statement = try prepare("ATTACH DATABASE ? AS \(Self.quoteIdentifier(schema)) KEY ?")
        try statement.bind(path, at: 1)
        let code: CInt
        if let key {
            code = key.material.withUnsafeBytes { bytes in
                if key.kind == .passphrase {
                    return DatabaseValue.bindBlob(bytes, to: statement.sqliteStatement, at: 2)
                }
                return sqlite3_bind_text(
                    statement.sqliteStatement, 2, bytes.baseAddress!.assumingMemoryBound(to: CChar.self),
                    CInt(bytes.count), CSQLCipher_transient())
            }
        } else {
            code = sqlite3_bind_text(statement.sqliteStatement, 2, "", 0, CSQLCipher_transient())
        }
        guard code == SQLITE_OK else { throw statement.error(code: code) }
        defer { try? statement.clearBindings() }
        try statement.runToCompletion()
    }

    static func checkDestination(_ destination: String) throws {
        if let size = regularFileSize(atPath: destination), size > 0 {
            throw DatabaseError(
                kind: .fileSystem, code: DatabaseError.SQLITE_CANTOPEN,
                message: "the destination \(destination) exists and is not empty; nothing was written")
        }
        let folder = parentFolder(of: destination)
        guard isWritableFolder(folder) else {
            throw DatabaseError(
                kind: .fileSystem, code: DatabaseError.SQLITE_CANTOPEN,
                message: "the destination folder \(folder) does not exist or is not writable; nothing was written")
        }
    }

    /// Opens a fresh copy with its key and checks it against what the source had.
    static func verifyCopy(
        at path: String, encryption: Encryption, userVersion: Int64, applicationID: Int64, journalMode: String,
        schemaCount: Int
    ) throws {
        func fail(_ message: String) -> DatabaseError {
            DatabaseError(
                kind: .verificationFailed, code: DatabaseError.SQLITE_CORRUPT,
                message: "the copy did not verify: \(message); it was removed")
        }
        let copy = try Connection(path: path, encryption: encryption)
        defer { copy.close() }
        try copy.quickCheck()
        guard try copy.scalar("SELECT count(*) FROM sqlite_master", as: Int.self) == schemaCount else {
            throw fail("it has another number of schema objects than the source")
        }
        guard try copy.scalar("PRAGMA user_version", as: Int64.self) == userVersion,
              try copy.scalar("PRAGMA application_id", as: Int64.self) == applicationID
        else {
            throw fail("user_version or application_id differ from the source")
        }
        if journalMode.caseInsensitiveEquals("wal") {
            guard try copy.pragmaText("journal_mode = WAL")?.caseInsensitiveEquals("wal") == true else {
                throw fail("WAL mode could not be set")
            }
        }
        if encryption.key != nil && (encryption.settings.plaintextHeaderSize ?? 0) == 0 {
            guard readFilePrefix(atPath: path, count: 16) != sqliteHeaderMagic else {
                throw fail("its header is plaintext although it should be encrypted")
            }
        }
    }
}
