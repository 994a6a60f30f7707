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
