#if Services  // trait Services (Package.swift)
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
        await offCooperativePool { self.close() }
    }
}

extension DatabaseQueue: Service {
    /// Holds the queue open until graceful shutdown (or cancellation), then closes it after the work in flight;
    /// see ``DatabasePool/run()``.
    public func run() async throws {
        try? await gracefulShutdown()
        await offCooperativePool { self.close() }
    }
}
#endif
