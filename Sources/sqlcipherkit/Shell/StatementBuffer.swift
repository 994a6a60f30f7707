/// The lines of the statement the shell is gathering, with what it needs to know as each line arrives: whether the
/// text ends with a complete statement (the answer `sqlite3_complete` gives, see ``CompletenessCheck``) and whether it
/// holds key material (``KeyMaterialScan``). Every byte is looked at once, when it is appended: a statement of N lines
/// costs N lines of work, not N².
struct StatementBuffer {
    private(set) var bytes: [UInt8] = []
    private var lexer = SQLLexer()
    private var completeness = CompletenessCheck()
    private var keyMaterial = KeyMaterialScan()
    /// Whether a byte other than a space was appended.
    private(set) var holdsText = false

    var isEmpty: Bool { bytes.isEmpty }

    /// How many bytes were looked at (the shell's tests count the work with it).
    var scannedByteCount: Int { lexer.offset }

    /// Appends text (a line and its line end).
    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { append(bytes: $0) }
    }

    mutating func append(bytes newBytes: UnsafeBufferPointer<UInt8>) {
        let start = bytes.count
        bytes.append(contentsOf: newBytes)
        if !holdsText { holdsText = newBytes.contains { !Self.isSpace($0) } }
        // The parts are moved out while the lexer runs: the tokens it hands back update them, and they read the
        // bytes in place.
        var (lexer, completeness, keyMaterial) = (self.lexer, self.completeness, self.keyMaterial)
        defer { (self.lexer, self.completeness, self.keyMaterial) = (lexer, completeness, keyMaterial) }
        bytes.withUnsafeBufferPointer { all in
            for byte in all[start...] {
                lexer.feed(byte) { token in
                    completeness.consume(token, in: all)
                    keyMaterial.consume(token, in: all)
                }
            }
        }
    }

    /// Whether the text ends with a complete statement: a semicolon outside strings, names, comments and trigger
    /// bodies, with nothing after it but spaces and comments.
    var isComplete: Bool {
        completeness.isComplete(endingIn: lexer.mode)
    }

    /// Whether the text holds key material, or could (``KeyMaterialScan``). A token the text ends in (a word, a
    /// string left open) counts as if it were ended.
    var holdsKeyMaterial: Bool {
        guard !keyMaterial.holdsKeyMaterial else { return true }
        guard lexer.mode != .between else { return false }
        var lexer = self.lexer
        var scan = keyMaterial
        var text = bytes
        var ending: [UInt8] = [0x20]
        if case .quoted(let quote) = lexer.mode { ending.insert(quote, at: 0) }
        text.append(contentsOf: ending)
        text.withUnsafeBufferPointer { all in
            for byte in ending { lexer.feed(byte) { scan.consume($0, in: all) } }
        }
        return scan.holdsKeyMaterial
    }

    /// Where the lexer ended: inside a comment, a string, a word, or between tokens.
    var endMode: SQLLexer.Mode { lexer.mode }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }
}

/// `sqlite3_complete`'s state machine (SQLite's `complete.c`), fed token by token. Its states: before any
/// statement, at the start of one (a semicolon was just read), inside one, after EXPLAIN, after CREATE (and TEMP),
/// inside a CREATE TRIGGER, after a semicolon inside the trigger, after its END. The text is complete when the
/// machine is at the start of a statement.
struct CompletenessCheck {
    private enum State: Int {
        case invalid, start, normal, explain, create, trigger, semicolon, end
    }

    private enum Token: Int {
        case semicolon, space, other, explain, create, temp, trigger, end
    }

    /// `transitions[state][token]`, as in `complete.c` (with triggers and EXPLAIN compiled in).
    private static let transitions: [[State]] = [
        // semicolon, space, other, explain, create, temp, trigger, end
        /* invalid */ [.start, .invalid, .normal, .explain, .create, .normal, .normal, .normal],
        /* start */ [.start, .start, .normal, .explain, .create, .normal, .normal, .normal],
        /* normal */ [.start, .normal, .normal, .normal, .normal, .normal, .normal, .normal],
        /* explain */ [.start, .explain, .explain, .normal, .create, .normal, .normal, .normal],
        /* create */ [.start, .create, .normal, .normal, .normal, .create, .trigger, .normal],
        /* trigger */ [.semicolon, .trigger, .trigger, .trigger, .trigger, .trigger, .trigger, .trigger],
        /* semicolon */ [.semicolon, .semicolon, .trigger, .trigger, .trigger, .trigger, .trigger, .end],
        /* end */ [.start, .end, .trigger, .trigger, .trigger, .trigger, .trigger, .trigger],
    ]

    private var state = State.invalid

    mutating func consume(_ token: SQLLexer.Token, in bytes: UnsafeBufferPointer<UInt8>) {
        let kind: Token = switch token.kind {
        case .semicolon: .semicolon
        case .space: .space
        case .word: Self.keyword(bytes[token.range])
        case .string, .quotedName, .other: .other
        }
        state = Self.transitions[state.rawValue][kind.rawValue]
    }

    /// Whether the text read so far is complete, the lexer being in `mode` after its last byte. A line comment
    /// that runs to the end of the text counts as spaces; a word, `/` or `-` still to be ended would make the
    /// statement go on, and an open string, name or block comment is incomplete.
    func isComplete(endingIn mode: SQLLexer.Mode) -> Bool {
        switch mode {
        case .between, .lineComment: state == .start
        case .word, .slash, .dash, .quoted, .blockComment, .blockCommentStar: false
        }
    }

    private static func keyword(_ word: Slice<UnsafeBufferPointer<UInt8>>) -> Token {
        guard word.count >= 3 && word.count <= 9 else { return .other }
        if SQLLexer.word(word, is: "create") { return .create }
        if SQLLexer.word(word, is: "temp") || SQLLexer.word(word, is: "temporary") { return .temp }
        if SQLLexer.word(word, is: "trigger") { return .trigger }
        if SQLLexer.word(word, is: "end") { return .end }
        if SQLLexer.word(word, is: "explain") { return .explain }
        return .other
    }
}
