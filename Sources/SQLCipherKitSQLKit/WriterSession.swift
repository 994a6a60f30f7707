#if SQLKit  // trait SQLKit (Package.swift)
import Dispatch
import SQLCipherKit

/// Keeps the pool's writer inside one transaction while an async closure runs, and runs that closure's statements
/// on it.
///
/// ``SQLCipherSQLDatabase/transaction(_:)`` starts ``DatabasePool/write(_:)`` with ``serve(_:)`` as its body: the
/// writer's dispatch thread (never one of Swift's cooperative threads) waits for statements, runs each, and returns
/// (commit) or throws (rollback) when the closure ends. The pool counts the transaction as one unit of work in
/// flight from BEGIN to COMMIT, so a rekey or ``DatabasePool/close()`` waits for it, and other writers queue behind
/// it.
final class WriterSession: Sendable {
    private enum Step: Sendable {
        case run(@Sendable (Connection) -> Void, fail: @Sendable (any Error) -> Void)
        case commit
        case rollback
    }

    private struct State {
        var steps: [Step] = []
        var failure: (any Error)?
        var isFinished = false
    }

    private let state = Locked(State())
    private let semaphore = DispatchSemaphore(value: 0)

    /// Thrown out of the write closure to roll back; never seen by callers.
    struct Rollback: Error {}

    /// The body of the pool's write: runs steps until the transaction ends.
    func serve(_ db: Connection) throws {
        while true {
            semaphore.wait()
            let step = state.withLock { $0.steps.removeFirst() }
            switch step {
            case .run(let body, _): body(db)
            case .commit: return
            case .rollback: throw Rollback()
            }
        }
    }

    /// Runs `body` on the writer inside the transaction and returns its result.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let refusal: (any Error)? = state.withLock { state in
                if let failure = state.failure { return failure }
                if state.isFinished { return Self.finishedError() }
                state.steps.append(.run(
                    { db in continuation.resume(with: Result { try body(db) }) },
                    fail: { error in continuation.resume(throwing: error) }))
                return nil
            }
            if let refusal {
                continuation.resume(throwing: refusal)
            } else {
                semaphore.signal()
            }
        }
    }

    /// Ends the transaction: commit or roll back once the statements already submitted have run.
    func finish(commit: Bool) {
        let isFirst = state.withLock { state in
            guard !state.isFinished else { return false }
            state.isFinished = true
            state.steps.append(commit ? .commit : .rollback)
            return true
        }
        if isFirst { semaphore.signal() }
    }

    /// The write never started (pool closed, BEGIN failed): fails what is waiting and what comes later.
    func fail(_ error: any Error) {
        let pending: [Step] = state.withLock { state in
            state.failure = error
            state.isFinished = true
            defer { state.steps.removeAll() }
            return state.steps
        }
        for case .run(_, let fail) in pending { fail(error) }
    }

    private static func finishedError() -> DatabaseError {
        DatabaseError(
            .transactionMisuse,
            "the transaction has ended; use the database the transaction closure received only inside it")
    }
}
#endif
