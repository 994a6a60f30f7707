import CSQLCipher

// `VACUUM INTO` in SQL (SQLite 3.27+, so SQLCipher 4 only) writes a copy the library never checked: with the
// process's umask mode (usually 0644), without the source's cipher settings (from a database with other settings than
// the engine's defaults the copy opens with no settings at all), and a URI target (`file:o.db?hexkey=00`) chooses the
// copy's key in SQL. The copy goes through ``Connection/vacuum(into:)`` instead, which writes it the library's way.
//
// The authorizer cannot refuse it while it compiles: compiling VACUUM asks the authorizer nothing. Only when it runs
// does the engine attach the target under a schema of its own, and that ATTACH is authorized then, with the target's
// file name. So each statement is checked once compiled, from its text: one that starts with VACUUM may only be
// `VACUUM` or `VACUUM schema`; anything after that is refused.

extension EncryptionGuard {
    static let vacuumIntoRefusal = GuardRefusal(
        "VACUUM INTO is refused in SQL: the engine would write the copy with the process's file mode, without this"
            + " database's cipher settings, and a URI file name could choose its key",
        remedy: .copyWithVacuumInto, hidesSQL: true)

    /// Why a compiled statement is refused although the authorizer let it compile, or `nil`.
    static func refusal(compiled statement: OpaquePointer, state: GuardState) -> GuardRefusal? {
        guard !state.isRunningLibraryStatement, let text = sqlite3_sql(statement) else { return nil }
        return text.withMemoryRebound(to: UInt8.self, capacity: 1) { isVacuumInto($0) } ? vacuumIntoRefusal : nil
    }

    /// Throws the error for a statement ``refusal(compiled:state:)`` refuses.
    static func checkCompiled(_ statement: OpaquePointer, sql: @autoclosure () -> String?, state: GuardState) throws {
        guard let refusal = refusal(compiled: statement, state: state) else { return }
        throw refusal.error(sql: sql())
    }

    /// Whether SQL text is a VACUUM statement with more than an optional schema name: `VACUUM INTO …`,
    /// `VACUUM main INTO …`, and anything else that is not plain `VACUUM [schema]`.
    static func isVacuumInto(_ sql: UnsafePointer<UInt8>) -> Bool {
        var tokens = SQLTokens(sql)
        guard let first = tokens.next(), first.isKeyword("vacuum") else { return false }
        guard let second = tokens.next() else { return false }
        return !(second.isName && tokens.next() == nil)
    }
}

/// The tokens of SQL text, as far as telling a statement's first words apart needs: spaces, comments and `;` are
/// skipped as SQLite's tokenizer skips them; a word, a quoted name or string, or any other single byte is a token.
struct SQLTokens {
    struct Token: Equatable {
        enum Kind { case word, quoted, other }
        let kind: Kind
        let bytes: [UInt8]

        var isName: Bool { kind != .other }

        func isKeyword(_ keyword: String) -> Bool {
            kind == .word && bytes.count == keyword.utf8.count
                && zip(bytes, keyword.utf8).allSatisfy { $0 | 0x20 == $1 }
        }
    }

    private let text: UnsafePointer<UInt8>
    private var index = 0

    init(_ text: UnsafePointer<UInt8>) {
        self.text = text
    }

    mutating func next() -> Token? {
        skipSpaceCommentsAndSemicolons()
        let start = index
        let byte = text[index]
        guard byte != 0 else { return nil }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "`"), UInt8(ascii: "["):
            let closing = byte == UInt8(ascii: "[") ? UInt8(ascii: "]") : byte
            index += 1
            while text[index] != 0 {
                if text[index] == closing {
                    // A doubled quote is a quote inside the name or string ([…] has no escape).
                    if closing != UInt8(ascii: "]"), text[index + 1] == closing {
                        index += 2
                        continue
                    }
                    index += 1
                    break
                }
                index += 1
            }
            return Token(kind: .quoted, bytes: bytes(from: start))
        case _ where Self.isWordByte(byte):
            while Self.isWordByte(text[index]) { index += 1 }
            return Token(kind: .word, bytes: bytes(from: start))
        default:
            index += 1
            return Token(kind: .other, bytes: [byte])
        }
    }

    /// The next token when it is a parameter (`?`, `?NNN`, `:name`, `@name`, `$name`), or `nil` (and nothing is
    /// consumed).
    mutating func nextParameter() -> String? {
        skipSpaceCommentsAndSemicolons()
        let start = index
        let first = text[start]
        guard first == UInt8(ascii: "?") || first == UInt8(ascii: ":") || first == UInt8(ascii: "@")
            || first == UInt8(ascii: "$") else { return nil }
        var end = start + 1
        if first == UInt8(ascii: "?") {
            while text[end] >= UInt8(ascii: "0") && text[end] <= UInt8(ascii: "9") { end += 1 }
        } else {
            while Self.isWordByte(text[end]) && text[end] != UInt8(ascii: "$") { end += 1 }
            guard end > start + 1 else { return nil }
        }
        index = end
        return String(decoding: UnsafeBufferPointer(start: text + start, count: end - start), as: UTF8.self)
    }

    private func bytes(from start: Int) -> [UInt8] {
        Array(UnsafeBufferPointer(start: text + start, count: index - start))
    }

    /// Letters, digits, `_`, `$` and every byte of a multi-byte UTF-8 character, as in SQLite's identifiers.
    private static func isWordByte(_ byte: UInt8) -> Bool {
        byte >= 0x80 || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "$")
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
    }

    private mutating func skipSpaceCommentsAndSemicolons() {
        while true {
            let byte = text[index]
            if byte == 0x20 || (byte >= 0x09 && byte <= 0x0d) || byte == UInt8(ascii: ";") {
                index += 1
            } else if byte == UInt8(ascii: "-"), text[index + 1] == UInt8(ascii: "-") {
                index += 2
                while text[index] != 0, text[index] != UInt8(ascii: "\n") { index += 1 }
            } else if byte == UInt8(ascii: "/"), text[index + 1] == UInt8(ascii: "*") {
                index += 2
                while text[index] != 0, !(text[index] == UInt8(ascii: "*") && text[index + 1] == UInt8(ascii: "/")) {
                    index += 1
                }
                if text[index] != 0 { index += 2 }
            } else {
                return
            }
        }
    }
}
