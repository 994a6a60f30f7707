import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a line source gives the shell.
enum LineInput: Equatable {
    case line(String)
    /// Ctrl-C at the prompt: the line, and the statement being typed, are dropped.
    case interrupted
    case endOfInput
}

/// Where the shell's lines come from: the line editor on a terminal, standard input otherwise, a `.read` file.
protocol LineSource: AnyObject {
    /// The next line, without its line end. `prompt` is shown only by interactive sources.
    func readLine(prompt: String) throws -> LineInput
    /// The statement whose lines were read since the last call has ended. With `isSecret`, the guard refused it as
    /// a key PRAGMA: the lines are dropped from the history.
    func statementEnded(isSecret: Bool)
}

extension LineSource {
    func statementEnded(isSecret: Bool) {}
}

/// The lines of a buffer (a `.read` file).
final class TextLines: LineSource {
    private var lines: [Substring]
    private var index = 0

    init(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        self.lines = lines
    }

    func readLine(prompt: String) throws -> LineInput {
        guard index < lines.count else { return .endOfInput }
        defer { index += 1 }
        return .line(String(lines[index]))
    }
}

/// The lines of a file descriptor as they arrive (standard input not on a terminal, or a terminal without line
/// editing): a statement runs as soon as its line is complete, so another program can drive the shell line by line.
final class DescriptorLines: LineSource {
    private let descriptor: CInt
    /// Where the prompt goes, or `nil` for none (standard input is not a terminal).
    private let promptDescriptor: CInt?
    private var buffer: [UInt8] = []
    private var isAtEnd = false

    init(descriptor: CInt, promptDescriptor: CInt?) {
        self.descriptor = descriptor
        self.promptDescriptor = promptDescriptor
    }

    func readLine(prompt: String) throws -> LineInput {
        if let promptDescriptor { Output.write(prompt, to: promptDescriptor) }
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffer.removeSubrange(...end) }
                return .line(String(decoding: buffer[..<end], as: UTF8.self))
            }
            if isAtEnd {
                guard !buffer.isEmpty else { return .endOfInput }
                defer { buffer.removeAll() }
                return .line(String(decoding: buffer, as: UTF8.self))
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
}
