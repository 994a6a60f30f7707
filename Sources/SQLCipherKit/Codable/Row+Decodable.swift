extension Row {
    /// Decodes the row into a `Decodable` type, reading its properties from the columns of the same name.
    ///
    /// ```swift
    /// struct Note: Codable {
    ///     var id: Int64
    ///     var body: String
    ///     var createdAt: Date
    ///     enum CodingKeys: String, CodingKey { case id, body, createdAt = "created_at" }
    /// }
    /// for row in try db.query("SELECT * FROM note") {
    ///     let note = try row.decode(Note.self)
    /// }
    /// ```
    ///
    /// - Keys are column names (compared case-insensitively when there is no exact match); `CodingKeys` map
    ///   properties to columns.
    /// - A property of a ``DatabaseValueConvertible`` type (integers, `Double`, `Bool`, `String`, `Data`, `Date`,
    ///   `UUID`, `URL`, `DatabaseValue`, and `RawRepresentable` types that declare the conformance) is read with
    ///   that type's own strict conversion, straight from the statement. An optional property reads NULL (or a
    ///   missing column) as `nil`.
    /// - A single-value type (a `RawRepresentable` enum that is only `Codable`) reads the column through a
    ///   single-value container.
    /// - Any other `Decodable` property (arrays, dictionaries, nested structs) is read from JSON stored in the
    ///   column as TEXT or BLOB.
    /// - At the top level, an unkeyed container reads the columns in order and a single-value container reads the
    ///   first column.
    ///
    /// For many rows, `Connection.fetchAll(_:_:_:)` and ``RowCursor/decode(_:)`` are faster: they learn the
    /// column of each key once per statement instead of once per row.
    ///
    /// - Parameter type: The type to decode.
    /// - Returns: The decoded value.
    /// - Throws: ``DatabaseError/invalidArgument`` naming the column when a non-optional property has no column;
    ///   ``DatabaseError/valueConversion`` naming the column and the Swift type when a value does not convert (NULL
    ///   for a non-optional property, TEXT for an integer, JSON that does not match); the initializer's own errors;
    ///   ``DatabaseError/connectionClosed`` for a cursor row whose connection has closed.
    public func decode<Record: Decodable>(_ type: Record.Type = Record.self) throws -> Record {
        let context = try RowDecodingContext(row: self, recordType: Record.self)
        defer { context.finish() }
        return try context.decodeRecord(Record.self)
    }
}

// MARK: - One column by name (what @RowDecodable generates)

extension Row {
    /// The column named `name` as `Value`, with `Value`'s own strict conversion: `row[name]`.
    ///
    /// With its `Decodable` and `decodeColumnIfPresent(_:named:)` overloads, this is what the `@RowDecodable` macro
    /// (module `SQLCipherKitRecordMacro`, Docs/Codable.md) generates for each stored property: the column read the
    /// way ``decode(_:)`` would read it, without the standard library's keyed container.
    ///
    /// - Parameters:
    ///   - type: The value's type.
    ///   - name: The column name (case-insensitive when there is no exact match).
    /// - Returns: The value.
    /// - Throws: ``DatabaseError/invalidArgument`` when the row has no such column; ``DatabaseError/valueConversion``
    ///   naming the column when the value does not convert (NULL included).
    @inlinable
    @inline(__always)
    public func decodeColumn<Value: DatabaseValueConvertible>(_ type: Value.Type, named name: String) throws -> Value {
        try self[name]
    }

    /// The column named `name` as `Value`, for a type that is both ``DatabaseValueConvertible`` and `Decodable`
    /// (most are): the database conversion, as ``decode(_:)`` uses. This overload only settles which of the two
    /// others a call means.
    ///
    /// - Parameters:
    ///   - type: The value's type.
    ///   - name: The column name.
    /// - Returns: The value.
    /// - Throws: As `decodeColumn(_:named:)` for a ``DatabaseValueConvertible`` type.
    @inlinable
    @inline(__always)
    public func decodeColumn<Value: DatabaseValueConvertible & Decodable>(
        _ type: Value.Type, named name: String
    ) throws -> Value {
        try self[name]
    }

    /// The column named `name` as a `Decodable` type that is not ``DatabaseValueConvertible``, read as
    /// ``decode(_:)`` reads such a property: a single-value type (a `RawRepresentable` enum) through a single-value
    /// container, anything else from JSON stored as TEXT or BLOB.
    ///
    /// - Parameters:
    ///   - type: The value's type.
    ///   - name: The column name.
    /// - Returns: The value.
    /// - Throws: ``DatabaseError/invalidArgument`` when the row has no such column; ``DatabaseError/valueConversion``
    ///   naming the column when the value does not decode.
    public func decodeColumn<Value: Decodable>(_ type: Value.Type, named name: String) throws -> Value {
        guard let index = columnIndexIfPresent(named: name) else { throw nameError(name) }
        guard let value = try decodeOneColumn(Value.self, at: index, nullIsNil: false) else {
            // Not reached: without `nullIsNil`, NULL throws a conversion error naming the column.
            throw conversionError(index, to: Value.self)
        }
        return value
    }

    /// The column named `name` as `Value`, or `nil` when the row has no such column or its value is NULL: what
    /// ``decode(_:)`` does for an optional property.
    ///
    /// - Parameters:
    ///   - type: The wrapped type.
    ///   - name: The column name.
    /// - Returns: The value, or `nil`.
    /// - Throws: ``DatabaseError/valueConversion`` naming the column when a non-NULL value does not convert.
    @inlinable
    @inline(__always)
    public func decodeColumnIfPresent<Value: DatabaseValueConvertible>(
        _ type: Value.Type, named name: String
    ) throws -> Value? {
        guard let index = columnIndexIfPresent(named: name) else { return nil }
        return try self[index] as Value?
    }

    /// The column named `name` as `Value` or `nil`, for a type that is both ``DatabaseValueConvertible`` and
    /// `Decodable`: the database conversion. This overload only settles which of the two others a call means.
    ///
    /// - Parameters:
    ///   - type: The wrapped type.
    ///   - name: The column name.
    /// - Returns: The value, or `nil` for a missing column or NULL.
    /// - Throws: As `decodeColumnIfPresent(_:named:)` for a ``DatabaseValueConvertible`` type.
    @inlinable
    @inline(__always)
    public func decodeColumnIfPresent<Value: DatabaseValueConvertible & Decodable>(
        _ type: Value.Type, named name: String
    ) throws -> Value? {
        guard let index = columnIndexIfPresent(named: name) else { return nil }
        return try self[index] as Value?
    }

    /// The column named `name` as a `Decodable` type that is not ``DatabaseValueConvertible``, or `nil` when the row
    /// has no such column or its value is NULL.
    ///
    /// - Parameters:
    ///   - type: The wrapped type.
    ///   - name: The column name.
    /// - Returns: The value, or `nil`.
    /// - Throws: ``DatabaseError/valueConversion`` naming the column when a non-NULL value does not decode.
    public func decodeColumnIfPresent<Value: Decodable>(_ type: Value.Type, named name: String) throws -> Value? {
        guard let index = columnIndexIfPresent(named: name) else { return nil }
        return try decodeOneColumn(Value.self, at: index, nullIsNil: true)
    }

    /// One column through a decoding context of its own (the `Decodable` overloads above).
    private func decodeOneColumn<Value: Decodable>(_ type: Value.Type, at index: Int, nullIsNil: Bool) throws -> Value? {
        let context = try RowDecodingContext(row: self, recordType: Value.self)
        defer { context.finish() }
        return try context.decodeOneColumn(Value.self, at: index, nullIsNil: nullIsNil)
    }
}
