#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON form of values that are neither a ``DatabaseValueConvertible`` type nor a single value (arrays,
/// dictionaries, nested structs): stored as TEXT by the encoder, read from TEXT or BLOB by the decoder.
///
/// Both sides use Foundation's default strategies (so a `Date` inside a nested value is a number of seconds since
/// 2001-01-01, as `JSONEncoder` writes it); keys are sorted so that equal values give equal text.
enum CodableJSON {
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    static func makeDecoder() -> JSONDecoder {
        JSONDecoder()
    }

    /// Describes a coding error by its kind and coding path only: Foundation's descriptions may quote the value
    /// (an invalid enum raw value), and stored values may be confidential.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else {
            if let error = error as? EncodingError, case .invalidValue(_, let context) = error {
                return "the value cannot be encoded as JSON" + path(context.codingPath)
            }
            return "\(type(of: error))"
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "expected \(type)" + path(context.codingPath)
        case .valueNotFound(let type, let context):
            return "missing \(type) value" + path(context.codingPath)
        case .keyNotFound(let key, let context):
            return "missing key `\(key.stringValue)`" + path(context.codingPath)
        case .dataCorrupted(let context):
            return "invalid or corrupted data" + path(context.codingPath)
        @unknown default:
            return "decoding failed"
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        guard !codingPath.isEmpty else { return "" }
        return " at `" + codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            + "`"
    }
}
