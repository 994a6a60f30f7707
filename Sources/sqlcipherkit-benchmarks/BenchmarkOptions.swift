/// Command-line options of `sqlcipherkit-benchmarks`.
///
/// Parsed by hand: the target depends only on the library and the engine, so the figures measure nothing else.
struct BenchmarkOptions {
    /// A benchmark that `--only` can select.
    enum Benchmark: String, CaseIterable {
        case fetch, decodable, insert, backup, pool
    }

    /// Fewer iterations, for a quick look (the medians are then noisier).
    var isQuick = false

    /// One warm-up and one timed pass of fetch, decodable and insert: for counting instructions under callgrind,
    /// where the second pass of each workload is the figure (see Docs/Performance.md).
    var isSinglePass = false

    /// The folder in which a temporary sub-folder holds the databases; the system's temporary folder by default.
    var baseDirectory: String?

    /// The benchmarks to run, all by default.
    var selectedBenchmarks = Set(Benchmark.allCases)

    /// The least size of the database the backup benchmark copies, in MB (10^6 bytes).
    var backupMegabyteCount = 200

    var warmUpCount: Int { isQuick || isSinglePass ? 1 : 2 }
    var fetchIterationCount: Int { isSinglePass ? 1 : isQuick ? 5 : 15 }
    var decodableIterationCount: Int { isSinglePass ? 1 : isQuick ? 5 : 15 }
    var insertIterationCount: Int { isSinglePass ? 1 : isQuick ? 5 : 15 }
    // A 200 MB backup takes seconds per contestant; these keep the backup part within about 3 minutes on 2 vCPUs.
    var backupWarmUpCount: Int { isQuick ? 0 : 1 }
    var backupIterationCount: Int { isQuick ? 2 : 5 }
    // The pool benchmark: about 45 s per engine on 2 vCPUs by default, about 10 s with --quick.
    var poolWarmUpCount: Int { 1 }
    var poolOpenRoundCount: Int { isQuick ? 3 : 7 }
    var poolThroughputSeconds: Double { isQuick ? 0.5 : 1.5 }
    var poolThroughputRoundCount: Int { isQuick ? 1 : 3 }
    var poolWriteSeconds: Double { isQuick ? 1 : 2.5 }
    var poolWriteRoundCount: Int { isQuick ? 1 : 2 }

    static let usage = """
        Usage: sqlcipherkit-benchmarks [--quick] [--single-pass] [--only LIST] [--backup-mb N] [DIRECTORY]

        Compares SQLCipherKit with the raw SQLCipher C API on encrypted databases (raw key, no KDF, except in pool):
          fetch   200,000 rows x 10 INTEGER columns, every column read by index, and by name
          decodable
                  the same rows decoded into a Decodable struct of 10 Int64 by db.fetchCursor(T.self, sql)
                  and db.fetchAll(T.self, sql), and (no target) built by a FetchableRecord's init(row:)
          insert  50,000 rows x 10 INTEGER, one transaction, one prepared statement
          backup  an encrypted database of at least N MB copied with the online backup API into a new file:
                  sqlite3_backup_step(-1) against db.backup(toPath:) (which also verifies, fsyncs and renames)
                  and db.backup(to: Connection) (copy and quick_check)
          pool    DatabasePool with a passphrase: open latency (plain Connection, the pool's first connection,
                  its Nth), one pool.read against a raw BEGIN; SELECT; COMMIT, read throughput with 1, 2 and 4
                  readers (threads and tasks), write throughput alone and with 2 readers

          --quick          fewer iterations (noisier medians)
          --single-pass    one warm-up and one timed pass of fetch, decodable and insert (for callgrind)
          --only LIST      comma-separated benchmarks to run: fetch, decodable, insert, backup, pool
                           (default: all)
          --backup-mb N    size of the backup benchmark's database in MB (default 200)
          DIRECTORY        where to create the temporary database folder (default: $TMPDIR or /tmp);
                           the folder is removed at the end
          -h, --help       show this help

        Build in release mode: swift build -c release --product sqlcipherkit-benchmarks
        """

    /// Parses the arguments after the program name.
    ///
    /// - Returns: `nil` when help was asked for.
    /// - Throws: ``BenchmarkError/usage(_:)`` for an unknown option or benchmark, a bad size, or a second directory.
    static func parse(_ arguments: [String]) throws(BenchmarkError) -> BenchmarkOptions? {
        var options = BenchmarkOptions()
        var remaining = arguments[...]
        func value(of option: String) throws(BenchmarkError) -> String {
            guard let value = remaining.popFirst(), !value.hasPrefix("-") else {
                throw .usage("\(option) needs a value")
            }
            return value
        }
        while let argument = remaining.popFirst() {
            // `--only=fetch` and `--backup-mb=50` are split into option and value.
            if let equals = argument.firstIndex(of: "="), ["--only", "--backup-mb"].contains(argument[..<equals]) {
                remaining.insert(String(argument[argument.index(after: equals)...]), at: remaining.startIndex)
                remaining.insert(String(argument[..<equals]), at: remaining.startIndex)
                continue
            }
            switch argument {
            case "--quick":
                options.isQuick = true
            case "--single-pass":
                options.isSinglePass = true
            case "--only":
                options.selectedBenchmarks = try parseBenchmarkList(try value(of: argument))
            case "--backup-mb":
                let text = try value(of: argument)
                guard let count = Int(text), count >= 1 else {
                    throw .usage("--backup-mb needs a whole number of MB, at least 1, not \(text)")
                }
                options.backupMegabyteCount = count
            case "-h", "--help":
                return nil
            case _ where argument.hasPrefix("-"):
                throw .usage("unknown option \(argument)")
            default:
                guard options.baseDirectory == nil else { throw .usage("only one directory may be given") }
                options.baseDirectory = argument
            }
        }
        return options
    }

    private static func parseBenchmarkList(_ list: String) throws(BenchmarkError) -> Set<Benchmark> {
        var benchmarks = Set<Benchmark>()
        for name in list.split(separator: ",", omittingEmptySubsequences: false) {
            guard let benchmark = Benchmark(rawValue: String(name).trimmed()) else {
                let known = Benchmark.allCases.map(\.rawValue).joined(separator: ", ")
                throw .usage("unknown benchmark `\(name)` in --only (known: \(known))")
            }
            benchmarks.insert(benchmark)
        }
        return benchmarks
    }
}

/// An error that stops the benchmark (exit code 1). Missing a target is not an error.
enum BenchmarkError: Error, CustomStringConvertible {
    case usage(String)
    case sqlite(operation: String, code: Int32, message: String)
    case system(String)
    case mismatch(String)

    var description: String {
        switch self {
        case .usage(let message): "\(message)\n\n\(BenchmarkOptions.usage)"
        case .sqlite(let operation, let code, let message): "\(operation) failed (SQLite code \(code)): \(message)"
        case .system(let message): message
        case .mismatch(let message): "results differ between the raw C API and SQLCipherKit: \(message)"
        }
    }
}
