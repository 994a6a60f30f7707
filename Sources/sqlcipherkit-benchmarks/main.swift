// sqlcipherkit-benchmarks: SQLCipherKit against the raw SQLCipher C API, in one process, on encrypted files.
// See Docs/Performance.md. Exit code 0 whatever the ratios; 1 on errors.
import CSQLCipher
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh random raw key in SQLCipher's text form `x'<64 hex>'`: no KDF on open.
func randomRawKeyText() -> String {
    var generator = SystemRandomNumberGenerator()
    let hex = (0..<32).map { _ in
        let byte = UInt8.random(in: .min ... .max, using: &generator)
        return String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
    }.joined()
    return "x'\(hex)'"
}

/// Writes a line to file descriptor 2 (the C `stderr` global is not concurrency-safe in Swift 6).
func printToStandardError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// A new private folder under `base` (or the temporary folder), removed by ``removeDirectory(_:)``.
func makeTemporaryDirectory(under base: String?) throws(BenchmarkError) -> String {
    let parent = base ?? getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    var template = Array((parent + "/sqlcipherkit-benchmarks.XXXXXX").utf8CString)
    guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw .system("cannot create a folder in \(parent): \(String(cString: strerror(errno)))")
    }
    return String(cString: created)
}

/// Removes the fetch/insert database files, then the folder (the backup and pool benchmarks remove their own files).
func removeDirectory(_ directory: String, databasePath: String) {
    removeDatabaseFiles(atPath: databasePath)
    if rmdir(directory) != 0 {
        printToStandardError("warning: could not remove \(directory): \(String(cString: strerror(errno)))")
    }
}

func runBenchmarks(_ options: BenchmarkOptions) throws {
    #if DEBUG
    print("WARNING: debug build; the figures mean nothing. Use swift build -c release.\n")
    #endif
    let directory = try makeTemporaryDirectory(under: options.baseDirectory)
    let databasePath = directory + "/benchmark.sqlite"
    defer { removeDirectory(directory, databasePath: databasePath) }
    let keyText = randomRawKeyText()
    let selected = options.selectedBenchmarks

    print("SQLCipherKit benchmarks (raw key except where a passphrase is said, one process)")
    print("  SQLCipher \(SQLCipher.version), SQLite \(SQLCipher.sqliteVersion),"
        + " crypto \(SQLCipher.cryptoProvider) \(SQLCipher.cryptoProviderVersion)")
    print("  machine: \(MachineDescription.processorCount) CPU (nproc), \(MachineDescription.cpuModel),"
        + " \(MachineDescription.kernel), load average \(MachineDescription.loadAverage)")
    print("  benchmarks: " + BenchmarkOptions.Benchmark.allCases.filter(selected.contains).map(\.rawValue)
        .joined(separator: ", ") + (options.isQuick ? " (--quick)" : ""))
    print("  folder: \(directory)")

    if !selected.isDisjoint(with: [.fetch, .decodable, .insert]) {
        print("")
        try runFetchAndInsertBenchmarks(options, databasePath: databasePath, keyText: keyText)
    }
    if selected.contains(.backup) {
        print("")
        try runBackupBenchmark(options, directory: directory, rawKeyText: keyText)
    }
    if selected.contains(.pool) {
        print("")
        try runPoolBenchmark(options, directory: directory, rawKeyText: keyText)
    }
    if selected.contains(.ratios) {
        print("")
        try RatioBenchmark.runWallClock(options, directory: directory)
    }
    print("")
    print("load average at the end: \(MachineDescription.loadAverage)")
}

/// The fetch, `Decodable` fetch and insert benchmarks, on one encrypted file opened by both sides.
func runFetchAndInsertBenchmarks(_ options: BenchmarkOptions, databasePath: String, keyText: String) throws {
    let selected = options.selectedBenchmarks
    let db = try Connection(path: databasePath, key: EncryptionKey(sqlcipherRawKeyText: keyText))
    defer { db.close() }

    print("Fetch, Decodable fetch and insert (same encrypted file for both sides)")
    let iterations = [
        (BenchmarkOptions.Benchmark.fetch, options.fetchIterationCount, ""),
        (.decodable, options.decodableIterationCount,
         " (raw, fetchCursor, fetchAll and FetchableRecord in rotating order)"),
        (.insert, options.insertIterationCount, ""),
    ].filter { selected.contains($0.0) }.map { benchmark, count, note in
        "\(options.warmUpCount) + \(count) \(benchmark.rawValue)\(note)"
    }
    print("  iterations (warm-up + timed): " + iterations.joined(separator: ", "))

    try Workloads.createFetchSource(db)
    let raw = try RawConnection(path: databasePath, rawKeyText: keyText)
    let pageSize = try raw.integer("PRAGMA page_size")
    let pageCount = try raw.integer("PRAGMA page_count")
    let cacheSize = try raw.integer("PRAGMA cache_size")
    print("  page size \(pageSize) B, \(pageCount) pages after setup, cache_size \(cacheSize)"
        + " (\(cacheSize < 0 ? "\(-cacheSize) KiB" : "\(cacheSize) pages"))")
    print("")

    var measurements: [Measurement] = []
    var rawSum: Int64 = 0
    if selected.contains(.fetch) {
        // Every iteration reads the whole table (larger than the page cache, so pages are decrypted each time). Raw,
        // by index and by name run in an order rotated every iteration.
        let rows = "\(Workloads.fetchRowCount) rows x \(Workloads.columnCount) INTEGER"
        var indexSum: Int64 = 0
        var nameSum: Int64 = 0
        let fetch = try compareRotating(
            [
                Measurement(name: "fetch \(rows), row[i]", rowCount: Workloads.fetchRowCount, targetRatio: 1.05),
                Measurement(name: "fetch by name, row[\"c0\"]...", rowCount: Workloads.fetchRowCount,
                            targetRatio: nil),
            ],
            warmUpCount: options.warmUpCount, iterationCount: options.fetchIterationCount,
            raw: { _ in try measureSeconds { rawSum = try Workloads.rawFetch(raw) } },
            contestants: [
                { _ in try measureSeconds { indexSum = try Workloads.wrapperFetch(db) } },
                { _ in try measureSeconds { nameSum = try Workloads.wrapperFetchByName(db) } },
            ])
        guard rawSum == indexSum, rawSum == nameSum else {
            throw BenchmarkError.mismatch("fetch sums \(rawSum), \(indexSum) and \(nameSum)")
        }
        measurements += fetch
        measurements.append(fetch[1].relative(
            to: fetch[0], name: "by name / by index (raw column: by index)", targetRatio: 1.3))
    }

    if selected.contains(.decodable) {
        // The same table and SQL as the fetch; the raw side is the fetch's C loop, timed again in this rotation.
        var cursorSum: Int64 = 0
        var arraySum: Int64 = 0
        var recordSum: Int64 = 0
        let decodable = try compareRotating(
            [
                Measurement(name: "decodable fetchCursor \(Workloads.fetchRowCount) rows",
                            rowCount: Workloads.fetchRowCount, targetRatio: 1.5),
                Measurement(name: "decodable fetchAll \(Workloads.fetchRowCount) rows (array)",
                            rowCount: Workloads.fetchRowCount, targetRatio: 1.5),
                Measurement(name: "FetchableRecord fetchCursor, init(row:)", rowCount: Workloads.fetchRowCount,
                            targetRatio: nil),
            ],
            warmUpCount: options.warmUpCount, iterationCount: options.decodableIterationCount,
            raw: { _ in try measureSeconds { rawSum = try Workloads.rawFetch(raw) } },
            contestants: [
                { _ in try measureSeconds { cursorSum = try Workloads.decodingCursorFetch(db) } },
                { _ in try measureSeconds { arraySum = try Workloads.fetchAllDecoded(db) } },
                { _ in try measureSeconds { recordSum = try Workloads.recordCursorFetch(db) } },
            ])
        guard rawSum == cursorSum, rawSum == arraySum, rawSum == recordSum else {
            throw BenchmarkError.mismatch(
                "decodable fetch sums \(rawSum), \(cursorSum), \(arraySum) and \(recordSum)")
        }
        measurements += decodable
    }

    if selected.contains(.insert) {
        // A fresh table per run, created before and dropped after the timed transaction.
        var insert = Measurement(
            name: "insert \(Workloads.insertRowCount) rows x \(Workloads.columnCount) INTEGER",
            rowCount: Workloads.insertRowCount, targetRatio: 1.3)
        try compare(
            &insert, warmUpCount: options.warmUpCount, iterationCount: options.insertIterationCount,
            raw: { iteration in
                let table = "insert_raw_\(iteration)"
                try raw.execute(Workloads.createTableSQL(table))
                let seconds = try measureSeconds { try Workloads.rawInsert(raw, table: table) }
                guard try raw.integer("SELECT count(*) FROM \(table)") == Workloads.insertRowCount else {
                    throw BenchmarkError.mismatch("raw insert left a wrong row count")
                }
                try raw.execute("DROP TABLE \(table)")
                return seconds
            },
            wrapper: { iteration in
                let table = "insert_wrapper_\(iteration)"
                try db.execute(Workloads.createTableSQL(table))
                let seconds = try measureSeconds { try Workloads.wrapperInsert(db, table: table) }
                guard try db.scalar("SELECT count(*) FROM \(table)", as: Int.self) == Workloads.insertRowCount else {
                    throw BenchmarkError.mismatch("SQLCipherKit insert left a wrong row count")
                }
                try db.execute("DROP TABLE \(table)")
                return seconds
            })
        measurements.append(insert)
    }

    printTable(measurements)
    print("")
    let targets = measurements.compactMap { measurement -> String? in
        guard let target = measurement.targetRatio else { return nil }
        // The name up to its first number: "fetch", "decodable fetchCursor", "insert".
        let label = measurement.name.split(separator: " ").prefix(while: { $0.first?.isLetter ?? false })
            .joined(separator: " ")
        return "\(label) <= \(formatted(target, decimals: 2))x \(label.hasPrefix("by name") ? "by index" : "raw")"
    }
    let checksum = selected.isDisjoint(with: [.fetch, .decodable]) ? "" : "checksum \(rawSum); "
    print(checksum + "targets: " + targets.joined(separator: ", ")
        + " (\(measurements.allSatisfy(\.meetsTarget) ? "all met" : "not all met"))")
}

do {
    guard let options = try BenchmarkOptions.parse(Array(CommandLine.arguments.dropFirst())) else {
        print(BenchmarkOptions.usage)
        exit(0)
    }
    switch options.mode {
    case .benchmarks:
        try runBenchmarks(options)
    case .prepare(let directory):
        _ = try RatioBenchmark.prepare(in: directory, rotateMegabyteCount: options.rotateMegabyteCount)
        print("prepared \(directory) (SQLCipher \(SQLCipher.version))")
    case .once(let workload, let side, let directory):
        try RatioBenchmark.runOnce(workload, side: side, directory: directory, passes: options.oncePassCount)
    }
} catch {
    printToStandardError("sqlcipherkit-benchmarks: \(error)")
    exit(1)
}
