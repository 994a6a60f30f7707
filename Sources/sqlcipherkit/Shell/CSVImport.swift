import SQLCipherKit

/// `.import [--csv] [--skip N] FILE TABLE`: CSV records into a table, all or nothing, as the sqlite3 shell (3.40)
/// decides what is a header: the first N records are skipped; then, when the table does not exist, the next record
/// is the header it is created from (every column TEXT), and when it exists, every record is a row. Values are bound,
/// never spliced into SQL, and go through the SQL guard like any statement.
enum CSVImport {
    /// What `.import` was asked to do.
    struct Request: Equatable {
        var file: String
        var table: String
        /// How many records to skip first (`--skip N`).
        var skipCount = 0

        static let usage = "[--csv] [--skip N] FILE TABLE"

        /// Reads the options (before FILE, as in sqlite3): `--csv` (the only format, accepted as sqlite3 users write
        /// it) and `--skip N`.
        init(parsing command: DotCommand) throws {
            var arguments = command.arguments[...]
            var skipCount = 0
            while let option = arguments.first, option.hasPrefix("-") {
                arguments = arguments.dropFirst()
                switch option {
                case "--csv", "-csv":
                    continue
                case "--skip", "-skip":
                    guard let text = arguments.first, let count = Int(text), count >= 0 else {
                        throw CommandFailure(
                            "usage: .import \(Self.usage): --skip takes a number of records (0 or more)",
                            status: .usage)
                    }
                    skipCount = count
                    arguments = arguments.dropFirst()
                default:
                    throw CommandFailure(
                        "usage: .import \(Self.usage): \(option) is not an option of this shell's .import (its input is"
                            + " always RFC 4180 CSV)", status: .usage)
                }
            }
            guard arguments.count == 2 else { throw command.usage(Self.usage) }
            self.init(file: arguments[arguments.startIndex], table: arguments[arguments.startIndex + 1], skipCount: skipCount)
        }

        init(file: String, table: String, skipCount: Int = 0) {
            self.file = file
            self.table = table
            self.skipCount = skipCount
        }
    }

    struct Outcome: Equatable {
        /// Rows inserted.
        let rowCount: Int
        /// Into an existing table, without `--skip`: the first record holds the table's column names, so it is
        /// probably a header that was imported as a row (the shell warns).
        let firstRowMatchesColumnNames: Bool
    }

    /// Imports the file.
    static func run(_ request: Request, on connection: Connection) throws -> Outcome {
        let (file, table) = (request.file, request.table)
        let allRecords = try CSVReader.records(FileAccess.read(file, purpose: "the CSV file"), source: file)
        guard !allRecords.isEmpty else {
            throw CommandFailure("\(file) holds no CSV record", kind: "invalidArgument")
        }
        var records = allRecords.dropFirst(request.skipCount)
        let quotedTable = Connection.quoteIdentifier(table)
        let exists = try connection.tableExists(table)
        var header: CSVReader.Record?
        if !exists {
            guard let first = records.popFirst() else {
                throw CommandFailure(
                    "\(file): no record left after skipping \(request.skipCount) to make \(table) from (its header)",
                    kind: "invalidArgument")
            }
            header = first
        }
        let existingColumns = exists ? try connection.columns(in: table).map(\.name) : []
        let columnCount = header?.fields.count ?? existingColumns.count
        // A savepoint nests inside a transaction the operator opened; without one it is the transaction.
        try connection.execute("SAVEPOINT sqlcipherkit_import")
        do {
            if let header {
                // In sqlite3's words, so that the schema reads the same whichever shell imported the file.
                let columns = header.fields.map { Connection.quoteIdentifier($0) + " TEXT" }
                try connection.execute("CREATE TABLE \(quotedTable)(\n\(columns.joined(separator: ", ")))")
            }
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
        let first = records.first?.fields.map { $0.lowercased() }
        return Outcome(
            rowCount: records.count,
            firstRowMatchesColumnNames: exists && request.skipCount == 0
                && first == existingColumns.map { $0.lowercased() })
    }
}
