import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real `sqlcipherkit` binary on a pseudo-terminal, driven as an operator would: keys are sent as bytes (arrows
/// as escape sequences), and every step waits for the output it expects, never for a time.
final class PseudoTerminal {
    enum Failure: Error, CustomStringConvertible {
        case setup(String)
        case ended(waitingFor: String, output: String)
        case hung(waitingFor: String, output: String)

        var description: String {
            switch self {
            case .setup(let reason): "cannot set up a pseudo-terminal: \(reason)"
            case .ended(let text, let output): "the process ended before printing \(text.debugDescription): \(output.debugDescription)"
            case .hung(let text, let output): "no \(text.debugDescription) after 90 s: \(output.debugDescription)"
            }
        }
    }

    static let up = "\u{1B}[A"
    static let left = "\u{1B}[D"

    private let master: CInt
    private let process = Process()
    /// Output not yet returned by ``waitFor(_:)``.
    private var unread: [UInt8] = []

    var pid: pid_t { process.processIdentifier }

    init(_ arguments: [String], in scratch: Scratch) throws {
        master = Self.libc.openMaster(O_RDWR | O_NOCTTY)
        guard master >= 0, Self.libc.grant(master) == 0, Self.libc.unlock(master) == 0,
              let name = Self.libc.name(master)
        else {
            throw Failure.setup(String(cString: strerror(errno)))
        }
        let slave = open(name, O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw Failure.setup(String(cString: strerror(errno))) }
        let terminal = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        process.executableURL = URL(fileURLWithPath: binaryPath)
        process.arguments = arguments
        process.currentDirectoryURL = scratch.url
        var environment = ProcessInfo.processInfo.environment
        environment["TERM"] = "xterm"
        process.environment = environment
        process.standardInput = terminal
        process.standardOutput = terminal
        process.standardError = terminal
        try process.run()
        try terminal.close()
    }

    deinit {
        if process.isRunning { process.terminate() }
        close(master)
    }

    /// Types `text`.
    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(master, $0.baseAddress!, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Waits until `text` appears in the output (after what earlier waits returned) and returns the output up to and
    /// including it. The 90 s bound only turns a hang into a failure.
    @discardableResult
    func waitFor(_ text: String) throws -> String {
        let pattern = Array(text.utf8)
        let deadline = ContinuousClock.now + .seconds(90)
        while true {
            if let end = firstRange(of: pattern, in: unread)?.upperBound {
                defer { unread.removeSubrange(..<end) }
                return String(decoding: unread[..<end], as: UTF8.self)
            }
            guard ContinuousClock.now < deadline else {
                throw Failure.hung(waitingFor: text, output: String(decoding: unread, as: UTF8.self))
            }
            var descriptor = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 1000) > 0 else { continue }
            var block = [UInt8](repeating: 0, count: 4096)
            let count = read(master, &block, block.count)
            if count > 0 {
                unread += block[0..<count]
            } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                // EIO: every descriptor of the terminal's other side is closed, the process has ended.
                throw Failure.ended(waitingFor: text, output: String(decoding: unread, as: UTF8.self))
            }
        }
    }

    /// Waits for the process to end and returns its exit status.
    func finish() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// posix_openpt, grantpt, unlockpt and ptsname: in the C library, but not in what Swift's Glibc module shows.
    private struct PseudoTerminalFunctions {
        let openMaster: @convention(c) (CInt) -> CInt
        let grant: @convention(c) (CInt) -> CInt
        let unlock: @convention(c) (CInt) -> CInt
        let name: @convention(c) (CInt) -> UnsafeMutablePointer<CChar>?

        init() {
            let handle = dlopen(nil, RTLD_NOW)
            func function<T>(_ name: String, as type: T.Type) -> T {
                unsafeBitCast(dlsym(handle, name)!, to: type)
            }
            openMaster = function("posix_openpt", as: (@convention(c) (CInt) -> CInt).self)
            grant = function("grantpt", as: (@convention(c) (CInt) -> CInt).self)
            unlock = function("unlockpt", as: (@convention(c) (CInt) -> CInt).self)
            name = function("ptsname", as: (@convention(c) (CInt) -> UnsafeMutablePointer<CChar>?).self)
        }
    }

    private static let libc = PseudoTerminalFunctions()
}
