import CSQLCipher

/// A prepared SQL statement: exactly one statement, compiled once, run many times.
///
/// ```swift
/// let insert = try db.prepare("INSERT INTO note(body, rank) VALUES (?, ?)")
/// try insert.run("one", 1)
/// try insert.run("two", 2)
///
/// let select = try db.prepare("SELECT id, body FROM note WHERE rank > :rank")
/// let rows = try select.cursor(arguments: ["rank": 0])
/// while let row = try rows.next() { let id: Int64 = try row[0] }
/// ```
///
/// Parameters are numbered from 1, as in SQLite. Binding checks the index or name and the number of arguments, and a
/// value that SQLite rejects throws. Bound values never appear in errors or descriptions.
///
/// A statement that ran to its end (``step()`` returned `false`) is reset by the next bind or run, as `sqlite3_step`
/// resets one by itself; a statement still in the middle of its rows (``isBusy``) refuses a new binding until
/// ``reset()``: binding it throws `SQLITE_MISUSE` (``DatabaseError/SQLITE_MISUSE``).
///
/// A statement belongs to its ``Connection`` and, like it, must be used from one thread at a time. When the
/// connection closes, the statement is finalized with it and every later use throws
/// ``DatabaseError/connectionClosed``. Otherwise it is finalized when released.
///
/// See [Prepared Statement Object](https://www.sqlite.org/c3ref/stmt.html).
public final class Statement {
    /// The raw `sqlite3_stmt*`. Valid while the connection is open; never finalize it yourself.
    public let sqliteStatement: OpaquePointer

    @usableFromInline
    let handle: ConnectionHandle

    /// The SQL text of the statement.
    public let sql: String

    /// The number of parameters (the largest parameter index).
    public let parameterCount: Int

    /// The number of result columns when the statement was compiled: the count a ``Row`` read in place has.
    @usableFromInline
    let resultColumnCount: Int

    @exclusivity(unchecked)
    private var columnIndexByName: [String: Int]?

    /// The names `row[name]` asked for, each with the column it resolved to (-1: none), in the order first asked
    /// (``nameLookupCount`` of them, at most ``maximumNameLookupCount``; allocated at the first lookup by name).
    ///
    /// Code that reads columns by name asks for the same names in the same order on every row, so the next name is
    /// predicted: ``nameLookupPosition`` points after the last one found, and a lookup that matches the prediction
    /// costs one string comparison (for names of up to 15 UTF-8 bytes, one comparison of two words), without hashing
    /// the name. A plain pointer rather than an array: comparing in place does not retain the remembered name.
    // Read and written on every `row[name]`, from the statement's one thread; no access nests.
    @usableFromInline
    @exclusivity(unchecked)
    var nameLookups: UnsafeMutablePointer<NameLookup>?

    @usableFromInline
    @exclusivity(unchecked)
    var nameLookupCount = 0

    @usableFromInline
    @exclusivity(unchecked)
    var nameLookupPosition = 0

    /// A name asked for by `row[name]` and the column index it resolved to, or -1 when there is none.
    @usableFromInline
    struct NameLookup {
        @usableFromInline let name: String
        @usableFromInline let index: Int
    }

    /// The most names remembered in ``nameLookups``; further names are looked up by hashing every time.
    static let maximumNameLookupCount = 64

    /// The column names last read while the connection was open: once it closes (and finalizes the statement),
    /// rows copied from the statement still need them.
    @exclusivity(unchecked)
    private var lastColumnNames: [String]?

    /// What the guard keeps about the ATTACH actions of the statement (``AttachBookkeeping``); its
    /// `attachesDatabase` is read on every step and bind.
    // No dynamic exclusivity check (a statement is used from one thread): on the bound file name it cost two calls
    // into the runtime per bind, on every pool read.
    @usableFromInline
    @exclusivity(unchecked)
    var attachments: AttachBookkeeping

    /// Bumped by each new cursor over the statement; only the newest cursor may step or reset it.
    // Checked on every row; no dynamic exclusivity check (a statement is used from one thread).
    @usableFromInline
    @exclusivity(unchecked)
    var cursorGeneration = 0

    /// The generation of the cursor over the statement that has not finished yet (0: none). The statement cache
    /// hands out no statement with one: before its first step such a statement is not busy, and binding it again
    /// would give the cursor another binding's rows.
    @usableFromInline
    @exclusivity(unchecked)
    var openCursorGeneration = 0

    /// `true` once ``step()`` ran, until the library resets the statement: a statement that may have run (to a row,
    /// or to its end) must be reset before it is bound again. Lets the paths that reset before binding skip the
    /// engine's reset, with its mutex, when the statement is already reset (the usual case: every run the library
    /// finishes resets it). A statement stepped through ``sqliteStatement`` is not seen here; see ``bind(_:at:)``.
    // Written on every step, from the statement's one thread.
    @usableFromInline
    @exclusivity(unchecked)
    var needsReset = false

    /// Identifies the row the statement stands on: changed by every step and reset, and when the connection closes.
    /// A ``Row`` read in place keeps the stamp of its row and refuses to read once the statement moved on.
    // Read on every column a row reads, written on every step, from the statement's one thread.
    @usableFromInline
    @exclusivity(unchecked)
    var rowStamp: UInt = 0

    /// Ends the rows handed out so far (the connection is closing, and the statement with it).
    func invalidateRows() {
        rowStamp &+= 1
    }

    /// Resets the statement in the engine and notes it (``needsReset``); the connection must be open.
    @inlinable
    @inline(__always)
    func resetNow() {
        sqlite3_reset(sqliteStatement)
        needsReset = false
        rowStamp &+= 1
    }

    /// Compiles exactly one statement. Throws for an empty SQL string or one with a second statement after the first.
    convenience init(handle: ConnectionHandle, sql: String) throws {
        let compiler = StatementCompiler(handle: handle)
        let compiled = try sql.withCString { start throws -> CompiledStatement in
            var tail: UnsafePointer<CChar>?
            guard let compiled = try compiler.compile(start, tail: &tail, sql: sql) else {
                throw DatabaseError(.invalidSQL, "the SQL contains no statement", sql: sql)
            }
            if let tail, compiler.containsStatement(tail) {
                sqlite3_finalize(compiled.sqliteStatement)
                let shown = String(String(cString: tail).drop(while: { $0.isWhitespace || $0 == ";" }))
                throw DatabaseError(
                    .invalidSQL,
                    "expected one statement, found more; leftover SQL: `\(shown)`"
                        + " (use Connection.execute(_:) to run several statements)",
                    sql: sql)
            }
            return compiled
        }
        self.init(handle: handle, compiled: compiled, sql: sql)
    }

    /// Adopts a statement the ``StatementCompiler`` compiled; `sql` is its text.
    init(handle: ConnectionHandle, compiled: CompiledStatement, sql: String) {
        self.sqliteStatement = compiled.sqliteStatement
        self.handle = handle
        self.sql = sql
        self.parameterCount = Int(sqlite3_bind_parameter_count(compiled.sqliteStatement))
        self.resultColumnCount = Int(sqlite3_column_count(compiled.sqliteStatement))
        // The guard notes the ATTACH actions it sees compiled: this statement attaches a database.
        self.attachments = AttachBookkeeping(compiled: compiled)
        handle.adopt(self)
    }

    deinit {
        // After the connection closed, the statement was finalized by ConnectionHandle.close().
        if handle.isOpen {
            handle.finalize(sqliteStatement)
        }
        if let nameLookups {
            nameLookups.deinitialize(count: nameLookupCount)
            nameLookups.deallocate()
        }
    }

    /// Throws unless the library may call into the engine with the statement now: its connection is open, and no
    /// callback that must not use the connection is running (``DatabaseError/callbackMisuse``).
    @inlinable
    func checkOpen() throws(DatabaseError) {
        if !handle.isUsable { throw handle.unusableError(sql: sql) }
    }

    @usableFromInline
    func error(code: CInt) -> DatabaseError {
        EncryptionGuard.error(code: code, sql: sql, handle: handle)
    }

    // MARK: - Columns

    /// The number of columns in the result rows; 0 for statements that return no rows.
    public var columnCount: Int {
        // After the connection closed, the statement is finalized and must not be touched.
        guard handle.isOpen else { return lastColumnNames?.count ?? 0 }
        return Int(sqlite3_column_count(sqliteStatement))
    }

    /// The column names, as SQLite reports them (the `AS` alias when there is one).
    public var columnNames: [String] {
        guard handle.isOpen else { return lastColumnNames ?? [] }
        let names = (0..<CInt(columnCount)).map { String(cString: sqlite3_column_name(sqliteStatement, $0)) }
        lastColumnNames = names
        return names
    }

    /// Reads the column names once, so that rows copied from the statement keep them after the connection closes.
    func rememberColumnNames() {
        if lastColumnNames == nil { _ = columnNames }
    }

    /// The declared type of a result column (`"INTEGER"`, `"TEXT"`, …), or `nil` for an expression.
    ///
    /// - Parameter index: A 0-based column index.
    /// - Throws: ``DatabaseError/invalidArgument`` when the index is out of range.
    public func declaredType(ofColumn index: Int) throws -> String? {
        try checkOpen()
        guard (0..<columnCount).contains(index) else {
            throw DatabaseError.outOfRange("column index \(index) out of range 0..<\(columnCount)", sql: sql)
        }
        return sqlite3_column_decltype(sqliteStatement, CInt(index)).map { String(cString: $0) }
    }

    /// The 0-based index of the first column with this name (compared case-insensitively), or `nil`.
    public func columnIndex(named name: String) -> Int? {
        if let index = columnIndexByName?[name] { return index }
        if columnIndexByName == nil {
            var map: [String: Int] = [:]
            for (index, name) in columnNames.enumerated() {
                if map[name] == nil { map[name] = index }
                let lowered = name.lowercased()
                if map[lowered] == nil { map[lowered] = index }
            }
            columnIndexByName = map
            if let index = map[name] { return index }
        }
        return columnIndexByName?[name.lowercased()]
    }

    /// ``columnIndex(named:)`` for `row[name]`: the predicted name first (see ``nameLookups``), then the names
    /// already asked for, then the hashed lookup.
    @inlinable
    @inline(__always)
    func predictedColumnIndex(named name: String) -> Int? {
        // After the last name of a row comes the first one of the next row.
        let position = nameLookupPosition < nameLookupCount ? nameLookupPosition : 0
        if position < nameLookupCount, let lookups = nameLookups, lookups[position].name == name {
            nameLookupPosition = position &+ 1
            let index = lookups[position].index
            return index >= 0 ? index : nil
        }
        return unpredictedColumnIndex(named: name)
    }

    @usableFromInline
    func unpredictedColumnIndex(named name: String) -> Int? {
        // A new row starts over at the first name; otherwise the caller skipped or reordered names.
        if let lookups = nameLookups {
            for position in 0..<nameLookupCount where lookups[position].name == name {
                nameLookupPosition = position + 1
                let index = lookups[position].index
                return index >= 0 ? index : nil
            }
        }
        let index = columnIndex(named: name)
        if nameLookupCount < Self.maximumNameLookupCount {
            let lookups = nameLookups ?? .allocate(capacity: Self.maximumNameLookupCount)
            nameLookups = lookups
            (lookups + nameLookupCount).initialize(to: NameLookup(name: name, index: index ?? -1))
            nameLookupCount += 1
            nameLookupPosition = nameLookupCount
        }
        return index
    }

    /// `true` when the statement does not write to the database.
    ///
    /// See [sqlite3_stmt_readonly](https://www.sqlite.org/c3ref/stmt_readonly.html).
    public var isReadOnly: Bool {
        handle.isOpen && sqlite3_stmt_readonly(sqliteStatement) != 0
    }

    /// `true` while the statement has stepped but not finished or been reset (it then holds a read transaction).
    public var isBusy: Bool {
        handle.isOpen && sqlite3_stmt_busy(sqliteStatement) != 0
    }

    // MARK: - Parameters

    /// The name of a parameter, with its prefix (`:a`, `@a`, `$a`), or `nil` for a positional `?`.
    ///
    /// - Parameter index: A 1-based parameter index.
    public func parameterName(at index: Int) -> String? {
        guard (1...max(parameterCount, 1)).contains(index), parameterCount > 0, handle.isOpen else { return nil }
        return sqlite3_bind_parameter_name(sqliteStatement, CInt(index)).map { String(cString: $0) }
    }

    /// The 1-based index of a named parameter. A name without a prefix matches `:name`, `@name` or `$name`.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` naming the parameter when the statement has no such parameter.
    public func parameterIndex(named name: String) throws -> Int {
        try checkOpen()
        let candidates = name.first.map { ":@$?".contains($0) } == true ? [name] : [":" + name, "@" + name, "$" + name]
        for candidate in candidates {
            let index = sqlite3_bind_parameter_index(sqliteStatement, candidate)
            if index > 0 { return Int(index) }
        }
        throw DatabaseError.outOfRange("the statement has no parameter named `\(name)`", sql: sql)
    }

    /// Binds a value to the parameter at a 1-based index.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` when the index is out of range; a SQLite error when the value
    ///   cannot be bound (too big, or a `UInt64` above `Int64.max`).
    @inlinable
    public func bind(_ value: some DatabaseValueConvertible, at index: Int) throws {
        try checkOpen()
        guard index >= 1 && index <= parameterCount else {
            throw DatabaseError.outOfRange("parameter index \(index) out of range 1...\(parameterCount)", sql: sql)
        }
        try bindChecked(value, at: CInt(index))
    }

    /// Binds a value to a named parameter (`:name`, `@name`, `$name`, or the name without prefix).
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` when the statement has no such parameter.
    public func bind(_ value: some DatabaseValueConvertible, named name: String) throws {
        try bindChecked(value, at: CInt(parameterIndex(named: name)))
    }

    /// Binds a fixed list of values to the parameters 1…n, without boxing them.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` when the number of values differs from ``parameterCount``.
    @inlinable
    public func bind<each Value: DatabaseValueConvertible>(_ values: repeat each Value) throws {
        try checkOpen()
        var count = 0
        for _ in repeat each values { count += 1 }
        try checkArgumentCount(count)
        var index: CInt = 0
        for value in repeat each values {
            index += 1
            try bindChecked(value, at: index)
        }
    }

    /// Binds an array (to parameters 1…n) or a dictionary (by name) of values.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` for a wrong number of positional values, an unknown name, or a
    ///   named parameter left without a value.
    public func bind(arguments: StatementArguments) throws {
        try checkOpen()
        switch arguments.storage {
        case .positional(let values):
            try checkArgumentCount(values.count)
            for (offset, value) in values.enumerated() {
                try bindChecked(AnyDatabaseValueConvertible(value), at: CInt(offset + 1))
            }
        case .named(let values):
            var bound = Set<Int>()
            for (name, value) in values {
                let index = try parameterIndex(named: name)
                try bindChecked(AnyDatabaseValueConvertible(value), at: CInt(index))
                bound.insert(index)
            }
            if let missing = (1...max(parameterCount, 1)).first(where: { parameterCount > 0 && !bound.contains($0) }) {
                let name = parameterName(at: missing) ?? "?\(missing)"
                throw DatabaseError.outOfRange("no value for parameter `\(name)`", sql: sql)
            }
        }
    }

    @inlinable
    @inline(__always)
    func checkArgumentCount(_ count: Int) throws(DatabaseError) {
        if count != parameterCount { throw argumentCountError(count) }
    }

    @usableFromInline
    func argumentCountError(_ count: Int) -> DatabaseError {
        DatabaseError.outOfRange("the statement takes \(parameterCount) argument(s), \(count) given", sql: sql)
    }

    @inlinable
    @inline(__always)
    func bindChecked(_ value: some DatabaseValueConvertible, at index: CInt) throws(DatabaseError) {
        var code = value.bind(to: DatabaseParameter(sqliteStatement, index)).rawValue
        if code != SQLITE_OK {
            guard resetIfHalted(code) else { throw bindError(code: code, index: index) }
            code = value.bind(to: DatabaseParameter(sqliteStatement, index)).rawValue
            if code != SQLITE_OK { throw bindError(code: code, index: index) }
        }
        if attachments.attachesDatabase { attachments.noteBinding(value.databaseValue, at: index) }
    }

    /// After a bind failed with `code`: resets the statement and returns `true` when the failure is SQLite's
    /// refusal to bind a statement that ran to its end and was not reset (stepped through ``sqliteStatement``, which
    /// ``needsReset`` does not see). SQLite's own `sqlite3_step` resets such a statement by itself; binding does
    /// the same here. A statement mid-run (``isBusy``) is not reset: its rows are still being read.
    @usableFromInline
    func resetIfHalted(_ code: CInt) -> Bool {
        guard code == SQLITE_MISUSE, handle.isOpen, sqlite3_stmt_busy(sqliteStatement) == 0 else { return false }
        resetNow()
        return true
    }

    @usableFromInline
    func bindError(code: CInt, index: CInt) -> DatabaseError {
        if code == SQLITE_TOOBIG {
            return DatabaseError(
                kind: .invalidArgument, code: ResultCode(rawValue: code),
                message: "argument \(index) is too big for SQLite (integers are signed 64-bit; text and blobs are"
                    + " limited by SQLITE_MAX_LENGTH)",
                sql: sql)
        }
        return error(code: code)
    }

    /// Sets every parameter back to NULL.
    ///
    /// See [sqlite3_clear_bindings](https://www.sqlite.org/c3ref/clear_bindings.html).
    public func clearBindings() throws {
        try checkOpen()
        sqlite3_clear_bindings(sqliteStatement)
        attachments.boundFileName = nil
    }

    // MARK: - Running

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

@available(*, unavailable, message: "A Statement belongs to one thread; share a DatabaseQueue instead.")
extension Statement: Sendable {}

extension Statement: CustomStringConvertible {
    /// The SQL. Bound values are never shown.
    public var description: String { sql }
}
