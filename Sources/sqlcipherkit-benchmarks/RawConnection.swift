import CSQLCipher

/// The baseline: a `sqlite3*` used through the C API only, opened as a C programmer would for the same work:
/// `sqlite3_open_v2` (one thread per connection: `SQLITE_OPEN_NOMUTEX`, as SQLCipherKit opens its own) and
/// `sqlite3_key` with the raw key, nothing else. No busy timeout, no `PRAGMA temp_store` (these builds keep temporary
/// data in memory unless a PRAGMA says otherwise), and no first query: `sqlite3_key` reads nothing, so the workload's
/// own first statement is where the file is read and the key proved, as in a C program. What SQLCipherKit does on
/// top of this (its key check, `temp_store` forced and read back, the guard) is its cost, and shows in the ratios.
final class RawConnection {
    let sqliteConnection: OpaquePointer

    init(path: String, rawKeyText: String) throws(BenchmarkError) {
        var sqliteConnection: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &sqliteConnection, flags, nil)
        guard code == SQLITE_OK, let sqliteConnection else {
            let message = sqliteConnection.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(sqliteConnection)
            throw .sqlite(operation: "sqlite3_open_v2", code: code, message: message)
        }
        self.sqliteConnection = sqliteConnection
        let keyCode = rawKeyText.withCString { sqlite3_key(sqliteConnection, $0, Int32(rawKeyText.utf8.count)) }
        try check(keyCode, "sqlite3_key")
    }

    deinit {
        sqlite3_close_v2(sqliteConnection)
    }

    func check(_ code: Int32, _ operation: String) throws(BenchmarkError) {
        guard code == SQLITE_OK else {
            throw .sqlite(operation: operation, code: code, message: String(cString: sqlite3_errmsg(sqliteConnection)))
        }
    }

    /// Runs SQL statements, ignoring any rows.
    func execute(_ sql: String) throws(BenchmarkError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(sqliteConnection, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard code == SQLITE_OK else {
            throw .sqlite(operation: sql, code: code, message: message.map { String(cString: $0) } ?? "")
        }
    }

    func prepare(_ sql: String) throws(BenchmarkError) -> OpaquePointer {
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v2(sqliteConnection, sql, -1, &statement, nil), "prepare `\(sql)`")
        guard let statement else { throw .sqlite(operation: "prepare `\(sql)`", code: 0, message: "no statement") }
        return statement
    }

    /// The first column of every row as text (`NULL` as an empty string).
    func texts(_ sql: String) throws(BenchmarkError) -> [String] {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var texts: [String] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return texts }
            guard code == SQLITE_ROW else {
                throw .sqlite(operation: sql, code: code, message: String(cString: sqlite3_errmsg(sqliteConnection)))
            }
            texts.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
        }
    }

    /// The first column of the first row as an integer.
    func integer(_ sql: String) throws(BenchmarkError) -> Int64 {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        let code = sqlite3_step(statement)
        guard code == SQLITE_ROW else {
            throw .sqlite(operation: sql, code: code, message: String(cString: sqlite3_errmsg(sqliteConnection)))
        }
        return sqlite3_column_int64(statement, 0)
    }
}

/// Each benchmark thread uses its own connection; the C handle is opened with `SQLITE_OPEN_NOMUTEX`, so it is never
/// used by two threads at once.
extension RawConnection: @unchecked Sendable {}
