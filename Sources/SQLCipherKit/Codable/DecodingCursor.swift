import CSQLCipher

/// Iterates the rows of a statement decoded as `Record`, one at a time.
///
/// ```swift
/// let notes = try db.cursor("SELECT * FROM note WHERE rank > ?", 3).decode(Note.self)
/// while let note = try notes.next() {
///     print(note.body)
/// }
/// ```
///
/// Obtained from ``RowCursor/decode(_:)`` or `Connection.fetchCursor(_:_:_:)`. The column of each coding key is
/// found on the first row and reused for the next ones, and values are read straight from the statement, so a
/// decoded fetch costs little more than reading the columns by index. Decoding follows ``Row/decode(_:)``.
///
/// Like ``RowCursor``, it belongs to its connection's thread, and ends when a new cursor over the same statement
/// starts.
public final class DecodingCursor<Record: Decodable>: DatabaseCursor {
    /// The cursor over the undecoded rows.
    public let rows: RowCursor

    let context: RowDecodingContext

    init(rows: RowCursor) {
        self.rows = rows
        self.context = RowDecodingContext(cursor: rows, recordType: Record.self)
    }

    deinit {
        context.finish()
    }

    /// Advances to the next row and decodes it.
    ///
    /// - Returns: The decoded row, or `nil` when there are no more rows.
    /// - Throws: A SQLite error, or a decoding error as described in ``Row/decode(_:)`` (the cursor can go on
    ///   after a decoding error).
    public func next() throws -> Record? {
        guard try rows.step() else { return nil }
        return try context.decodeRecord(Record.self)
    }

    /// The remaining records.
    ///
    /// - Throws: The first error of ``next()``.
    @inlinable
    public func all() throws -> [Record] {
        // Inlinable so that the array's appends are specialized for `Record` in the caller's module.
        try map { $0 }
    }

    /// Resets the statement now instead of when the cursor is released.
    public func close() {
        rows.close()
    }
}

@available(*, unavailable, message: "A DecodingCursor belongs to its connection's thread.")
extension DecodingCursor: Sendable {}

extension RowCursor {
    /// ``next()`` without building a ``Row``: whether the statement is on a new row.
    @inlinable
    @inline(__always)
    func step() throws -> Bool {
        if isDone { return false }
        guard ownsStatement else {
            isDone = true
            return false
        }
        do {
            if try statement.step() { return true }
        } catch {
            finish()
            throw error
        }
        finish()
        sqlite3_reset(statement.sqliteStatement)
        return false
    }

    /// The remaining rows, decoded as `Record` one at a time; see ``Row/decode(_:)`` for how columns map to
    /// properties.
    ///
    /// ```swift
    /// let notes = try db.cursor("SELECT id, body FROM note").decode(Note.self)
    /// while let note = try notes.next() { … }
    /// ```
    ///
    /// - Parameter type: The type to decode each row as.
    /// - Returns: A cursor that shares this one's position.
    public func decode<Record: Decodable>(_ type: Record.Type) -> DecodingCursor<Record> {
        DecodingCursor(rows: self)
    }
}
