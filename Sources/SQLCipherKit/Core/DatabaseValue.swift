import CSQLCipher

/// A value as SQLite stores it: one of its five storage classes.
///
/// See [Datatypes In SQLite](https://www.sqlite.org/datatype3.html).
public enum DatabaseValue: Hashable, Sendable, CustomStringConvertible {
    /// SQL NULL.
    case null
    /// A signed 64-bit integer.
    case integer(Int64)
    /// An IEEE 754 double.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes.
    case blob([UInt8])

    /// The storage class name as SQLite spells it: `NULL`, `INTEGER`, `REAL`, `TEXT` or `BLOB`.
    public var storageClassName: String {
        switch self {
        case .null: "NULL"
        case .integer: "INTEGER"
        case .real: "REAL"
        case .text: "TEXT"
        case .blob: "BLOB"
        }
    }

    /// `true` for SQL NULL.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A description that names the storage class only. Values may be confidential: they are not printed.
    public var description: String {
        storageClassName
    }

    /// Reads the value of a column of the current row.
    @usableFromInline
    init(sqliteStatement: OpaquePointer, column: CInt) {
        switch sqlite3_column_type(sqliteStatement, column) {
        case SQLITE_INTEGER:
            self = .integer(sqlite3_column_int64(sqliteStatement, column))
        case SQLITE_FLOAT:
            self = .real(sqlite3_column_double(sqliteStatement, column))
        case SQLITE_TEXT:
            self = .text(Self.text(sqliteStatement, column))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(sqliteStatement, column))
            if count == 0 {
                self = .blob([])
            } else {
                let bytes = sqlite3_column_blob(sqliteStatement, column)!
                self = .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
            }
        default:
            self = .null
        }
    }

    @usableFromInline
    static func text(_ sqliteStatement: OpaquePointer, _ column: CInt) -> String {
        guard let pointer = sqlite3_column_text(sqliteStatement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(sqliteStatement, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// Binds the value to a statement parameter; returns SQLite's result code.
    @usableFromInline
    func bind(to sqliteStatement: OpaquePointer, at index: CInt) -> CInt {
        switch self {
        case .null:
            return sqlite3_bind_null(sqliteStatement, index)
        case .integer(let value):
            return sqlite3_bind_int64(sqliteStatement, index, value)
        case .real(let value):
            return sqlite3_bind_double(sqliteStatement, index, value)
        case .text(let value):
            return Self.bindText(value, to: sqliteStatement, at: index)
        case .blob(let bytes):
            return bytes.withUnsafeBytes { Self.bindBlob($0, to: sqliteStatement, at: index) }
        }
    }

    @usableFromInline
    static func bindText(_ text: String, to sqliteStatement: OpaquePointer, at index: CInt) -> CInt {
        var text = text
        return text.withUTF8 { utf8 in
            // An empty buffer may have no base address; SQLite would bind NULL for a NULL pointer.
            let base = utf8.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(bitPattern: 1)!
            return sqlite3_bind_text(
                sqliteStatement, index, base.assumingMemoryBound(to: CChar.self), CInt(utf8.count),
                CSQLCipher_transient())
        }
    }

    @usableFromInline
    static func bindBlob(_ buffer: UnsafeRawBufferPointer, to sqliteStatement: OpaquePointer, at index: CInt) -> CInt {
        // sqlite3_bind_blob with a NULL pointer binds NULL, not an empty blob.
        guard let base = buffer.baseAddress, buffer.count > 0 else {
            return sqlite3_bind_zeroblob(sqliteStatement, index, 0)
        }
        return sqlite3_bind_blob(sqliteStatement, index, base, CInt(buffer.count), CSQLCipher_transient())
    }
}

