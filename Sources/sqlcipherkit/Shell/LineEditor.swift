import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The shell's line editor on a terminal: a small reader of its own in raw mode rather than libedit or readline.
/// It needs no library beyond the C library (nothing to install, nothing to link, the same on Linux and macOS), reads
/// no configuration file (`~/.editrc` and `~/.inputrc` can bind keys to commands and save history), and keeps the
/// history in memory only: statements may hold secrets, so nothing is ever written to a history file.
///
/// Keys: left/right (Ctrl-B/Ctrl-F), Home/End (Ctrl-A/Ctrl-E), Backspace, Delete, Ctrl-U (to the start), Ctrl-K (to
/// the end), Ctrl-W (the word before the cursor), up/down (Ctrl-P/Ctrl-N) through the history, Ctrl-L (clear the
/// screen), Ctrl-D (end of input on an empty line, else delete), Ctrl-C (drop the line and the statement being
/// typed), Ctrl-Z (suspend). A tab is kept in the line and shown as a space.
final class LineEditor: LineSource {
    private let input: CInt
    private let output: CInt
    private let original: termios
    /// Lines entered, oldest first; at most ``historyLimit``.
    private(set) var history: [String] = []
    private let historyLimit = 1000
    /// How many of the last history entries belong to the statement being typed.
    private var currentStatementEntryCount = 0

    /// A line editor reading `input` (a terminal) and drawing on `output` (the same terminal); `nil` when the
    /// terminal's settings cannot be read.
    init?(input: CInt, output: CInt) {
        var settings = termios()
        guard tcgetattr(input, &settings) == 0 else { return nil }
        self.input = input
        self.output = output
        original = settings
    }

    deinit {
        restore()
    }

    /// Whether the terminal can be driven with the escape sequences the editor draws with.
    static var isTerminalCapable: Bool {
        guard let name = getenv("TERM").map({ String(cString: $0) }) else { return false }
        return !["", "dumb", "cons25", "emacs"].contains(name)
    }

    func statementEnded(isSecret: Bool) {
        if isSecret { history.removeLast(min(currentStatementEntryCount, history.count)) }
        currentStatementEntryCount = 0
    }

    func readLine(prompt: String) throws -> LineInput {
        try enterRawMode()
        defer { restore() }
        var state = EditState(prompt: prompt, history: history)
        refresh(&state)
        while true {
            guard let key = try readKey() else {
                return .endOfInput
            }
            switch key {
            case .enter:
                Output.write("\n", to: output)
                let line = String(state.buffer)
                remember(line)
                return .line(line)
            case .interrupt:
                Output.write("^C\n", to: output)
                // The shell says whether the statement it drops held key material (statementEnded).
                return .interrupted
            case .endOfFile where state.buffer.isEmpty:
                Output.write("\n", to: output)
                return .endOfInput
            case .suspend:
                restore()
                kill(getpid(), SIGTSTP)
                try enterRawMode()
            case .clearScreen:
                Output.write("\u{1B}[H\u{1B}[2J", to: output)
            default:
                state.apply(key)
            }
            refresh(&state)
        }
    }

    private func remember(_ line: String) {
        guard !line.allSatisfy(\.isWhitespace), history.last != line else { return }
        history.append(line)
        currentStatementEntryCount += 1
        if history.count > historyLimit {
            history.removeFirst(history.count - historyLimit)
            currentStatementEntryCount = min(currentStatementEntryCount, history.count)
        }
    }

    // MARK: - The terminal

    /// No echo, no line buffering, no signals from Ctrl-C/Ctrl-Z/Ctrl-\ (read as keys), no flow control, 8-bit
    /// bytes. Output processing stays on: "\n" still starts a new line. TCSADRAIN keeps what was typed ahead or
    /// pasted.
    private func enterRawMode() throws {
        var raw = original
        raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
        raw.c_cflag |= tcflag_t(CS8)
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG)
        withUnsafeMutableBytes(of: &raw.c_cc) { characters in
            characters[Int(VMIN)] = 1
            characters[Int(VTIME)] = 0
        }
        guard tcsetattr(input, TCSADRAIN, &raw) == 0 else {
            throw CommandFailure("cannot set up the terminal: \(String(cString: strerror(errno)))", kind: "fileSystem")
        }
    }

    private func restore() {
        var settings = original
        _ = tcsetattr(input, TCSADRAIN, &settings)
    }

    private var columnCount: Int {
        var size = winsize()
        guard ioctl(output, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// Draws the prompt and the part of the line around the cursor on one row, the cursor where it belongs.
    private func refresh(_ state: inout EditState) {
        let promptWidth = state.prompt.count
        let room = max(1, columnCount - promptWidth - 1)
        if state.cursor < state.firstShown { state.firstShown = state.cursor }
        if state.cursor - state.firstShown >= room { state.firstShown = state.cursor - room + 1 }
        let shown = state.buffer[state.firstShown..<min(state.buffer.count, state.firstShown + room)]
        let text = String(shown.map { $0 == "\t" ? " " : $0 })
        Output.write(
            "\r" + state.prompt + text + "\u{1B}[0K\r\u{1B}[\(promptWidth + state.cursor - state.firstShown)C",
            to: output)
    }

    // MARK: - Keys

    private func readByte() throws -> UInt8? {
        var byte: UInt8 = 0
        while true {
            let count = systemRead(input, &byte, 1)
            if count == 1 { return byte }
            if count == 0 { return nil }
            guard errno == EINTR else {
                throw CommandFailure("cannot read the terminal: \(String(cString: strerror(errno)))", kind: "fileSystem")
            }
        }
    }

    /// The next key, or `nil` at the end of input (the terminal closed).
    private func readKey() throws -> EditKey? {
        while true {
            guard let byte = try readByte() else { return nil }
            switch byte {
            case 0x0D, 0x0A: return .enter
            case 0x03: return .interrupt
            case 0x04: return .endOfFile
            case 0x1A: return .suspend
            case 0x0C: return .clearScreen
            case 0x01: return .home
            case 0x05: return .end
            case 0x02: return .left
            case 0x06: return .right
            case 0x10: return .up
            case 0x0E: return .down
            case 0x08, 0x7F: return .backspace
            case 0x15: return .deleteToStart
            case 0x0B: return .deleteToEnd
            case 0x17: return .deleteWord
            case 0x09: return .insert("\t")
            case 0x1B:
                if let key = try readEscapeSequence() { return key }
            case 0x20...0x7E:
                return .insert(Character(Unicode.Scalar(byte)))
            case 0xC2...0xF4:
                if let character = try readUTF8(leading: byte) { return .insert(character) }
            default:
                continue  // other control bytes, stray continuation bytes
            }
        }
    }

    /// `ESC [ A` and the like; `nil` for a sequence the editor does not use.
    private func readEscapeSequence() throws -> EditKey? {
        guard let first = try readByte() else { return nil }
        guard first == UInt8(ascii: "[") || first == UInt8(ascii: "O") else { return nil }
        guard let second = try readByte() else { return nil }
        if first == UInt8(ascii: "[") && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(second) {
            var digits = [second]
            while let next = try readByte() {
                if next == UInt8(ascii: "~") { break }
                guard digits.count < 8, (UInt8(ascii: "0")...UInt8(ascii: ";")).contains(next) else { return nil }
                digits.append(next)
            }
            switch String(decoding: digits, as: UTF8.self) {
            case "1", "7": return .home
            case "4", "8": return .end
            case "3": return .delete
            default: return nil
            }
        }
        switch second {
        case UInt8(ascii: "A"): return .up
        case UInt8(ascii: "B"): return .down
        case UInt8(ascii: "C"): return .right
        case UInt8(ascii: "D"): return .left
        case UInt8(ascii: "H"): return .home
        case UInt8(ascii: "F"): return .end
        default: return nil
        }
    }

    private func readUTF8(leading: UInt8) throws -> Character? {
        let length = leading >= 0xF0 ? 4 : leading >= 0xE0 ? 3 : 2
        var bytes = [leading]
        while bytes.count < length {
            guard let next = try readByte(), next & 0xC0 == 0x80 else { return nil }
            bytes.append(next)
        }
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        guard case .scalarValue(let scalar) = decoder.decode(&iterator) else { return nil }
        return Character(scalar)
    }
}

/// What a key does to the line.
enum EditKey: Equatable {
    case insert(Character)
    case enter, interrupt, endOfFile, suspend, clearScreen
    case left, right, home, end, up, down
    case backspace, delete, deleteToStart, deleteToEnd, deleteWord
}

/// The line being edited, and where the history browsing is. Pure state, tested without a terminal.
struct EditState {
    let prompt: String
    private(set) var buffer: [Character] = []
    private(set) var cursor = 0
    /// The first character drawn when the line is wider than the terminal.
    var firstShown = 0
    private let history: [String]
    /// `history.count` while editing the new line; lower while showing an older entry.
    private var historyIndex: Int
    /// The new line as it was before browsing the history.
    private var draft: [Character] = []

    init(prompt: String, history: [String]) {
        self.prompt = prompt
        self.history = history
        historyIndex = history.count
    }

    mutating func apply(_ key: EditKey) {
        switch key {
        case .insert(let character):
            buffer.insert(character, at: cursor)
            cursor += 1
        case .left: cursor = max(0, cursor - 1)
        case .right: cursor = min(buffer.count, cursor + 1)
        case .home: cursor = 0
        case .end: cursor = buffer.count
        case .backspace where cursor > 0:
            buffer.remove(at: cursor - 1)
            cursor -= 1
        case .delete where cursor < buffer.count, .endOfFile where cursor < buffer.count:
            buffer.remove(at: cursor)
        case .deleteToStart:
            buffer.removeSubrange(0..<cursor)
            cursor = 0
        case .deleteToEnd:
            buffer.removeSubrange(cursor...)
        case .deleteWord:
            var start = cursor
            while start > 0 && buffer[start - 1].isWhitespace { start -= 1 }
            while start > 0 && !buffer[start - 1].isWhitespace { start -= 1 }
            buffer.removeSubrange(start..<cursor)
            cursor = start
        case .up where historyIndex > 0:
            if historyIndex == history.count { draft = buffer }
            historyIndex -= 1
            show(Array(history[historyIndex]))
        case .down where historyIndex < history.count:
            historyIndex += 1
            show(historyIndex == history.count ? draft : Array(history[historyIndex]))
        default:
            break
        }
    }

    private mutating func show(_ line: [Character]) {
        buffer = line
        cursor = line.count
        firstShown = 0
    }
}
