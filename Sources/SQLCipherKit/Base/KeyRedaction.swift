/// Keeps key material out of the text the library builds from SQL: an error's SQL and reason (``DatabaseError``
/// applies it to every error it is given), and a trace event's SQL.
///
/// SQL can carry a key in many spellings: the KEY clause of ATTACH (a string, a blob literal, a bare word, with
/// comments between the tokens, in any case), the key PRAGMAs (`key`, `rekey`, `hexkey`, `hexrekey`, `textkey`,
/// `textrekey`, with `=`, with parentheses, without `=` by mistake, schema-qualified), and URI parameters of a file
/// name (`key=`, `hexkey=`, `textkey=`). Rather than parse each, text that mentions `key` anywhere (any case, inside
/// quotes or comments too: every one of those spellings does) is treated as holding one:
///
/// - in its SQL, every literal (string, blob, number), every quoted identifier and every comment is replaced by
///   ``placeholder``, and so is every word after a key word (`key`, `rekey`, `hexkey`, …) up to the next `,`, `)` or
///   `;`: `ATTACH 'a.db' AS o KEY 'k'` becomes `ATTACH <redacted> AS o KEY <redacted>`;
/// - in the reason, SQLite's quoting of the token near a syntax error (`near "…": syntax error`,
///   `unrecognized token: "…"`) is replaced, and so is every text the SQL's redaction took out, wherever it appears
///   ("no such column: k"); SQL it quotes between backquotes (a leftover statement) is redacted as SQL.
///
/// URI key parameters (`?key=…`, `&hexkey=…`) are redacted in any text. Statements that mention `key` without holding
/// one (`PRIMARY KEY`, a column `api_key`) lose their literals too: in doubt, the library redacts.
enum KeyRedaction {
    /// What replaces redacted text.
    static let placeholder = "<redacted>"

    /// The words after which the rest of a clause may be a key.
    private static let keyWords: Set<String> = ["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]

    // MARK: - Errors

    /// The SQL and reason of an error, with key material redacted (see the type's description).
    static func redacted(sql: String?, reason: String) -> (sql: String?, reason: String) {
        var secrets: [String] = []
        guard let sql, mayHoldKey(sql) else {
            return (sql, redacting(reason: reason, secrets: [], afterKeyedSQL: false))
        }
        // The SQL an error names may stop short of the token SQLite quotes (an unterminated string): the reason's
        // quoting is redacted whenever the SQL mentions a key.
        let redactedSQL = redacting(sql: sql, secrets: &secrets)
        return (redactedSQL, redacting(reason: reason, secrets: secrets, afterKeyedSQL: true))
    }

    /// Whether `text` mentions `key` (ASCII, any case), as every spelling of a key in SQL does.
    static func mayHoldKey(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.count >= 3 else { return false }
            for index in 0...(bytes.count - 3)
            where bytes[index] | 0x20 == 0x6B && bytes[index + 1] | 0x20 == 0x65 && bytes[index + 2] | 0x20 == 0x79 {
                return true
            }
            return false
        }
    }

    /// `sql` redacted when it mentions `key`; otherwise as it is.
    static func redacting(sql: String) -> String {
        guard mayHoldKey(sql) else { return sql }
        var secrets: [String] = []
        return redacting(sql: sql, secrets: &secrets)
    }

    // MARK: - SQL

    /// `sql` with its literals, quoted identifiers, comments and the words after a key word replaced; `secrets`
    /// gets the text of each replaced token (and the inside of each quoted one).
    private static func redacting(sql: String, secrets: inout [String]) -> String {
        let bytes = Array(sql.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        let mark = Array(placeholder.utf8)
        var afterKeyWord = false
        var index = 0

        func replace(_ range: Range<Int>, inside: Range<Int>? = nil) {
            secrets.append(String(decoding: bytes[range], as: UTF8.self))
            if let inside, !inside.isEmpty {
                secrets.append(String(decoding: bytes[inside], as: UTF8.self))
            }
            output += mark
        }

        while index < bytes.count {
            let byte = bytes[index]
            let next = index + 1 < bytes.count ? bytes[index + 1] : 0
            switch byte {
            case 0x2D where next == 0x2D:  // -- comment, to the end of the line
                let end = bytes[index...].firstIndex(of: 0x0A) ?? bytes.count
                replace(index..<end)
                index = end
            case 0x2F where next == 0x2A:  // /* comment */ (or to the end)
                var end = index + 2
                while end < bytes.count && !(bytes[end] == 0x2A && end + 1 < bytes.count && bytes[end + 1] == 0x2F) {
                    end += 1
                }
                end = min(end + 2, bytes.count)
                replace(index..<end)
                index = end
            case 0x27, 0x22, 0x60, 0x5B:  // 'string', "identifier", `identifier`, [identifier]
                let end = quotedEnd(bytes, from: index)
                let inside = (index + 1)..<(isClosed(bytes, index, end) ? end - 1 : end)
                if byte != 0x27, keyWords.contains(String(decoding: bytes[inside], as: UTF8.self).lowercased()) {
                    afterKeyWord = true
                }
                replace(index..<end, inside: inside)
                index = end
            case 0x3B, 0x2C, 0x29:  // ; , ) end a clause
                afterKeyWord = false
                output.append(byte)
                index += 1
            default:
                guard isWordByte(byte) && byte != 0x2E else {
                    output.append(byte)
                    index += 1
                    continue
                }
                // A number runs on through its decimal point (1.5e3); a name stops at a dot (`main.key`).
                let isNumber = (0x30...0x39).contains(byte)
                var end = index
                while end < bytes.count && isWordByte(bytes[end]) && (isNumber || bytes[end] != 0x2E) { end += 1 }
                // x'…' is a blob literal.
                if end == index + 1, byte | 0x20 == 0x78, end < bytes.count, bytes[end] == 0x27 {
                    let literalEnd = quotedEnd(bytes, from: end)
                    replace(index..<literalEnd, inside: (end + 1)..<(isClosed(bytes, end, literalEnd) ? literalEnd - 1 : literalEnd))
                    index = literalEnd
                    continue
                }
                let word = String(decoding: bytes[index..<end], as: UTF8.self)
                if afterKeyWord || isNumber {
                    replace(index..<end)
                } else {
                    if keyWords.contains(word.lowercased()) { afterKeyWord = true }
                    output += bytes[index..<end]
                }
                index = end
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Where the quoted token starting at `start` ends (after its closing quote; the end of the text when it has
    /// none). A doubled quote inside is part of the token.
    private static func quotedEnd(_ bytes: [UInt8], from start: Int) -> Int {
        let close: UInt8 = bytes[start] == 0x5B ? 0x5D : bytes[start]
        var index = start + 1
        while index < bytes.count {
            if bytes[index] == close {
                if close != 0x5D && index + 1 < bytes.count && bytes[index + 1] == close {
                    index += 2
                    continue
                }
                return index + 1
            }
            index += 1
        }
        return bytes.count
    }

    /// Whether the quoted token `start..<end` has its closing quote.
    private static func isClosed(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Bool {
        let close: UInt8 = bytes[start] == 0x5B ? 0x5D : bytes[start]
        return end - start >= 2 && bytes[end - 1] == close
    }

    /// A byte of a bare word (an identifier, a keyword or a number): SQLite's identifier characters, and the dot of
    /// a number.
    private static func isWordByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x5F
            || byte == 0x24 || byte >= 0x80 || byte == 0x2E
    }

    // MARK: - Reasons

    /// `reason` with the texts `secrets` lists, the token SQLite quotes near an error (when the SQL held a key),
    /// SQL between backquotes that mentions `key`, and URI key parameters redacted.
    private static func redacting(reason: String, secrets: [String], afterKeyedSQL: Bool) -> String {
        var reason = reason
        if afterKeyedSQL {
            reason = replacingQuotedToken(in: reason, after: "near \"", endingWith: "\": ")
            reason = replacingQuotedToken(in: reason, after: "unrecognized token: \"", endingWith: nil)
        }
        for secret in Set(secrets).sorted(by: { $0.utf8.count > $1.utf8.count })
        where !secret.isEmpty && secret != placeholder {
            reason = replacing(secret, in: reason, wholeTokensOnly: secret.utf8.count < 3)
        }
        if afterKeyedSQL && reason.utf8.contains(0x60) {
            reason = redactingBackquotedSQL(in: reason)
        }
        return redactingURIKeyParameters(in: reason)
    }

    /// Replaces the text between `start` and `end` (the last `"` of the text when `end` is `nil`).
    private static func replacingQuotedToken(in text: String, after start: String, endingWith end: String?) -> String {
        let bytes = Array(text.utf8)
        guard let startOffset = firstOffset(of: Array(start.utf8), in: bytes[...]) else { return text }
        let from = startOffset + start.utf8.count
        let to: Int?
        if let end {
            to = firstOffset(of: Array(end.utf8), in: bytes[from...])
        } else {
            to = bytes[from...].lastIndex(of: 0x22)
        }
        guard let to else { return text }
        return String(decoding: bytes[..<from], as: UTF8.self) + placeholder + String(decoding: bytes[to...], as: UTF8.self)
    }

    /// The offset of the first occurrence of `pattern` in `bytes` (offsets of the whole array).
    private static func firstOffset(of pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard !pattern.isEmpty, bytes.count >= pattern.count else { return nil }
        for offset in bytes.startIndex...(bytes.endIndex - pattern.count)
        where bytes[offset..<(offset + pattern.count)].elementsEqual(pattern) {
            return offset
        }
        return nil
    }

    /// `text` with every occurrence of `secret` replaced (only where it stands as a whole token when asked).
    private static func replacing(_ secret: String, in text: String, wholeTokensOnly: Bool) -> String {
        let textBytes = Array(text.utf8)
        let secretBytes = Array(secret.utf8)
        guard secretBytes.count <= textBytes.count else { return text }
        var output: [UInt8] = []
        var index = 0
        var changed = false
        while index < textBytes.count {
            if index + secretBytes.count <= textBytes.count,
               textBytes[index..<(index + secretBytes.count)].elementsEqual(secretBytes),
               !wholeTokensOnly
                || ((index == 0 || !isWordByte(textBytes[index - 1]))
                    && (index + secretBytes.count == textBytes.count
                        || !isWordByte(textBytes[index + secretBytes.count]))) {
                output += Array(placeholder.utf8)
                index += secretBytes.count
                changed = true
            } else {
                output.append(textBytes[index])
                index += 1
            }
        }
        return changed ? String(decoding: output, as: UTF8.self) : text
    }

    /// SQL a reason quotes between backquotes (such as a leftover statement), redacted when it mentions `key`.
    private static func redactingBackquotedSQL(in text: String) -> String {
        let parts = text.split(separator: "`", omittingEmptySubsequences: false)
        guard parts.count >= 3 else { return text }
        var result = ""
        for (offset, part) in parts.enumerated() {
            if offset > 0 { result += "`" }
            // Odd parts are between backquotes (a last one without its closing backquote too).
            result += offset % 2 == 1 ? redacting(sql: String(part)) : String(part)
        }
        return result
    }

    /// `text` with the value of every `key=`, `hexkey=` and `textkey=` URI parameter replaced.
    static func redactingURIKeyParameters(in text: String) -> String {
        guard mayHoldKey(text) else { return text }
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        var index = 0
        var changed = false
        let names = ["key=", "hexkey=", "textkey="].map { Array($0.utf8) }
        while index < bytes.count {
            output.append(bytes[index])
            guard bytes[index] == 0x3F || bytes[index] == 0x26 else {  // ? or &
                index += 1
                continue
            }
            index += 1
            guard let name = names.first(where: { name in
                index + name.count <= bytes.count
                    && zip(bytes[index..<(index + name.count)], name).allSatisfy { $0 | 0x20 == $1 | 0x20 }
            }) else { continue }
            output += bytes[index..<(index + name.count)]
            index += name.count
            var end = index
            // The value ends where the parameter, the URI or the quoted name does.
            while end < bytes.count, ![0x26, 0x23, 0x27, 0x22, 0x60, 0x20, 0x0A, 0x09, 0x29].contains(bytes[end]) {
                end += 1
            }
            if end > index {
                output += Array(placeholder.utf8)
                changed = true
            }
            index = end
        }
        return changed ? String(decoding: output, as: UTF8.self) : text
    }
}
