import Foundation
import SQLCipherKit
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The write end of the pipe the interactive shell's SIGINT handler writes to (-1 when there is none). A signal
/// handler can only do async-signal-safe things: it writes one byte, and a thread that reads the pipe interrupts the
/// statement (``InterruptHandle`` takes a lock, which a handler must not).
nonisolated(unsafe) private var interruptPipeWriteEnd: CInt = -1

/// Ctrl-C in the interactive shell while a statement runs: the statement is interrupted and fails ("interrupted"),
/// the shell goes on. A third Ctrl-C before the statement ends (one that does not stop) ends the shell the way a
/// signal ends any command. At the prompt the line editor reads Ctrl-C as a key; outside the interactive shell the
/// command's usual handler stays (a script fed on standard input stops).
///
/// `@unchecked Sendable`: every stored property is set in `init` and never changed; the one shared with the watching
/// thread and the signal handler, `previous`, is only read after `init`.
final class StatementInterrupt: @unchecked Sendable {
    private let pressCount = Atomic<Int>(0)
    private let readEnd: CInt
    private let writeEnd: CInt
    private let previous: UnsafeMutablePointer<sigaction>

    init?(interruptHandle: InterruptHandle) {
        var ends: [CInt] = [0, 0]
        guard pipe(&ends) == 0 else { return nil }
        readEnd = ends[0]
        writeEnd = ends[1]
        _ = fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) | O_NONBLOCK)
        previous = .allocate(capacity: 1)
        previous.initialize(to: sigaction())
        interruptPipeWriteEnd = writeEnd
        var action = sigaction()
        #if os(Linux)
        action.__sigaction_handler.sa_handler = { _ in StatementInterrupt.signalHandler() }
        #else
        action.__sigaction_u.__sa_handler = { _ in StatementInterrupt.signalHandler() }
        #endif
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        sigaction(SIGINT, &action, previous)
        let readEnd = readEnd
        let thread = Thread { [self] in self.watch(readEnd, interruptHandle) }
        thread.start()
    }

    deinit {
        previous.deallocate()
    }

    /// Puts the command's own handler back and lets the watching thread end.
    func stop() {
        sigaction(SIGINT, previous, nil)
        interruptPipeWriteEnd = -1
        closeDescriptor(writeEnd)
    }

    /// Called as a statement starts: the count of Ctrl-C starts again.
    func statementStarted() {
        pressCount.store(0, ordering: .relaxed)
    }

    private static func signalHandler() {
        let savedErrno = errno
        var byte: UInt8 = 1
        _ = systemWrite(interruptPipeWriteEnd, &byte, 1)
        errno = savedErrno
    }

    private func watch(_ readEnd: CInt, _ interruptHandle: InterruptHandle) {
        var byte: UInt8 = 0
        while true {
            let count = systemRead(readEnd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            interruptHandle.interrupt()
            if pressCount.add(1, ordering: .relaxed).newValue >= 3 {
                sigaction(SIGINT, previous, nil)
                kill(getpid(), SIGINT)
            }
        }
        closeDescriptor(readEnd)
    }
}
