import ArgumentParser
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sqlcipherkit exec`: runs SQL for scripts (``Connection/executeScript(_:eachRow:)``).
struct ExecCommand: SQLSessionCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run SQL statements on an encrypted database and print the rows.",
        discussion: CipherOptions.withFoldedNote("""
            The SQL comes from the argument, from standard input when the argument is - (not with --key-stdin), \
            or from a file with --file. The statements run one after the other (not in one transaction unless \
            the SQL says so) and stop at the first error: those before it stay committed, except in a transaction \
            the SQL began and did not end, which is rolled back from its BEGIN (a script that ends inside its \
            transaction is an error too). A missing database is an error unless --create is \
            given (then it is created, mode 0600). A plaintext (unencrypted) database is opened only with \
            --plaintext, and then without a key. Cipher and key PRAGMAs are refused: keys never travel in SQL. \
            ATTACH without a key (or with KEY '') is refused unless --allow-plaintext is given, and so is a key in \
            an ATTACH file name (file:x.db?key=...). VACUUM INTO is refused: use `sqlcipherkit backup` for a \
            verified, private copy. A failed ATTACH leaves no file behind.

            Output modes (--mode): list (default) prints a row per line, values separated by tabs; a backslash \
            is doubled, tab, newline and carriage return are \\t, \\n, \\r, other control characters \\u00XX, \
            NULL is \\N (--null-value changes it), a blob \\x<hex>: a value never breaks the line and NULL \
            differs from the text 'NULL'. csv is RFC 4180 (NULL an empty field, '' as ""). json prints one array \
            of objects per statement, numbers as numbers, blobs as {"base64": ...}. table and box draw a grid, \
            line prints "column = value" lines, column aligns the columns as sqlite3's .mode column does (with \
            --header, the names over a line of dashes). JSON has no infinite number: an infinite real is \
            {"real": "Infinity"} (or "-Infinity") in json mode and in --json. --json instead prints the one JSON \
            object of every subcommand, saying which statements ran and which were kept.

            Example:
              sqlcipherkit exec notes.db --key-file notes.key "SELECT count(*) FROM note"
              sqlcipherkit exec new.db --key-env NOTES_KEY --create --header \\
                  "CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT * FROM t"
              sqlcipherkit exec notes.db --key-env K --mode csv "SELECT * FROM note"
              sqlcipherkit exec notes.db --key-file notes.key --file migrate.sql
              sqlcipherkit exec notes.db --key-file notes.key - < migrate.sql
              sqlcipherkit exec legacy-plain.db --plaintext \\
                  "SELECT count(*) FROM sqlite_master"
              sqlcipherkit exec notes.db --key-file notes.key --json \\
                  "SELECT id, body FROM note"
            """)
    )

    @Argument(help: ArgumentHelp("The database.", valueName: "database"))
    var database: String

    @Argument(help: ArgumentHelp(
        "One or more SQL statements separated by semicolons; - reads them from standard input.", valueName: "sql"))
    var sql: String?

    @Option(name: .customLong("file"), help: ArgumentHelp("Read the SQL from this file.", valueName: "path"))
    var scriptFile: String?

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @Flag(help: "Open a plaintext (unencrypted) database, without a key.")
    var plaintext = false

    @Flag(help: "Create the database (mode 0600) when it does not exist.")
    var create = false

    @Flag(help: "Let the SQL ATTACH databases without a key: they are written UNENCRYPTED.")
    var allowPlaintext = false

    @OptionGroup(title: "Printing")
    var printing: PrintingOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    var acceptsKeyFromStandardInput: Bool { true }

    func validate() throws {
        switch (sql, scriptFile) {
        case (nil, nil): throw ValidationError("give the SQL as an argument, - for standard input, or --file PATH")
        case (.some, .some): throw ValidationError("give the SQL once: as an argument or with --file, not both")
        case (let sql?, nil):
            guard !sql.allSatisfy(\.isWhitespace) else { throw ValidationError("the SQL is empty") }
        case (nil, let path?):
            guard !path.isEmpty else { throw ValidationError("--file needs a path") }
        }
        if sql == "-" && key.readsStandardInput {
            throw ValidationError(
                "standard input cannot hold both the SQL (-) and the key (--key-stdin): give the key with"
                    + " --key-file or --key-env")
        }
        try validateOpening()
        try printing.validate(json: output.json)
    }

    func run() throws {
        let connection = try openConnection()
        defer { connection.close() }
        let script = try loadScript()
        let ledger = ScriptLedger()
        var results: [ExecReport.StatementResult] = []
        defer {
            Output.setJSONResult(ExecReport(results: results, ledger: ledger))
        }
        do {
            if Output.isJSON {
                var current: Statement?
                try connection.executeScript(script, eachRow: { statement, row in
                    if current !== statement {
                        current = statement
                        results.append(ExecReport.StatementResult(
                            statement: ledger.completedCount + 1, columns: statement.columnNames, rows: []))
                    }
                    results[results.count - 1].rows.append(try row.databaseValues.map(ExecReport.Value.init))
                }, afterEachStatement: { _ in ledger.statementEnded(on: connection) })
            } else {
                let sink = StandardOutputSink()
                defer { try? sink.flush() }
                try ScriptPrinting.run(
                    script, on: connection, printer: ResultPrinter(style: printing.style, sink: sink),
                    afterEachStatement: { _ in ledger.statementEnded(on: connection) })
            }
        } catch {
            ledger.stopped(on: connection, failed: true)
            if let note = ledger.failureNote { Output.message(note) }
            throw error
        }
        ledger.stopped(on: connection, failed: false)
        if let start = ledger.rolledBackFrom {
            throw CommandFailure(
                "the SQL left a transaction open (statement \(start) began it and no COMMIT ended it): it was rolled"
                    + " back, so nothing written from statement \(start) on was kept; end the transaction with COMMIT",
                kind: "invalidState")
        }
    }

    /// The SQL: the argument, standard input (`-`) or `--file`.
    private func loadScript() throws -> String {
        if let scriptFile {
            return String(decoding: try FileAccess.read(scriptFile, purpose: "the SQL file"), as: UTF8.self)
        }
        if sql == "-" {
            return String(decoding: try FileAccess.readToEnd(STDIN_FILENO, source: "standard input"), as: UTF8.self)
        }
        return sql ?? ""
    }
}

/// Which statements of an `exec` script ran and which of them were kept. The statements are not wrapped in a
/// transaction (as sqlite3 runs them): each one that ends outside a transaction the SQL began is committed when it
/// ends, and the first error stops the run. A transaction the SQL began and did not end (the run failed inside it, or
/// the script has no COMMIT) is rolled back, and with it every statement from the one that began it.
final class ScriptLedger {
    /// The statements that ran to their end: the first `completedCount` of the script.
    private(set) var completedCount = 0
    /// The statement that began the transaction open after the last completed statement.
    private var openTransactionStart: Int?
    /// The statement that failed, once the run stopped on an error.
    private(set) var failedStatement: Int?
    /// The statement from which nothing was kept, once the run stopped inside a transaction.
    private(set) var rolledBackFrom: Int?

    func statementEnded(on connection: Connection) {
        completedCount += 1
        if connection.isInsideTransaction {
            if openTransactionStart == nil { openTransactionStart = completedCount }
        } else {
            openTransactionStart = nil
        }
    }

    /// The run is over: a transaction still open is rolled back now (closing the connection would do it too; here
    /// it is said). After a failure inside a transaction the engine may have rolled it back itself: not kept either.
    func stopped(on connection: Connection, failed: Bool) {
        if failed { failedStatement = completedCount + 1 }
        if connection.isInsideTransaction { try? connection.execute("ROLLBACK") }
        rolledBackFrom = openTransactionStart
    }

    /// What ran and what stays, said before the error of a failed run; nothing when the first statement failed (the
    /// error says all there is).
    var failureNote: String? {
        let failed = "statement \(completedCount + 1) failed"
        guard completedCount > 0 else { return nil }
        let ran = completedCount == 1 ? "statement 1" : "statements 1-\(completedCount)"
        guard let start = rolledBackFrom else {
            return "\(failed); \(ran) ran and \(completedCount == 1 ? "stays" : "stay") committed"
        }
        let kept = switch start {
        case 1: "none stays"
        case 2: "statement 1 stays committed"
        default: "statements 1-\(start - 1) stay committed"
        }
        return "\(failed) inside the transaction statement \(start) began, which was rolled back: \(ran) ran, \(kept)"
    }
}

/// `--mode`, `--header` and `--null-value`, of `exec` and `shell`.
struct PrintingOptions: ParsableArguments {
    @Option(help: ArgumentHelp("How rows are printed.", valueName: "mode"))
    var mode: ResultMode?

    @Flag(help: "Print the column names before each statement's rows (list, csv, column; the others always do).")
    var header = false

    @Option(help: ArgumentHelp(
        "What NULL prints as in list, table, box, line and column modes (default \\N).", valueName: "text"))
    var nullValue: String?

    var style: ResultStyle {
        ResultStyle(mode: mode ?? .list, showsHeader: header, nullValue: nullValue ?? ResultStyle.defaultNullValue)
    }

    /// `--json` prints one JSON object: the printing options would have nothing to print.
    func validate(json: Bool) throws {
        if json && (mode != nil || nullValue != nil) {
            throw ValidationError("--json prints one JSON object; --mode and --null-value are for the printed rows")
        }
    }
}

/// `exec --json`'s `result`: one entry per statement that returned rows (its 1-based number in the script), rows as
/// arrays of values (blobs as `x'<hex>'` strings, non-finite reals as `{"real": "Infinity"}`), and which statements
/// ran and were kept (``ScriptLedger``).
struct ExecReport: Encodable, Sendable {
    struct StatementResult: Encodable, Sendable {
        let statement: Int
        let columns: [String]
        var rows: [[Value]]
    }

    enum Value: Encodable, Sendable {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)

        init(_ value: DatabaseValue) {
            switch value {
            case .null: self = .null
            case .integer(let integer): self = .integer(integer)
            case .real(let real): self = .real(real)
            case .text(let text): self = .text(text)
            case .blob(let bytes): self = .text("x'" + Hex.string(bytes) + "'")
            }
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .real(let real) where !real.isFinite:
                // JSON has no infinity or NaN: an object, which no number and no text can be mistaken for.
                var container = encoder.container(keyedBy: NonFiniteKey.self)
                try container.encode(ValueText.nonFiniteName(real), forKey: .real)
                return
            default:
                break
            }
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .integer(let integer): try container.encode(integer)
            case .real(let real): try container.encode(real)
            case .text(let text): try container.encode(text)
            }
        }

        private enum NonFiniteKey: String, CodingKey { case real }
    }

    let results: [StatementResult]
    let completedStatementCount: Int
    @Nullable var failedStatement: Int?
    @Nullable var rolledBackFrom: Int?

    init(results: [StatementResult], ledger: ScriptLedger) {
        self.results = results
        completedStatementCount = ledger.completedCount
        failedStatement = ledger.failedStatement
        rolledBackFrom = ledger.rolledBackFrom
    }
}
