#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Concurrent access to one database in WAL mode: one writer and up to ``Configuration/maximumReaderCount`` readers
/// that run in parallel with it and with each other, each read in its own consistent snapshot.
///
/// ```swift
/// let pool = try DatabasePool(path: "notes.db", keyProvider: .file("/run/secrets/notes.key"))
/// try await pool.write { db in try db.execute("INSERT INTO note(body) VALUES (?)", "hello") }
/// let count = try await pool.read { db in try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? 0 }
/// ```
///
/// - Writes run in an immediate transaction on the single writer connection, one at a time.
/// - Reads run in a deferred transaction on a reader connection (`PRAGMA query_only`), so a read sees one snapshot
///   from start to end while the writer commits.
/// - Async writes run SQLite on the writer's own dispatch queue, never on Swift's cooperative threads. Async reads
///   run in place on the task's thread while recent reads of the same kind were short, and on the reader's queue
///   otherwise (see ``AsyncReadExecution``). A task cancelled while it waits for a connection stops waiting and throws
///   `CancellationError`.
/// - While reads come one after another, the pool keeps the WAL read lock taken between them, on a connection of its
///   own, for at most 10 ms at a time and never while its writer works (see
///   ``Configuration/holdsReadLockBetweenReads``): without it, SQLite takes and gives back the lock with a system
///   call at most reads of two threads.
/// - With a passphrase, the key is derived once (OpenSSL PBKDF2 with the engine's KDF settings and the file's salt)
///   and every connection opens with the derived raw key: an Nth connection costs about 1 ms instead of SQLCipher's
///   25–85 ms of key derivation.
/// - ``rekey(to:)`` changes the key for every connection: new work waits, work in flight finishes, readers are
///   closed, the writer rekeys and verifies, and the pool goes on with the new key.
///
/// Closures must use only the `Connection` they receive and must not call the pool again (that would deadlock: it
/// throws ``DatabaseError/invalidState``).
public final class DatabasePool: DatabaseWriter {
    /// How a pool opens and shares its connections.
    ///
    /// ```swift
    /// var configuration = DatabasePool.Configuration(maximumReaderCount: 8)
    /// configuration.openOptions.busyTimeout = .seconds(10)
    /// let pool = try DatabasePool(path: "notes.db", keyProvider: .file("/run/secrets/notes.key"), configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The most reader connections a pool opens at once (on demand). At least 1.
        public var maximumReaderCount: Int
        /// Cipher settings for every connection.
        public var settings: CipherSettings
        /// Busy timeout, statement cache size, logger and connection preparation for every connection (the mode is
        /// chosen by the pool).
        public var openOptions: OpenOptions
        /// Where the closures of a pool's async reads run. ``DatabasePool/AsyncReadExecution/adaptive`` by default.
        public var asyncReadExecution: AsyncReadExecution
        /// Whether the pool keeps the WAL read lock taken in this process while its reads come one after another
        /// (`true` by default): one read transaction, on a connection of its own, for at most 10 ms at a time.
        ///
        /// Without it, SQLite takes and gives back the lock with a system call at every read that finds no other read
        /// of the process running, which costs more than a point lookup itself. Reads see exactly what they see
        /// without it. The held transaction is given back before every access to the pool's writer, so the pool's own
        /// writes and checkpoints never wait for it; a truncating checkpoint on another connection, or another
        /// process that needs the file to itself, may wait up to 10 ms longer (set a busy timeout there). The pool
        /// opens one more connection for it, at its second read. Turn it off for a pool that only ever runs one read
        /// at a time and must leave the file unlocked between reads.
        public var holdsReadLockBetweenReads: Bool

        /// Creates a configuration.
        public init(maximumReaderCount: Int = 4, settings: CipherSettings = .engineDefault,
                    openOptions: OpenOptions = OpenOptions(),
                    asyncReadExecution: AsyncReadExecution = .adaptive,
                    holdsReadLockBetweenReads: Bool = true) {
            self.maximumReaderCount = maximumReaderCount
            self.settings = settings
            self.openOptions = openOptions
            self.asyncReadExecution = asyncReadExecution
            self.holdsReadLockBetweenReads = holdsReadLockBetweenReads
        }
    }

    /// Where the closure of an async `read` runs once it has a reader.
    ///
    /// Handing a closure to another thread and resuming the task afterwards costs two thread wake-ups, more than a
    /// point lookup itself (about 15 µs against 3–10 µs here). A reader, once taken, belongs to the caller alone, so
    /// the closure can also run on the task's own thread.
    public enum AsyncReadExecution: Sendable, Equatable {
        /// In place on the task's thread while recent async reads of the same kind took under 100 µs on average
        /// (a running average that moves by 1/8 at each read), on the reader's dispatch queue otherwise. A long
        /// read that comes without warning still runs in place once, holding one of Swift's cooperative threads
        /// meanwhile; the reads of its kind after it go to the queue until their average is short again.
        ///
        /// The kind: each statement the SQLKit and Fluent drivers run is a kind of its own, so a service's
        /// millisecond scans go to the queues while its point lookups keep running in place. Reads through
        /// ``DatabasePool/read(_:)`` share one kind.
        case adaptive
        /// Always on the reader's dispatch queue, so SQLite never runs on (or blocks) Swift's cooperative threads.
        /// Each read then costs the two hand-offs.
        case readerQueue
    }

    let coordinator: AccessCoordinator

    /// The database path.
    public let path: String

    /// Opens (or creates) the database in WAL mode with a key from `keyProvider`.
    ///
    /// - Throws: The key provider's error; the errors of ``Connection/init(path:encryption:options:)``;
    ///   ``DatabaseError/invalidArgument`` for a reader count below 1; ``DatabaseError/unsupportedByEngine`` when WAL
    ///   mode cannot be enabled (an in-memory database).
    public convenience init(path: String, keyProvider: KeyProvider, configuration: Configuration = Configuration())
        throws
    {
        try self.init(path: path, keyProvider: Optional(keyProvider), configuration: configuration)
    }

    /// Opens a **plaintext** database in WAL mode. Prefer ``init(path:keyProvider:configuration:)``.
    public static func unencrypted(path: String, configuration: Configuration = Configuration()) throws
        -> DatabasePool
    {
        try DatabasePool(path: path, keyProvider: nil, configuration: configuration)
    }

    private init(path: String, keyProvider: KeyProvider?, configuration: Configuration) throws {
        guard configuration.maximumReaderCount >= 1 else {
            throw DatabaseError(
                .invalidArgument,
                "a pool needs at least 1 reader, not \(configuration.maximumReaderCount)")
        }
        var options = configuration.openOptions
        options.mode = .readWriteCreate
        let factory = ConnectionFactory(
            path: path, keyProvider: keyProvider, settings: configuration.settings, options: options)
        let writer = try factory.open()
        do {
            let mode = try Self.switchToWAL(writer, path: path, busyTimeout: options.busyTimeout ?? .zero)
            guard mode?.caseInsensitiveEquals("wal") == true else {
                throw DatabaseError(
                    .unsupportedByEngine,
                    "WAL mode could not be enabled (journal mode is \(mode ?? "unknown")); a pool needs a"
                        + " database file. Use DatabaseQueue for in-memory databases")
            }
        } catch {
            writer.close()
            throw error
        }
        self.path = path
        self.coordinator = AccessCoordinator(
            factory: factory, writer: writer, maximumReaderCount: configuration.maximumReaderCount,
            label: "DatabasePool(\(path))", asyncReadExecution: configuration.asyncReadExecution,
            holdsReadLockBetweenReads: configuration.holdsReadLockBetweenReads)
        options.logger?.info("database pool opened", metadata: [
            "path": "\(path)", "encrypted": "\(keyProvider != nil)", "readers": "\(configuration.maximumReaderCount)",
        ])
    }

    deinit {
        coordinator.close()
    }

    /// Turns WAL mode on for the writer (a no-op when the file is already in WAL mode).
    ///
    /// The switch reads the file (a shared lock), then needs the exclusive lock. When another connection holds the
    /// reserved lock meanwhile (a second pool or process opening the same new file, a writer in rollback mode),
    /// SQLite answers `SQLITE_BUSY` at once, without calling the busy handler: waiting while holding the shared
    /// lock could deadlock. The switch is then tried again from the start, with nothing held, until it succeeds or
    /// `busyTimeout` has passed — the same wait any other statement gets.
    private static func switchToWAL(_ writer: Connection, path: String, busyTimeout: Duration) throws -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: busyTimeout)
        var pause = Duration.milliseconds(1)
        while true {
            do {
                return try writer.pragmaText("journal_mode = WAL")
            } catch let error as DatabaseError where error.resultCode == DatabaseError.SQLITE_BUSY && clock.now < deadline {
                testHookWALSwitchBusy.withLock { $0[path] }?()
                usleep(useconds_t(pause.components.attoseconds / 1_000_000_000_000))
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    /// Called each time the switch to WAL mode of the pool opening the file at the key's path meets a lock and will
    /// be tried again (tests release the lock then, instead of guessing when the pool got there).
    static let testHookWALSwitchBusy = Locked<[String: @Sendable () -> Void]>([:])

    // MARK: - Reading

    /// Runs `body` in a read transaction on a reader connection, blocking the calling thread.
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        do { return try coordinator.readTransaction(body) } catch { coordinator.noteFailure(error); throw error }
    }

    /// Runs `body` in a read transaction on a reader connection, suspending while it waits for one.
    ///
    /// The closure runs on the task's own thread or on the reader's dispatch queue, as the configuration's
    /// ``AsyncReadExecution`` says (by default: in place while the pool's recent reads through this method were
    /// short). A task cancelled before the closure starts gets `CancellationError` and the closure does not run.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        do { return try await coordinator.readTransaction(body) } catch { coordinator.noteFailure(error); throw error }
    }

    /// The async ``read(_:)``, choosing where `body` runs from the recent reads of statement `sql` alone: the
    /// adaptive mode keeps a running average per kind of read, and reads through ``read(_:)`` are all one kind. The
    /// SQL drivers read through here, so a service's short lookups keep running in place while its scans go to the
    /// readers' queues. `sql` only names the kind; `body` runs whatever it runs.
    package func read<T: Sendable>(
        timedAs sql: String, _ body: @escaping @Sendable (Connection) throws -> T
    ) async throws -> T {
        do {
            return try await coordinator.read(timingKey: ReadTiming.key(of: sql), body)
        } catch {
            coordinator.noteFailure(error)
            throw error
        }
    }

    /// Which of the adaptive mode's averages the reads of `sql` use (tests choose statements that do not share one).
    package static func readTimingSlot(of sql: String) -> Int { ReadTiming.slot(of: ReadTiming.key(of: sql)) }

    // MARK: - Writing

    /// Runs `body` on the writer outside any transaction (for VACUUM, PRAGMAs, or transactions of your own).
    public func writeWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        do { return try coordinator.onWriter(body) } catch { coordinator.noteFailure(error); throw error }
    }

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
        do { return try await coordinator.onWriter(body) } catch { coordinator.noteFailure(error); throw error }
    }

    // MARK: - Keys and lifetime

    /// Changes the key of the database for every connection of the pool.
    ///
    /// New work waits (it then runs with the new key), work in flight finishes, readers are closed, the writer runs
    /// ``Connection/rekey(to:)`` (verified, WAL truncated), and `newKeyProvider` becomes the pool's provider. A
    /// passphrase is derived once for the existing salt, so later connections still skip the KDF.
    ///
    /// Other processes' connections keep the old key and fail at their next read (see ``Connection/rekey(to:)``);
    /// a reader in another process can keep the WAL from being truncated, which the outcome reports.
    ///
    /// When the rekey reports an error, a fresh probe decides which key opens the file: if the new key does (the
    /// error came after it took), the pool goes on with the new key and this method returns; if the old key does,
    /// the pool keeps it and the error is thrown; if neither can be shown to, the pool keeps whichever key opens a
    /// fresh connection (and closes only when none does), and the error is thrown.
    ///
    /// - Returns: What was left to do (a WAL not yet truncated).
    /// - Throws: The provider's error, or the rekey's when the file does not open with the new key.
    @discardableResult
    public func rekey(to newKeyProvider: KeyProvider) throws -> Connection.RekeyOutcome {
        try coordinator.rekey(to: newKeyProvider)
    }

    /// Reopens every connection with the key of `newKeyProvider`, for a database whose key another process changed
    /// (another replica of a service rotated it): new work waits, work in flight finishes, readers close, and the
    /// writer reopens with the new key, which becomes the pool's provider.
    ///
    /// The new key is first checked on a fresh read-only connection: when it does not open the file, nothing
    /// changes and the error is thrown.
    ///
    /// - Throws: The provider's error, or the check's (``DatabaseError/wrongKey`` when the key does not open it).
    public func reopen(keyProvider newKeyProvider: KeyProvider) throws {
        try coordinator.reopen(keyProvider: newKeyProvider)
    }

    /// Calls `observer` (on the thread of the failed work) whenever work on the pool fails with `SQLITE_NOTADB`:
    /// the file no longer opens with the pool's key, because another process rotated it. A service uses it to look
    /// for the new key at once rather than at its next check.
    package func observeKeyRejections(_ observer: @escaping @Sendable () -> Void) {
        coordinator.keyRejectionObserver.withLock { $0 = observer }
    }

    /// Waits for the work in flight, then closes every connection; later calls throw
    /// ``DatabaseError/connectionClosed``, and callers waiting for a connection are failed with it.
    public func close() {
        coordinator.close()
    }

    /// `true` after ``close()``.
    public var isClosed: Bool { coordinator.isClosed }

    /// Whether every connection of the pool enforces foreign keys (``OpenOptions/enforcesForeignKeys``).
    public var enforcesForeignKeys: Bool { coordinator.factory.options.enforcesForeignKeys }

    /// Opens one more connection to the database with the pool's key and cipher settings, outside the pool: the
    /// caller owns it and closes it. The replicator's own connection, which holds a read transaction so that no
    /// checkpoint goes past what it has shipped, and runs the checkpoints itself.
    package func openUnpooledConnection() throws -> Connection {
        try coordinator.factory.open()
    }

    /// The number of reader connections currently open.
    public var readerConnectionCount: Int { coordinator.openReaderCount }

    /// How many reads wait for a free reader now.
    package var readerWaiterCount: Int { coordinator.readerWaiterCount }

    /// Whether the pool holds the WAL read lock between its reads now (see
    /// ``Configuration/holdsReadLockBetweenReads``).
    package var isHoldingReadLock: Bool { coordinator.readLockHolder?.isHeld ?? false }

    /// Sets how long the holds of the read lock taken from now on last (tests: a long one, so that what they check
    /// while it is held does not race its timer).
    package func setReadLockHoldLimit(_ limit: Duration) { coordinator.readLockHolder?.setHoldLimit(limit) }

    /// Sets the function told each time the pool gives back the read lock it held between reads (tests wait for it
    /// instead of sleeping).
    package func observeReadLockReleases(_ observer: (@Sendable () -> Void)?) {
        coordinator.readLockHolder?.observeReleases(observer)
    }
}
