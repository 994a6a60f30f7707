import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit exec`: runs SQL for scripts (``Connection/executeScript(_:eachRow:)``).
struct ExecCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run SQL statements on an encrypted database and print the rows.",
        discussion: """
            The statements run one after the other (not in one transaction unless the SQL says so). Every row a \
            statement returns is printed on one line, values separated by tabs: NULL as NULL, blobs as x'<hex>', \
            text as is. A missing database is an error unless --create is given (then it is created, mode 0600). \
            A plaintext (unencrypted) database is opened only with --plaintext, and then without a key. Cipher \
            and key PRAGMAs are refused: keys never travel in SQL. ATTACH without a key (or \
            with KEY '') is refused unless --allow-plaintext is given, and so is a key in an ATTACH file name \
            (file:x.db?key=...). VACUUM INTO is refused: use `sqlcipherkit backup` for a verified, private copy. \
            A failed ATTACH leaves no file behind.

            Example:
              sqlcipherkit exec notes.db --key-file notes.key "SELECT count(*) FROM note"
              sqlcipherkit exec new.db --key-env NOTES_KEY --create --header "CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT * FROM t"
              sqlcipherkit exec legacy-plain.db --plaintext "SELECT count(*) FROM sqlite_master"
              sqlcipherkit exec notes.db --key-file notes.key --json "SELECT id, body FROM note"
            """
    )

    @Argument(help: ArgumentHelp("The database.", valueName: "database"))
    var database: String

    @Argument(help: ArgumentHelp("One or more SQL statements separated by semicolons.", valueName: "sql"))
    var sql: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings")
    var cipher: CipherOptions

    @Flag(help: "Open a plaintext (unencrypted) database, without a key.")
    var plaintext = false

    @Flag(help: "Create the database (mode 0600) when it does not exist.")
    var create = false

    @Flag(help: "Print the column names before each statement's rows.")
    var header = false

    @Flag(help: "Let the SQL ATTACH databases without a key: they are written UNENCRYPTED.")
    var allowPlaintext = false

    @OptionGroup(title: "Output")
    var output: OutputOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        guard !sql.allSatisfy(\.isWhitespace) else { throw ValidationError("the SQL is empty") }
        if plaintext && (key.isGiven || !cipher.isEmpty) {
            throw ValidationError("--plaintext opens an unencrypted database: give no key and no cipher option")
        }
    }

    func run() throws {
        let encryption: Encryption = plaintext ? .none : try cipher.encryption(for: try key.loadKey())
        if DatabaseFileInspection.inspect(path: database).format == .missing && !create {
            throw CommandFailure(
                "\(database) does not exist; pass --create to create a new database", kind: "missingFile")
        }
        let connection = try Connection(
            path: database, encryption: encryption, options: OpenOptions(allowsPlaintextAttachments: allowPlaintext))
        var results: [ExecReport.StatementResult] = []
        var statementWithHeader: Statement?
        do {
            try connection.executeScript(sql) { statement, row in
                if statementWithHeader !== statement {
                    statementWithHeader = statement
                    if Output.isJSON {
                        results.append(ExecReport.StatementResult(columns: statement.columnNames, rows: []))
                    } else if header {
                        Output.result(statement.columnNames.joined(separator: "\t"))
                    }
                }
                let values = try row.databaseValues
                if Output.isJSON {
                    results[results.count - 1].rows.append(values.map(ExecReport.Value.init))
                } else {
                    Output.result(values.map(Self.format).joined(separator: "\t"))
                }
            }
        } catch {
            Output.setJSONResult(ExecReport(results: results))
            connection.close()
            throw error
        }
        connection.close()
        Output.setJSONResult(ExecReport(results: results))
    }

    /// A value as `exec` prints it.
    static func format(_ value: DatabaseValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let integer): String(integer)
        case .real(let real): String(real)
        case .text(let text): text
        case .blob(let bytes): "x'" + Hex.string(bytes) + "'"
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
            case .blob: self = .text(ExecCommand.format(value))
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
