import CSQLCipher

// On open, what an existing file is: its plaintext header checked before the engine reads it, and a first page
// that does not read turned into an error that names the cause.
extension Connection {
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

    /// Reads page 1 of an existing file and turns a failure into an error that says what the file is.
    ///
    /// With the right key, a damaged or truncated file reads as SQLITE_CORRUPT, a wrong key as SQLITE_NOTADB: the
    /// two are told apart, and a partial last page is damage (named with its page), not a key problem.
    func verifyExistingFile(size: Int, encryption: Encryption) throws {
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
}
