import CSQLCipher

/// A type that can be stored in and read from a database column or bound to a statement parameter.
///
/// SQLCipherKit provides conformances for `Bool`, every integer width, `Double`, `Float`, `String`, `[UInt8]`,
/// `Data`, `Date`, `UUID`, `URL`, `Optional` and ``DatabaseValue``. A `RawRepresentable` type whose raw value
/// conforms gets the conformance by declaring it:
///
/// ```swift
/// enum Status: String, DatabaseValueConvertible { case active, archived }
/// ```
///
/// Conversions are strict: a value that cannot be represented exactly (TEXT read as `Int`, an integer that overflows
/// `Int8`, NULL read as a non-optional) fails, and the row access that asked for it throws a
/// ``DatabaseError/valueConversion`` error naming the column and both types. Nothing is silently truncated.
public protocol DatabaseValueConvertible {
    /// The value to store.
    var databaseValue: DatabaseValue { get }

    /// Converts a stored value, or returns `nil` when the value cannot be represented as `Self`.
    static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Self?

    /// Reads the value from a column of the current row, or returns `nil` when it cannot be represented as `Self`.
    ///
    /// The default implementation converts the column's ``DatabaseColumn/databaseValue`` with
    /// ``fromDatabaseValue(_:)``, which is what a conforming type almost always wants. The standard types implement it
    /// to read the column without building a ``DatabaseValue``: it is the hot path of every fetch.
    static func decode(from column: DatabaseColumn) -> Self?

    /// Binds the value to a statement parameter and returns SQLite's result code.
    ///
    /// The default implementation binds ``databaseValue``. Implement it to bind without building a ``DatabaseValue``
    /// (`Data` binds its bytes in place), or to refuse a value that cannot be stored exactly: any code other than
    /// ``DatabaseError/SQLITE_OK`` fails the bind with ``DatabaseError/invalidArgument`` (`UInt64` above
    /// `Int64.max` returns ``DatabaseError/SQLITE_TOOBIG``).
    func bind(to parameter: DatabaseParameter) -> ResultCode
}

extension DatabaseValueConvertible {
    /// Converts the column's ``DatabaseColumn/databaseValue`` with ``fromDatabaseValue(_:)``.
    @inlinable
    public static func decode(from column: DatabaseColumn) -> Self? {
        fromDatabaseValue(column.databaseValue)
    }

    /// Binds ``databaseValue``.
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        parameter.bind(databaseValue)
    }
}

/// A column of a statement's current row, read in place: what ``DatabaseValueConvertible/decode(from:)`` reads.
///
/// Valid only during that call: the row it reads changes when the statement steps.
public struct DatabaseColumn {
    @usableFromInline
    let sqliteStatement: OpaquePointer

    @usableFromInline
    let column: CInt

    @inlinable
    init(_ sqliteStatement: OpaquePointer, _ column: CInt) {
        self.sqliteStatement = sqliteStatement
        self.column = column
    }

    /// The 0-based column index.
    public var index: Int { Int(column) }

    /// The column's value, copied out of the row.
    @inlinable
    public var databaseValue: DatabaseValue {
        DatabaseValue(sqliteStatement: sqliteStatement, column: column)
    }

    /// `true` when the column holds NULL.
    @inlinable
    public var isNull: Bool {
        sqlite3_column_type(sqliteStatement, column) == SQLITE_NULL
    }
}

@available(*, unavailable, message: "A column is read during a decode call, on its connection's thread.")
extension DatabaseColumn: Sendable {}

/// A statement parameter about to be bound: what ``DatabaseValueConvertible/bind(to:)`` binds.
///
/// Valid only during that call.
public struct DatabaseParameter {
    @usableFromInline
    let sqliteStatement: OpaquePointer

    @usableFromInline
    let parameter: CInt

    @inlinable
    init(_ sqliteStatement: OpaquePointer, _ parameter: CInt) {
        self.sqliteStatement = sqliteStatement
        self.parameter = parameter
    }

    /// The 1-based parameter index.
    public var index: Int { Int(parameter) }

    /// Binds a value.
    @inlinable
    public func bind(_ value: DatabaseValue) -> ResultCode {
        ResultCode(rawValue: value.bind(to: sqliteStatement, at: parameter))
    }

    /// Binds bytes as a BLOB (SQLite copies them; an empty buffer binds an empty BLOB, not NULL).
    @inlinable
    public func bindBlob(_ bytes: UnsafeRawBufferPointer) -> ResultCode {
        ResultCode(rawValue: DatabaseValue.bindBlob(bytes, to: sqliteStatement, at: parameter))
    }
}

@available(*, unavailable, message: "A parameter is bound during a bind call, on its connection's thread.")
extension DatabaseParameter: Sendable {}

extension DatabaseValueConvertible where Self: RawRepresentable, RawValue: DatabaseValueConvertible {
    /// The raw value's database value.
    public var databaseValue: DatabaseValue {
        rawValue.databaseValue
    }

    /// The case whose raw value converts from the stored value, or `nil`.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Self? {
        RawValue.fromDatabaseValue(databaseValue).flatMap(Self.init(rawValue:))
    }
}

// MARK: - DatabaseValue

extension DatabaseValue: DatabaseValueConvertible {
    /// The value itself.
    public var databaseValue: DatabaseValue { self }

    /// The value itself; never `nil`.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> DatabaseValue? {
        databaseValue
    }
}

// MARK: - Optional

extension Optional: DatabaseValueConvertible where Wrapped: DatabaseValueConvertible {
    /// NULL for `nil`, the wrapped value's database value otherwise.
    @inlinable
    public var databaseValue: DatabaseValue {
        switch self {
        case .none: .null
        case .some(let wrapped): wrapped.databaseValue
        }
    }

    /// `.some(nil)` for NULL; the converted value, or `nil` when it does not convert.
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Self? {
        if case .null = databaseValue { return .some(nil) }
        return Wrapped.fromDatabaseValue(databaseValue).map { .some($0) }
    }

    /// `.some(nil)` for NULL; the wrapped type's reading otherwise.
    @inlinable
    public static func decode(from column: DatabaseColumn) -> Self? {
        if column.isNull { return .some(nil) }
        return Wrapped.decode(from: column).map { .some($0) }
    }

    /// Binds NULL for `nil`, the wrapped value otherwise.
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        switch self {
        case .none: parameter.bind(.null)
        case .some(let wrapped): wrapped.bind(to: parameter)
        }
    }
}

// MARK: - Integers

/// Integers are read from INTEGER values, and from REAL values that hold an integer exactly. A value out of the
/// type's range does not convert.
public protocol DatabaseInteger: FixedWidthInteger, DatabaseValueConvertible {}

extension DatabaseInteger {
    /// An INTEGER value. `UInt64` and `UInt` values above `Int64.max` cannot be stored: see ``UInt64``.
    @inlinable
    public var databaseValue: DatabaseValue {
        .integer(Int64(self))
    }

    /// The integer, when it fits exactly.
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Self? {
        switch databaseValue {
        case .integer(let value): Self(exactly: value)
        case .real(let value): Self(exactly: value)
        default: nil
        }
    }

    /// Reads an INTEGER column directly.
    @inlinable
    @inline(__always)
    public static func decode(from source: DatabaseColumn) -> Self? {
        let sqliteStatement = source.sqliteStatement, column = source.column
        // One column lookup instead of two (column_type + column_int64). The value is "unprotected", which
        // sqlite.org/c3ref/value.html allows here: connections are opened with SQLITE_OPEN_NOMUTEX and used from
        // one thread.
        if let value = sqlite3_column_value(sqliteStatement, column), sqlite3_value_type(value) == SQLITE_INTEGER {
            return Self(exactly: sqlite3_value_int64(value))
        }
        return fromDatabaseValue(DatabaseValue(sqliteStatement: sqliteStatement, column: column))
    }

    /// Binds an INTEGER.
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        ResultCode(rawValue: sqlite3_bind_int64(parameter.sqliteStatement, parameter.parameter, Int64(self)))
    }
}

extension Int: DatabaseInteger {}
extension Int8: DatabaseInteger {}
extension Int16: DatabaseInteger {}
extension Int32: DatabaseInteger {}
extension UInt8: DatabaseInteger {}
extension UInt16: DatabaseInteger {}
extension UInt32: DatabaseInteger {}

extension Int64: DatabaseInteger {
    /// Reads an INTEGER column directly: the hot path of most fetches.
    @inlinable
    @inline(__always)
    public static func decode(from source: DatabaseColumn) -> Int64? {
        let sqliteStatement = source.sqliteStatement, column = source.column
        // See DatabaseInteger.decode for why the unprotected value is safe.
        if let value = sqlite3_column_value(sqliteStatement, column), sqlite3_value_type(value) == SQLITE_INTEGER {
            return sqlite3_value_int64(value)
        }
        return fromDatabaseValue(DatabaseValue(sqliteStatement: sqliteStatement, column: column))
    }
}

/// `UInt64` and `UInt` are stored as INTEGER. SQLite integers are signed 64-bit, so values above `Int64.max` cannot
/// be stored as integers: binding one throws ``DatabaseError/invalidArgument`` instead of wrapping around, and
/// ``DatabaseValueConvertible/databaseValue`` gives their exact decimal TEXT.
public protocol DatabaseUnsignedInteger64: DatabaseInteger, UnsignedInteger {}

extension DatabaseUnsignedInteger64 {
    /// An INTEGER; above `Int64.max`, the exact decimal TEXT (never a wrapped or rounded number).
    @inlinable
    public var databaseValue: DatabaseValue {
        Int64(exactly: self).map(DatabaseValue.integer) ?? .text(String(self))
    }

    /// Binds an INTEGER, or returns `SQLITE_TOOBIG` when the value exceeds `Int64.max`.
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        guard let value = Int64(exactly: self) else { return DatabaseError.SQLITE_TOOBIG }
        return ResultCode(rawValue: sqlite3_bind_int64(parameter.sqliteStatement, parameter.parameter, value))
    }
}

extension UInt64: DatabaseUnsignedInteger64 {}
extension UInt: DatabaseUnsignedInteger64 {}

// MARK: - Bool, Double, Float

extension Bool: DatabaseValueConvertible {
    /// 1 or 0.
    @inlinable
    public var databaseValue: DatabaseValue {
        .integer(self ? 1 : 0)
    }

    /// `false` for the INTEGER 0, `true` for any other INTEGER. Other storage classes do not convert.
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Bool? {
        if case .integer(let value) = databaseValue { return value != 0 }
        return nil
    }
}

extension Double: DatabaseValueConvertible {
    /// A REAL value.
    @inlinable
    public var databaseValue: DatabaseValue {
        .real(self)
    }

    /// A REAL, or an INTEGER (converted to the nearest double).
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Double? {
        switch databaseValue {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    /// Reads a REAL or INTEGER column directly.
    @inlinable
    public static func decode(from column: DatabaseColumn) -> Double? {
        switch sqlite3_column_type(column.sqliteStatement, column.column) {
        case SQLITE_FLOAT, SQLITE_INTEGER: sqlite3_column_double(column.sqliteStatement, column.column)
        default: nil
        }
    }

    /// Binds a REAL.
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        ResultCode(rawValue: sqlite3_bind_double(parameter.sqliteStatement, parameter.parameter, self))
    }
}

extension Float: DatabaseValueConvertible {
    /// A REAL value.
    @inlinable
    public var databaseValue: DatabaseValue {
        .real(Double(self))
    }

    /// A REAL or INTEGER within `Float`'s range (rounded to the nearest `Float`); larger finite values do not
    /// convert.
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Float? {
        guard let double = Double.fromDatabaseValue(databaseValue) else { return nil }
        let float = Float(double)
        if float.isInfinite && double.isFinite { return nil }
        return float
    }
}

// MARK: - String

extension String: DatabaseValueConvertible {
    /// A TEXT value.
    @inlinable
    public var databaseValue: DatabaseValue {
        .text(self)
    }

    /// TEXT only: numbers are not turned into strings behind the caller's back.
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> String? {
        if case .text(let value) = databaseValue { return value }
        return nil
    }

    /// Reads a TEXT column directly.
    @inlinable
    public static func decode(from column: DatabaseColumn) -> String? {
        guard sqlite3_column_type(column.sqliteStatement, column.column) == SQLITE_TEXT else { return nil }
        return DatabaseValue.text(column.sqliteStatement, column.column)
    }

    /// Binds TEXT.
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        ResultCode(rawValue: DatabaseValue.bindText(self, to: parameter.sqliteStatement, at: parameter.parameter))
    }
}

// MARK: - Bytes

extension Array: DatabaseValueConvertible where Element == UInt8 {
    /// A BLOB value.
    @inlinable
    public var databaseValue: DatabaseValue {
        .blob(self)
    }

    /// A BLOB, or the UTF-8 bytes of a TEXT.
    @inlinable
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> [UInt8]? {
        switch databaseValue {
        case .blob(let bytes): bytes
        case .text(let text): Array(text.utf8)
        default: nil
        }
    }

    /// Binds a BLOB (an empty array binds an empty BLOB, not NULL).
    @inlinable
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        withUnsafeBytes { parameter.bindBlob($0) }
    }
}
