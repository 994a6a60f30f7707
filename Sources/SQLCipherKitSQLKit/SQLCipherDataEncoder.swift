#if SQLKit  // trait SQLKit (Package.swift)
import Foundation
import SQLCipherKit
@_spi(CodableUtilities) import SQLKit

/// Turns the values SQLKit and Fluent bind into SQLite values, in the same storage classes fluent-sqlite-driver
/// uses, so a file written by one reads the same through the other.
///
/// - Integers and `Bool` → INTEGER; `Double`, `Float` and `Date` (seconds since 1970) → REAL; `String` and `UUID`
///   → TEXT; `Data` → BLOB; `nil` → NULL.
/// - Anything that does not encode as one single value (arrays, dictionaries, structs) → JSON TEXT.
public struct SQLCipherDataEncoder: Sendable {
    /// The encoder for values stored as JSON.
    let json: UncheckedSendable<JSONEncoder>

    /// An encoder with a default `JSONEncoder`.
    public init() {
        self.init(json: JSONEncoder())
    }

    /// An encoder that writes JSON values with `json`.
    public init(json: JSONEncoder) {
        self.json = UncheckedSendable(json)
    }

    /// The SQLite value for `value`.
    public func encode(_ value: any Encodable) throws -> DatabaseValue {
        if let direct = Self.directValue(value) { return direct }
        let encoder = SingleValueEncoder(dataEncoder: self)
        do {
            try value.encode(to: encoder)
            guard let encoded = encoder.value else {
                throw SQLCodingError.unsupportedOperation("missing value", codingPath: [])
            }
            return encoded
        } catch is SQLCodingError {
            // Keyed or unkeyed: a structured value, stored as JSON text (SQLite's json_* functions read text).
            return .text(String(decoding: try json.value.encode(value), as: UTF8.self))
        }
    }

    private static func directValue(_ value: any Encodable) -> DatabaseValue? {
        switch value {
        case let value as String: .text(value)
        case let value as Int: .integer(Int64(value))
        case let value as Int64: .integer(value)
        case let value as Bool: .integer(value ? 1 : 0)
        case let value as Double: .real(value)
        case let value as Date: .real(value.timeIntervalSince1970)
        case let value as UUID: .text(value.uuidString)
        case let value as Data: .blob([UInt8](value))
        default: nil
        }
    }

    /// Captures a value that encodes into a single-value container; any other container fails with
    /// `SQLCodingError`, which sends the value to JSON.
    private final class SingleValueEncoder: Encoder, SingleValueEncodingContainer {
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        let dataEncoder: SQLCipherDataEncoder
        var value: DatabaseValue?

        init(dataEncoder: SQLCipherDataEncoder) {
            self.dataEncoder = dataEncoder
        }

        func container<Key: CodingKey>(keyedBy: Key.Type) -> KeyedEncodingContainer<Key> {
            .invalid(at: codingPath)
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer { .invalid(at: codingPath) }

        func singleValueContainer() -> any SingleValueEncodingContainer { self }

        func encodeNil() throws { value = .null }
        func encode(_ value: Bool) throws { self.value = .integer(value ? 1 : 0) }
        func encode(_ value: String) throws { self.value = .text(value) }
        func encode(_ value: Double) throws { self.value = .real(value) }
        func encode(_ value: Float) throws { self.value = .real(Double(value)) }
        func encode(_ value: Int) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: Int8) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: Int16) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: Int32) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: Int64) throws { self.value = .integer(value) }
        func encode(_ value: UInt) throws { self.value = .integer(Int64(truncatingIfNeeded: value)) }
        func encode(_ value: UInt8) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: UInt16) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: UInt32) throws { self.value = .integer(Int64(value)) }
        func encode(_ value: UInt64) throws { self.value = .integer(Int64(truncatingIfNeeded: value)) }
        func encode(_ value: some Encodable) throws { self.value = try dataEncoder.encode(value) }
    }
}

/// A value that is only used in ways that are safe across threads (JSON coders, configured once and then only
/// read; `JSONEncoder`/`JSONDecoder` are thread-safe for encoding and decoding).
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
#endif
