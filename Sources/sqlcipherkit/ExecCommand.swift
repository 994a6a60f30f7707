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
            the SQL says so) and stop at the first error. A missing database is an error unless --create is \
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
            --header, the names over a line of dashes). --json instead prints the one JSON object of every \
            subcommand.

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
        if Output.isJSON {
            try runForJSON(script, on: connection)
        } else {
            let sink = StandardOutputSink()
            defer { try? sink.flush() }
            try ScriptPrinting.run(script, on: connection, printer: ResultPrinter(style: printing.style, sink: sink))
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

    private func runForJSON(_ script: String, on connection: Connection) throws {
        var results: [ExecReport.StatementResult] = []
        var current: Statement?
        defer { Output.setJSONResult(ExecReport(results: results)) }
        try connection.executeScript(script) { statement, row in
            if current !== statement {
                current = statement
                results.append(ExecReport.StatementResult(columns: statement.columnNames, rows: []))
            }
            results[results.count - 1].rows.append(try row.databaseValues.map(ExecReport.Value.init))
        }
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

/// `exec --json`'s `result`: one entry per statement that returned rows, rows as arrays of values (blobs as
/// `x'<hex>'` strings).
struct ExecReport: Encodable, Sendable {
    struct StatementResult: Encodable, Sendable {
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
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .integer(let integer): try container.encode(integer)
            case .real(let real): try container.encode(real)
            case .text(let text): try container.encode(text)
            }
        }
    }

    let results: [StatementResult]
}
