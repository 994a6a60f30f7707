import CSQLCipher

/// How the library's read-only checks open a database (the key check before a read-write open, the "which key opens
/// it" probe, inspection, verification): so that they read it exactly as SQLite will after recovery, and write,
/// create and delete nothing.
///
/// A plain read-only connection cannot do that: a hot journal stops it ("attempt to write a readonly database",
/// whatever the key), and on a WAL database it creates a `-wal` and a `-shm` it leaves behind. So, when no other
/// connection can be using a write-ahead log, the check reads through a ``ReadOnlyOverlay``: a hot journal is rolled
/// back in memory, the WAL index lives in memory, and the database holds one real SHARED lock for the whole check
/// (no writer and no other process's rollback can change the file under it).
///
/// Another connection may be using the WAL (a `-wal` exists and a connection of this process, or on Linux another
/// process, has the database open; without `/proc`, a `-shm` exists): its WAL index is in the shared `-shm`, which
/// the overlay does not read. Then the check opens read-only as before, sharing the live WAL index.
final class ReadOnlyCheck {
    /// The database file.
    let path: String

    /// Whether the check reads through the overlay (decided before anything is opened: a check's own connection
    /// would count as a holder).
    let usesOverlay: Bool

    /// Other processes seen holding the database or its WAL (Linux only; empty elsewhere).
    let otherProcessIDs: [Int32]

    /// Whether SQLite rolled a hot journal back (in memory) during the last run: the file has an unfinished
    /// transaction that the next read-write open will roll back.
    private(set) var rolledBackJournal = false

    /// The most memory the overlay used for restored pages during the last run.
    private(set) var overlayMemoryHighWater = 0

    /// Whether a wrong key's error names the other SQLCipher format when the file is in it (see
    /// ``OpenOptions/namesOtherFormat``); the "which key opens it" probes turn it off.
    var namesOtherFormat = true

    init(path: String) {
        self.path = path
        var holders: [Int32] = []
        if regularFileSize(atPath: path + "-wal") == nil {
            // No WAL: rollback-journal mode, where the overlay's real SHARED lock orders the check with every writer.
            usesOverlay = true
        } else if OpenFiles.openCount(path: path) > 0 {
            usesOverlay = false
        } else if OtherProcesses.canFindHolders {
            holders = OtherProcesses.holding(paths: [path, path + "-wal", path + "-shm"])
            usesOverlay = holders.isEmpty
        } else {
            // Holders cannot be seen: every connection using a WAL has the -shm open, so without one nobody does.
            usesOverlay = regularFileSize(atPath: path + "-shm") == nil
        }
        otherProcessIDs = holders
    }

    /// Opens the database for the check, runs `body`, and closes it.
    ///
    /// The connection is read-only for SQL (`PRAGMA query_only`, ``Connection/isReadOnly``) and closed when `body`
    /// returns: it must not escape.
    ///
    /// - Throws: What opening throws (``DatabaseError/wrongKey``, …), what `body` throws, `SQLITE_NOMEM` (with a
    ///   message saying so) when a hot journal's rollback does not fit in memory.
    func run<T>(encryption: Encryption, busyTimeout: Duration?, _ body: (Connection) throws -> T) throws -> T {
        rolledBackJournal = false
        overlayMemoryHighWater = 0
        guard usesOverlay else {
            var options = OpenOptions(mode: .readOnly, busyTimeout: busyTimeout, statementCacheCapacity: 0)
            options.logger = nil
            options.namesOtherFormat = namesOtherFormat
            let connection = try Connection(path: path, encryption: encryption, options: options)
            defer { connection.close() }
            return try body(connection)
        }
        let overlay = try ReadOnlyOverlay()
        defer {
            rolledBackJournal = overlay.finishedJournal
            overlayMemoryHighWater = overlay.memoryHighWater
            overlay.destroy()
        }
        // Read-write for SQLite, so that it rolls a hot journal back instead of refusing to read; the overlay keeps
        // every write in memory, and query_only refuses SQL that would write.
        var options = OpenOptions(mode: .readWrite, busyTimeout: busyTimeout, statementCacheCapacity: 0)
        options.logger = nil
        options.skipsKeyProbe = true
        options.namesOtherFormat = namesOtherFormat
        options.vfsName = overlay.vfsName
        do {
            let connection = try Connection(path: path, encryption: encryption, options: options)
            defer { connection.close() }
            try connection.execute("PRAGMA query_only = 1")
            return try body(connection)
        } catch let error as DatabaseError where error.resultCode == DatabaseError.SQLITE_NOMEM {
            let journalSize = regularFileSize(atPath: path + "-journal").map { " (the journal is \($0) bytes)" } ?? ""
            throw DatabaseError(
                kind: error.kind, code: error.extendedResultCode,
                message: "out of memory while reading \(path) as SQLite will after recovery: a hot journal is rolled"
                    + " back in memory for the check, which needs about the journal's size\(journalSize);"
                    + " nothing was changed")
        }
    }
}

extension Connection {
    /// The first bytes of the main database file as this connection's pager reads them (through its VFS: after a
    /// rollback in an overlay, the restored bytes).
    func mainFilePrefix(count: Int) throws -> [UInt8] {
        let sqliteConnection = try checkedConnection()
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(sqliteConnection, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
              let file, let read = file.pointee.pMethods?.pointee.xRead
        else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let code = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, CInt(count), 0) }
        return code == SQLITE_OK ? bytes : []
    }
}
