/// Whether SQL text holds key material, or could: such a statement is kept out of the shell's history, and an error
/// it causes is printed without the statement and without SQLite's message (which can quote the text near the
/// error, `near "'secret'": syntax error`). It errs on the side of secrecy, since a false alarm costs only a line of
/// history. A statement is taken to hold key material when
///
/// - it is `PRAGMA key`, `rekey`, `hexkey`, `hexrekey`, `textkey` or `textrekey` (any case, any schema, the name
///   quoted or not), whatever follows;
/// - it is an `ATTACH` with a `KEY` clause (the key may be any expression, a name too);
/// - a word ending in `key` is followed by a literal, directly or after `=` or `(` (`KEY 'x'`, `rekey = x'…'`,
///   `key=1234`): this also catches a misspelled `ATACH … KEY '…'` or `PRAGMA key 'x'` without `=`, and, harmlessly,
///   `WHERE key = 'theme'`;
/// - a string or quoted name holds a URI key parameter (`key=`, `hexkey=`, `textkey=`, also percent-encoded).
///
/// Fed the tokens of ``SQLLexer`` as they come; `bytes` holds the text they point into.
struct KeyMaterialScan {
    private(set) var holdsKeyMaterial = false

    /// The PRAGMAs that take a key.
    static let keyPragmas: [StaticString] = ["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]

    /// The words before a statement's verb that do not change it.
    private static let explainWords: [StaticString] = ["explain", "query", "plan"]

    private enum Verb { case unknown, pragma, attach, other }

    /// The statement's first word, past EXPLAIN [QUERY PLAN].
    private var verb = Verb.unknown
    /// How many significant tokens of the statement were read after its verb.
    private var tokensAfterVerb = 0
    /// In a PRAGMA: the token after the first is a dot (the first named the schema, the third names the PRAGMA).
    private var pragmaNameFollowsSchema = false
    /// After a word ending in `key` (1), and after an `=` or `(` that follows it (2).
    private var afterKeyWord = 0

    mutating func consume(_ token: SQLLexer.Token, in bytes: UnsafeBufferPointer<UInt8>) {
        guard !holdsKeyMaterial else { return }
        let text = bytes[token.range]
        let wasAfterKeyWord = afterKeyWord
        afterKeyWord = 0
        switch token.kind {
        case .space:
            afterKeyWord = wasAfterKeyWord
            return
        case .semicolon:
            verb = .unknown
            tokensAfterVerb = 0
            pragmaNameFollowsSchema = false
            return
        case .word:
            let first = text[text.startIndex]
            if wasAfterKeyWord > 0 && ((0x30...0x39).contains(first) || (text.count == 1 && first | 0x20 == 0x78)) {
                holdsKeyMaterial = true  // a number, or the x of x'…'
                return
            }
            if verb == .unknown {
                if Self.explainWords.contains(where: { SQLLexer.word(text, is: $0) }) { return }
                verb = SQLLexer.word(text, is: "pragma") ? .pragma : SQLLexer.word(text, is: "attach") ? .attach : .other
                return
            }
            if verb == .attach && SQLLexer.word(text, is: "key") { holdsKeyMaterial = true }
            if isPragmaName && Self.keyPragmas.contains(where: { SQLLexer.word(text, is: $0) }) { holdsKeyMaterial = true }
            if Self.endsInKey(text) { afterKeyWord = 1 }
        case .string, .quotedName:
            if wasAfterKeyWord > 0 && token.kind == .string { holdsKeyMaterial = true }
            // A URI key parameter needs an `=`; a PRAGMA's name is short: most strings are passed over unread.
            if isPragmaName || text.contains(UInt8(ascii: "=")) {
                let content = Self.unquoted(text)
                if isPragmaName && Self.keyPragmas.contains(where: { $0.description == content }) { holdsKeyMaterial = true }
                if Self.percentDecoded(content).contains("key=") { holdsKeyMaterial = true }
            }
            if verb == .unknown { verb = .other }
        case .other:
            let byte = text.first
            if wasAfterKeyWord == 1 && (byte == UInt8(ascii: "=") || byte == UInt8(ascii: "(")) { afterKeyWord = 2 }
            if wasAfterKeyWord > 0 && (byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")) { afterKeyWord = 2 }
            if verb == .pragma && tokensAfterVerb == 1 && byte == UInt8(ascii: ".") { pragmaNameFollowsSchema = true }
            if verb == .unknown { verb = .other }
        }
        tokensAfterVerb += 1
    }

    /// Whether the next token of a PRAGMA names it (`PRAGMA name` or `PRAGMA schema.name`).
    private var isPragmaName: Bool {
        verb == .pragma && (tokensAfterVerb == 0 || (tokensAfterVerb == 2 && pragmaNameFollowsSchema))
    }

    /// Whether a word ends in `key`, in any case.
    private static func endsInKey(_ word: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        guard word.count >= 3 else { return false }
        let end = word.endIndex
        return word[end - 3] | 0x20 == UInt8(ascii: "k") && word[end - 2] | 0x20 == UInt8(ascii: "e")
            && word[end - 1] | 0x20 == UInt8(ascii: "y")
    }

    /// ASCII letters in lower case, other bytes as they are (decoded as UTF-8).
    private static func lowercased(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes.lazy.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// The content of a quoted token in lower case, its doubled quotes made single.
    private static func unquoted(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        guard let quote = bytes.first, bytes.count >= 2 else { return lowercased(bytes) }
        let inner = bytes.dropFirst().dropLast()
        guard quote != UInt8(ascii: "[") else { return lowercased(inner) }
        var result: [UInt8] = []
        result.reserveCapacity(inner.count)
        var previousWasQuote = false
        for byte in inner {
            if byte == quote && previousWasQuote {
                previousWasQuote = false
                continue
            }
            previousWasQuote = byte == quote
            result.append(byte)
        }
        return lowercased(result)
    }

    /// `%XX` escapes decoded, as SQLite decodes a URI's parameters.
    private static func percentDecoded(_ text: String) -> String {
        guard text.contains("%") else { return text }
        let bytes = Array(text.utf8)
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let value = UInt8(String(decoding: bytes[index + 1...index + 2], as: UTF8.self), radix: 16) {
                result.append((0x41...0x5A).contains(value) ? value | 0x20 : value)
                index += 3
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }
}
