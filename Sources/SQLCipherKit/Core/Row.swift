import CSQLCipher

/// A result row: columns read by 0-based index or by name, converted to the type you ask for.
///
/// ```swift
/// let id: Int64 = try row[0]
/// let body: String = try row["body"]
/// let note: String? = try row["note"]      // NULL reads as nil only for an optional type
/// ```
///
/// A row comes either from a ``RowCursor``, ``Connection/first(_:_:map:)`` or ``Connection/all(_:_:map:)`` (it then
/// reads the statement's current row in place, without copying, and is valid until the statement moves on: the
/// cursor's next row, the end of the call) or from ``Connection/query(_:_:)`` and ``copy()`` (it then holds its own
/// copy of the values, valid for good). Reading a row in place after its statement moved on (stepped, reset, ended,
/// its connection closed) throws ``DatabaseError/rowMisuse`` (``DatabaseError/connectionClosed`` once the connection
/// is closed) rather than reading another row. A column that does not convert to the requested type throws
/// ``DatabaseError/valueConversion`` naming the column and both types.
///
/// ```swift
/// let kept = try db.all("SELECT id, body FROM note") { row in try row.copy() }   // copies stay valid
/// ```
public struct Row {
    /// A copied row's values and statement, in one reference so that ``owner`` is a single pointer.
    @usableFromInline
    final class CopiedValues {
        @usableFromInline let values: [DatabaseValue]
        @usableFromInline let statement: Statement

        init(values: [DatabaseValue], statement: Statement) {
            self.values = values
            self.statement = statement
        }
    }

    /// What keeps the row's statement alive, and with it the row: the ``RowCursor`` (releasing it resets the
    /// statement under the row), the ``Statement`` itself for a row read in place by a call that steps it (no cursor
    /// object per call: ``Connection/first(_:_:map:)``, ``Connection/scalar(_:_:as:)``, ``Connection/all(_:_:map:)``),
    /// or the ``CopiedValues`` of a copied row (``sqliteStatement`` is `nil` then). One reference of no particular
    /// class rather than an enum of the three: releasing it is one call, which the compiler keeps inline (an enum
    /// in a five-word row was destroyed through an outlined value witness for every record built
    /// by `init(row:)`).
    @usableFromInline
    let owner: AnyObject

    /// The number of columns: the statement's when it was compiled for a row read in place, the values' for a copied
    /// row. Not stored, so that the row stays four words (a fifth made every row a record's `init(row:)` took go
    /// through Row's outlined value witnesses).
    @inlinable
    var columnCount: Int {
        if sqliteStatement != nil {
            return unmanagedStatement._withUnsafeGuaranteedRef { $0.resultColumnCount }
        }
        return unsafeDowncast(owner, to: CopiedValues.self).values.count
    }

    /// The statement the row comes from, unretained: the row keeps it alive through its cursor or its copied
    /// values. Calling it through `_withUnsafeGuaranteedRef` costs no retain and release, where an `unowned(unsafe)`
    /// reference still paid one pair per call (10% of the by-name fetch benchmark): every `row[name]` goes
    /// through it.
    @usableFromInline
    let unmanagedStatement: Unmanaged<Statement>

    /// For a row read in place, the statement's ``Statement/rowStamp`` when this row was its current row: reading
    /// is refused once the statement moved on (closing the connection changes the stamp too). 0 for a copied row (a
    /// statement's stamp is at least 1 once it has stepped). One comparison per column read, where the check that
    /// the connection is open was; and the row stays four words (a fifth made every row returned and released go
    /// through value witnesses).
    @usableFromInline
    var stamp: UInt

    /// The statement's raw pointer for rows read in place, `nil` for copied rows: reading a column through it
    /// avoids retaining and releasing the statement on every column (8% of the fetch benchmark).
    @usableFromInline
    let sqliteStatement: OpaquePointer?

    /// The connection's handle.
    @inlinable
    var handle: ConnectionHandle { unmanagedStatement._withUnsafeGuaranteedRef { $0.handle } }

    @inlinable
    @inline(__always)
    init(cursor: RowCursor) {
        owner = cursor
        self.sqliteStatement = cursor.statement.sqliteStatement
        self.unmanagedStatement = Unmanaged.passUnretained(cursor.statement)
        self.stamp = cursor.statement.rowStamp
    }

    /// The statement's current row, read in place (see ``owner``). Made before the first step: the
    /// caller sets ``stamp`` after each step.
    @inlinable
    @inline(__always)
    init(inPlace statement: Statement) {
        owner = statement
        self.sqliteStatement = statement.sqliteStatement
        self.unmanagedStatement = Unmanaged.passUnretained(statement)
        self.stamp = statement.rowStamp
    }

    /// Copies the statement's current row.
    init(copying statement: Statement, columnCount: Int) {
        let values = (0..<CInt(columnCount)).map {
            DatabaseValue(sqliteStatement: statement.sqliteStatement, column: $0)
        }
        statement.rememberColumnNames()
        owner = CopiedValues(values: values, statement: statement)
        self.sqliteStatement = nil
        self.unmanagedStatement = Unmanaged.passUnretained(statement)
        self.stamp = 0
    }

    @inlinable
    var statement: Statement { unmanagedStatement.takeUnretainedValue() }

    /// The values of a copied row (``sqliteStatement`` is `nil`), `nil` for a row read in place.
    @usableFromInline
    var copied: CopiedValues? {
        sqliteStatement == nil ? unsafeDowncast(owner, to: CopiedValues.self) : nil
    }

    /// The number of columns.
    public var count: Int { columnCount }

    /// The column names.
    public var columnNames: [String] { Array(statement.columnNames.prefix(columnCount)) }

    /// The index of the column with this name (as `row[name]` finds it), or `nil` when the row has none.
    @inlinable
    @inline(__always)
    func columnIndexIfPresent(named name: String) -> Int? {
        let predicted = unmanagedStatement._withUnsafeGuaranteedRef { $0.predictedColumnIndex(named: name) }
        guard let index = predicted, index < columnCount else { return nil }
        return index
    }

    /// Whether the row has a column with this name (case-insensitive).
    public func hasColumn(_ name: String) -> Bool {
        statement.columnIndex(named: name).map { $0 < columnCount } ?? false
    }

    /// The value at a 0-based column index, converted to `Value`.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` for an index out of range; ``DatabaseError/valueConversion``
    ///   when the stored value cannot be represented as `Value` (including NULL for a non-optional type).
    @inlinable
    @inline(__always)
    public subscript<Value: DatabaseValueConvertible>(_ index: Int) -> Value {
        get throws {
            let decoded: Value?
            if let sqliteStatement {
                let statement = unmanagedStatement
                guard index >= 0 && index < statement._withUnsafeGuaranteedRef({ $0.resultColumnCount }) else {
                    throw indexError(index)
                }
                guard stamp == statement._withUnsafeGuaranteedRef({ $0.rowStamp }) else { throw notCurrentError() }
                decoded = Value.decode(from: DatabaseColumn(sqliteStatement, CInt(index)))
            } else {
                let values = unsafeDowncast(owner, to: CopiedValues.self).values
                guard index >= 0 && index < values.count else { throw indexError(index) }
                decoded = Value.fromDatabaseValue(values[index])
            }
            guard let decoded else { throw conversionError(index, to: Value.self) }
            return decoded
        }
    }

    /// The value of the first column with this name (case-insensitive), converted to `Value`.
    ///
    /// The statement resolves each name once; reading the same names in the same order on every row (the usual
    /// loop) then costs one string comparison per column on top of reading by index, without hashing the name.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` when there is no such column; ``DatabaseError/valueConversion``
    ///   when the value does not convert.
    @inlinable
    @inline(__always)
    public subscript<Value: DatabaseValueConvertible>(_ name: String) -> Value {
        get throws {
            let predicted = unmanagedStatement._withUnsafeGuaranteedRef { $0.predictedColumnIndex(named: name) }
            guard let index = predicted, index < columnCount else {
                throw nameError(name)
            }
            return try self[index]
        }
    }

    /// Whether a row read in place still stands on its statement's current row.
    @inlinable
    @inline(__always)
    var isCurrent: Bool {
        stamp == unmanagedStatement._withUnsafeGuaranteedRef { $0.rowStamp }
    }

    /// The error for reading a row read in place that is no longer current (``isCurrent``).
    @usableFromInline
    func notCurrentError() -> DatabaseError {
        let statement = statement
        guard statement.handle.isOpen else { return DatabaseError.closed(sql: statement.sql) }
        return DatabaseError(
            .rowMisuse,
            "the row was read after its statement moved on (to the next row, or reset when the call that handed it"
                + " over returned): a row read in place is valid only until then; copy it to keep it (Row.copy(),"
                + " Connection.query)",
            sql: statement.sql)
    }

    @usableFromInline
    func nameError(_ name: String) -> DatabaseError {
        DatabaseError.outOfRange("no column named `\(name)` in the row", sql: statement.sql)
    }

    /// The raw value at a 0-based index.
    public func databaseValue(at index: Int) throws -> DatabaseValue {
        try self[index]
    }

    /// All values, in column order.
    ///
    /// - Throws: ``DatabaseError/rowMisuse`` for a row read in place after its statement moved on;
    ///   ``DatabaseError/connectionClosed`` once its connection has closed.
    public var databaseValues: [DatabaseValue] {
        get throws {
            if let copied { return copied.values }
            let statement = statement
            guard isCurrent else { throw notCurrentError() }
            return (0..<CInt(columnCount)).map {
                DatabaseValue(sqliteStatement: statement.sqliteStatement, column: $0)
            }
        }
    }

    /// A copy that stays valid after the cursor moves on.
    ///
    /// - Throws: ``DatabaseError/rowMisuse`` for a row read in place after its statement moved on;
    ///   ``DatabaseError/connectionClosed`` once its connection has closed.
    public func copy() throws -> Row {
        if sqliteStatement == nil { return self }
        guard isCurrent else { throw notCurrentError() }
        return Row(copying: statement, columnCount: columnCount)
    }

    @usableFromInline
    func indexError(_ index: Int) -> DatabaseError {
        DatabaseError.outOfRange("column index \(index) out of range 0..<\(columnCount)", sql: statement.sql)
    }

    @usableFromInline
    func conversionError(_ index: Int, to type: Any.Type) -> DatabaseError {
        let stored: DatabaseValue = if let copied {
            copied.values[index]
        } else {
            DatabaseValue(sqliteStatement: statement.sqliteStatement, column: CInt(index))
        }
        let name = statement.columnNames[index]
        let reason = stored.isNull ? "NULL cannot be read as non-optional \(type)"
            : "\(stored.storageClassName) value cannot be represented as \(type)"
        return DatabaseError(
            .valueConversion,
            "column `\(name)` (index \(index)): \(reason)", sql: statement.sql)
    }
}

@available(*, unavailable, message: "A Row belongs to its connection's thread.")
extension Row: Sendable {}

extension Row: CustomStringConvertible {
    /// Column names and storage classes; values are not shown (they may be confidential).
    public var description: String {
        let names = statement.columnNames
        guard let values = try? databaseValues else { return "[row no longer current]" }
        return "[" + (0..<columnCount).map { "\(names[$0]): \(values[$0].storageClassName)" }
            .joined(separator: ", ") + "]"
    }
}
