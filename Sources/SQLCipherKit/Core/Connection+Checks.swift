import CSQLCipher

// Checks and reads every layer needs on an open connection: the open path verifies keys with them, maintenance and
// rotation verify their results with them.
extension Connection {
    /// `PRAGMA quick_check`: reads (and so decrypts and authenticates) every page.
    ///
    /// - Throws: ``DatabaseError/verificationFailed`` with SQLite's report when the result is not `ok`.
    public func quickCheck() throws {
        let report = try quickCheckProblems()
        guard report.isEmpty else {
            throw DatabaseError.checkFailed("PRAGMA quick_check failed: " + report.prefix(5).joined(separator: "; "))
        }
    }

    /// `PRAGMA quick_check`'s report: empty when it answers `ok`, SQLite's rows otherwise. The one reader of the
    /// PRAGMA: ``quickCheck()``, copy verification and the integrity report go through it.
    func quickCheckProblems() throws -> [String] {
        let rows = try all("PRAGMA quick_check", as: String.self)
        return rows == ["ok"] ? [] : rows
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)`, which must complete (no reader in the way).
    func checkpointTruncate() throws {
        let isBusy = try first("PRAGMA wal_checkpoint(TRUNCATE)") { row in try row[0] as Int }
        guard isBusy == 0 else {
            throw DatabaseError.inUse("the WAL checkpoint could not complete: another connection is reading the database")
        }
    }

    /// `wal_checkpoint(TRUNCATE)` without waiting for readers: fails at once with `SQLITE_BUSY` (kind
    /// ``DatabaseError/invalidState``) when another connection or process is reading, instead of holding this
    /// connection for the busy timeout. The busy timeout is put back afterwards.
    package func checkpointTruncateWithoutWaiting() throws {
        try setBusyTimeout(.zero)
        defer { try? setBusyTimeout(options.busyTimeout ?? .zero) }
        try checkpointTruncate()
    }

    /// The database salt: the 16 bytes that, with the key, derive the encryption key (`nil` for a plaintext or
    /// still empty database). Not secret. For a database with a plaintext header it is not stored in the file, and
    /// must be kept and given at every open. A new database gets its salt with its first write.
    public var cipherSalt: [UInt8]? {
        get throws {
            guard isEncrypted else { return nil }
            if SQLCipher.supports(.plaintextHeader) {
                // A new, empty database has no salt until its first write.
                guard (regularFileSize(atPath: filePath) ?? 0) > 0 else { return nil }
                guard let hex = try pragmaText("cipher_salt"), hex.count == 32 else { return nil }
                return Hex.bytes(hex)
            }
            guard (regularFileSize(atPath: filePath) ?? 0) >= 16 else { return nil }
            // Through SQLite's own file handle: opening and closing another descriptor of the file would drop every
            // POSIX lock this process holds on it (a replicator's read transaction, a pool's readers).
            let bytes = try readMainFile(count: 16, at: 0)
            return bytes.count == 16 ? bytes : nil
        }
    }
}

extension Connection {
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
}
