import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where printed rows go: standard output, a shell's `.output` file, or a string kept for `--json`.
protocol TextSink: AnyObject {
    func write(_ text: String) throws
    /// Writes what is buffered; called at the end of every statement's output.
    func flush() throws
}

/// Standard output (or the test capture), written in blocks rather than one system call per row.
final class StandardOutputSink: TextSink {
    private var buffer = ""
    private let blockSize = 64 * 1024

    func write(_ text: String) throws {
        buffer += text
        if buffer.utf8.count >= blockSize { try flush() }
    }

    func flush() throws {
        guard !buffer.isEmpty else { return }
        Output.write(buffer, toStandardError: false)
        buffer = ""
    }
}

/// What the shell would have printed on standard output, kept for the one JSON object of `--json`.
final class CollectingSink: TextSink {
    private(set) var text = ""

    func write(_ text: String) throws { self.text += text }
    func flush() throws {}
}

/// A file descriptor the sink owns (the shell's `.output FILE`); closed by ``close()``.
final class FileSink: TextSink {
    let path: String
    private var descriptor: CInt
    private var buffer: [UInt8] = []

    init(path: String, descriptor: CInt) {
        self.path = path
        self.descriptor = descriptor
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 64 * 1024 { try flush() }
    }

    func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let written = buffer[offset...].withUnsafeBytes { systemWrite(descriptor, $0.baseAddress!, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                let reason = String(cString: strerror(errno))
                buffer.removeAll()
                throw CommandFailure("cannot write to \(path): \(reason)", kind: "fileSystem")
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes and closes; a failure to write what was buffered is reported.
    func close() throws {
        defer {
            if descriptor >= 0 { closeDescriptor(descriptor) }
            descriptor = -1
        }
        try flush()
    }
}
