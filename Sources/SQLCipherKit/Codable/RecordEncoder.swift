#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - State

/// The columns and values an `Encodable` record encodes to, in the order its keys were encoded.
final class RecordEncoding {
    let recordType: Any.Type
    private(set) var columns: [String] = []
    private(set) var values: [DatabaseValue] = []
    /// A misuse the non-throwing container methods could not throw; thrown once `encode(to:)` returns.
    var deferredError: DatabaseError?

    private lazy var jsonEncoder = CodableJSON.makeEncoder()

    /// Encodes `record` into columns and values.
    init<Record: Encodable>(_ record: Record) throws {
        self.recordType = Record.self
        do {
            try record.encode(to: RecordEncoder(encoding: self))
        } catch let error as EncodingError {
            throw DatabaseError(
                .valueConversion,
                "cannot encode \(Record.self): \(CodableJSON.describe(error))")
        }
        if let deferredError { throw deferredError }
    }

    func set(_ value: DatabaseValue, forColumn column: String) {
        if let index = columns.firstIndex(of: column) {
            values[index] = value
        } else {
            columns.append(column)
            values.append(value)
        }
    }

    func recordMisuse(_ message: String) {
        if deferredError == nil {
            deferredError = DatabaseError(
                .valueConversion,
                "cannot encode \(recordType): \(message)")
        }
    }

    /// The database value of one field: native for ``DatabaseValueConvertible`` types, the single value of a
    /// single-value type, JSON TEXT for anything else.
    func databaseValue<Value: Encodable>(of value: Value, field: String) throws -> DatabaseValue {
        if let convertible = value as? any DatabaseValueConvertible {
            return convertible.databaseValue
        }
        let probe = ColumnValueEncoder.Probe()
        do {
            try value.encode(to: ColumnValueEncoder(probe: probe, encoding: self, field: field))
        } catch let error as EncodingError {
            throw fieldError(field, Value.self, CodableJSON.describe(error))
        }
        if !probe.isStructured {
            guard let single = probe.value else {
                throw fieldError(field, Value.self, "the value encoded nothing")
            }
            return single
        }
        do {
            let data = try jsonEncoder.encode(value)
            return .text(String(decoding: data, as: UTF8.self))
        } catch {
            throw fieldError(field, Value.self, "cannot encode it as JSON: \(CodableJSON.describe(error))")
        }
    }

    func fieldError(_ field: String, _ type: Any.Type, _ reason: String) -> DatabaseError {
        DatabaseError(
            .valueConversion,
            "field `\(field)` (\(type)) of \(recordType): \(reason)")
    }
}

@available(*, unavailable)
extension RecordEncoding: Sendable {}

// MARK: - Record encoder

/// Encodes a record as columns: one per key of its keyed container.
struct RecordEncoder: Encoder {
    let encoding: RecordEncoding

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RecordKeyedEncodingContainer<Key>(encoding: encoding))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        encoding.recordMisuse("a record must encode a keyed container (one key per column), not an unkeyed one")
        return DiscardingEncodingContainer<AnyCodingKey>()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        encoding.recordMisuse("a record must encode a keyed container (one key per column), not a single value")
        return DiscardingEncodingContainer<AnyCodingKey>()
    }
}

struct RecordKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoding: RecordEncoding

    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws {
        encoding.set(.null, forColumn: key.stringValue)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        let column = key.stringValue
        encoding.set(try encoding.databaseValue(of: value, field: column), forColumn: column)
    }

    // `nil` is stored as NULL: the default implementations would leave the column out.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        try encodeOptional(value, key)
    }

    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeOptional(value, key) }

    private mutating func encodeOptional<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value {
            try encode(value, forKey: key)
        } else {
            try encodeNil(forKey: key)
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        encoding.recordMisuse(nestedMessage(key))
        return KeyedEncodingContainer(DiscardingEncodingContainer<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoding.recordMisuse(nestedMessage(key))
        return DiscardingEncodingContainer<AnyCodingKey>()
    }

    mutating func superEncoder() -> any Encoder {
        RecordEncoder(encoding: encoding)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        encoding.recordMisuse(nestedMessage(key))
        return ColumnValueEncoder(probe: ColumnValueEncoder.Probe(), encoding: encoding, field: key.stringValue)
    }

    private func nestedMessage(_ key: Key) -> String {
        "field `\(key.stringValue)`: nested containers are not written to rows; encode an Encodable value instead"
            + " (it is stored as JSON)"
    }
}

// MARK: - One column

/// Finds out how a value that is not ``DatabaseValueConvertible`` encodes: a single value (stored natively) or a
/// keyed or unkeyed container (stored as JSON; what it writes here is discarded).
struct ColumnValueEncoder: Encoder {
    final class Probe {
        var value: DatabaseValue?
        var isStructured = false
    }

    let probe: Probe
    let encoding: RecordEncoding
    let field: String

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        probe.isStructured = true
        return KeyedEncodingContainer(DiscardingEncodingContainer<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        probe.isStructured = true
        return DiscardingEncodingContainer<AnyCodingKey>()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        ColumnValueEncodingContainer(probe: probe, encoding: encoding, field: field)
    }
}

struct ColumnValueEncodingContainer: SingleValueEncodingContainer {
    let probe: ColumnValueEncoder.Probe
    let encoding: RecordEncoding
    let field: String

    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() throws {
        probe.value = .null
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        probe.value = try encoding.databaseValue(of: value, field: field)
    }
}

/// Accepts and drops everything: what a structured value writes while being probed, or after a misuse was recorded.
struct DiscardingEncodingContainer<Key: CodingKey>:
    KeyedEncodingContainerProtocol, UnkeyedEncodingContainer, SingleValueEncodingContainer
{
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {}
    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws {}

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(DiscardingEncodingContainer<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { self }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(DiscardingEncodingContainer<NestedKey>())
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { DiscardingEncoder() }
}

struct DiscardingEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(DiscardingEncodingContainer<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingEncodingContainer<AnyCodingKey>() }
    func singleValueContainer() -> any SingleValueEncodingContainer { DiscardingEncodingContainer<AnyCodingKey>() }
}

struct AnyCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}
