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
        try executeScript(sql, eachRow: body, afterEachStatement: { _ in })
    }

    /// ``executeScript(_:eachRow:)``, calling `ended` after each statement has run to its end (not after the one
    /// that fails): `sqlcipherkit exec` reports which statements of a script ran and which transaction was left open.
    package func executeScript(
        _ sql: String, eachRow body: (Statement, Row) throws -> Void, afterEachStatement ended: (Statement) throws -> Void
    ) throws {
        _ = try checkedConnection(sql: sql)
        let handle = handle
        let compiler = StatementCompiler(handle: handle)
        // Each statement is compiled once, after the ones before it ran (a CREATE TABLE precedes the INSERT using it).
        try compiler.forEachStatement(in: sql) { compiled, text in
            let statement = Statement(handle: handle, compiled: compiled, sql: text())
            try statement.cursor().forEach { row in try body(statement, row) }
            try ended(statement)
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
