import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit exec`: runs SQL for scripts (``Connection/executeScript(_:eachRow:)``).
struct ExecCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run SQL statements on an encrypted database and print the rows.",
        discussion: """
            The statements run one after the other (not in one transaction unless the SQL says so). Every row a \
            statement returns is printed on one line, values separated by tabs: NULL as NULL, blobs as x'<hex>', \
            text as is. The database is created (mode 0600) when it does not exist. PRAGMA key and rekey are \
            refused: keys never travel in SQL.

            Example:
              sqlcipherkit exec notes.db --key-file notes.key "SELECT count(*) FROM note"
              sqlcipherkit exec notes.db --key-env NOTES_KEY --header "CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT * FROM t"
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

    @Flag(help: "Print the column names before each statement's rows.")
    var header = false

    func validate() throws {
        _ = try key.requiredSource()
        guard !sql.allSatisfy(\.isWhitespace) else { throw ValidationError("the SQL is empty") }
    }

    func run() throws {
        let connection = try Connection(path: database, encryption: try cipher.encryption(for: try key.loadKey()))
        var statementWithHeader: Statement?
        try connection.executeScript(sql) { statement, row in
            if header && statementWithHeader !== statement {
                statementWithHeader = statement
                Output.result(statement.columnNames.joined(separator: "\t"))
            }
            Output.result(try row.databaseValues.map(Self.format).joined(separator: "\t"))
        }
        connection.close()
    }

    /// A value as `exec` prints it.
    static func format(_ value: DatabaseValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let integer): String(integer)
        case .real(let real): String(real)
        case .text(let text): text
        case .blob(let bytes): "x'" + bytes.map { hexPair($0) }.joined() + "'"
        }
    }

    private static func hexPair(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
