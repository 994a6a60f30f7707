#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CSQLCipher

// MARK: - Context

/// What every row of one fetch shares: where values are read from, and which column each coding key names.
///
/// Column lookups are learnt, not hashed: a `Decodable` initializer asks for its keys in the same order on every row,
/// so the context records the sequence of key names it was asked for on the first row (with the column index each
/// one resolved to) and, on later rows, only compares the key's name with the one recorded at the same position. A
/// key asked for in another order falls back to the statement's name lookup and updates the record. Nothing is
/// allocated per row: the keyed container (and the box `KeyedDecodingContainer` puts it in) is built once per key
/// type and reused.
///
/// The keyed container refers to the context `unowned(unsafe)`, so that the standard library's box, which copies the
/// container out for every `decode(_:forKey:)`, copies a plain pointer instead of retaining and releasing the context
/// (two atomic operations per column, 15% of the decoding benchmark). That is sound because a container never
/// outlives its context: the context owns the only reference to each box it made, and when its owner is done with it
/// (``finish()``) a box referenced from elsewhere (a container the record's initializer kept) makes the context stay
/// allocated for the rest of the process. Reading values is allowed only during ``decodeRecord(_:)``: a container
/// kept past its row throws instead of reading another row (or a finalized statement).
final class RowDecodingContext {
    let statement: Statement
    let recordType: Any.Type

    /// The statement's raw pointer when rows are read in place (cursor rows), `nil` for copied rows.
    let sqliteStatement: OpaquePointer?

    /// The values of a copied row.
    let values: [DatabaseValue]

    let columnCount: Int

    private struct LearntKey {
        let name: String
        /// The column index, or -1 when the row has no such column.
        let index: Int
        /// The key's type and its bytes, when the key is a plain value of 1, 2, 4 or 8 bytes (a synthesized
        /// `CodingKeys` enum is one byte): comparing those is cheaper than building and comparing `stringValue`.
        let keyType: ObjectIdentifier?
        let keyBits: UInt64
    }

    // Read and written for every column of every row; the dynamic exclusivity checks cost more than the lookup
    // itself. Sound without them: the context belongs to one thread and no access overlaps another. A plain pointer
    // (capacity ``maximumLearntKeyCount``, allocated at the first key) rather than an array: comparing a key with
    // the learnt name in place does not retain and release the name for every column.
    @exclusivity(unchecked)
    private var learntKeys: UnsafeMutablePointer<LearntKey>?
    @exclusivity(unchecked)
    private var learntKeyCount = 0
    @exclusivity(unchecked)
    private var keyPosition = 0

    /// The most keys learnt; further ones are looked up through the statement every time.
    private static let maximumLearntKeyCount = 256

    private lazy var jsonDecoder = CodableJSON.makeDecoder()

    /// The keyed container used last, and every one built so far (one per key type). Building a
    /// `KeyedDecodingContainer` looks up the generic metadata of three types and allocates a box: a third of the
    /// decoding cost of a 10-column row. Unchecked exclusivity, as for the learnt keys: read on every row.
    @exclusivity(unchecked)
    private var lastKeyedContainer: KeyedContainerHolderBase?
    @exclusivity(unchecked)
    private var keyedContainers: [KeyedContainerHolderBase] = []

    /// The decoder given to every record's `init(from:)`: one object per context, so that passing it costs no
    /// retain; it refers to the context unowned (see ``finish()``).
    @exclusivity(unchecked)
    private var decoder: RowDecoder?
    /// The same, unretained, so that passing it to `init(from:)` costs no retain (``decoder`` keeps it alive).
    @exclusivity(unchecked)
    private var unmanagedDecoder: Unmanaged<RowDecoder>?

    /// Whether ``decodeRecord(_:)`` is running: values are read only then.
    @exclusivity(unchecked)
    private var isDecoding = false

    /// Set once the context has been retained for good (a keyed container may outlive its owner).
    private(set) var isKeptAlive = false

    /// A context for the rows of a cursor, read in place.
    init(cursor: RowCursor, recordType: Any.Type) {
        self.statement = cursor.statement
        self.recordType = recordType
        self.sqliteStatement = cursor.statement.sqliteStatement
        self.values = []
        self.columnCount = cursor.columnCount
    }

    /// A context for one row.
    init(row: Row, recordType: Any.Type) throws {
        self.statement = row.statement
        self.recordType = recordType
        self.columnCount = row.count
        if let sqliteStatement = row.sqliteStatement {
            guard row.isCurrent else { throw row.notCurrentError() }
            self.sqliteStatement = sqliteStatement
            self.values = []
        } else {
            self.sqliteStatement = nil
            self.values = try row.databaseValues
        }
    }

    deinit {
        if let learntKeys {
            learntKeys.deinitialize(count: learntKeyCount)
            learntKeys.deallocate()
        }
    }

    /// Decodes the current row of the statement (or the copied row).
    @inline(__always)
    func decodeRecord<Record: Decodable>(_ type: Record.Type) throws -> Record {
        keyPosition = 0
        isDecoding = true
        defer { isDecoding = false }
        do {
            let decoder = unmanagedDecoder ?? Unmanaged.passUnretained(rowDecoder)
            return try decoder._withUnsafeGuaranteedRef { try Record(from: $0) }
        } catch let error as DecodingError {
            throw DatabaseError(
                .valueConversion,
                "cannot decode \(recordType) from the row: \(CodableJSON.describe(error))", sql: statement.sql)
        }
    }

    /// The decoder of the rows, built at the first row.
    var rowDecoder: RowDecoder {
        if let decoder { return decoder }
        let made = RowDecoder(context: self)
        decoder = made
        unmanagedDecoder = .passUnretained(made)
        return made
    }

    /// The keyed container for the rows, reused from the previous row when the key type is the same.
    func keyedContainer<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        let keyType = ObjectIdentifier(Key.self)
        if let last = lastKeyedContainer, last.keyType == keyType {
            // The identifier check makes the unchecked downcast sound. The holder, generic over the container type,
            // copies the container out with the metadata it already has: copying it here would look up the generic
            // metadata of `KeyedDecodingContainer<Key>` on every row.
            return unsafeDowncast(last, to: KeyedContainerHolder<KeyedDecodingContainer<Key>>.self).get()
        }
        return otherKeyedContainer(keyedBy: Key.self)
    }

    private func otherKeyedContainer<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        if !isDecoding {
            // A decoder kept past its record's initializer: the container may outlive every owner of the context.
            keepAlive()
        }
        let keyType = ObjectIdentifier(Key.self)
        if let known = keyedContainers.first(where: { $0.keyType == keyType }) {
            lastKeyedContainer = known
            return unsafeDowncast(known, to: KeyedContainerHolder<KeyedDecodingContainer<Key>>.self).get()
        }
        let container = KeyedDecodingContainer(RowKeyedDecodingContainer<Key>(context: self))
        guard MemoryLayout<KeyedDecodingContainer<Key>>.size == MemoryLayout<AnyObject>.size else {
            // Not the one reference to a box this code knows (a future standard library): whether the container
            // outlives the record cannot be told, so the context stays allocated. Memory-safe, never reached on the
            // standard libraries this package builds with (the decoding context lifetime tests would fail).
            keepAlive()
            return container
        }
        let holder = KeyedContainerHolder(container, keyType: keyType)
        keyedContainers.append(holder)
        lastKeyedContainer = holder
        return container
    }

    /// Called by the context's owner when it no longer decodes rows with it: if the decoder or a keyed container
    /// (both refer to the context unowned) is still referenced elsewhere, kept by a record's initializer, the
    /// context is retained for good so that they never point to freed memory (they throw when used, see
    /// ``checkDecoding()``). Otherwise nothing refers to the context any more and it is freed with its owner
    /// (the decoding context lifetime tests check both).
    func finish() {
        // Drop the context's own references to the decoder and the boxes, then see whether any of them is still
        // alive: a weak reference tells reliably (a uniqueness check through the generic holder did not: debug
        // builds checked a copy).
        var referred = keyedContainers.map { $0.weakBox() }
        if let decoder { referred.append(WeakReference(decoder)) }
        decoder = nil
        unmanagedDecoder = nil
        lastKeyedContainer = nil
        keyedContainers = []
        if referred.contains(where: { $0.object != nil }) {
            keepAlive()
        }
    }

    private func keepAlive() {
        guard !isKeptAlive else { return }
        isKeptAlive = true
        _ = Unmanaged.passRetained(self)
    }

    /// Throws unless a record is being decoded: a container or decoder kept past its row must not read the next row
    /// (nor a statement finalized since).
    @inline(__always)
    func checkDecoding() throws {
        if !isDecoding { throw notDecodingError() }
    }

    private func notDecodingError() -> DatabaseError {
        DatabaseError(
            .invalidState,
            "a decoding container of \(recordType) was used after its row was decoded; containers and decoders are"
                + " valid only during init(from:)",
            sql: statement.sql)
    }

    // MARK: Columns

    /// The column index of a key, or `nil` when the row has no column of that name.
    @inline(__always)
    func columnIndex<Key: CodingKey>(for key: Key) -> Int? {
        let position = keyPosition
        keyPosition = position &+ 1
        if position < learntKeyCount, let learntKeys {
            let learnt = learntKeys + position
            if let keyType = learnt.pointee.keyType {
                // Equal bytes of a plain value of the same type: the same key.
                if keyType == ObjectIdentifier(Key.self), Self.bits(of: key) == learnt.pointee.keyBits {
                    let index = learnt.pointee.index
                    return index >= 0 ? index : nil
                }
            } else if learnt.pointee.name == key.stringValue {
                let index = learnt.pointee.index
                return index >= 0 ? index : nil
            }
        }
        return learnColumnIndex(for: key, at: position)
    }

    /// The bytes of a plain value of 1, 2, 4 or 8 bytes, zero-extended; `nil` for any other key type.
    @inline(__always)
    private static func bits<Key: CodingKey>(of key: Key) -> UInt64? {
        guard _isPOD(Key.self) else { return nil }
        // `unsafeBitCast` to a type of the same size reads the value in place (no closure, no copy).
        switch MemoryLayout<Key>.size {
        case 1: return UInt64(unsafeBitCast(key, to: UInt8.self))
        case 2: return UInt64(unsafeBitCast(key, to: UInt16.self))
        case 4: return UInt64(unsafeBitCast(key, to: UInt32.self))
        case 8: return unsafeBitCast(key, to: UInt64.self)
        default: return nil
        }
    }

    private func learnColumnIndex<Key: CodingKey>(for key: Key, at position: Int) -> Int? {
        let name = key.stringValue
        let index = statement.columnIndex(named: name).flatMap { $0 < columnCount ? $0 : nil }
        let bits = Self.bits(of: key)
        let learnt = LearntKey(
            name: name, index: index ?? -1, keyType: bits == nil ? nil : ObjectIdentifier(Key.self),
            keyBits: bits ?? 0)
        if position < learntKeyCount, let learntKeys {
            learntKeys[position] = learnt
        } else if position == learntKeyCount, position < Self.maximumLearntKeyCount {
            let keys = learntKeys ?? .allocate(capacity: Self.maximumLearntKeyCount)
            learntKeys = keys
            (keys + position).initialize(to: learnt)
            learntKeyCount += 1
        }
        return index
    }

    var columnNames: [String] {
        Array(statement.columnNames.prefix(columnCount))
    }

    // MARK: Values

    /// Reads a column with the type's own conversion: the one place a column is converted straight from the
    /// statement (`Value.decode(from:)`), or from a copied row's values. Callers check
    /// ``checkDecoding()`` first.
    @inline(__always)
    private func read<Value: DatabaseValueConvertible>(_ type: Value.Type, at index: Int) -> Value? {
        if let sqliteStatement {
            // Every index is below `columnCount`, so it fits a CInt.
            return Value.decode(from: DatabaseColumn(sqliteStatement, CInt(truncatingIfNeeded: index)))
        }
        return Value.fromDatabaseValue(values[index])
    }

    func isNull(at index: Int) throws -> Bool {
        try checkDecoding()
        if let sqliteStatement {
            return sqlite3_column_type(sqliteStatement, CInt(index)) == SQLITE_NULL
        }
        return values[index].isNull
    }

    /// The stored value, for error messages and JSON; only while decoding (see ``checkDecoding()``).
    private func databaseValue(at index: Int) -> DatabaseValue {
        if let sqliteStatement {
            return DatabaseValue(sqliteStatement: sqliteStatement, column: CInt(index))
        }
        return values[index]
    }

    /// Reads a column as `Value`, or throws a conversion error naming the column and the type.
    @inline(__always)
    func decodeColumn<Value: DatabaseValueConvertible>(_ type: Value.Type, at index: Int) throws -> Value {
        try checkDecoding()
        if let value = read(Value.self, at: index) { return value }
        throw conversionError(at: index, to: Value.self)
    }

    /// Reads one column as any `Decodable` type outside a record's initializer (`Row.decodeColumn(_:named:)`):
    /// `nil` for NULL when `nullIsNil`.
    func decodeOneColumn<Value: Decodable>(_ type: Value.Type, at index: Int, nullIsNil: Bool) throws -> Value? {
        isDecoding = true
        defer { isDecoding = false }
        if nullIsNil, try isNull(at: index) { return nil }
        return try decodeValue(Value.self, at: index)
    }

    /// Reads a column as any `Decodable` type: natively for ``DatabaseValueConvertible`` types, through a
    /// single-value container for single-value types (a `RawRepresentable` enum), from JSON otherwise.
    func decodeValue<Value: Decodable>(_ type: Value.Type, at index: Int) throws -> Value {
        try checkDecoding()
        if let convertible = Value.self as? any DatabaseValueConvertible.Type {
            guard let value = readAny(convertible, at: index) as? Value else {
                throw conversionError(at: index, to: Value.self)
            }
            return value
        }
        do {
            return try Value(from: ColumnDecoder(context: self, index: index))
        } catch is StructuredValueRequest {
            return try decodeJSON(Value.self, at: index)
        } catch let error as DecodingError {
            throw conversionError(
                at: index, to: Value.self,
                reason: "the value cannot be decoded as \(Value.self): \(CodableJSON.describe(error))")
        }
    }

    private func readAny<Value: DatabaseValueConvertible>(_ type: Value.Type, at index: Int) -> Any? {
        read(Value.self, at: index)
    }

    private func decodeJSON<Value: Decodable>(_ type: Value.Type, at index: Int) throws -> Value {
        let data: Data
        switch databaseValue(at: index) {
        case .text(let text): data = Data(text.utf8)
        case .blob(let bytes): data = Data(bytes)
        case .null: throw conversionError(at: index, to: Value.self)
        case let other:
            throw conversionError(
                at: index, to: Value.self,
                reason: "\(other.storageClassName) value cannot be decoded as \(Value.self) (JSON is read from TEXT"
                    + " or BLOB)")
        }
        do {
            return try jsonDecoder.decode(Value.self, from: data)
        } catch {
            throw conversionError(
                at: index, to: Value.self,
                reason: "the JSON value cannot be decoded as \(Value.self): \(CodableJSON.describe(error))")
        }
    }

    // MARK: Errors

    func conversionError(at index: Int, to type: Any.Type, reason: String? = nil) -> DatabaseError {
        let reason = reason ?? {
            let stored = databaseValue(at: index)
            return stored.isNull ? "NULL cannot be read as non-optional \(type)"
                : "\(stored.storageClassName) value cannot be represented as \(type)"
        }()
        let name = index < columnCount ? statement.columnNames[index] : "?"
        return DatabaseError(
            .valueConversion,
            "column `\(name)` (index \(index)) of \(recordType): \(reason)", sql: statement.sql)
    }

    func missingColumnError(_ key: some CodingKey, type: Any.Type) -> DatabaseError {
        DatabaseError.outOfRange(
            "no column named `\(key.stringValue)` for the \(type) property of \(recordType) (the row has: "
                + columnNames.joined(separator: ", ") + ")",
            sql: statement.sql)
    }

    func unsupported(_ what: String) -> DatabaseError {
        DatabaseError(
            .valueConversion,
            "cannot decode \(recordType): \(what)", sql: statement.sql)
    }
}

@available(*, unavailable)
extension RowDecodingContext: Sendable {}

/// A weak reference, to tell whether an object outlived its owner.
struct WeakReference {
    weak var object: AnyObject?

    init(_ object: AnyObject) {
        self.object = object
    }
}

/// A reused keyed container, found by the type of its keys.
private class KeyedContainerHolderBase {
    let keyType: ObjectIdentifier

    init(keyType: ObjectIdentifier) {
        self.keyType = keyType
    }

    /// A weak reference to the container's box: once the holder is gone, it is `nil` unless a copy of the container
    /// is still referenced elsewhere.
    func weakBox() -> WeakReference { fatalError("overridden") }
}

/// Generic over the container type (a `KeyedDecodingContainer<Key>`) rather than the key type, so that its methods
/// find the container's metadata in the holder's own.
private final class KeyedContainerHolder<Container>: KeyedContainerHolderBase {
    // `KeyedDecodingContainer` is one reference to the standard library's box (checked where a holder is made); the
    // holder keeps it as `AnyObject` so that ``weakBox()`` can refer to the box itself.
    // Unchecked: read on every row (the dynamic check is a runtime call each time), never accessed concurrently.
    @exclusivity(unchecked)
    private var box: AnyObject

    init(_ container: Container, keyType: ObjectIdentifier) {
        self.box = unsafeBitCast(container, to: AnyObject.self)
        super.init(keyType: keyType)
    }

    @inline(never)
    func get() -> Container {
        unsafeBitCast(box, to: Container.self)
    }

    override func weakBox() -> WeakReference {
        WeakReference(box)
    }
}

/// Thrown by ``ColumnDecoder`` when a type asks one column for a keyed or unkeyed container: it is then read from
/// JSON instead. Never escapes the library.
struct StructuredValueRequest: Error {}

// MARK: - Row decoder

/// Decodes a row: keyed by column name, unkeyed in column order, or as a single value (the first column).
///
/// One per context, which it refers to unowned (the context outlives it, see ``RowDecodingContext/finish()``).
final class RowDecoder: Decoder {
    private let unmanagedContext: Unmanaged<RowDecodingContext>

    /// The context, retained: for the paths that are not per row.
    var context: RowDecodingContext { unmanagedContext.takeUnretainedValue() }

    init(context: RowDecodingContext) {
        unmanagedContext = .passUnretained(context)
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        unmanagedContext._withUnsafeGuaranteedRef { $0.keyedContainer(keyedBy: Key.self) }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        RowUnkeyedDecodingContainer(context: context)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard context.columnCount > 0 else { throw context.unsupported("the row has no column") }
        return ColumnValueDecodingContainer(context: context, index: 0, codingPath: [])
    }
}

struct RowKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// Unmanaged so that copying the container, and reading through it, costs no retain and release (see
    /// ``RowDecodingContext``, which outlives it).
    let unmanagedContext: Unmanaged<RowDecodingContext>

    init(context: RowDecodingContext) {
        unmanagedContext = .passUnretained(context)
    }

    /// The context, retained: for the paths that are not per column.
    private var context: RowDecodingContext { unmanagedContext.takeUnretainedValue() }

    var codingPath: [any CodingKey] { [] }

    var allKeys: [Key] {
        context.columnNames.compactMap { Key(stringValue: $0) }
    }

    func contains(_ key: Key) -> Bool {
        context.columnIndex(for: key) != nil
    }

    @inline(__always)
    private func index(_ key: Key, _ type: Any.Type) throws -> Int {
        guard let index = context.columnIndex(for: key) else { throw context.missingColumnError(key, type: type) }
        return index
    }

    @inline(__always)
    private func column<Value: DatabaseValueConvertible>(_ type: Value.Type, _ key: Key) throws -> Value {
        try unmanagedContext._withUnsafeGuaranteedRef { context in
            guard let index = context.columnIndex(for: key) else {
                throw context.missingColumnError(key, type: Value.self)
            }
            return try context.decodeColumn(Value.self, at: index)
        }
    }

    @inline(__always)
    private func columnIfPresent<Value: DatabaseValueConvertible>(_ type: Value.Type, _ key: Key) throws -> Value? {
        try unmanagedContext._withUnsafeGuaranteedRef { context in
            guard let index = context.columnIndex(for: key), try !context.isNull(at: index) else { return nil }
            return try context.decodeColumn(Value.self, at: index)
        }
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        try context.isNull(at: try index(key, Optional<Any>.self))
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try column(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try column(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try column(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try column(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try column(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try column(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try column(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try column(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try column(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try column(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try column(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try column(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try column(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try column(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try context.decodeValue(T.self, at: index(key, T.self))
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try columnIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try columnIfPresent(type, key) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let index = context.columnIndex(for: key), try !context.isNull(at: index) else { return nil }
        return try context.decodeValue(T.self, at: index)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw context.unsupported(
            "nested containers are not read from rows (column `\(key.stringValue)`); decode a Decodable property"
                + " instead, it is read from the column's JSON")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw context.unsupported(
            "nested containers are not read from rows (column `\(key.stringValue)`); decode a Decodable property"
                + " instead, it is read from the column's JSON")
    }

    func superDecoder() throws -> any Decoder {
        context.rowDecoder
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ColumnDecoder(context: context, index: try index(key, Any.self))
    }
}

/// Reads the columns of a row in order.
struct RowUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let context: RowDecodingContext
    private(set) var currentIndex = 0

    init(context: RowDecodingContext) {
        self.context = context
    }

    var codingPath: [any CodingKey] { [] }
    var count: Int? { context.columnCount }
    var isAtEnd: Bool { currentIndex >= context.columnCount }

    private mutating func nextIndex(_ type: Any.Type) throws -> Int {
        guard !isAtEnd else {
            throw context.unsupported("asked for a \(type) after the last of \(context.columnCount) column(s)")
        }
        defer { currentIndex += 1 }
        return currentIndex
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { return false }
        if try context.isNull(at: currentIndex) {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try context.decodeValue(T.self, at: nextIndex(T.self))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw context.unsupported("nested containers are not read from rows")
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw context.unsupported("nested containers are not read from rows")
    }

    mutating func superDecoder() throws -> any Decoder {
        ColumnDecoder(context: context, index: try nextIndex(Any.self))
    }
}

// MARK: - One column

/// Decodes one column as a single value; a keyed or unkeyed container makes the caller read the column's JSON.
struct ColumnDecoder: Decoder {
    let context: RowDecodingContext
    let index: Int

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw StructuredValueRequest()
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw StructuredValueRequest()
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        ColumnValueDecodingContainer(context: context, index: index, codingPath: [])
    }
}

struct ColumnValueDecodingContainer: SingleValueDecodingContainer {
    let context: RowDecodingContext
    let index: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool {
        (try? context.isNull(at: index)) ?? false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try context.decodeColumn(type, at: index) }
    func decode(_ type: String.Type) throws -> String { try context.decodeColumn(type, at: index) }
    func decode(_ type: Double.Type) throws -> Double { try context.decodeColumn(type, at: index) }
    func decode(_ type: Float.Type) throws -> Float { try context.decodeColumn(type, at: index) }
    func decode(_ type: Int.Type) throws -> Int { try context.decodeColumn(type, at: index) }
    func decode(_ type: Int8.Type) throws -> Int8 { try context.decodeColumn(type, at: index) }
    func decode(_ type: Int16.Type) throws -> Int16 { try context.decodeColumn(type, at: index) }
    func decode(_ type: Int32.Type) throws -> Int32 { try context.decodeColumn(type, at: index) }
    func decode(_ type: Int64.Type) throws -> Int64 { try context.decodeColumn(type, at: index) }
    func decode(_ type: UInt.Type) throws -> UInt { try context.decodeColumn(type, at: index) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try context.decodeColumn(type, at: index) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try context.decodeColumn(type, at: index) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try context.decodeColumn(type, at: index) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try context.decodeColumn(type, at: index) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try context.decodeValue(T.self, at: index)
    }
}


