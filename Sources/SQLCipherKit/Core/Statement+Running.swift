import CSQLCipher

// Running a statement: stepping (the guard checks what an ATTACH attached), resetting, running to completion,
// cursors and rows read in place.
extension Statement {
    /// Runs one step.
    ///
    /// - Returns: `true` when a row is available, `false` when the statement is done.
    /// - Throws: A SQLite error; the statement is then reset and can be run again.
    @inlinable
    @inline(__always)
    public func step() throws -> Bool {
        try checkOpen()
        needsReset = true
        rowStamp &+= 1
        if attachments.attachesDatabase {
            return try stepAttachingDatabase()
        }
        switch sqlite3_step(sqliteStatement) {
        case SQLITE_ROW:
            // A callback of the caller's refused during the step (a close() inside a collation, say): this call is
            // the one that ran it.
            if handle.hasPendingMisuse { throw handle.misuseAfterStep(sqliteStatement) }
            return true
        case SQLITE_DONE:
            if handle.hasPendingMisuse { throw handle.misuseAfterStep(sqliteStatement) }
            return false
        case let code:
            let error = error(code: code)
            sqlite3_reset(sqliteStatement)
            throw error
        }
    }

    /// ``step()`` for a statement that attaches a database: the attachment is checked before anything can use it.
    @usableFromInline
    func stepAttachingDatabase() throws -> Bool {
        let code: CInt
        do {
            code = try EncryptionGuard.step(
                attachingStatement: sqliteStatement, fileNames: attachments.fileNamesToCheck, handle: handle)
        } catch {
            sqlite3_reset(sqliteStatement)
            throw error
        }
        if handle.hasPendingMisuse && (code == SQLITE_ROW || code == SQLITE_DONE) {
            throw handle.misuseAfterStep(sqliteStatement)
        }
        switch code {
        case SQLITE_ROW:
            return true
        case SQLITE_DONE:
            return false
        default:
            let error = error(code: code)
            sqlite3_reset(sqliteStatement)
            throw error
        }
    }

    /// Resets the statement so it can run again; bindings are kept.
    ///
    /// Errors of the previous run were thrown by ``step()``, so this only throws when the connection is closed.
    /// See [sqlite3_reset](https://www.sqlite.org/c3ref/reset.html).
    @inlinable
    public func reset() throws {
        try checkOpen()
        resetNow()
        // A trace event comes as a statement stopped half-way is reset: a refusal inside it is this call's.
        if handle.hasPendingMisuse, let misuse = handle.takePendingMisuse() { throw misuse }
    }

    /// Binds the values and runs the statement to completion (for INSERT, UPDATE, DELETE, DDL).
    ///
    /// Rows a SELECT would return are stepped over. Use ``Connection/lastInsertRowID`` and
    /// ``Connection/changesCount`` for the outcome. A cursor still open over the statement ends (it returns no
    /// more rows), as when a new cursor is made.
    // Inlined into the caller: left out of line (the optimizer's choice once the cursor and reset bookkeeping grew
    // it), every row of an insert paid a call and a frame (Docs/Performance.md, "Insert").
    @inlinable
    @inline(__always)
    public func run<each Value: DatabaseValueConvertible>(_ values: repeat each Value) throws {
        endCursors()
        try resetIfBusy()
        try bind(repeat each values)
        try runToCompletion()
    }

    /// Ends any cursor over the statement (it returns no more rows), as a new cursor would: running the statement
    /// rebinds and resets it under that cursor, which would otherwise read another binding's rows.
    @inlinable
    func endCursors() {
        cursorGeneration &+= 1
        openCursorGeneration = 0
    }

    /// Resets a statement that ran since the library last reset it (an abandoned cursor, a ``step()`` to the end)
    /// or that is mid-run through ``sqliteStatement``; ``runToCompletion()`` resets after each run.
    @inlinable
    func resetIfBusy() throws {
        try checkOpen()
        if needsReset || sqlite3_stmt_busy(sqliteStatement) != 0 {
            resetNow()
        }
    }

    /// Binds the arguments and runs the statement to completion; see ``run(_:)``.
    public func run(arguments: StatementArguments) throws {
        endCursors()
        try reset()
        try bind(arguments: arguments)
        try runToCompletion()
    }

    @inlinable
    func runToCompletion() throws {
        while try step() {}
        resetNow()
    }

    /// Binds the values and returns a cursor over the result rows.
    @inlinable
    public func cursor<each Value: DatabaseValueConvertible>(_ values: repeat each Value) throws -> RowCursor {
        try reset()
        try bind(repeat each values)
        return RowCursor(statement: self)
    }

    /// Binds the arguments and returns a cursor over the result rows.
    public func cursor(arguments: StatementArguments) throws -> RowCursor {
        try reset()
        try bind(arguments: arguments)
        return RowCursor(statement: self)
    }

    // MARK: - Rows read in place

    /// Binds the values and passes each result row, read in place, to `body` until it returns `false` or the rows
    /// end; then resets the statement.
    ///
    /// For the calls that are done with their rows when they return (``Connection/first(_:_:map:)``,
    /// ``Connection/scalar(_:_:as:)``, ``Connection/all(_:_:map:)``): the same contract as a ``RowCursor`` closed
    /// at the end, without allocating one on every call (a point read's cursor object, its setup and release were
    /// a large share of its cost). Like a new cursor, it ends any cursor still open over the
    /// statement; and a cursor opened over it from inside `body` ends this loop, which then leaves the statement
    /// to that cursor.
    @inlinable
    func forEachRowInPlace<each Value: DatabaseValueConvertible>(
        _ values: repeat each Value, eachRow body: (Row) throws -> Bool
    ) throws {
        // Its callers take the statement from the cache only when it is not mid-run, so it needs a reset only when
        // it ran since the library last reset it (a caller's step() to the end); the usual read skips the engine's
        // reset and its mutex.
        try checkOpen()
        if needsReset {
            resetNow()
        }
        try bind(repeat each values)
        endCursors()
        let generation = cursorGeneration
        var row = Row(inPlace: self)
        do {
            while cursorGeneration == generation, try step() {
                // The row is valid until the statement moves on: a copy `body` keeps refuses to read after that.
                row.stamp = rowStamp
                guard try body(row) else { break }
            }
        } catch {
            if cursorGeneration == generation && handle.isOpen { resetNow() }
            throw error
        }
        if cursorGeneration == generation && handle.isOpen {
            resetNow()
            // A trace event comes as a statement stopped half-way (`first`) is reset: a refusal inside it is ours.
            if handle.hasPendingMisuse, let misuse = handle.takePendingMisuse() { throw misuse }
        }
    }
}
