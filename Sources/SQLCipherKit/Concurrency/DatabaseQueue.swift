/// One connection shared by any number of threads and tasks: every access is serialised.
///
/// ```swift
/// let queue = try DatabaseQueue(path: "notes.db", keyProvider: .file("/run/secrets/notes.key"))
/// try queue.write { db in try db.execute("INSERT INTO note(body) VALUES (?)", "hello") }
/// let count = try await queue.read { db in try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? 0 }
/// ```
///
/// Simpler than ``DatabasePool`` and fine for light concurrency, in-memory databases and any journal mode; reads
/// wait for writes and the other way round. The async methods run SQLite on the queue's own dispatch queue, never
/// on Swift's cooperative threads.
///
/// Closures must use only the `Connection` they receive and must not call the queue again (that would deadlock: it
/// throws ``DatabaseError/invalidState``).
public final class DatabaseQueue: DatabaseWriter {
    let coordinator: AccessCoordinator

    /// The database path.
    public let path: String

    /// Opens (or creates) an encrypted database with a key from `keyProvider`.
    public convenience init(
        path: String, keyProvider: KeyProvider, settings: CipherSettings = .engineDefault,
        options: OpenOptions = OpenOptions()
    ) throws {
        try self.init(path: path, keyProvider: Optional(keyProvider), settings: settings, options: options)
    }

    /// Opens a **plaintext** database. Prefer ``init(path:keyProvider:settings:options:)``.
    public static func unencrypted(path: String, options: OpenOptions = OpenOptions()) throws -> DatabaseQueue {
        try DatabaseQueue(path: path, keyProvider: nil, settings: .engineDefault, options: options)
    }

    /// A queue over a private in-memory database (not encrypted: it never reaches the disk).
    public static func inMemory(options: OpenOptions = OpenOptions()) throws -> DatabaseQueue {
        try unencrypted(path: ":memory:", options: options)
    }

    private init(path: String, keyProvider: KeyProvider?, settings: CipherSettings, options: OpenOptions) throws {
        let factory = ConnectionFactory(path: path, keyProvider: keyProvider, settings: settings, options: options)
        self.path = path
        self.coordinator = AccessCoordinator(
            factory: factory, writer: try factory.open(), maximumReaderCount: 0, label: "DatabaseQueue(\(path))")
    }

    deinit {
        coordinator.close()
    }

    /// Runs `body` in a read-only transaction (`PRAGMA query_only`), blocking the calling thread.
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try coordinator.readTransaction(body)
    }

    /// Runs `body` in a read-only transaction, without blocking Swift's cooperative threads.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await coordinator.readTransaction(body)
    }

    /// Runs `body` outside any transaction (for VACUUM, PRAGMAs, or transactions of your own), blocking the calling
    /// thread.
    public func writeWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try coordinator.onWriter(body)
    }

    /// Runs `body` outside any transaction, without blocking Swift's cooperative threads.
    public func writeWithoutTransaction<T: Sendable>(
        _ body: @escaping @Sendable (Connection) throws -> T
    ) async throws -> T {
        try await coordinator.onWriter(body)
    }

    /// Changes the key; see ``DatabasePool/rekey(to:)``.
    @discardableResult
    public func rekey(to newKeyProvider: KeyProvider) throws -> Connection.RekeyOutcome {
        try coordinator.rekey(to: newKeyProvider)
    }

    /// Reopens the connection with a key another process changed; see ``DatabasePool/reopen(keyProvider:)``.
    public func reopen(keyProvider newKeyProvider: KeyProvider) throws {
        try coordinator.reopen(keyProvider: newKeyProvider)
    }

    /// Waits for the work in flight, then closes the connection; later calls throw
    /// ``DatabaseError/connectionClosed``.
    public func close() {
        coordinator.close()
    }

    /// `true` after ``close()``.
    public var isClosed: Bool { coordinator.isClosed }
}
