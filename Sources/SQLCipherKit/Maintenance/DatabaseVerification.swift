/// Whether a key opens a database and every page and every committed transaction of it is intact, read as SQLite
/// will read it after recovery, with nothing written: the library behind `sqlcipherkit verify`.
///
/// ```swift
/// let verification = try DatabaseVerification.verify(path: "notes.db", encryption: .key(key))
/// print(verification.isIntact, verification.hasHotJournal)
/// ```
///
/// The database is read through a read-only overlay when no other connection can be using its write-ahead log
/// (Docs/Security.md, "Read-only checks"): a hot journal left by a crash is rolled back in memory (the file and the
/// journal stay as they are; the next read-write open rolls it back on disk), no `-wal` or `-shm` is created, and no
/// extra disk space is needed. Then every page is checked (``Connection/checkIntegrity()``) and the `-wal`, if there
/// is one, frame by frame (``WriteAheadLogReport``): a frame that fails its checksum makes SQLite drop it and every
/// later commit without an error.
public struct DatabaseVerification: Sendable, Hashable {
    /// The database file.
    public let path: String
    /// The page checks, on the database as SQLite reads it after recovery.
    public let integrity: IntegrityReport
    /// `true` when the database has a hot journal: a transaction did not finish (a crash, a killed process). The
    /// checks read the database as the rollback will leave it; the next read-write open rolls it back on disk.
    public let hasHotJournal: Bool
    /// The `-wal` checked frame by frame; `nil` when there is none, or when it is in use (``isWriteAheadLogInUse``).
    public let writeAheadLog: WriteAheadLogReport?
    /// `true` when a `-wal` exists and another connection (of this process or, on Linux, of another one) has the
    /// database open: its WAL index is shared and changes as it writes, so the pages are read through it and the
    /// file is not checked frame by frame.
    public let isWriteAheadLogInUse: Bool

    /// `true` when every page is intact and the WAL (when checked) loses no commit.
    public var isIntact: Bool {
        integrity.isIntact && (writeAheadLog?.isIntact ?? true)
    }

    /// Opens the database with `encryption`, checks every page and the write-ahead log, and closes it.
    ///
    /// - Parameters:
    ///   - path: The database file; it must exist (nothing is created).
    ///   - encryption: The key and cipher settings.
    ///   - busyTimeout: How long to wait for another connection's lock.
    /// - Returns: The report; ``isIntact`` says whether the database passed.
    /// - Throws: ``DatabaseError/wrongKey`` (or ``DatabaseError/notEncrypted``, ``DatabaseError/notADatabase``, …)
    ///   when the key does not open it, ``DatabaseError/damaged`` when page 1 cannot be read, `SQLITE_BUSY` when
    ///   another connection's lock outlasts `busyTimeout`, `SQLITE_NOMEM` when a hot journal's rollback does not fit
    ///   in memory.
    public static func verify(
        path: String, encryption: Encryption, busyTimeout: Duration = .seconds(2)
    ) throws -> DatabaseVerification {
        let check = ReadOnlyCheck(path: path)
        let integrity = try check.run(encryption: encryption, busyTimeout: busyTimeout) { connection in
            try connection.checkIntegrity()
        }
        let hasWAL = regularFileSize(atPath: path + "-wal") != nil
        let writeAheadLog = hasWAL && check.usesOverlay ? try WriteAheadLogReport.check(path: path + "-wal") : nil
        return DatabaseVerification(
            path: path, integrity: integrity, hasHotJournal: check.rolledBackJournal, writeAheadLog: writeAheadLog,
            isWriteAheadLogInUse: hasWAL && !check.usesOverlay)
    }
}
