import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a line source gives the shell.
enum LineInput: Equatable {
    case line(String)
    /// A line the shell cannot take as SQL (a NUL byte, bytes that are not UTF-8): the reason, naming the line.
    case unreadable(String)
    /// Ctrl-C at the prompt: the line, and the statement being typed, are dropped.
    case interrupted
    case endOfInput

    /// The line `bytes` (without its line end), or why it cannot be SQL text. A NUL byte would end the text SQLite
    /// reads, silently dropping the rest; bytes that are not UTF-8 would be replaced by U+FFFD, changing the data.
    static func checking(_ bytes: ArraySlice<UInt8>, line: Int, source: String) -> LineInput {
        if bytes.contains(0) {
            return .unreadable(
                "\(source), line \(line): a NUL byte (0x00), which SQL text cannot hold (SQLite stops reading at it and"
                    + " would drop the rest); the statement was not run")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return .unreadable(
                "\(source), line \(line): bytes that are not UTF-8; the shell reads SQL as UTF-8 (write other bytes as"
                    + " X'…', or CAST(X'…' AS TEXT) for text, as .dump does); the statement was not run")
        }
        return .line(text)
    }
}

/// Where the shell's lines come from: the line editor on a terminal, standard input otherwise, a `.read` file.
protocol LineSource: AnyObject {
    /// The next line, without its line end. `prompt` is shown only by interactive sources.
    func readLine(prompt: String) throws -> LineInput
    /// The statement whose lines were read since the last call has ended (run, failed, or dropped by Ctrl-C). With
    /// `isSecret` its lines are dropped from the history: it holds key material (``KeyMaterialScan``), or the guard
    /// refused it as a key PRAGMA.
    func statementEnded(isSecret: Bool)
}

extension LineSource {
    func statementEnded(isSecret: Bool) {}
}

/// The lines of a buffer (a `.read` file).
final class TextLines: LineSource {
    private let bytes: [UInt8]
    private let source: String
    private var start = 0
    private var lineNumber = 0

    /// `source` names the buffer in messages.
    init(_ bytes: [UInt8], source: String) {
        self.bytes = bytes
        self.source = source
    }

    func readLine(prompt: String) throws -> LineInput {
        guard start < bytes.count else { return .endOfInput }
        let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
        defer { start = end + 1 }
        lineNumber += 1
        return LineInput.checking(bytes[start..<end], line: lineNumber, source: source)
    }
}

/// The lines of a file descriptor as they arrive (standard input not on a terminal, or a terminal without line
/// editing): a statement runs as soon as its line is complete, so another program can drive the shell line by line.
/// Each byte is searched for a line end once, however long the line.
final class DescriptorLines: LineSource {
    private let descriptor: CInt
    /// Where the prompt goes, or `nil` for none (standard input is not a terminal).
    private let promptDescriptor: CInt?
    private let source: String
    private var buffer: [UInt8] = []
    /// Where the next line starts in `buffer`.
    private var start = 0
    /// Up to where `buffer` was searched for a line end.
    private var searched = 0
    private var isAtEnd = false
    private var lineNumber = 0
    /// How many bytes were searched for a line end (the tests count the work with it).
    private(set) var scannedByteCount = 0

    init(descriptor: CInt, promptDescriptor: CInt?, source: String = "standard input") {
        self.descriptor = descriptor
        self.promptDescriptor = promptDescriptor
        self.source = source
    }

    func readLine(prompt: String) throws -> LineInput {
        if let promptDescriptor { Output.write(prompt, to: promptDescriptor) }
        while true {
            let newline = buffer[searched...].firstIndex(of: UInt8(ascii: "\n"))
            scannedByteCount += (newline.map { $0 + 1 } ?? buffer.count) - searched
            if let end = newline {
                defer {
                    start = end + 1
                    searched = start
                }
                return nextLine(buffer[start..<end])
            }
            searched = buffer.count
            if isAtEnd {
                guard start < buffer.count else { return .endOfInput }
                defer {
                    start = buffer.count
                    searched = start
                }
                return nextLine(buffer[start...])
            }
            // What was read is moved to the front once, before more is read behind it.
            if start > 0 {
                buffer.removeSubrange(..<start)
                searched -= start
                start = 0
            }
            var block = [UInt8](repeating: 0, count: 16 * 1024)
            let count = block.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw CommandFailure("cannot read standard input: \(String(cString: strerror(errno)))", kind: "fileSystem")
            }
            if count == 0 { isAtEnd = true } else { buffer.append(contentsOf: block[0..<count]) }
        }
    }

    private func nextLine(_ bytes: ArraySlice<UInt8>) -> LineInput {
        lineNumber += 1
        return LineInput.checking(bytes, line: lineNumber, source: source)
    }
}
