import Foundation
import SQLCipherKit

/// How one value (or column name) is written in each mode. The rules, in Docs/CLI.md#output-modes:
///
/// - list, table, box, line: one line whatever the value holds. A backslash is doubled, a tab, newline and carriage
///   return are `\t`, `\n`, `\r`, any other control character is `\u00XX` (a value cannot move the cursor or recolour
///   the operator's terminal), NULL is `\N` (or `--null-value`), a blob is `\x` and its hex digits. Since a text's
///   backslashes are doubled, no text prints as `\N` or `\x…`: every value reads back unambiguously.
/// - csv: RFC 4180. A field holding a comma, a double quote, CR or LF is quoted, its quotes doubled; the empty text
///   is `""` and NULL an empty field, so they differ; a blob is `\x` and its hex digits (CSV has no types).
/// - json: integers and reals are numbers, text a string, NULL `null`, a blob `{"base64": "…"}`, an infinite real
///   `{"real": "Infinity"}` (or `"-Infinity"`; NaN `"NaN"`): JSON has no number for them.
enum ValueText {
    // MARK: - list, table, box, line

    static func list(_ value: DatabaseValue, nullValue: String) -> String {
        switch value {
        case .null: nullValue
        case .integer(let integer): String(integer)
        case .real(let real): number(real)
        case .text(let text): escaped(text)
        case .blob(let bytes): #"\x"# + Hex.string(bytes)
        }
    }

    /// Text on one line, with no control character left in it.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\\" || isControl($0) }) else { return text }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += #"\\"#
            case "\t": result += #"\t"#
            case "\n": result += #"\n"#
            case "\r": result += #"\r"#
            case _ where isControl(scalar): result += unicodeEscape(scalar)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// C0 and C1 controls and DEL: a terminal acts on them (C1's U+009B starts an escape sequence like ESC [).
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    private static func unicodeEscape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16)
        return #"\u"# + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    // MARK: - csv

    static func csv(_ value: DatabaseValue, separator: String = ",") -> String {
        switch value {
        case .null: ""
        case .text(let text): csvField(text, quotesEmpty: true, separator: separator)
        default: list(value, nullValue: "")
        }
    }

    /// One field: quoted when it holds a separator (a comma, or the shell's `.separator`), a quote or a line end
    /// (or, with `quotesEmpty`, nothing at all).
    static func csvField(_ text: String, quotesEmpty: Bool = false, separator: String = ",") -> String {
        if text.isEmpty { return quotesEmpty ? #""""# : "" }
        let holdsSeparator = separator != "," && !separator.isEmpty && text.contains(separator)
        guard holdsSeparator
            || text.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" })
        else {
            return text
        }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    // MARK: - json

    static func json(_ value: DatabaseValue) -> String {
        switch value {
        case .null: "null"
        case .integer(let integer): String(integer)
        case .real(let real):
            // JSON has no infinity or NaN (and `1e999` is read as the largest finite double by some parsers).
            real.isFinite ? number(real) : #"{"real":"# + jsonString(nonFiniteName(real)) + "}"
        case .text(let text): jsonString(text)
        case .blob(let bytes): #"{"base64":"# + jsonString(Data(bytes).base64EncodedString()) + "}"
        }
    }

    static func jsonString(_ text: String) -> String {
        var result = "\""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += #"\""#
            case "\\": result += #"\\"#
            case "\n": result += #"\n"#
            case "\r": result += #"\r"#
            case "\t": result += #"\t"#
            // U+2028 and U+2029 are valid in JSON but end a line in JavaScript source.
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                result += unicodeEscape(scalar)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    // MARK: - Numbers

    /// How JSON output (`--mode json`, `.mode json`, `exec --json`) names a non-finite real, inside the object
    /// `{"real": …}`: `Infinity`, `-Infinity` or `NaN` (SQLite stores no NaN, but a function may return one).
    static func nonFiniteName(_ real: Double) -> String {
        real.isNaN ? "NaN" : (real < 0 ? "-Infinity" : "Infinity")
    }

    /// The shortest decimal that reads back as the same double (`0.1`, `1e-05`, `5.0`); infinities as `1e999` and
    /// `-1e999`, which SQLite and JSON parsers read as infinite (SQLite stores no NaN: it becomes NULL).
    static func number(_ real: Double) -> String {
        if real.isInfinite { return real < 0 ? "-1e999" : "1e999" }
        return real.description
    }
}
