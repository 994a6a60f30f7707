#if SQLKit  // trait SQLKit (Package.swift)
import Foundation
import SQLCipherKit
@_spi(CodableUtilities) import SQLKit

/// Turns SQLite values into the types SQLKit rows and Fluent models ask for (the inverse of
/// ``SQLCipherDataEncoder``): INTEGER into integers and `Bool`; REAL or INTEGER into `Double`, `Float` and `Date`
/// (seconds since 1970, or ISO 8601 TEXT); TEXT into `String` and `UUID`; BLOB into `Data`; JSON TEXT into
/// structured values.
public struct SQLCipherDataDecoder: Sendable {
    /// The decoder for values stored as JSON.
    let json: UncheckedSendable<JSONDecoder>

    /// A decoder with a default `JSONDecoder`.
    public init() {
        self.init(json: JSONDecoder())
    }

    /// A decoder that reads JSON values with `json`.
    public init(json: JSONDecoder) {
        self.json = UncheckedSendable(json)
    }

    /// Decodes `value` as `T`.
    public func decode<T: Decodable>(_ type: T.Type, from value: DatabaseValue) throws -> T {
        if let direct = try Self.directValue(type, from: value) { return direct }
        do {
            return try T(from: SingleValueDecoder(dataDecoder: self, value: value))
        } catch is SQLCodingError {
            let bytes: Data = switch value {
            case .text(let text): Data(text.utf8)
            case .blob(let blob): Data(blob)
            case .integer(let integer): Data(String(integer).utf8)
            case .real(let real): Data(String(real).utf8)
            case .null: Data()
            }
            return try json.value.decode(T.self, from: bytes)
        }
    }

    private static func mismatch<T>(_ type: T.Type, _ value: DatabaseValue) -> DecodingError {
        // The storage class only: values may be confidential.
        DecodingError.typeMismatch(T.self, .init(
            codingPath: [], debugDescription: "cannot read a SQLite \(value.storageClassName) value as \(T.self)"))
    }

    private static func directValue<T>(_ type: T.Type, from value: DatabaseValue) throws -> T? {
        func integer() throws -> Int64 {
            guard case .integer(let integer) = value else { throw mismatch(T.self, value) }
            return integer
        }
        func double() throws -> Double {
            switch value {
            case .integer(let integer): return Double(integer)
            case .real(let real): return real
            default: throw mismatch(T.self, value)
            }
        }
        switch type {
        case is DatabaseValue.Type: return value as? T
        case is String.Type:
            switch value {
            case .text(let text): return text as? T
            case .integer(let integer): return String(integer) as? T
            case .real(let real): return String(real) as? T
            default: throw mismatch(T.self, value)
            }
        case is Int.Type: return Int(try integer()) as? T
        case is Int64.Type: return try integer() as? T
        case is Int32.Type: return Int32(truncatingIfNeeded: try integer()) as? T
        case is Int16.Type: return Int16(truncatingIfNeeded: try integer()) as? T
        case is Int8.Type: return Int8(truncatingIfNeeded: try integer()) as? T
        case is UInt.Type: return UInt(truncatingIfNeeded: try integer()) as? T
        case is UInt64.Type: return UInt64(truncatingIfNeeded: try integer()) as? T
        case is UInt32.Type: return UInt32(truncatingIfNeeded: try integer()) as? T
        case is UInt16.Type: return UInt16(truncatingIfNeeded: try integer()) as? T
        case is UInt8.Type: return UInt8(truncatingIfNeeded: try integer()) as? T
        case is Double.Type: return try double() as? T
        case is Float.Type: return Float(try double()) as? T
        case is Bool.Type:
            switch value {
            case .integer(let integer): return (integer != 0) as? T
            case .text(let text) where ["true", "false"].contains(text.lowercased()):
                return (text.lowercased() == "true") as? T
            default: throw mismatch(T.self, value)
            }
        case is Date.Type:
            switch value {
            case .integer, .real:
                // Rounded to microseconds, so a Date read back equals the one written.
                let sinceReference = try double() - Date.timeIntervalBetween1970AndReferenceDate
                return Date(timeIntervalSinceReferenceDate: (sinceReference * 1e6).rounded() / 1e6) as? T
            case .text(let text):
                guard let date = parseISO8601(text) else { throw mismatch(T.self, value) }
                return date as? T
            default: throw mismatch(T.self, value)
            }
        case is UUID.Type:
            switch value {
            case .text(let text):
                guard let uuid = UUID(uuidString: text) else { throw mismatch(T.self, value) }
                return uuid as? T
            case .blob(let bytes) where bytes.count == 16:
                return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                                   bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14],
                                   bytes[15])) as? T
            default: throw mismatch(T.self, value)
            }
        case is Data.Type:
            guard case .blob(let bytes) = value else { throw mismatch(T.self, value) }
            return Data(bytes) as? T
        default:
            return nil
        }
    }

    private static func parseISO8601(_ text: String) -> Date? {
        let strategies: [Date.ISO8601FormatStyle] = [
            .iso8601,
            .iso8601.dateTimeSeparator(.space),
            .iso8601.dateTimeSeparator(.space).year().month().day().time(includingFractionalSeconds: false),
            .iso8601.year().month().day(),
        ]
        for strategy in strategies {
            if let date = try? Date(text, strategy: strategy) { return date }
        }
        return nil
    }

    /// Offers the value through a single-value container; a keyed or unkeyed request fails with `SQLCodingError`,
    /// which sends the value to JSON.
    private struct SingleValueDecoder: Decoder, SingleValueDecodingContainer {
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        let dataDecoder: SQLCipherDataDecoder
        let value: DatabaseValue

        func container<Key: CodingKey>(keyedBy: Key.Type) throws -> KeyedDecodingContainer<Key> {
            throw .invalid(at: codingPath)
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw .invalid(at: codingPath) }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

        func decodeNil() -> Bool { value.isNull }

        func decode<T: Decodable>(_: T.Type) throws -> T { try dataDecoder.decode(T.self, from: value) }
    }
}
#endif
