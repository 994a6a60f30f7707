import Dispatch
import Foundation

/// Runs blocking work (a close that waits for work in flight, a rekey, an open that derives a key, file I/O that may
/// stall) on a dispatch queue, so that no thread of Swift's cooperative pool is blocked: on a 2-core machine the pool
/// has two threads, and two blocked ones stall every task of the process. The one way every module of the package
/// leaves the pool.
///
/// - Parameters:
///   - queue: Where `body` runs (a serial queue of the caller's to keep an order; a global queue otherwise).
///   - body: The blocking work.
/// - Returns: What `body` returns.
package func offCooperativePool<T: Sendable>(
    on queue: DispatchQueue = .global(), _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        queue.async { continuation.resume(with: Result { try body() }) }
    }
}

/// ``offCooperativePool(on:_:)`` for work that cannot fail.
package func offCooperativePool<T: Sendable>(
    on queue: DispatchQueue = .global(), _ body: @escaping @Sendable () -> T
) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        queue.async { continuation.resume(returning: body()) }
    }
}

/// ``offCooperativePool(on:_:)`` on a thread started for this call alone, for rare work that must not wait behind
/// whatever else the process has queued on dispatch's global queues.
///
/// Why: the global queues run as many CPU-bound items at once as there are CPUs, in the order they came. A process
/// that has queued many long items (key derivations, backups, verifications of other databases) makes an item queued
/// after them wait for all of them. A thread per call costs a thread start (tens of microseconds), so this is for
/// work that runs seldom and should not depend on what else the application queues (a live key hand-over).
package func offCooperativePool<T: Sendable>(
    onThreadOfItsOwn name: String, _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = name
        thread.start()
    }
}

/// What ``outcome(of:timeout:)`` found.
package enum TimedOutcome<T: Sendable>: Sendable {
    /// The work ended within the timeout.
    case finished(Result<T, any Error>)
    /// The timeout came first; the work was cancelled and ended within the grace period after it.
    case cancelled
    /// The timeout came first and the cancelled work had not ended one more timeout later (it ignores
    /// cancellation: a call blocked in the kernel, a store that never answers). It may still be running: the
    /// caller must not give up anything the work relies on for correctness (a lease) and must make what it
    /// closes fail safely for it.
    case abandoned
}

/// Runs `work` against a timeout: its outcome when it ends first; otherwise, once `timeout` has passed, it is
/// cancelled and awaited for up to `timeout` more (so that, when it honours cancellation, nothing it uses is closed
/// under it), never longer: a shutdown that must end in bounded time cannot wait for work that ignores
/// cancellation.
///
/// The work and the timers run in tasks of their own, not children of the caller's: a shutdown runs in a task that
/// is already cancelled, and children would inherit that (the timer would end at once, the work would be cancelled
/// before it began).
package func outcome<T: Sendable>(
    of work: @escaping @Sendable () async throws -> T, timeout: Duration
) async -> TimedOutcome<T> {
    let workTask = Task { try await work() }
    if await endsFirst(workTask, within: timeout) { return .finished(await workTask.result) }
    workTask.cancel()
    return await endsFirst(workTask, within: timeout) ? .cancelled : .abandoned
}

/// Whether `task` ends before `timeout` passes (the task is not cancelled here).
private func endsFirst<T: Sendable>(_ task: Task<T, any Error>, within timeout: Duration) async -> Bool {
    let timer = Task { try await Task.sleep(for: timeout) }
    let ended = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let outcome = Locked<CheckedContinuation<Bool, Never>?>(continuation)
        let resume = { @Sendable (value: Bool) in
            outcome.withLock { continuation in
                continuation?.resume(returning: value)
                continuation = nil
            }
        }
        Task {
            _ = await task.result
            resume(true)
        }
        Task {
            _ = await timer.result
            resume(false)
        }
    }
    timer.cancel()
    return ended
}
