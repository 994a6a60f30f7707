#if Services  // trait Services (Package.swift)
import Dispatch
import SQLCipherKit
import ServiceLifecycle

extension DatabasePool: Service {
    /// Holds the pool open until graceful shutdown (or cancellation), then closes it: work in flight finishes, new
    /// work is refused with ``DatabaseError/connectionClosed``.
    ///
    /// Add the pool to a `ServiceGroup` *before* the services that use it (an HTTP server): the group shuts
    /// services down in reverse order, so the server stops taking requests and finishes its own first.
    ///
    /// ```swift
    /// let group = ServiceGroup(services: [pool, httpServer], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// try await group.run()
    /// ```
    public func run() async throws {
        try? await gracefulShutdown()
        await closeOffCooperativePool { self.close() }
    }
}

extension DatabaseQueue: Service {
    /// Holds the queue open until graceful shutdown (or cancellation), then closes it after the work in flight;
    /// see ``DatabasePool/run()``.
    public func run() async throws {
        try? await gracefulShutdown()
        await closeOffCooperativePool { self.close() }
    }
}

/// Runs a blocking call (a close that waits for work in flight, a rekey, an open that derives a key) on a dispatch
/// thread, so no thread of Swift's cooperative pool is blocked.
func closeOffCooperativePool(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            body()
            continuation.resume()
        }
    }
}

/// Like ``closeOffCooperativePool(_:)`` for a call that returns or throws.
func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        DispatchQueue.global().async {
            continuation.resume(with: Result { try body() })
        }
    }
}
#endif
