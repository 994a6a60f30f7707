import CSQLCipher

/// The raw `sqlite3*` shared by a connection and its statements, so a statement knows when its connection has been
/// closed (and its own `sqlite3_stmt*` finalized with it) without keeping the connection alive.
@usableFromInline
final class ConnectionHandle {
    // Read on every step (Statement.checkOpen); the dynamic exclusivity check was a runtime call per row
    // fetched. Sound without it: the handle is used from one thread and close() is the only writer.
    @usableFromInline
    @exclusivity(unchecked)
    private(set) var sqliteConnection: OpaquePointer?

    /// Shared with other threads for `interrupt()`; see ``InterruptHandle``.
    let interruptHandle: InterruptHandle

    /// The SQL guard's state for this handle (its authorizer's context).
    let guardState = GuardState()

    /// The file this handle counts as open in ``OpenFiles``, if any.
    private var openFileID: OpenFiles.FileID?

    /// The statements ``Statement`` prepared and has not finalized, each with its ``Statement``. Only these are
    /// finalized by ``close()``: the connection also holds statements of its virtual tables (FTS keeps its own),
    /// which the module finalizes itself when the connection closes; finalizing them first made that a double free.
    /// The ``Statement`` is unretained: it leaves the table in its `deinit` (``finalize(_:)``), or ``close()`` empties
    /// the table, so an entry never outlives its statement.
    private var ownStatements: [OpaquePointer: Unmanaged<Statement>] = [:]

    // MARK: Callbacks and closures that run with the connection lent to them

    /// The innermost callback of the caller's that the engine runs now with this connection lent to it
    /// (``lend(to:_:)``; the library's closures are counted by the connection, see `Connection.lentClosure`).
    @exclusivity(unchecked)
    private(set) var lentTo: LentConnectionUse?

    /// How many of the caller's callbacks run now (nested). ``Connection/close()`` is refused meanwhile.
    @exclusivity(unchecked)
    private(set) var lentDepth = 0

    /// How many of them are callbacks that SQLite forbids to use the connection at all
    /// (``LentConnectionUse/forbidsUse``): every call into the engine is refused meanwhile. Read before every step.
    @usableFromInline
    @exclusivity(unchecked)
    private(set) var restrictedDepth = 0

    /// Whether a refusal (``recordMisuse(_:)``) waits to be thrown by the call that ran the callback. Read after
    /// every step.
    @usableFromInline
    @exclusivity(unchecked)
    private(set) var hasPendingMisuse = false

    /// The refusal ``hasPendingMisuse`` announces.
    @exclusivity(unchecked)
    private var pendingMisuse: DatabaseError?

    /// Whether a commit must be refused (turned into a rollback) until the refusal waiting is thrown: set when a
    /// callback of the engine was refused while no transaction was open (see ``recordMisuse(_:)``).
    @exclusivity(unchecked)
    private(set) var refusesCommits = false

    /// Whether the caller's commit hook (``Connection/setCommitHook(_:)``) is installed on this handle: its
    /// trampoline refuses commits itself while ``refusesCommits``.
    @exclusivity(unchecked)
    private var hasUserCommitHook = false

    /// Whether the library installed its own commit hook, which refuses every commit, for ``refusesCommits``.
    @exclusivity(unchecked)
    private var hasRefusingCommitHook = false

    /// Counts the errors that left no transaction open while a transaction or savepoint of the library was open:
    /// the engine rolls back by itself after some (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_BUSY`, …). Tells such a
    /// rollback from a body that ended the transaction itself (see `EncryptionGuard.error`).
    @exclusivity(unchecked)
    var engineRollbackCount = 0

    /// How many transactions or savepoints of the library (``Connection/transaction(_:_:)``,
    /// ``Connection/savepoint(_:_:)``) are open on this handle.
    @exclusivity(unchecked)
    var openTransactionScopeCount = 0

    init(_ sqliteConnection: OpaquePointer) {
        self.sqliteConnection = sqliteConnection
        self.interruptHandle = InterruptHandle(sqliteConnection)
    }

    /// A handle that is already closed: the state of a connection before it opens.
    init() {
        self.sqliteConnection = nil
        self.interruptHandle = InterruptHandle(nil)
    }

    /// Counts the handle as a connection to the file until it closes.
    func register(filePath: String) {
        openFileID = OpenFiles.register(path: filePath)
    }

    @inlinable
    var isOpen: Bool {
        sqliteConnection != nil
    }

    /// Whether the library may call into the engine now: the connection is open, and no callback that must not use
    /// it is running (``restrictedDepth``).
    @inlinable
    var isUsable: Bool {
        sqliteConnection != nil && restrictedDepth == 0
    }

    /// The error for a call that found the handle not ``isUsable``: closed, or used inside a callback that must not
    /// use it (the refusal is also kept for the call that ran the callback).
    @usableFromInline
    func unusableError(sql: String?) -> DatabaseError {
        guard isOpen, let lentTo, restrictedDepth > 0 else { return DatabaseError.closed(sql: sql) }
        let error = DatabaseError(
            .callbackMisuse,
            "the connection was used inside \(lentTo.description), which must not use it (SQLite forbids it: the"
                + " callback runs in the middle of the engine's own work on the connection); refused",
            sql: sql)
        recordMisuse(error)
        return error
    }

    /// Counts a statement ``Statement`` prepared as one ``close()`` finalizes.
    func adopt(_ statement: Statement) {
        ownStatements[statement.sqliteStatement] = Unmanaged.passUnretained(statement)
    }

    /// Finalizes a statement ``Statement`` prepared (while the connection is open).
    func finalize(_ statement: OpaquePointer) {
        ownStatements[statement] = nil
        sqlite3_finalize(statement)
    }

    /// Finalizes the library's statements, then closes the connection. Safe to call twice.
    func close() {
        guard let sqliteConnection else { return }
        interruptHandle.invalidate()
        // Statements still referenced by callers are finalized here; they see `isOpen == false` afterwards, and the
        // rows they handed out (read in place) no longer stand on a row of theirs.
        for (statement, owner) in ownStatements {
            owner._withUnsafeGuaranteedRef { $0.invalidateRows() }
            sqlite3_finalize(statement)
        }
        ownStatements.removeAll()
        // The caller's authorizer refers back to the handle: let go of it (nothing compiles any more).
        guardState.userAuthorizer = nil
        pendingMisuse = nil
        hasPendingMisuse = false
        refusesCommits = false
        hasRefusingCommitHook = false
        // close_v2 defers the close if an unfinished backup still uses the handle, instead of leaking it.
        sqlite3_close_v2(sqliteConnection)
        self.sqliteConnection = nil
        if let openFileID {
            OpenFiles.unregister(openFileID)
            self.openFileID = nil
        }
    }

    // MARK: - Lending the connection

    /// Runs `body`, a callback or closure of the caller's, with the connection lent to it: ``Connection/close()``,
    /// a rekey or a reopen is refused meanwhile (the engine, or the library, is in the middle of using the
    /// connection), and so is every call into the engine when `use` ``LentConnectionUse/forbidsUse``.
    @inline(__always)
    func lend<T>(to use: LentConnectionUse, _ body: () throws -> T) rethrows -> T {
        let outer = lentTo
        lentTo = use
        lentDepth += 1
        if use.forbidsUse { restrictedDepth += 1 }
        defer {
            lentTo = outer
            lentDepth -= 1
            if use.forbidsUse { restrictedDepth -= 1 }
        }
        return try body()
    }

    /// The refusal of `what` (a close, a rekey, a reopen) inside `use`, the callback or closure running now, kept
    /// for the call that ran it.
    func refusal(of what: String, inside use: LentConnectionUse?) -> DatabaseError {
        let use = use?.description ?? "a callback"
        let error = DatabaseError(
            .callbackMisuse,
            "\(what) was called inside \(use), while the connection is in use there; refused: the connection was not"
                + " closed and stays usable (call it once the call that ran \(use) has returned)")
        recordMisuse(error)
        return error
    }

    /// Keeps `error` (the first one) for the call that ran the callback or closure, which throws it when it gets
    /// control back (``takePendingMisuse()``).
    ///
    /// Inside a callback the engine calls while a statement runs, with no transaction open, that statement commits
    /// as it ends: the commit is refused (turned into a rollback, `SQLITE_CONSTRAINT_COMMITHOOK`), so that the call
    /// that throws the refusal has changed nothing. A trace event comes once the statement has ended: too late.
    func recordMisuse(_ error: DatabaseError) {
        guard pendingMisuse == nil else { return }
        pendingMisuse = error
        hasPendingMisuse = true
        guard let sqliteConnection, let lentTo, lentTo.isEngineCallback, lentTo != .trace,
              sqlite3_get_autocommit(sqliteConnection) != 0 else { return }
        refusesCommits = true
        if !hasUserCommitHook {
            sqlite3_commit_hook(sqliteConnection, { _ in 1 }, nil)
            hasRefusingCommitHook = true
        }
    }

    /// Notes whether the caller's commit hook is installed now (it replaced the library's refusing one, if any).
    func noteUserCommitHook(isInstalled: Bool) {
        hasUserCommitHook = isInstalled
        hasRefusingCommitHook = false
    }

    /// The refusal waiting to be thrown, if any, now handed over (and commits no longer refused).
    @usableFromInline
    func takePendingMisuse() -> DatabaseError? {
        guard let error = pendingMisuse else { return nil }
        pendingMisuse = nil
        hasPendingMisuse = false
        refusesCommits = false
        if hasRefusingCommitHook {
            hasRefusingCommitHook = false
            if let sqliteConnection { sqlite3_commit_hook(sqliteConnection, nil, nil) }
        }
        return error
    }

    /// ``takePendingMisuse()`` for the hot paths: the statement that ran the callback is reset first, so that it
    /// holds nothing (a read transaction) once the refusal is thrown.
    @usableFromInline
    func misuseAfterStep(_ statement: OpaquePointer) -> DatabaseError {
        sqlite3_reset(statement)
        return takePendingMisuse() ?? DatabaseError.closed()
    }
}

/// What lends the connection to the caller's code: each kind of callback the engine calls, and each closure the
/// library runs between its own calls. See ``ConnectionHandle/lend(to:_:)``.
enum LentConnectionUse {
    case function, aggregate, collation, authorizer, trace, progressHandler, busyHandler
    case commitHook, rollbackHook, updateHook
    case transactionBody, savepointBody, writerClosure

    /// Whether SQLite forbids the callback to use the connection at all ("must not do anything that will modify the
    /// database connection"; preparing or running a statement counts): the authorizer, the progress and busy
    /// handlers, the commit, rollback and update hooks. A progress handler that ran a statement recursed into itself
    /// until the process died (signal 11).
    var forbidsUse: Bool {
        switch self {
        case .authorizer, .progressHandler, .busyHandler, .commitHook, .rollbackHook, .updateHook: true
        case .function, .aggregate, .collation, .trace, .transactionBody, .savepointBody, .writerClosure: false
        }
    }

    /// Whether the engine calls it in the middle of running a statement (rather than the library between calls).
    var isEngineCallback: Bool {
        switch self {
        case .transactionBody, .savepointBody, .writerClosure: false
        default: true
        }
    }

    /// How messages name it.
    var description: String {
        switch self {
        case .function: "an SQL function"
        case .aggregate: "an aggregate SQL function"
        case .collation: "a collation"
        case .authorizer: "the authorizer"
        case .trace: "a trace handler"
        case .progressHandler: "a progress handler"
        case .busyHandler: "a busy handler"
        case .commitHook: "a commit hook"
        case .rollbackHook: "a rollback hook"
        case .updateHook: "an update hook"
        case .transactionBody: "the body of transaction {}"
        case .savepointBody: "the body of savepoint {}"
        case .writerClosure: "a DatabaseWriter's closure"
        }
    }
}

/// Interrupts the running statement of a connection from any thread.
///
/// Obtained from ``Connection/interruptHandle``. Calling ``interrupt()`` after the connection closed does nothing.
/// See [sqlite3_interrupt](https://www.sqlite.org/c3ref/interrupt.html).
public final class InterruptHandle: Sendable {
    // The pointer is only passed to sqlite3_interrupt, which SQLite documents as callable from any thread; the
    // mutex makes sure it is never called after sqlite3_close.
    private let state: Locked<UInt?>

    init(_ sqliteConnection: OpaquePointer?) {
        state = Locked(sqliteConnection.map { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer($0))) })
    }

    /// Makes the statement running on the connection stop as soon as possible with `SQLITE_INTERRUPT`.
    public func interrupt() {
        state.withLock { address in
            if let address, let pointer = OpaquePointer(bitPattern: Int(bitPattern: address)) {
                sqlite3_interrupt(pointer)
            }
        }
    }

    func invalidate() {
        state.withLock { $0 = nil }
    }
}
