/// Command-line options of `sqlcipherkit-benchmarks`.
///
/// Parsed by hand: the target depends only on the library and the engine, so the figures measure nothing else.
struct BenchmarkOptions {
    /// Fewer iterations, for a quick look (the medians are then noisier).
    var isQuick = false

    /// The folder in which a temporary sub-folder holds the database; the system's temporary folder by default.
    var baseDirectory: String?

    var warmUpCount: Int { isQuick ? 1 : 2 }
    var fetchIterationCount: Int { isQuick ? 5 : 15 }
    var insertIterationCount: Int { isQuick ? 5 : 15 }

    static let usage = """
        Usage: sqlcipherkit-benchmarks [--quick] [DIRECTORY]

        Compares SQLCipherKit with the raw SQLCipher C API on one encrypted database (raw key, no KDF):
          fetch   200,000 rows x 10 INTEGER columns, every column read by index
          insert  50,000 rows x 10 INTEGER, one transaction, one prepared statement

          --quick      fewer iterations (noisier medians)
          DIRECTORY    where to create the temporary database folder (default: $TMPDIR or /tmp);
                       the folder is removed at the end
          -h, --help   show this help

        Build in release mode: swift build -c release --product sqlcipherkit-benchmarks
        """

    /// Parses the arguments after the program name.
    ///
    /// - Returns: `nil` when help was asked for.
    /// - Throws: ``BenchmarkError/usage(_:)`` for an unknown option or a second directory.
    static func parse(_ arguments: [String]) throws(BenchmarkError) -> BenchmarkOptions? {
        var options = BenchmarkOptions()
        for argument in arguments {
            switch argument {
            case "--quick":
                options.isQuick = true
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
