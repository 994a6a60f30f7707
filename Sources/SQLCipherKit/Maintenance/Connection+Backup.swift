import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How far an online backup has come: pages copied so far and the source's page count at that moment.
public struct BackupProgress: Sendable, Hashable, CustomStringConvertible {
    /// Pages copied so far.
    public let pagesCopied: Int
    /// The number of pages in the source (it can change while the source is written to).
    public let pageCount: Int
    /// How many times the copy started again from the first page because another connection changed the source
    /// (only in rollback-journal mode; a WAL database is copied from one snapshot and never restarts).
    public let restartCount: Int

    /// Creates a progress value.
    public init(pagesCopied: Int, pageCount: Int, restartCount: Int = 0) {
        self.pagesCopied = pagesCopied
        self.pageCount = pageCount
        self.restartCount = restartCount
    }

    /// The completed fraction, from 0 to 1.
    public var fractionCompleted: Double {
        pageCount == 0 ? 1 : Double(pagesCopied) / Double(pageCount)
    }

    /// `pagesCopied/pageCount`, and the restarts when there were any.
    public var description: String {
        "\(pagesCopied)/\(pageCount) pages" + (restartCount > 0 ? " (restarted \(restartCount)×: the source changed)" : "")
    }
}

extension Connection {
    /// Backs the database up into a file while other connections keep reading and writing it, through SQLite's
    /// online backup API.
    ///
    /// ```swift
    /// try db.backup(toPath: "/backups/notes.db", encryption: .key(backupKey)) { progress in
    ///     print(progress)                       // throw to cancel
    /// }
    /// ```
    ///
    /// SQLCipher's backup copies decrypted pages and re-encrypts them with the destination's key, which may differ
    /// from the source's. It silently writes a corrupt or plaintext copy, or crashes, when the two sides' page layout
    /// differs (Docs/EngineNotes.md#backup-api), so before the copy starts this method checks that:
    /// - the destination is keyed when the source is (a plaintext copy of an encrypted database is made only by
    ///   ``exportDecryptedPlaintextCopy(to:)``), and plaintext when the source is;
    /// - page size, HMAC use and algorithm, and plaintext header size are equal on both sides.
    ///
    /// The copy is written under a temporary name beside the destination (mode 0600), then reopened with its key and
    /// verified (schema read, `PRAGMA quick_check`, `PRAGMA cipher_integrity_check` on SQLCipher 4.2+, first bytes not
    /// plaintext), flushed to disk, and renamed over the destination: a crash or a failure never leaves a partial
    /// file under the final name, and an existing backup is replaced only by a verified one.
    ///
    /// The copy is one consistent snapshot, and it finishes under constant writes from other connections: a WAL
    /// database is copied inside one read transaction (writers go on; their changes are not in the copy); in
    /// rollback-journal mode, where a reader would block writers, the copy goes step by step and, when another
    /// connection changes the source, starts again — after ``maximumBackupRestarts`` restarts it copies the rest in
    /// one step under a shared lock (writers wait for it, within their busy timeout). ``BackupProgress/restartCount``
    /// says when that happened.
    ///
    /// The destination is written through the library's one replacement path: a symlink is followed, a destination
    /// that is the source itself is refused, an existing backup keeps its owner, group and mode, and a temporary file
    /// left by a killed run is removed by the next.
    ///
    /// - Parameters:
    ///   - destination: The backup file; replaced if it exists.
    ///   - encryption: The destination's key and settings. ``backup(toPath:pagesPerStep:progress:)`` uses this
    ///     connection's own.
    ///   - pagesPerStep: Pages copied per step; between steps other connections may write. At least 1.
    ///   - progress: Called after every step; throw from it to cancel (the error is rethrown, nothing is left).
    /// - Throws: ``DatabaseError/invalidArgument`` for mismatched settings or a plaintext/encrypted mix;
    ///   ``DatabaseError/fileSystem`` for a missing or read-only folder, or a destination that is the source;
    ///   ``DatabaseError/verificationFailed``; SQLite errors such as `SQLITE_FULL`.
    public func backup(
        toPath destination: String, encryption: Encryption, pagesPerStep: Int = 256,
        progress: ((BackupProgress) throws -> Void)? = nil
    ) throws {
        _ = try checkedConnection()
        let replacement = try AtomicReplacement(
            destination: destination, source: filePath, policy: .replaceExisting, operation: "backup")
        do {
            let pageCount = try backUp(
                intoNewFile: replacement.temporaryPath, encryption: encryption, pagesPerStep: pagesPerStep,
                progress: progress)
            try replacement.commit { copyPath in
                try Self.verifyCopy(at: copyPath, encryption: encryption, expected: nil, pageCount: pageCount)
            }
        } catch {
            replacement.abandon()
            options.logger?.error("backup failed", metadata: ["path": "\(path)", "destination": "\(destination)",
                                                              "error": "\(error)"])
            throw error
        }
        options.logger?.info("backed up", metadata: ["path": "\(path)", "destination": "\(replacement.destination)"])
    }

    /// Copies the pages into a new (empty) file keyed with `target`; returns the copy's page count.
    func backUp(
        intoNewFile path: String, encryption target: Encryption, pagesPerStep: Int,
        progress: ((BackupProgress) throws -> Void)?
    ) throws -> Int {
        let copy = try Connection(path: path, encryption: target, options: OpenOptions(mode: .readWrite))
        defer { copy.close() }
        try copyPages(to: copy, pagesPerStep: pagesPerStep, progress: progress)
        return try copy.pageCount()
    }

    /// Backs the database up into a file with this connection's own key and settings; see
    /// ``backup(toPath:encryption:pagesPerStep:progress:)``.
    public func backup(
        toPath destination: String, pagesPerStep: Int = 256, progress: ((BackupProgress) throws -> Void)? = nil
    ) throws {
        try backup(toPath: destination, encryption: encryption, pagesPerStep: pagesPerStep, progress: progress)
    }

    /// Backs the database up into another open connection (a file or an in-memory database), replacing its content.
    ///
    /// The same checks as ``backup(toPath:encryption:pagesPerStep:progress:)`` run before the copy; afterwards the
    /// destination is checked with `PRAGMA quick_check`. An encrypted file can be loaded into a keyed in-memory
    /// database this way, for a read-only job that should not touch the disk.
    public func backup(
        to destination: Connection, pagesPerStep: Int = 256, progress: ((BackupProgress) throws -> Void)? = nil
    ) throws {
        try copyPages(to: destination, pagesPerStep: pagesPerStep, progress: progress)
        try destination.quickCheck()
    }

    /// Replaces this database's content with a backup's, through the online backup API. This connection keeps its
    /// own key: the pages are re-encrypted with it.
    ///
    /// The backup is opened read-only with its own key and verified first; the same settings checks as for
    /// ``backup(toPath:encryption:pagesPerStep:progress:)`` apply; afterwards this database is checked with
    /// `PRAGMA quick_check`. Other connections to this database see the restored content at their next transaction.
    ///
    /// - Parameters:
    ///   - source: The backup file.
    ///   - encryption: The backup's key and settings.
    ///   - pagesPerStep: Pages copied per step. At least 1.
    ///   - progress: Called after every step; throw from it to cancel (the error is rethrown).
    public func restore(
        fromPath source: String, encryption: Encryption, pagesPerStep: Int = 256,
        progress: ((BackupProgress) throws -> Void)? = nil
    ) throws {
        guard regularFileSize(atPath: source) != nil else {
            throw DatabaseError(
                .fileSystem,
                "the backup \(source) does not exist; nothing was changed")
        }
        let backup = try Connection(
            path: source, encryption: encryption, options: OpenOptions(mode: .readOnly))
        defer { backup.close() }
        try backup.quickCheck()
        try backup.copyPages(to: self, pagesPerStep: pagesPerStep, progress: progress)
        try quickCheck()
        options.logger?.info("restored", metadata: ["path": "\(path)", "source": "\(source)"])
    }

    /// Restores from a backup made with this connection's own key and settings; see
    /// ``restore(fromPath:encryption:pagesPerStep:progress:)``.
    public func restore(
        fromPath source: String, pagesPerStep: Int = 256, progress: ((BackupProgress) throws -> Void)? = nil
    ) throws {
        try restore(fromPath: source, encryption: encryption, pagesPerStep: pagesPerStep, progress: progress)
    }

    // MARK: - The copy

    /// Checks both sides, then runs `sqlite3_backup_*` from this connection's main database into `destination`'s.
    func copyPages(
        to destination: Connection, pagesPerStep: Int, progress: ((BackupProgress) throws -> Void)?
    ) throws {
        guard pagesPerStep >= 1 else {
            throw DatabaseError(
                .invalidArgument,
                "pagesPerStep must be at least 1, not \(pagesPerStep)")
        }
        let sourceConnection = try checkedConnection()
        let destinationConnection = try destination.checkedConnection()
        try checkBackupCompatibility(with: destination)
        guard !destination.isInsideTransaction else {
            throw DatabaseError(
                .invalidState,
                "the backup destination is inside a transaction")
        }
        destination.statementCache.removeAll()

        // A WAL source is read from one snapshot: a read transaction held across every step, so the copy never
        // restarts however much other connections write (and does not block them).
        let isWAL = try pragmaText("journal_mode")?.caseInsensitiveEquals("wal") == true
        let holdsSnapshot = isWAL && !isInsideTransaction
        if holdsSnapshot {
            try execute("BEGIN DEFERRED")
            _ = try scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
        }
        defer {
            if holdsSnapshot { try? execute("COMMIT") }
        }

        guard let backup = sqlite3_backup_init(destinationConnection, "main", sourceConnection, "main") else {
            throw DatabaseError.fromSQLite(code: sqlite3_errcode(destinationConnection), connection: destinationConnection)
        }
        var finished = false
        defer {
            if !finished { sqlite3_backup_finish(backup) }
        }
        let busyLimit = options.busyTimeout ?? .zero
        var busySince: ContinuousClock.Instant?
        var restartCount = 0
        var lastCopied = 0
        var pagesThisStep = CInt(clamping: pagesPerStep)
        while true {
            let code = sqlite3_backup_step(backup, pagesThisStep)
            switch code {
            case SQLITE_OK, SQLITE_DONE:
                busySince = nil
                let pageCount = Int(sqlite3_backup_pagecount(backup))
                let copied = pageCount - Int(sqlite3_backup_remaining(backup))
                if code == SQLITE_OK && copied <= lastCopied {
                    // Another connection changed the source: the engine starts again from page 1. A step that
                    // does not finish always copies `pagesThisStep` pages, so a count that did not grow is a
                    // restart too (a write after every step lands on the same count each time). Bounded: past
                    // the limit, the rest is copied in one step, under one shared lock.
                    restartCount += 1
                    options.logger?.notice("backup restarted: the source changed", metadata: [
                        "path": "\(path)", "restarts": "\(restartCount)",
                    ])
                    if restartCount >= Self.maximumBackupRestarts { pagesThisStep = -1 }
                }
                lastCopied = copied
                try progress?(BackupProgress(pagesCopied: copied, pageCount: pageCount, restartCount: restartCount))
                if code == SQLITE_DONE {
                    finished = true
                    let finishCode = sqlite3_backup_finish(backup)
                    guard finishCode == SQLITE_OK else {
                        throw DatabaseError.fromSQLite(code: finishCode, connection: destinationConnection)
                    }
                    return
                }
            case SQLITE_BUSY, SQLITE_LOCKED:
                // Another connection holds a lock: retry within this connection's busy timeout (SQLite does not
                // apply the timeout to backup steps).
                let now = ContinuousClock.now
                if let since = busySince, now - since > busyLimit {
                    finished = true
                    sqlite3_backup_finish(backup)
                    throw DatabaseError(
                        kind: .busy, code: ResultCode(rawValue: code),
                        message: "the backup could not get a lock within the busy timeout (\(busyLimit))")
                }
                busySince = busySince ?? now
                usleep(10_000)
            default:
                finished = true
                sqlite3_backup_finish(backup)
                throw DatabaseError.fromSQLite(code: code, connection: destinationConnection)
            }
        }
    }

    /// After this many restarts caused by other connections' writes (rollback-journal mode), a backup copies the
    /// rest in one step under one shared lock, so it finishes.
    public static let maximumBackupRestarts = 3

    /// The cipher layout of a connection's main database: what must be equal on both sides of a backup (the KDF
    /// settings are not part of it: pages are copied decrypted and encrypted again with the destination's key).
    struct CipherLayout: Equatable {
        var isEncrypted: Bool
        var pageSize: Int?
        var usesHMAC: Bool?
        var hmacAlgorithm: String?
        var plaintextHeaderSize: Int?
    }

    func cipherLayout() throws -> CipherLayout {
        guard let cipher = try DatabaseFileInspection.CipherDetails(readingFrom: self) else {
            return CipherLayout(isEncrypted: false, pageSize: try pragmaInteger("page_size"))
        }
        return CipherLayout(
            isEncrypted: true, pageSize: cipher.pageSize, usesHMAC: cipher.usesHMAC,
            hmacAlgorithm: cipher.hmacAlgorithm, plaintextHeaderSize: cipher.plaintextHeaderSize)
    }

    private func checkBackupCompatibility(with destination: Connection) throws {
        let source = try cipherLayout()
        let target = try destination.cipherLayout()
        func refuse(_ message: String, remedy: DatabaseError.Remedy) -> DatabaseError {
            DatabaseError(.invalidArgument, "backup refused: \(message); nothing was copied", remedy: remedy)
        }
        if source.isEncrypted && !target.isEncrypted {
            throw refuse(
                "the source is encrypted and the destination is not", remedy: .decryptIntoNewFile)
        }
        if !source.isEncrypted && target.isEncrypted {
            throw refuse(
                "the source is plaintext and the destination encrypted (the engine would write a corrupt file)",
                remedy: .encryptIntoNewFile)
        }
        // Between plaintext databases SQLite adapts the destination's page size itself.
        guard source.isEncrypted else { return }
        // A page-size mismatch makes the engine write an unreadable file or crash (Docs/EngineNotes.md#backup-api).
        // Each difference is shown as the PRAGMA reads (cipher_use_hmac is 1 or 0).
        func field(_ name: String, _ value: (CipherLayout) -> String?) -> (String, String?, String?) {
            (name, value(source), value(target))
        }
        let differences = [
            field("page size") { $0.pageSize.map(String.init) },
            field("HMAC use") { $0.usesHMAC.map { $0 ? "1" : "0" } },
            field("HMAC algorithm") { $0.hmacAlgorithm },
            field("plaintext header size") { $0.plaintextHeaderSize.map(String.init) },
        ].filter { $0.1 != $0.2 }
        if let difference = differences.first {
            throw refuse(
                "the \(difference.0) differs (source \(difference.1 ?? "none"), destination \(difference.2 ?? "none"))",
                remedy: .matchSourceCipherSettings)
        }
    }
}
