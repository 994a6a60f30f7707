import CSQLCipher
import SQLCipherKit

/// The workloads, each written once against the C API and once (or twice, for the `Decodable` fetch) against
/// SQLCipherKit.
///
/// The fetch functions are `@inline(never)` so that each pass is one call that callgrind can isolate
/// (`--toggle-collect`, `--dump-after`; see Docs/Performance.md).
///
/// Both sides do the same work per row (the same values computed the same way, every column read), and return a
/// checksum that is printed and compared, so the optimizer cannot drop any of it.
enum Workloads {
    static let columnCount = 10
    static let fetchRowCount = 200_000
    static let insertRowCount = 50_000

    static let columnList = (0..<columnCount).map { "c\($0)" }.joined(separator: ", ")
    static let fetchTable = "fetch_source"
    static let fetchSQL = "SELECT \(columnList) FROM \(fetchTable)"

    static func createTableSQL(_ name: String) -> String {
        "CREATE TABLE \(name)(" + (0..<columnCount).map { "c\($0) INTEGER" }.joined(separator: ", ") + ")"
    }

    static func insertSQL(_ table: String) -> String {
        "INSERT INTO \(table)(\(columnList)) VALUES (" + Array(repeating: "?", count: columnCount)
            .joined(separator: ", ") + ")"
    }

    /// The value of a column of a row: a mix of 1- to 4-byte record encodings, so rows look like real data.
    @inline(__always)
    static func value(row: Int, column: Int) -> Int64 {
        (Int64(row) &* 2_654_435_761 &+ Int64(column) &* 40_503) & (column & 1 == 0 ? 0xFF_FFFF : 0x3FF)
    }

    /// Fills the table read by the fetch benchmark (through SQLCipherKit, untimed).
    static func createFetchSource(_ db: Connection) throws {
        try db.execute(createTableSQL(fetchTable))
        try db.transaction {
            let insert = try db.prepare(insertSQL(fetchTable))
            for row in 0..<fetchRowCount {
                try insert.run(
                    value(row: row, column: 0), value(row: row, column: 1), value(row: row, column: 2),
                    value(row: row, column: 3), value(row: row, column: 4), value(row: row, column: 5),
                    value(row: row, column: 6), value(row: row, column: 7), value(row: row, column: 8),
                    value(row: row, column: 9))
            }
        }
    }

    // MARK: - Fetch

    /// Reads every column of every row with `sqlite3_column_int64`; returns the sum.
    @inline(never)
    static func rawFetch(_ raw: RawConnection) throws(BenchmarkError) -> Int64 {
        let statement = try raw.prepare(fetchSQL)
        defer { sqlite3_finalize(statement) }
        var sum: Int64 = 0
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { try raw.check(code, "step `\(fetchSQL)`"); break }
            for column in 0..<Int32(columnCount) {
                sum &+= sqlite3_column_int64(statement, column)
            }
        }
        return sum
    }

    /// Reads every column of every row with a cursor and `row[i] as Int64`; returns the sum.
    @inline(never)
    static func wrapperFetch(_ db: Connection) throws -> Int64 {
        var sum: Int64 = 0
        let rows = try db.cursor(fetchSQL)
        while let row = try rows.next() {
            for column in 0..<columnCount {
                sum &+= try row[column] as Int64
            }
        }
        return sum
    }

    /// The column names, in order: `row[name]` is given the same `String` values a caller's literals would be.
    static let columnNames = (0..<columnCount).map { "c\($0)" }

    /// Reads every column of every row with a cursor and `row[name] as Int64`; returns the sum.
    @inline(never)
    static func wrapperFetchByName(_ db: Connection) throws -> Int64 {
        var sum: Int64 = 0
        let rows = try db.cursor(fetchSQL)
        let names = columnNames
        while let row = try rows.next() {
            for name in names {
                sum &+= try row[name] as Int64
            }
        }
        return sum
    }

    // MARK: - Decodable fetch

    /// A row of the fetch table as a `Decodable` record: ten `Int64` properties whose synthesized coding keys are
    /// the column names.
    struct FetchRecord: Decodable {
        let c0, c1, c2, c3, c4, c5, c6, c7, c8, c9: Int64

        var sum: Int64 { c0 &+ c1 &+ c2 &+ c3 &+ c4 &+ c5 &+ c6 &+ c7 &+ c8 &+ c9 }
    }

    /// The same record read by column index through ``FetchableRecord``.
    struct IndexedRecord: FetchableRecord {
        let c0, c1, c2, c3, c4, c5, c6, c7, c8, c9: Int64

        init(row: Row) throws {
            c0 = try row[0]; c1 = try row[1]; c2 = try row[2]; c3 = try row[3]; c4 = try row[4]
            c5 = try row[5]; c6 = try row[6]; c7 = try row[7]; c8 = try row[8]; c9 = try row[9]
        }

        var sum: Int64 { c0 &+ c1 &+ c2 &+ c3 &+ c4 &+ c5 &+ c6 &+ c7 &+ c8 &+ c9 }
    }

    /// The `Decodable` record with the `init(row:)` that `@RowDecodable` generates for it (Tests'
    /// RowDecodableCompilerTests check that text): each property read by name with `decodeColumn`. Written out here
    /// so the benchmark builds without the RecordMacro trait (swift-syntax).
    struct GeneratedRecord: Decodable, FetchableRecord {
        let c0, c1, c2, c3, c4, c5, c6, c7, c8, c9: Int64

        init(row: Row) throws {
            self.c0 = try row.decodeColumn((Int64).self, named: "c0")
            self.c1 = try row.decodeColumn((Int64).self, named: "c1")
            self.c2 = try row.decodeColumn((Int64).self, named: "c2")
            self.c3 = try row.decodeColumn((Int64).self, named: "c3")
            self.c4 = try row.decodeColumn((Int64).self, named: "c4")
            self.c5 = try row.decodeColumn((Int64).self, named: "c5")
            self.c6 = try row.decodeColumn((Int64).self, named: "c6")
            self.c7 = try row.decodeColumn((Int64).self, named: "c7")
            self.c8 = try row.decodeColumn((Int64).self, named: "c8")
            self.c9 = try row.decodeColumn((Int64).self, named: "c9")
        }

        var sum: Int64 { c0 &+ c1 &+ c2 &+ c3 &+ c4 &+ c5 &+ c6 &+ c7 &+ c8 &+ c9 }
    }

    /// `db.fetchAll(GeneratedRecord.self, sql)`: a `Decodable` type fetched through its generated `init(row:)`.
    @inline(never)
    static func fetchAllGenerated(_ db: Connection) throws -> Int64 {
        try db.fetchAll(GeneratedRecord.self, fetchSQL).reduce(0) { $0 &+ $1.sum }
    }

    /// Builds every row one at a time with `db.fetchCursor(IndexedRecord.self, sql)` (`init(row:)`); returns the sum.
    @inline(never)
    static func recordCursorFetch(_ db: Connection) throws -> Int64 {
        var sum: Int64 = 0
        let records = try db.fetchCursor(IndexedRecord.self, fetchSQL)
        while let record = try records.next() {
            sum &+= record.sum
        }
        return sum
    }

    /// Decodes every row one at a time with `db.fetchCursor(FetchRecord.self, sql)`; returns the sum of all fields.
    @inline(never)
    static func decodingCursorFetch(_ db: Connection) throws -> Int64 {
        var sum: Int64 = 0
        let records = try db.fetchCursor(FetchRecord.self, fetchSQL)
        while let record = try records.next() {
            sum &+= record.sum
        }
        return sum
    }

    /// Decodes every row into an array with `db.fetchAll(FetchRecord.self, sql)`, then sums all fields.
    @inline(never)
    static func fetchAllDecoded(_ db: Connection) throws -> Int64 {
        try db.fetchAll(FetchRecord.self, fetchSQL).reduce(0) { $0 &+ $1.sum }
    }

    // MARK: - Insert

    /// BEGIN IMMEDIATE, one prepared statement (bind ×10, step, reset per row), COMMIT; returns the sum of the
    /// values bound.
    @discardableResult
    @inline(never)
    static func rawInsert(_ raw: RawConnection, table: String) throws(BenchmarkError) -> Int64 {
        try raw.execute("BEGIN IMMEDIATE TRANSACTION")
        let statement = try raw.prepare(insertSQL(table))
        var sum: Int64 = 0
        for row in 0..<insertRowCount {
            for column in 0..<columnCount {
                let value = value(row: row, column: column)
                sum &+= value
                let code = sqlite3_bind_int64(statement, Int32(column + 1), value)
                if code != SQLITE_OK { sqlite3_finalize(statement); try raw.check(code, "bind") }
            }
            let code = sqlite3_step(statement)
            if code != SQLITE_DONE { sqlite3_finalize(statement); try raw.check(code, "step `INSERT`") }
            sqlite3_reset(statement)
        }
        sqlite3_finalize(statement)
        try raw.execute("COMMIT TRANSACTION")
        return sum
    }

    /// `transaction {}`, one prepared statement, `run(v0, …, v9)` per row; returns the sum of the values bound.
    @discardableResult
    @inline(never)
    static func wrapperInsert(_ db: Connection, table: String) throws -> Int64 {
        try db.transaction {
            let insert = try db.prepare(insertSQL(table))
            var sum: Int64 = 0
            for row in 0..<insertRowCount {
                let v0 = value(row: row, column: 0), v1 = value(row: row, column: 1)
                let v2 = value(row: row, column: 2), v3 = value(row: row, column: 3)
                let v4 = value(row: row, column: 4), v5 = value(row: row, column: 5)
                let v6 = value(row: row, column: 6), v7 = value(row: row, column: 7)
                let v8 = value(row: row, column: 8), v9 = value(row: row, column: 9)
                sum &+= v0 &+ v1 &+ v2 &+ v3 &+ v4 &+ v5 &+ v6 &+ v7 &+ v8 &+ v9
                try insert.run(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9)
            }
            return sum
        }
    }
}
