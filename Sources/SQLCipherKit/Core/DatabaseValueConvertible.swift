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

    /// Reads a column of the current row of a statement, or returns `nil` when it cannot be represented as `Self`.
    ///
    /// The default implementation goes through ``fromDatabaseValue(_:)``; the standard types read the column
    /// directly to avoid the intermediate value.
    static func decode(sqliteStatement: OpaquePointer, column: CInt) -> Self?

    /// Binds the value to a statement parameter and returns SQLite's result code.
    ///
    /// The default implementation binds ``databaseValue``; the standard types bind directly.
    func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt
}

extension DatabaseValueConvertible {
    /// Reads the column as a ``DatabaseValue`` and converts it.
    @inlinable
    public static func decode(sqliteStatement: OpaquePointer, column: CInt) -> Self? {
        fromDatabaseValue(DatabaseValue(sqliteStatement: sqliteStatement, column: column))
    }

    /// Binds ``databaseValue``.
    @inlinable
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        databaseValue.bind(to: sqliteStatement, at: index)
    }
}

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
    public static func decode(sqliteStatement: OpaquePointer, column: CInt) -> Self? {
        if sqlite3_column_type(sqliteStatement, column) == SQLITE_NULL { return .some(nil) }
        return Wrapped.decode(sqliteStatement: sqliteStatement, column: column).map { .some($0) }
    }

    /// Binds NULL for `nil`, the wrapped value otherwise.
    @inlinable
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        switch self {
        case .none: sqlite3_bind_null(sqliteStatement, index)
        case .some(let wrapped): wrapped.bind(sqliteStatement: sqliteStatement, index: index)
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
    public static func decode(sqliteStatement: OpaquePointer, column: CInt) -> Self? {
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
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        sqlite3_bind_int64(sqliteStatement, index, Int64(self))
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
    public static func decode(sqliteStatement: OpaquePointer, column: CInt) -> Int64? {
        // See DatabaseInteger.decode for why the unprotected value is safe.
        if let value = sqlite3_column_value(sqliteStatement, column), sqlite3_value_type(value) == SQLITE_INTEGER {
            return sqlite3_value_int64(value)
        }
        return fromDatabaseValue(DatabaseValue(sqliteStatement: sqliteStatement, column: column))
    }
}

/// `UInt64` and `UInt` are stored as INTEGER. SQLite integers are signed 64-bit, so values above `Int64.max` cannot
/// be stored as integers: binding one throws ``DatabaseError/invalidArgument`` instead of wrapping around, and
/// ``databaseValue`` gives their exact decimal TEXT.
public protocol DatabaseUnsignedInteger64: DatabaseInteger, UnsignedInteger {}

extension DatabaseUnsignedInteger64 {
    /// An INTEGER; above `Int64.max`, the exact decimal TEXT (never a wrapped or rounded number).
    @inlinable
    public var databaseValue: DatabaseValue {
        Int64(exactly: self).map(DatabaseValue.integer) ?? .text(String(self))
    }

    /// Binds an INTEGER, or returns `SQLITE_TOOBIG` when the value exceeds `Int64.max`.
    @inlinable
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        guard let value = Int64(exactly: self) else { return SQLITE_TOOBIG }
        return sqlite3_bind_int64(sqliteStatement, index, value)
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
    public static func decode(sqliteStatement: OpaquePointer, column: CInt) -> Double? {
        switch sqlite3_column_type(sqliteStatement, column) {
        case SQLITE_FLOAT, SQLITE_INTEGER: sqlite3_column_double(sqliteStatement, column)
        default: nil
        }
    }

    /// Binds a REAL.
    @inlinable
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        sqlite3_bind_double(sqliteStatement, index, self)
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
    public static func decode(sqliteStatement: OpaquePointer, column: CInt) -> String? {
        guard sqlite3_column_type(sqliteStatement, column) == SQLITE_TEXT else { return nil }
        return DatabaseValue.text(sqliteStatement, column)
    }

    /// Binds TEXT.
    @inlinable
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        DatabaseValue.bindText(self, to: sqliteStatement, at: index)
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
    public func bind(sqliteStatement: OpaquePointer, index: CInt) -> CInt {
        withUnsafeBytes { DatabaseValue.bindBlob($0, to: sqliteStatement, at: index) }
    }
}
