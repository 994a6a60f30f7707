import Dispatch

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

/// Runs `work` against a timeout: its outcome when it ends first; otherwise, once `timeout` has passed, it is
/// cancelled and awaited (so nothing it uses is closed under it), and the answer is `nil`.
///
/// The work and the timer run in tasks of their own, not children of the caller's: a shutdown runs in a task that
/// is already cancelled, and children would inherit that (the timer would end at once, the work would be cancelled
/// before it began).
///
/// - Returns: The work's result, or `nil` when the timeout came first.
package func outcome<T: Sendable>(
    of work: @escaping @Sendable () async throws -> T, timeout: Duration
) async -> Result<T, any Error>? {
    let workTask = Task { try await work() }
    let timer = Task { try await Task.sleep(for: timeout) }
    let workEndedFirst = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let outcome = Locked<CheckedContinuation<Bool, Never>?>(continuation)
        let resume = { @Sendable (value: Bool) in
            outcome.withLock { continuation in
                continuation?.resume(returning: value)
                continuation = nil
            }
        }
        Task {
            _ = await workTask.result
            resume(true)
        }
        Task {
            _ = await timer.result
            resume(false)
        }
    }
    timer.cancel()
    if workEndedFirst { return await workTask.result }
    workTask.cancel()
    _ = await workTask.result
    return nil
}
