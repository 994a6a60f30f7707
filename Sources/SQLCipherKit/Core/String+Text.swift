// Text helpers the library's SQL and PRAGMA handling share.
extension String {
    /// The string without leading and trailing whitespace (Unicode's, not only ASCII's).
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }

    /// Whether the two are equal ignoring case (PRAGMA values, column names).
    func caseInsensitiveEquals(_ other: String) -> Bool {
        lowercased() == other.lowercased()
    }
}

/// A path as the path part of a `file:` URI: `%`, `?` and `#` escaped.
func uriEscaped(_ path: String) -> String {
    var escaped = ""
    for character in path.unicodeScalars {
        switch character {
        case "%": escaped += "%25"
        case "?": escaped += "%3f"
        case "#": escaped += "%23"
        default: escaped.unicodeScalars.append(character)
        }
    }
    return escaped
}
