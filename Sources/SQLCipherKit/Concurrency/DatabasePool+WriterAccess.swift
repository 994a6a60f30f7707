extension DatabasePool {
    /// Runs `body` on the writer outside any transaction, without blocking Swift's cooperative threads (for PRAGMAs,
    /// VACUUM, DDL or statements that manage their own transaction).
    ///
    /// Each statement `body` runs commits on its own (autocommit) unless it starts a transaction, which it must end
    /// before it returns: the writer is shared by every caller of the pool.
    ///
    /// - Throws: ``DatabaseError/connectionClosed`` after ``close()``; `CancellationError` when the task is
    ///   cancelled before `body` starts; what `body` throws.
    public func writeWithoutTransaction<T: Sendable>(
        _ body: @escaping @Sendable (Connection) throws -> T
    ) async throws -> T {
        try await coordinator.onWriter(body)
    }
}
