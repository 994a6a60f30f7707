import CSQLCipher

// On open, before a read-write handle exists: whether the `-wal` or `-journal` beside the file belongs to it.
extension Connection {
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
}
