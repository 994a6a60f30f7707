import CSQLCipher
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The backup benchmark: a large encrypted database copied into a new file through SQLite's online backup API, with
/// the C API and with SQLCipherKit.
///
/// `db.backup(toPath:)` does more than the bare C copy: it checks both sides' cipher layout, writes under a temporary
/// name, reopens the copy and runs `PRAGMA quick_check` (and `cipher_integrity_check` on SQLCipher 4.2+), fsyncs it
/// and renames it. So the raw side times its bare copy and then the same verification, phase by phase, and
/// SQLCipherKit's copy phase is timed to its last progress callback: the report compares copy with copy and whole
/// call with the same work done through the C API, besides the whole call with the bare copy.
enum BackupBenchmark {
    static let sourceTable = "backup_source"
    /// Random bytes per row: about 19 rows per 4096-byte page, so a 200 MB file holds about a million rows.
    static let payloadByteCount = 200
    static let rowsPerTransaction = 100_000

    // MARK: - Setup

    /// Creates an encrypted database of at least `megabyteCount` MB (10^6 bytes) at `path`, through the C API in
    /// transactions of 100,000 rows, without journal or fsync (setup is not timed; only the file matters).
    static func createSource(atPath path: String, rawKeyText: String, megabyteCount: Int) throws(BenchmarkError) {
        let setup = try RawConnection(path: path, rawKeyText: rawKeyText)
        try setup.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
        try setup.execute("CREATE TABLE \(sourceTable)(id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
        let insertSQL = "WITH RECURSIVE n(i) AS"
            + " (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rowsPerTransaction))"
            + " INSERT INTO \(sourceTable)(payload) SELECT randomblob(\(payloadByteCount)) FROM n"
        let leastByteCount = Int64(megabyteCount) * 1_000_000
        while try byteCount(of: setup) < leastByteCount {
            try setup.execute("BEGIN IMMEDIATE; \(insertSQL); COMMIT")
        }
    }

    /// The size of a connection's main database: page count × page size.
    static func byteCount(of raw: RawConnection) throws(BenchmarkError) -> Int64 {
        try raw.integer("PRAGMA page_count") * raw.integer("PRAGMA page_size")
    }

    // MARK: - Raw C API

    /// The phases of one raw backup, in seconds.
    struct RawPhases {
        /// `sqlite3_open_v2` of a new file, `sqlite3_key`, `sqlite3_backup_init`, `step(-1)`, `finish`, close.
        var copy = 0.0
        /// Reopening the copy with its key, then `PRAGMA quick_check`.
        var quickCheck = 0.0
        /// `PRAGMA cipher_integrity_check` on the reopened copy (0 on SQLCipher 3.x, which lacks it).
        var integrityCheck = 0.0
        /// fsync of the copy, rename to the final name, fsync of the folder.
        var syncAndRename = 0.0
    }

    /// Backs `source` up into `destination` with the C API, then verifies, flushes and renames the copy as
    /// `db.backup(toPath:)` does, timing each phase.
    static func rawBackup(
        from source: RawConnection, toPath destination: String, rawKeyText: String
    ) throws -> RawPhases {
        let temporaryPath = destination + ".tmp"
        var phases = RawPhases()
        phases.copy = try measureSeconds { try rawCopy(from: source, toPath: temporaryPath, rawKeyText: rawKeyText) }
        do {
            var copy: RawConnection?
            phases.quickCheck = try measureSeconds {
                copy = try RawConnection(path: temporaryPath, rawKeyText: rawKeyText)
                let report = try copy!.texts("PRAGMA quick_check")
                guard report == ["ok"] else { throw BenchmarkError.mismatch("raw copy: quick_check \(report)") }
            }
            if SQLCipher.supports(.cipherIntegrityCheck) {
                phases.integrityCheck = try measureSeconds {
                    let failures = try copy!.texts("PRAGMA cipher_integrity_check")
                    guard failures.isEmpty else {
                        throw BenchmarkError.mismatch("raw copy: cipher_integrity_check \(failures.prefix(3))")
                    }
                }
            }
        }
        phases.syncAndRename = try measureSeconds {
            try flushToDisk(atPath: temporaryPath)
            guard rename(temporaryPath, destination) == 0 else {
                throw BenchmarkError.system("cannot rename \(temporaryPath): \(String(cString: strerror(errno)))")
            }
            try flushToDisk(atPath: parentFolder(of: destination))
        }
        return phases
    }

    /// The bare copy: a new file opened and keyed, `sqlite3_backup_step(-1)`, closed.
    static func rawCopy(from source: RawConnection, toPath path: String, rawKeyText: String) throws(BenchmarkError) {
        var destination: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let openCode = sqlite3_open_v2(path, &destination, flags, nil)
        defer { sqlite3_close(destination) }
        guard openCode == SQLITE_OK, let destination else {
            throw .sqlite(operation: "sqlite3_open_v2 \(path)", code: openCode, message: "cannot open")
        }
        func failure(_ operation: String, _ code: Int32) -> BenchmarkError {
            .sqlite(operation: operation, code: code, message: String(cString: sqlite3_errmsg(destination)))
        }
        let keyCode = rawKeyText.withCString { sqlite3_key(destination, $0, Int32(rawKeyText.utf8.count)) }
        guard keyCode == SQLITE_OK else { throw failure("sqlite3_key", keyCode) }
        guard let backup = sqlite3_backup_init(destination, "main", source.sqliteConnection, "main") else {
            throw failure("sqlite3_backup_init", sqlite3_errcode(destination))
        }
        let stepCode = sqlite3_backup_step(backup, -1)
        let finishCode = sqlite3_backup_finish(backup)
        guard stepCode == SQLITE_DONE else { throw failure("sqlite3_backup_step", stepCode) }
        guard finishCode == SQLITE_OK else { throw failure("sqlite3_backup_finish", finishCode) }
    }

    // MARK: - SQLCipherKit

    /// `db.backup(toPath:)`; returns the whole call's seconds and the seconds to its last progress callback (the
    /// copy: the destination opened and checked, every page copied; before finish, verification, fsync, rename).
    static func wrapperBackup(_ db: Connection, toPath destination: String) throws -> (total: Double, copy: Double) {
        let clock = ContinuousClock()
        let start = clock.now
        var lastProgress = start
        try db.backup(toPath: destination) { _ in lastProgress = clock.now }
        let end = clock.now
        return (seconds(end - start), seconds(lastProgress - start))
    }

    /// `db.backup(to:)` into a new, already opened `Connection` (the open is not timed); returns the whole call's
    /// seconds (copy and `quick_check`) and the seconds to its last progress callback (the copy).
    static func wrapperBackup(
        _ db: Connection, toConnectionAtPath destination: String, rawKeyText: String
    ) throws -> (total: Double, copy: Double) {
        let copy = try Connection(path: destination, key: EncryptionKey(sqlcipherRawKeyText: rawKeyText))
        defer { copy.close() }
        let clock = ContinuousClock()
        let start = clock.now
        var lastProgress = start
        try db.backup(to: copy) { _ in lastProgress = clock.now }
        let end = clock.now
        return (seconds(end - start), seconds(lastProgress - start))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: - Files

    /// Checks that a copy has the source's size (a short copy would flatter its side), then removes it.
    static func checkAndRemoveCopy(atPath path: String, expectedByteCount: Int64, side: String) throws {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw BenchmarkError.system("\(side) left no copy at \(path)")
        }
        removeDatabaseFiles(atPath: path)
        guard Int64(status.st_size) == expectedByteCount else {
            throw BenchmarkError.mismatch("\(side) copy has \(status.st_size) bytes, the source \(expectedByteCount)")
        }
    }

    static func flushToDisk(atPath path: String) throws(BenchmarkError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .system("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw .system("cannot fsync \(path): \(String(cString: strerror(errno)))") }
    }

    static func parentFolder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// The timings of the backup benchmark, one value per timed iteration in every array.
struct BackupMeasurement {
    let sourceByteCount: Int64
    let pageCount: Int64
    let pageSize: Int64
    var raw: [BackupBenchmark.RawPhases] = []
    /// `db.backup(toPath:)`: whole call, and to the last progress callback.
    var wrapperToPath: [Double] = []
    var wrapperToPathCopy: [Double] = []
    /// `db.backup(to: Connection)`: whole call, and to the last progress callback.
    var wrapperToConnection: [Double] = []
    var wrapperToConnectionCopy: [Double] = []

    var rawCopy: [Double] { raw.map(\.copy) }
    var rawCopyAndQuickCheck: [Double] { raw.map { $0.copy + $0.quickCheck } }
    var rawFull: [Double] { raw.map { $0.copy + $0.quickCheck + $0.integrityCheck + $0.syncAndRename } }

    /// Decimal MB per second for a median time.
    func megabytesPerSecond(_ seconds: [Double]) -> Double {
        Double(sourceByteCount) / 1e6 / Measurement.median(seconds)
    }
}

/// Runs the backup benchmark in `directory` and prints its report.
func runBackupBenchmark(_ options: BenchmarkOptions, directory: String, rawKeyText: String) throws {
    let clock = ContinuousClock()
    let start = clock.now
    let sourcePath = directory + "/backup-source.sqlite"
    let rawDestination = directory + "/backup-raw.sqlite"
    let toPathDestination = directory + "/backup-kit-path.sqlite"
    let toConnectionDestination = directory + "/backup-kit-connection.sqlite"
    defer {
        for path in [sourcePath, rawDestination, rawDestination + ".tmp", toPathDestination, toConnectionDestination] {
            removeDatabaseFiles(atPath: path)
        }
    }

    try BackupBenchmark.createSource(
        atPath: sourcePath, rawKeyText: rawKeyText, megabyteCount: options.backupMegabyteCount)
    let setupSeconds = BackupBenchmark.seconds(clock.now - start)
    let raw = try RawConnection(path: sourcePath, rawKeyText: rawKeyText)
    let db = try Connection(path: sourcePath, key: EncryptionKey(sqlcipherRawKeyText: rawKeyText))
    defer { db.close() }
    var measurement = BackupMeasurement(
        sourceByteCount: try BackupBenchmark.byteCount(of: raw),
        pageCount: try raw.integer("PRAGMA page_count"), pageSize: try raw.integer("PRAGMA page_size"))
    let expected = measurement.sourceByteCount

    // Three contestants, their order rotated every iteration to spread drift and the page cache's state.
    let contestants: [(Bool) throws -> Void] = [
        { isTimed in
            let phases = try BackupBenchmark.rawBackup(from: raw, toPath: rawDestination, rawKeyText: rawKeyText)
            try BackupBenchmark.checkAndRemoveCopy(atPath: rawDestination, expectedByteCount: expected, side: "raw C")
            if isTimed { measurement.raw.append(phases) }
        },
        { isTimed in
            let (total, copy) = try BackupBenchmark.wrapperBackup(db, toPath: toPathDestination)
            try BackupBenchmark.checkAndRemoveCopy(
                atPath: toPathDestination, expectedByteCount: expected, side: "backup(toPath:)")
            if isTimed {
                measurement.wrapperToPath.append(total)
                measurement.wrapperToPathCopy.append(copy)
            }
        },
        { isTimed in
            let (total, copy) = try BackupBenchmark.wrapperBackup(
                db, toConnectionAtPath: toConnectionDestination, rawKeyText: rawKeyText)
            try BackupBenchmark.checkAndRemoveCopy(
                atPath: toConnectionDestination, expectedByteCount: expected, side: "backup(to:)")
            if isTimed {
                measurement.wrapperToConnection.append(total)
                measurement.wrapperToConnectionCopy.append(copy)
            }
        },
    ]
    let iterationCount = options.backupWarmUpCount + options.backupIterationCount
    for iteration in 0..<iterationCount {
        for index in contestants.indices {
            try contestants[(index + iteration) % contestants.count](iteration >= options.backupWarmUpCount)
        }
    }

    printBackupTable(
        measurement, warmUpCount: options.backupWarmUpCount, iterationCount: options.backupIterationCount,
        setupSeconds: setupSeconds, totalSeconds: BackupBenchmark.seconds(clock.now - start))
}

/// Removes a database file and SQLite's companions; missing files are fine.
func removeDatabaseFiles(atPath path: String) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        unlink(path + suffix)
    }
}
