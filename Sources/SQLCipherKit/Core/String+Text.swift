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
}
