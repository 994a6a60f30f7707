/// A record read straight from a ``Row``, by column index or name: the fast alternative to `Decodable` for types
/// fetched in bulk.
///
/// ```swift
/// struct Note: FetchableRecord {
///     var id: Int64
///     var body: String
///     init(row: Row) throws {
///         id = try row[0]          // or row["id"]: names are resolved once per statement
///         body = try row[1]
///     }
/// }
/// let notes = try db.fetchAll(Note.self, "SELECT id, body FROM note ORDER BY id")
/// ```
///
/// Decoding a `Decodable` type goes through the standard library's keyed container, which costs far more per
/// property than a read by index, whatever the library does (see Docs/Codable.md); `init(row:)` reads the columns with
/// the same strict conversions (``DatabaseValueConvertible``) at the cost of reading them by index. A type that is
/// both `Decodable` and `FetchableRecord` is fetched through `init(row:)`.
///
/// The row passed to `init(row:)` is valid only during the call (it reads the statement's current row in place;
/// kept past it, it throws ``DatabaseError/rowMisuse`` when read).
public protocol FetchableRecord {
    /// Reads the record from the current row.
    ///
    /// - Throws: Any error; a row access that fails throws ``DatabaseError/valueConversion`` or
    ///   ``DatabaseError/invalidArgument`` naming the column.
    init(row: Row) throws
}

/// Iterates the rows of a statement as `Record` values built by ``FetchableRecord/init(row:)``, one at a time.
///
/// ```swift
/// let notes = try db.fetchCursor(Note.self, "SELECT id, body FROM note")
/// while let note = try notes.next() { … }
/// ```
///
/// Like ``RowCursor``, it belongs to its connection's thread, and ends when a new cursor over the same statement
/// starts.
public final class RecordCursor<Record: FetchableRecord>: DatabaseCursor {
    /// The cursor over the rows.
    public let rows: RowCursor

    @usableFromInline
    init(rows: RowCursor) {
        self.rows = rows
    }

    /// Advances to the next row and builds a record from it.
    ///
    /// - Returns: The record, or `nil` when there are no more rows.
    /// - Throws: A SQLite error, or the error of `init(row:)` (the cursor can go on after it).
    @inlinable
    public func next() throws -> Record? {
        // The row is built only when there is one, and handed over without an Optional around it: a `Row?` returned
        // and unwrapped went through Row's outlined value witnesses on every record.
        guard try rows.step() else { return nil }
        return try Record(row: Row(cursor: rows))
    }

    /// The remaining records.
    ///
    /// - Throws: The first error of ``next()``.
    @inlinable
    public func all() throws -> [Record] {
        try map { $0 }
    }

    /// Resets the statement now instead of when the cursor is released.
    public func close() {
        rows.close()
    }
}

@available(*, unavailable, message: "A RecordCursor belongs to its connection's thread.")
extension RecordCursor: Sendable {}

extension RowCursor {
    /// The remaining rows as `Record` values built by ``FetchableRecord/init(row:)``.
    ///
    /// - Parameter type: The record type.
    /// - Returns: A cursor that shares this one's position.
    public func records<Record: FetchableRecord>(_ type: Record.Type) -> RecordCursor<Record> {
        RecordCursor(rows: self)
    }
}

extension Connection {
    /// Every row of one statement as a `Record` built by ``FetchableRecord/init(row:)`` (from the statement cache).
    ///
    /// - Parameters:
    ///   - type: The record type.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: The records.
    /// - Throws: A SQLite error, or the first error of `init(row:)`.
    @inlinable
    public func fetchAll<Record: FetchableRecord, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> [Record] {
        try RecordCursor<Record>(rows: cursor(sql, repeat each values)).all()
    }

    /// Every row as a `Record` built by ``FetchableRecord/init(row:)``, for a type that is also `Decodable`.
    ///
    /// - Parameters:
    ///   - type: The record type.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: The records.
    /// - Throws: A SQLite error, or the first error of `init(row:)`.
    @inlinable
    public func fetchAll<Record: FetchableRecord & Decodable, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> [Record] {
        try RecordCursor<Record>(rows: cursor(sql, repeat each values)).all()
    }

    /// A cursor over the rows of one statement as `Record` values built by ``FetchableRecord/init(row:)``.
    ///
    /// - Parameters:
    ///   - type: The record type.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: A cursor; records are built as it advances.
    /// - Throws: A SQLite error while preparing or binding.
    @inlinable
    public func fetchCursor<Record: FetchableRecord, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> RecordCursor<Record> {
        RecordCursor(rows: try cursor(sql, repeat each values))
    }

    /// A cursor over the rows as `Record` values built by ``FetchableRecord/init(row:)``, for a type that is also
    /// `Decodable`.
    ///
    /// - Parameters:
    ///   - type: The record type.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: A cursor; records are built as it advances.
    /// - Throws: A SQLite error while preparing or binding.
    @inlinable
    public func fetchCursor<Record: FetchableRecord & Decodable, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> RecordCursor<Record> {
        RecordCursor(rows: try cursor(sql, repeat each values))
    }

    /// The first row of one statement as a `Record` built by ``FetchableRecord/init(row:)``, or `nil`.
    ///
    /// - Parameters:
    ///   - type: The record type.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: The record, or `nil` when there is no row.
    /// - Throws: A SQLite error, or the error of `init(row:)`.
    @inlinable
    public func fetchOne<Record: FetchableRecord, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> Record? {
        let records = RecordCursor<Record>(rows: try cursor(sql, repeat each values))
        defer { records.close() }
        return try records.next()
    }

    /// The first row as a `Record` built by ``FetchableRecord/init(row:)``, for a type that is also `Decodable`.
    ///
    /// - Parameters:
    ///   - type: The record type.
    ///   - sql: One statement.
    ///   - values: The values bound to the parameters 1…n.
    /// - Returns: The record, or `nil` when there is no row.
    /// - Throws: A SQLite error, or the error of `init(row:)`.
    @inlinable
    public func fetchOne<Record: FetchableRecord & Decodable, each Value: DatabaseValueConvertible>(
        _ type: Record.Type, _ sql: String, _ values: repeat each Value
    ) throws -> Record? {
        let records = RecordCursor<Record>(rows: try cursor(sql, repeat each values))
        defer { records.close() }
        return try records.next()
    }
}
