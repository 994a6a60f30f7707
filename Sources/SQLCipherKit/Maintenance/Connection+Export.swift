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
    /// - Warning: On SQLCipher 3, tracing is suspended during the export (that engine's export crashes the process
    ///   when tracing is on); a trace set with ``trace(includingBoundValues:_:)`` is restored afterwards, one installed
    ///   on the raw handle is not.
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

    func export(to destination: String, encryption target: Encryption) throws {
        _ = try checkedConnection()
        guard !isInsideTransaction else {
            throw DatabaseError(
                .invalidState,
                "export cannot run inside a transaction; commit or roll back first")
        }
        let replacement = try AtomicReplacement(
            destination: destination, source: filePath, policy: .createNew, operation: "export")
        do {
            let source = try export(intoNewFile: replacement.temporaryPath, encryption: target)
            try replacement.commit { copyPath in
                try Self.verifyExport(at: copyPath, encryption: target, source: source)
            }
        } catch {
            replacement.abandon()
            options.logger?.error("export failed", metadata: ["path": "\(path)", "destination": "\(destination)",
                                                              "error": "\(error)"])
            throw error
        }
        options.logger?.info("exported", metadata: [
            "path": "\(path)", "destination": "\(replacement.destination)", "encrypted": "\(target.key != nil)",
        ])
    }

    /// Exports the database into a new (empty) file with `sqlcipher_export`, carrying `user_version` and
    /// `application_id`; returns the source's summary, read in the same transaction as the copy.
    func export(intoNewFile path: String, encryption target: Encryption) throws -> DatabaseSummary {
        let sqliteConnection = try checkedConnection()
        if !SQLCipher.supports(.version4Format) {
            // SQLCipher 3.4.1's sqlcipher_export clears the trace callback but not its mask, and the next traced
            // statement calls a NULL function pointer (measured: SIGSEGV). Remove any trace first, and put the
            // connection's own trace back afterwards.
            sqlite3_trace_v2(sqliteConnection, 0, nil, nil)
        }
        defer { restoreTrace() }
        try attach(path: path, as: "sqlcipherkit_export", key: target.key)
        defer { try? execute("DETACH DATABASE sqlcipherkit_export") }
        if let key = target.key {
            try applyCipherSettings(target.settings, key: key, schema: "sqlcipherkit_export")
        }
        // One read transaction: the rows counted are the rows copied, whatever other connections write.
        try execute("BEGIN DEFERRED")
        do {
            let source = try summary(countingRows: true)
            _ = try scalar("SELECT sqlcipher_export('sqlcipherkit_export')", as: DatabaseValue.self)
            // Integers only: header fields, never key material.
            try execute("PRAGMA sqlcipherkit_export.user_version = \(source.userVersion)")
            try execute("PRAGMA sqlcipherkit_export.application_id = \(source.applicationID)")
            try execute("COMMIT")
            return source
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Gives an exported copy the source's WAL mode back (the engine's export drops it), then verifies it.
    static func verifyExport(at path: String, encryption: Encryption, source: DatabaseSummary) throws {
        if source.journalMode == "wal" {
            let copy = try Connection(path: path, encryption: encryption, options: OpenOptions(mode: .readWrite))
            defer { copy.close() }
            guard try copy.pragmaText("journal_mode = WAL")?.caseInsensitiveEquals("wal") == true else {
                throw DatabaseError(
                    .verificationFailed,
                    "the copy did not verify: WAL mode could not be set; it was removed")
            }
        }
        try verifyCopy(at: path, encryption: encryption, expected: source)
    }

    /// Attaches another database file to this connection under a schema name, with its own key (or explicitly
    /// none), so one statement can read and write both (`SELECT … FROM archive.note`).
    ///
    /// The key is bound as a parameter of `ATTACH … KEY ?`, never spliced into SQL. Without a KEY clause
    /// SQLCipher would reuse the main database's key — and SQLCipher 3 silently creates a *plaintext* file when the
    /// main key has not been used yet — so this method always gives one. The attached file is verified at once
    /// (a wrong key fails here, not at the first query). Cipher settings other than the engine's defaults can be
    /// given for a new file only: SQLCipher reads an existing file during ATTACH, before settings can be applied.
    ///
    /// - Parameters:
    ///   - path: The file to attach (created when missing, with mode 0600).
    ///   - schema: The schema name to use in SQL.
    ///   - encryption: Its key and settings, or ``Encryption/none`` for a plaintext file.
    /// - Throws: ``DatabaseError/wrongKey`` when the key does not open an existing file; a SQLite error otherwise.
    ///
    /// See [ATTACH DATABASE](https://www.sqlite.org/lang_attach.html).
    public func attach(_ path: String, as schema: String, encryption: Encryption) throws {
        if !encryption.settings.isEngineDefault, (regularFileSize(atPath: path) ?? 0) > 0 {
            // SQLCipher reads an existing file's first page during ATTACH, before per-schema settings can be set.
            throw DatabaseError(
                .invalidArgument,
                "an existing database with non-default cipher settings cannot be attached (SQLCipher reads"
                    + " it during ATTACH, before its settings can be applied); open it with its own Connection")
        }
        if EncryptionGuard.hasURIKeyParameter(path) {
            throw DatabaseError.notAuthorized(
                "not authorized: \(EncryptionGuard.uriKeyRefusal.message); nothing was created")
        }
        let isCreatedNow = FileCreation.createPrivateFileIfMissing(atPath: path)
        var isAttached = false
        do {
            // A wrong key for an existing file usually fails here already (SQLITE_NOTADB).
            try attach(path: path, as: schema, key: encryption.key)
            isAttached = true
            if let key = encryption.key {
                try applyCipherSettings(encryption.settings, key: key, schema: schema)
            }
            _ = try scalar("SELECT count(*) FROM \(Self.quoteIdentifier(schema)).sqlite_master", as: Int.self)
        } catch {
            if isAttached {
                try? detach(schema)
            }
            if isCreatedNow {
                FileCreation.removeIfEmpty(atPath: path)
            }
            if let error = error as? DatabaseError, error.resultCode == DatabaseError.SQLITE_NOTADB {
                throw DatabaseError(
                    kind: encryption.key == nil ? .missingKey : .wrongKey, code: error.extendedResultCode,
                    message: "the key does not open the attached database (path: \(path))", sql: error.sql)
            }
            throw error
        }
    }

    /// Detaches a database attached with ``attach(_:as:encryption:)``.
    public func detach(_ schema: String) throws {
        try execute("DETACH DATABASE \(Self.quoteIdentifier(schema))")
    }

    /// Attaches with an explicit key bound as a parameter. `nil` attaches a plaintext database (`KEY ''`).
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
        if key == nil {
            // Plaintext asked for explicitly (`.none`, the plaintext export): the guard lets this ATTACH through.
            try withPlaintextAttachmentAllowed { try statement.runToCompletion() }
        } else {
            try statement.runToCompletion()
        }
    }
}
