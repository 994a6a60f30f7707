/// Command-line options of `sqlcipherkit-benchmarks`.
///
/// Parsed by hand: the target depends only on the library and the engine, so the figures measure nothing else.
struct BenchmarkOptions {
    /// A benchmark that `--only` can select.
    enum Benchmark: String, CaseIterable {
        case fetch, decodable, insert, backup, pool, ratios
    }

    /// What the process does: the benchmarks, or one step of a callgrind run (see `.ci/bench-callgrind`).
    enum Mode {
        case benchmarks
        /// `--prepare DIR`: make the ratio table's files in DIR (an existing folder) and exit.
        case prepare(String)
        /// `--once WORKLOAD --side raw|kit DIR`: one measured pass of one side of one ratio workload.
        case once(RatioBenchmark.Workload, RatioBenchmark.Side, String)
    }

    /// `--passes N` with `--once`: how many measured passes follow the warm-up (1 by default). Counting a process
    /// with 1 and with 11 passes (`perf stat`, `strace -c`) and taking the difference gives the system calls and
    /// context switches of 10 passes, without the setup and the warm-up.
    var oncePassCount = 1

    var mode = Mode.benchmarks

    /// The size of the rotation rows' database, in MB (10^6 bytes).
    var rotateMegabyteCount = 250

    /// The rows of the ratio table to run, all by default.
    var ratioWorkloads = RatioBenchmark.Workload.allCases

    var ratioWarmUpCount: Int { 1 }
    var ratioRoundCount: Int { isQuick ? 2 : 5 }
    var ratioFastRepeat: Int { isQuick ? 2 : 3 }

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
        Usage: sqlcipherkit-benchmarks [--quick] [--single-pass] [--only LIST] [--backup-mb N]
                                      [--rotate-mb N] [--workloads LIST] [DIRECTORY]
               sqlcipherkit-benchmarks --prepare DIR [--rotate-mb N]
               sqlcipherkit-benchmarks --once WORKLOAD --side raw|kit [--passes N] DIR

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
          ratios  issue 23's table, SQLCipherKit / raw C API, paired round-robin: rotate copy and in place
                  against the raw recipes (ATTACH ... KEY + sqlcipher_export + quick_check; sqlite3_rekey +
                  quick_check) on a --rotate-mb database, Decodable cursor and fetchAll (and fetchAll through the
                  init(row:) @RowDecodable generates), pool.read point lookups
                  on 1, 4, 8 and 16 threads (raw: a connection per thread), async pool.read in 4 tasks, open +
                  raw key + first query, fetch by index; for information, the 4 tasks with .readerQueue, and
                  against one raw thread per CPU (the width of Swift's cooperative pool)

          --quick          fewer iterations (noisier medians)
          --single-pass    one warm-up and one timed pass of fetch, decodable and insert (for callgrind)
          --only LIST      comma-separated benchmarks to run: fetch, decodable, insert, backup, pool
                           (default: all)
          --backup-mb N    size of the backup benchmark's database in MB (default 200)
          --rotate-mb N    size of the ratio table's rotation database in MB (default 250)
          --workloads LIST comma-separated rows of the ratio table (default: all): rotate-copy,
                           rotate-in-place, decodable-cursor, decodable-fetchall, decodable-generated,
                           pool-read-1, pool-read-4, async-read-4, open-key, by-index, insert,
                           pool-read-8, pool-read-16, async-read-4-queue, async-read-4-cpus
          --prepare DIR    make the ratio table's files in DIR and exit (for --once)
          --once WORKLOAD --side raw|kit DIR
                           one warm-up and one measured pass of one side of one ratio row, on the files of
                           --prepare; for callgrind (--zero-before and --dump-after the mangled name of
                           RatioBenchmark.measuredWorkloadPass; .ci/bench-callgrind runs the pairs)
          --passes N       with --once: N measured passes after the warm-up (default 1); the difference
                           between 11 and 1 counts 10 passes' system calls without the setup
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
        var onceWorkload: RatioBenchmark.Workload?
        var side: RatioBenchmark.Side?
        func value(of option: String) throws(BenchmarkError) -> String {
            guard let value = remaining.popFirst(), !value.hasPrefix("-") else {
                throw .usage("\(option) needs a value")
            }
            return value
        }
        while let argument = remaining.popFirst() {
            // `--only=fetch` and `--backup-mb=50` are split into option and value.
            if let equals = argument.firstIndex(of: "="), ["--only", "--backup-mb", "--rotate-mb", "--workloads", "--side", "--passes"].contains(argument[..<equals]) {
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
            case "--rotate-mb":
                let text = try value(of: argument)
                guard let count = Int(text), count >= 1 else {
                    throw .usage("--rotate-mb needs a whole number of MB, at least 1, not \(text)")
                }
                options.rotateMegabyteCount = count
            case "--workloads":
                options.ratioWorkloads = try parseWorkloadList(try value(of: argument))
            case "--prepare":
                options.mode = .prepare(try value(of: argument))
            case "--once":
                onceWorkload = try parseWorkloadList(try value(of: argument)).first
            case "--side":
                let text = try value(of: argument)
                guard let parsed = RatioBenchmark.Side(rawValue: text) else {
                    throw .usage("--side is raw or kit, not \(text)")
                }
                side = parsed
            case "--passes":
                let text = try value(of: argument)
                guard let count = Int(text), count >= 1 else {
                    throw .usage("--passes needs a whole number, at least 1, not \(text)")
                }
                options.oncePassCount = count
            case "-h", "--help":
                return nil
            case _ where argument.hasPrefix("-"):
                throw .usage("unknown option \(argument)")
            default:
                guard options.baseDirectory == nil else { throw .usage("only one directory may be given") }
                options.baseDirectory = argument
            }
        }
        if let onceWorkload {
            guard let side, let directory = options.baseDirectory else {
                throw .usage("--once needs --side raw|kit and the folder made by --prepare")
            }
            options.mode = .once(onceWorkload, side, directory)
        }
        return options
    }

    private static func parseWorkloadList(_ list: String) throws(BenchmarkError) -> [RatioBenchmark.Workload] {
        var workloads: [RatioBenchmark.Workload] = []
        for name in list.split(separator: ",", omittingEmptySubsequences: false) {
            guard let workload = RatioBenchmark.Workload(rawValue: String(name).trimmed()) else {
                let known = RatioBenchmark.Workload.allCases.map(\.rawValue).joined(separator: ", ")
                throw .usage("unknown workload `\(name)` (known: \(known))")
            }
            workloads.append(workload)
        }
        return workloads
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
