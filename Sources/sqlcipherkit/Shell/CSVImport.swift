import SQLCipherKit

/// `.import FILE TABLE`: CSV records into a table, all or nothing. A missing table is created from the header
/// record (every column TEXT, as the sqlite3 shell does); into an existing table every record is a row. Values are
/// bound, never spliced into SQL, and go through the SQL guard like any statement.
enum CSVImport {
    /// Imports the file; returns the number of rows inserted.
    static func run(file: String, table: String, on connection: Connection) throws -> Int {
        var records = try CSVReader.records(FileAccess.read(file, purpose: "the CSV file"), source: file)
        guard !records.isEmpty else {
            throw CommandFailure("\(file) holds no CSV record", kind: "invalidArgument")
        }
        let quotedTable = Connection.quoteIdentifier(table)
        let exists = try connection.tableExists(table)
        let header = exists ? nil : records.removeFirst()
        // A savepoint nests inside a transaction the operator opened; without one it is the transaction.
        try connection.execute("SAVEPOINT sqlcipherkit_import")
        do {
            if let header {
                let columns = header.fields.map { Connection.quoteIdentifier($0) + " TEXT" }
                try connection.execute("CREATE TABLE \(quotedTable)(\(columns.joined(separator: ", ")))")
            }
            let columnCount = try header?.fields.count ?? connection.columns(in: table).count
            let insert = try connection.prepare(
                "INSERT INTO \(quotedTable) VALUES(" + Array(repeating: "?", count: columnCount).joined(separator: ",")
                    + ")")
            for record in records {
                guard record.fields.count == columnCount else {
                    throw CommandFailure(
                        "\(file), line \(record.line): \(record.fields.count) fields, but \(table) has \(columnCount)"
                            + " columns; nothing was imported",
                        kind: "invalidArgument")
                }
                try insert.run(arguments: StatementArguments(record.fields))
            }
            try connection.execute("RELEASE sqlcipherkit_import")
        } catch {
            try? connection.execute("ROLLBACK TO sqlcipherkit_import; RELEASE sqlcipherkit_import")
            throw error
        }
        return records.count
    }
}
