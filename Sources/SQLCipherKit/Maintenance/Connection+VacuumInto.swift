import CSQLCipher

extension Connection {
    /// Writes a vacuumed copy of the database into a new file (`VACUUM INTO`), encrypted with this connection's key
    /// and settings, then verifies it (opened with that key, `quick_check`, header not plaintext) before renaming it
    /// into place. The copy is written under a temporary name beside the destination, mode 0600.
    ///
    /// The engine's `VACUUM INTO` gives the copy the engine's default cipher settings, not the source's: for a
    /// database with other settings (SQLCipher 3 compatibility, another page size, no HMAC, a plaintext header)
    /// the copy is written with `sqlcipher_export` instead, as compact, with this connection's key and settings
    /// (see ``exportEncrypted(to:key:settings:)``). `VACUUM INTO` in SQL is refused: this is the way to make the copy.
    ///
    /// `VACUUM INTO` exists from SQLite 3.27: SQLCipher 4 has it, SQLCipher 3.4.1 (SQLite 3.15.2) does not, and gets
    /// ``DatabaseError/unsupportedByEngine``. Use ``backup(toPath:pagesPerStep:progress:)`` or
    /// ``exportEncrypted(to:key:settings:)`` there.
    ///
    /// - Throws: ``DatabaseError/unsupportedByEngine``; ``DatabaseError/fileSystem`` when the destination exists;
    ///   ``DatabaseError/verificationFailed`` when the copy is not what it should be (it is removed).
    public func vacuum(into destination: String) throws {
        guard SQLCipher.sqliteVersionNumber >= 3_027_000 else {
            throw DatabaseError(
                .unsupportedByEngine,
                "VACUUM INTO needs SQLite 3.27 or later; the linked engine is SQLite \(SQLCipher.sqliteVersion)"
                    + " (SQLCipher \(SQLCipher.version))", remedy: .copyWithBackup)
        }
        if encryption.key != nil && !encryption.settings.isEngineDefault {
            try export(to: destination, encryption: encryption)
            return
        }
        let replacement = try AtomicReplacement(
            destination: destination, source: filePath, policy: .createNew, operation: "VACUUM INTO")
        do {
            // VACUUM INTO cannot run inside a transaction: the summary is read just before it (no row counts, which
            // other connections could change in between).
            let source = try summary(countingRows: false)
            // The guard refuses VACUUM INTO in SQL; this one writes into the private temporary file. Not from the
            // statement cache: a cached statement would skip the guard when SQL of the caller's has the same text.
            let statement = try withLibraryStatements { try prepare("VACUUM INTO ?") }
            try statement.bind(replacement.temporaryPath, at: 1)
            try withLibraryStatements { try statement.runToCompletion() }
            try replacement.commit { copyPath in
                // VACUUM INTO writes a rollback-journal file whatever the source's mode.
                var expected = source
                expected.journalMode = "delete"
                try Self.verifyCopy(at: copyPath, encryption: encryption, expected: expected)
            }
        } catch {
            replacement.abandon()
            throw error
        }
    }
}
