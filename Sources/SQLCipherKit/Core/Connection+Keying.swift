import CSQLCipher

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
}
