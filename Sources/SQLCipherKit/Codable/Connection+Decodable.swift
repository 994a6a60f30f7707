extension Connection {
    /// Every row of one statement, decoded as `Record` (from the statement cache).
    ///
    /// ```swift
    /// let notes = try db.fetchAll(Note.self, "SELECT * FROM note WHERE rank > ? ORDER BY id", 3)
    /// ```
    ///
    /// Columns map to properties by name, as described in ``Row/decode(_:)``. The type comes first so the call never
    /// competes with ``all(_:_:as:)``, which reads the first column of each row as a ``DatabaseValueConvertible``.
    ///
    /// - Parameters:
    ///   - type: The type to decode each row as.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: The decoded rows.
    /// - Throws: A SQLite error, or the first decoding error (``DatabaseError/valueConversion``,
    ///   ``DatabaseError/invalidArgument`` for a missing column) naming the column and the Swift type.
    @inlinable
    public func fetchAll<Record: Decodable, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> [Record] {
        try cursor(sql, repeat each values).decode(Record.self).all()
    }

    /// Every row of one statement, decoded as `Record`, with an array or dictionary of arguments.
    ///
    /// - Parameters:
    ///   - type: The type to decode each row as.
    ///   - sql: One statement.
    ///   - arguments: Positional or named arguments.
    /// - Returns: The decoded rows.
    /// - Throws: A SQLite error, or the first decoding error (``DatabaseError/valueConversion``,
    ///   ``DatabaseError/invalidArgument`` for a missing column) naming the column and the Swift type.
    @inlinable
    public func fetchAll<Record: Decodable>(
        _ type: Record.Type, _ sql: String, arguments: StatementArguments
    ) throws -> [Record] {
        try cursor(sql, arguments: arguments).decode(Record.self).all()
    }

    /// The first row of one statement decoded as `Record`, or `nil` when there is no row.
    ///
    /// ```swift
    /// let note = try db.fetchOne(Note.self, "SELECT * FROM note WHERE id = ?", 42)
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode the row as.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: The decoded first row, or `nil`.
    /// - Throws: A SQLite error, or the first decoding error (``DatabaseError/valueConversion``,
    ///   ``DatabaseError/invalidArgument`` for a missing column) naming the column and the Swift type.
    public func fetchOne<Record: Decodable, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> Record? {
        let records = try cursor(sql, repeat each values).decode(Record.self)
        defer { records.close() }
        return try records.next()
    }

    /// The first row of one statement decoded as `Record`, with an array or dictionary of arguments.
    ///
    /// - Parameters:
    ///   - type: The type to decode the row as.
    ///   - sql: One statement.
    ///   - arguments: Positional or named arguments.
    /// - Returns: The decoded first row, or `nil`.
    /// - Throws: A SQLite error, or the first decoding error (``DatabaseError/valueConversion``,
    ///   ``DatabaseError/invalidArgument`` for a missing column) naming the column and the Swift type.
    public func fetchOne<Record: Decodable>(
        _ type: Record.Type, _ sql: String, arguments: StatementArguments
    ) throws -> Record? {
        let records = try cursor(sql, arguments: arguments).decode(Record.self)
        defer { records.close() }
        return try records.next()
    }

    /// A cursor over the rows of one statement, decoded as `Record` one at a time (from the statement cache).
    ///
    /// ```swift
    /// let notes = try db.fetchCursor(Note.self, "SELECT * FROM note")
    /// while let note = try notes.next() { … }
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode each row as.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: A cursor; rows are decoded as it advances.
    /// - Throws: A SQLite error while preparing or binding.
    public func fetchCursor<Record: Decodable, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> DecodingCursor<Record> {
        try cursor(sql, repeat each values).decode(Record.self)
    }
}
