import SQLCipherKit

/// Values as SQL literals for `.dump`, each of which reads back as exactly the value it was made from:
///
/// - text in single quotes, quotes doubled; a newline or tab stays as it is, but text holding any other control
///   character (a carriage return, an escape sequence, NUL), and text whose bytes are not valid UTF-8, is written
///   `CAST(X'<UTF-8 hex>' AS TEXT)`, so the dump holds no byte that acts on a terminal and loses nothing (it is read
///   as UTF-8, SQLite's default encoding);
/// - blobs `X'<hex>'`, integers in decimal, NULL;
/// - reals as the shortest decimal that reads back as the same double, when the linked engine reads it back so.
///   SQLite's decimal parser before 3.43 is not always correctly rounded (a value can come back one unit in the last
///   place off): such a value is written as an exact product, its integer significand times or divided by powers of
///   two (`(CAST(5404319552844595 AS REAL)/4503599627370496)`), which every SQLite computes exactly. Infinities
///   are `1e999` and `-1e999`.
final class SQLLiteral {
    /// Reads a decimal the way the engine reads a literal (`CAST` and the parser share one conversion).
    private let parse: Statement

    init(connection: Connection) throws {
        parse = try connection.prepare("SELECT CAST(?1 AS REAL)")
    }

    func literal(_ value: DatabaseValue) throws -> String {
        switch value {
        case .null: return "NULL"
        case .integer(let integer): return String(integer)
        case .real(let real): return try literal(real)
        case .text(let text): return Self.literal(text)
        case .blob(let bytes): return "X'" + Hex.string(bytes) + "'"
        }
    }

    /// The literal of text stored as `bytes` (UTF-8 as SQLite keeps it): as ``literal(_:)-swift.type.method`` when
    /// they are valid UTF-8, otherwise `CAST(X'<hex>' AS TEXT)`, which gives back the same bytes.
    static func literal(textBytes bytes: [UInt8]) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return "CAST(X'" + Hex.string(bytes) + "' AS TEXT)"
        }
        return literal(text)
    }

    static func literal(_ text: String) -> String {
        let needsBytes = text.unicodeScalars.contains { scalar in
            (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
        }
        if needsBytes { return "CAST(X'" + Hex.string(text.utf8) + "' AS TEXT)" }
        return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    private func literal(_ real: Double) throws -> String {
        if real.isInfinite { return real < 0 ? "-1e999" : "1e999" }
        let decimal = real.description
        guard case .real(let readBack)? = try parse.cursor(decimal).next()?.databaseValue(at: 0),
              readBack.bitPattern == real.bitPattern || (readBack == 0 && real == 0)
        else { return Self.exactProduct(real) }
        return decimal
    }

    /// `real` as its significand (an integer below 2^53) scaled by powers of two, each step exact.
    static func exactProduct(_ real: Double) -> String {
        let bits = real.bitPattern
        let exponentBits = Int((bits >> 52) & 0x7FF)
        var significand = bits & ((1 << 52) - 1)
        var exponent: Int
        if exponentBits == 0 {
            exponent = -1074
        } else {
            significand |= 1 << 52
            exponent = exponentBits - 1075
        }
        if significand == 0 { return real.sign == .minus ? "-0.0" : "0.0" }
        while significand & 1 == 0 {
            significand >>= 1
            exponent += 1
        }
        var text = "(" + (real.sign == .minus ? "-" : "") + "CAST(\(significand) AS REAL)"
        let operation = exponent < 0 ? "/" : "*"
        var remaining = abs(exponent)
        while remaining > 0 {
            let step = min(remaining, 62)
            text += operation + String(UInt64(1) << UInt64(step))
            remaining -= step
        }
        return text + ")"
    }
}
