import CSQLCipher

extension Connection {
    /// Runs the statements of a script one after the other, handing every row a statement returns to `body`.
    ///
    /// ```swift
    /// try db.executeScript("CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT x FROM t") { statement, row in
    ///     print(statement.columnNames, try row.databaseValues)
    /// }
    /// ```
    ///
    /// Each statement is compiled only when the ones before it have run, so a script may create a table and then
    /// use it. Unlike ``execute(_:)``, rows are not discarded. The script is not wrapped in a transaction.
    ///
    /// - Parameters:
    ///   - sql: One or more SQL statements separated by semicolons, without parameters.
    ///   - body: Called with the statement and each of its rows; the row is valid only during the call.
    /// - Throws: The first statement's error, naming that statement's SQL; the statements before it stay executed.
    public func executeScript(_ sql: String, eachRow body: (Statement, Row) throws -> Void) throws {
        let sqliteConnection = try checkedConnection(sql: sql)
        let utf8 = Array(sql.utf8) + [0]
        var offset = 0
        while offset < utf8.count - 1 {
            // Find where the next statement ends without running it; it is compiled again below, once the
            // statements before it have run (a CREATE TABLE must precede the INSERT that uses it).
            let (code, length, isEmpty) = utf8.withUnsafeBufferPointer { buffer in
                let start = UnsafeRawPointer(buffer.baseAddress! + offset).assumingMemoryBound(to: CChar.self)
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                handle.guardState.lastRefusal = nil
                let code = sqlite3_prepare_v2(sqliteConnection, start, -1, &statement, &tail)
                defer { sqlite3_finalize(statement) }
                let length = tail.map { $0 - start } ?? (buffer.count - 1 - offset)
                return (code, length, statement == nil)
            }
            let text = String(decoding: utf8[offset..<(offset + length)], as: UTF8.self)
            guard code == SQLITE_OK else {
                throw EncryptionGuard.error(
                    code: code, connection: sqliteConnection, sql: text.trimmingWhitespace(), state: handle.guardState)
            }
            offset += max(length, 1)
            if isEmpty { continue }  // whitespace or a comment
            let statement = try prepare(text.trimmingWhitespace())
            try statement.cursor().forEach { row in try body(statement, row) }
        }
    }
}

extension Connection {
    /// Whether `sql` ends with a complete statement (a semicolon outside string literals, identifiers, comments and
    /// trigger bodies), as [sqlite3_complete](https://www.sqlite.org/c3ref/complete.html) decides. The shell reads
    /// until it is: a statement may span lines.
    package static func isCompleteStatement(_ sql: String) -> Bool {
        sqlite3_complete(sql) != 0
    }
}
