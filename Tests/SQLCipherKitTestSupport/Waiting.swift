import Dispatch
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#endif

// Explicit synchronisation for tests that must hold on a loaded machine (2 cores, Swift Testing running suites in
// parallel on 2 cooperative threads, a thread that may not run for tens of seconds): wait for the event itself, never
// for a time. A limit only turns a hang into a failure; it is never what decides an outcome.

/// How long a test waits for something that must happen before it calls it a hang.
public let hangLimit: Duration = .seconds(120)

/// Polls `condition` on this thread (blocking it) until it holds; `false` if it still does not after `limit`.
///
/// For synchronous code: threads, and test functions that do not suspend. An async test uses
/// ``suspendingWait(within:_:)``, which leaves its cooperative thread to others while it waits.
public func blockingWait(within limit: Duration = hangLimit, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + limit
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        usleep(5_000)
    }
}

/// Polls `condition`, suspending between looks, until it holds; `false` if it still does not after `limit`.
public func suspendingWait(within limit: Duration = hangLimit, _ condition: () async throws -> Bool) async rethrows
    -> Bool
{
    let deadline = ContinuousClock.now + limit
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
}

/// Runs blocking work (a semaphore wait, a rekey that waits for work in flight, a synchronous pool call) on a thread of
/// its own and suspends until it returns: an async test that blocked its cooperative thread instead could starve the
/// tasks it waits for, since there are only as many of those threads as cores.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await offCooperativePool(onThreadOfItsOwn: "sqlcipherkit-test", body)
}

/// Waits for `semaphore` on a thread of its own, suspending meanwhile; `false` if it was not signalled within `limit`.
public func awaitSignal(_ semaphore: DispatchSemaphore, within limit: Duration = hangLimit) async -> Bool {
    let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
    return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        Thread { continuation.resume(returning: semaphore.wait(timeout: .now() + seconds) == .success) }.start()
    }
}

/// A meeting point for `parties` threads: each ``arrive()`` blocks until all have arrived (later arrivals pass at
/// once). Used to hold several pool reads open together, so a test knows they overlap instead of hoping a sleep
/// makes them.
///
/// Blocks its caller: call it only on threads that are not Swift's cooperative ones (a pool's reader queues, a
/// `Thread`).
public final class Rendezvous: Sendable {
    private let parties: Int
    private let arrived = Shared(0)
    private let everyoneHere = DispatchSemaphore(value: 0)

    public init(parties: Int) {
        self.parties = parties
    }

    /// Arrives and waits for the others; `false` if they had not all arrived within `limit` (a hang).
    @discardableResult
    public func arrive(within limit: Duration = hangLimit) -> Bool {
        let count = arrived.withLock { count in
            count += 1
            return count
        }
        if count > parties { return true }
        if count == parties {
            for _ in 0..<(parties - 1) { everyoneHere.signal() }
            return true
        }
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        return everyoneHere.wait(timeout: .now() + seconds) == .success
    }

    /// How many have arrived so far.
    public var arrivedCount: Int { arrived.withLock { $0 } }
}

/// Another process that holds a file open (as descriptor 3) until the test ends it: a service or an operator's shell
/// keeping the database open. It says so on its output once the file is open, and lives until ``stop()`` (or until
/// this process ends: its standard input is a pipe only this process writes), never for a fixed time that a slow
/// test could outlive.
public final class FileHolder {
    public let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    /// Starts the holder and returns once it has the file open.
    public init(path: String) throws {
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // `cat` reads its input until the pipe closes, keeping descriptor 3 (the shell's `exec` keeps the pid).
        process.arguments = ["-c", #"exec 3<"$0" || exit 1; echo holding; exec cat >/dev/null"#, path]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = output.fileHandleForReading.readData(ofLength: 8)
        guard String(decoding: line, as: UTF8.self) == "holding\n" else {
            stop()
            throw CocoaError(
                .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the holder could not open \(path)"])
        }
    }

    public var processIdentifier: Int32 { process.processIdentifier }

    /// Ends it. Not `waitUntilExit()`: with the suite's other children around, Foundation could miss this one's exit
    /// and wait for ever; Foundation reaps it.
    public func stop() {
        guard !isStopped else { return }
        isStopped = true
        // Killed while it surely runs (it waits for input), before the pipe closes and it could exit and be reaped.
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? input.fileHandleForWriting.close()
    }

    private var isStopped = false

    deinit { stop() }
}
