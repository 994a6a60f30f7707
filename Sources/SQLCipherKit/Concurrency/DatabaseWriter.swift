/// What ``DatabaseQueue`` and ``DatabasePool`` share: code that takes a `some DatabaseWriter` (a migrator, a
/// repository, a health check) works with either.
///
/// ```swift
/// func noteCount(in database: some DatabaseWriter) throws -> Int {
///     try database.read { db in try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? 0 }
/// }
/// ```
///
/// - Reads run in a deferred transaction that cannot write (`PRAGMA query_only`): on a reader connection of a pool,
///   on the single connection of a queue.
/// - Writes run in an immediate transaction on the writer, one at a time; `writeWithoutTransaction(_:)` runs
///   outside any transaction (PRAGMAs, VACUUM, transactions of your own).
/// - The async variants never run SQLite on a thread of Swift's cooperative pool for long: see each type.
///
/// Closures must use only the `Connection` they receive and must not call the writer again (that would deadlock: it
/// throws ``DatabaseError/invalidState``). The library's two types are the only conforming types it expects.
///
/// `write` is written once, here, over `writeWithoutTransaction` (as GRDB does): a conforming type provides the
/// access without a transaction and gets the transactional one.
public protocol DatabaseWriter: AnyObject, Sendable {
    /// The database path.
    var path: String { get }

    /// Runs `body` in a read transaction, blocking the calling thread.
    func read<T>(_ body: (Connection) throws -> T) throws -> T

    /// Runs `body` in a read transaction, suspending while it waits for a connection.
    func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T

    /// Runs `body` on the writer outside any transaction, blocking the calling thread.
    func writeWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T

    /// Runs `body` on the writer outside any transaction, without blocking Swift's cooperative threads.
    func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T

    /// Changes the key of the database for every connection (see ``DatabasePool/rekey(to:)``).
    @discardableResult
    func rekey(to newKeyProvider: KeyProvider) throws -> Connection.RekeyOutcome

    /// Reopens every connection with a key another process changed (see ``DatabasePool/reopen(keyProvider:)``).
    func reopen(keyProvider newKeyProvider: KeyProvider) throws

    /// Waits for the work in flight, then closes every connection; later calls throw
    /// ``DatabaseError/connectionClosed``.
    func close()

    /// `true` after ``close()``.
    var isClosed: Bool { get }
}

extension DatabaseWriter {
    /// Runs `body` in an immediate transaction on the writer, blocking the calling thread. Commits when `body`
    /// returns, rolls back when it throws.
    ///
    /// ```swift
    /// try database.write { db in try db.execute("INSERT INTO note(body) VALUES (?)", "hello") }
    /// ```
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.transaction(.immediate) { try body(db) } }
    }

    /// Runs `body` in an immediate transaction on the writer, without blocking Swift's cooperative threads. Commits
    /// when `body` returns, rolls back when it throws.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await writeWithoutTransaction { db in try db.transaction(.immediate) { try body(db) } }
    }
}

// The work both types do, written once over the coordinator.
extension AccessCoordinator {
    /// A read transaction: on a reader when there are readers (a pool), on the writer under `PRAGMA query_only`
    /// otherwise (a queue).
    func readTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        if maximumReaderCount > 0 { return try read(body) }
        return try onWriter { db in try Self.readOnly(db, body) }
    }

    /// The async read transaction; see `readTransaction(_:)`. Inlined into its callers: one async frame less per
    /// read. A pool's reads through here are timed as kind 0 (see ``ReadTiming``).
    @inline(__always)
    func readTransaction<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        if maximumReaderCount > 0 { return try await read(timingKey: 0, body) }
        return try await onWriter { db in try Self.readOnly(db, body) }
    }

    private static func readOnly<T>(_ db: Connection, _ body: (Connection) throws -> T) throws -> T {
        try db.execute("PRAGMA query_only = 1")
        defer { try? db.execute("PRAGMA query_only = 0") }
        return try db.transaction(.deferred) { try body(db) }
    }
}
