import CSQLCipher

// The parameters of a statement and the binding of values to them.
extension Statement {
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
        if attachments.attachesDatabase { noteAttachBinding(value.databaseValue, at: index) }
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

    /// Hands the value bound to an ATTACH statement to its ``AttachBookkeeping``.
    // Out of line, and a method of the statement rather than the struct's mutating method called from the inlined
    // bindChecked: mutating `attachments` there made the compiler form its address before the test of
    // `attachesDatabase`, one instruction more on every bound value of every statement (callgrind, pool-read-1).
    @usableFromInline
    func noteAttachBinding(_ value: DatabaseValue, at index: CInt) {
        attachments.noteBinding(value, at: index)
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
}
