/// SQL text cut into the tokens `sqlite3_complete` sees, one byte at a time, so that the shell can follow a statement
/// as its lines arrive and look at each byte once (calling `sqlite3_complete` on the whole statement after every line
/// made a statement of N lines cost N² bytes: 1 MB over 25,000 lines took 9 seconds).
///
/// The tokens, as in SQLite's `complete.c`: a semicolon; a space (`' '`, tab, newline, carriage return, form feed)
/// or a comment (`-- …` to the end of the line, `/* … */`); a word (letters, digits, `_`, `$` and every byte from
/// 0x80, as SQLite's identifier characters); a string in single quotes; a name in double quotes, backquotes or
/// brackets; any other byte on its own (a vertical tab too, as in `complete.c`). A doubled quote inside a string
/// (`'it''s'`) makes two strings back to back, which is all a completeness check needs.
///
/// A token is reported once its last byte has been read (a word once the byte after it has), with its position in
/// the bytes fed so far.
struct SQLLexer {
    enum Kind: Equatable {
        case semicolon
        /// Spaces and comments.
        case space
        case word
        /// `'…'`.
        case string
        /// `"…"`, `` `…` `` or `[…]`.
        case quotedName
        case other
    }

    struct Token: Equatable {
        let kind: Kind
        /// The offsets of its first byte and of the byte after it.
        let range: Range<Int>
    }

    /// Where the lexer is between two bytes.
    enum Mode: Equatable {
        case between
        case word
        case quoted(UInt8)
        /// After a `/` that may start a comment.
        case slash
        case blockComment
        /// In a block comment, after a `*` that may end it.
        case blockCommentStar
        /// After a `-` that may start a comment.
        case dash
        case lineComment
    }

    private(set) var mode = Mode.between
    /// How many bytes were fed.
    private(set) var offset = 0
    private var tokenStart = 0

    /// Reads one byte; calls `emit` for each token it ends (at most two: a word and the byte after it).
    mutating func feed(_ byte: UInt8, emit: (Token) -> Void) {
        defer { offset += 1 }
        switch mode {
        case .between:
            break
        case .word:
            if Self.isIdentifierByte(byte) { return }
            emit(Token(kind: .word, range: tokenStart..<offset))
        case .quoted(let quote):
            if byte == quote { finish(quote == UInt8(ascii: "'") ? .string : .quotedName, emit) }
            return
        case .slash:
            if byte == UInt8(ascii: "*") {
                mode = .blockComment
                return
            }
            emit(Token(kind: .other, range: tokenStart..<offset))
        case .blockComment:
            if byte == UInt8(ascii: "*") { mode = .blockCommentStar }
            return
        case .blockCommentStar:
            if byte == UInt8(ascii: "/") {
                finish(.space, emit)
            } else if byte != UInt8(ascii: "*") {
                mode = .blockComment
            }
            return
        case .dash:
            if byte == UInt8(ascii: "-") {
                mode = .lineComment
                return
            }
            emit(Token(kind: .other, range: tokenStart..<offset))
        case .lineComment:
            if byte == UInt8(ascii: "\n") { finish(.space, emit) }
            return
        }
        mode = .between
        tokenStart = offset
        switch byte {
        case UInt8(ascii: ";"):
            emit(Token(kind: .semicolon, range: offset..<offset + 1))
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), 0x0C:
            emit(Token(kind: .space, range: offset..<offset + 1))
        case UInt8(ascii: "/"):
            mode = .slash
        case UInt8(ascii: "-"):
            mode = .dash
        case UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "`"):
            mode = .quoted(byte)
        case UInt8(ascii: "["):
            mode = .quoted(UInt8(ascii: "]"))
        case _ where Self.isIdentifierByte(byte):
            mode = .word
        default:
            emit(Token(kind: .other, range: offset..<offset + 1))
        }
    }

    /// Ends the token that the current byte closes.
    private mutating func finish(_ kind: Kind, _ emit: (Token) -> Void) {
        emit(Token(kind: kind, range: tokenStart..<offset + 1))
        mode = .between
    }

    /// Whether `word` (a word token's bytes) is `keyword` (lower-case ASCII letters) in any case. Compared in place:
    /// the shell classifies every word of every statement.
    static func word(_ word: Slice<UnsafeBufferPointer<UInt8>>, is keyword: StaticString) -> Bool {
        guard word.count == keyword.utf8CodeUnitCount else { return false }
        return keyword.withUTF8Buffer { letters in
            // A word holds letters, digits, `_`, `$` and bytes from 0x80: only letters meet a letter when 0x20 is set.
            zip(word, letters).allSatisfy { $0 | 0x20 == $1 }
        }
    }

    /// SQLite's identifier characters: ASCII letters and digits, `_`, `$`, and every byte of a multi-byte UTF-8
    /// character.
    static func isIdentifierByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "$"), 0x80...0xFF:
            true
        default:
            false
        }
    }
}
