import CSQLCipher

/// The raw `sqlite3*` shared by a connection and its statements, so a statement knows when its connection has been
/// closed (and its own `sqlite3_stmt*` finalized with it) without keeping the connection alive.
@usableFromInline
final class ConnectionHandle {
    // Read on every step (Statement.checkOpen); the dynamic exclusivity check cost 76 instructions per row in the
    // fetch benchmark. Sound without it: the handle is used from one thread and close() is the only writer.
    @usableFromInline
    @exclusivity(unchecked)
    private(set) var sqliteConnection: OpaquePointer?

    /// Shared with other threads for `interrupt()`; see ``InterruptHandle``.
    let interruptHandle: InterruptHandle

    /// The SQL guard's state for this handle (its authorizer's context).
    let guardState = GuardState()

    /// The file this handle counts as open in ``OpenFiles``, if any.
    private var openFileID: OpenFiles.FileID?

    /// The statements ``Statement`` prepared and has not finalized. Only these are finalized by ``close()``: the
    /// connection also holds statements of its virtual tables (FTS keeps its own), which the module finalizes
    /// itself when the connection closes; finalizing them first made that a double free.
    private var ownStatements: Set<OpaquePointer> = []

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

    /// Counts a statement ``Statement`` prepared as one ``close()`` finalizes.
    func adopt(_ statement: OpaquePointer) {
        ownStatements.insert(statement)
    }

    /// Finalizes a statement ``Statement`` prepared (while the connection is open).
    func finalize(_ statement: OpaquePointer) {
        ownStatements.remove(statement)
        sqlite3_finalize(statement)
    }

    /// Finalizes the library's statements, then closes the connection. Safe to call twice.
    func close() {
        guard let sqliteConnection else { return }
        interruptHandle.invalidate()
        // Statements still referenced by callers are finalized here; they see `isOpen == false` afterwards.
        for statement in ownStatements { sqlite3_finalize(statement) }
        ownStatements.removeAll()
        // close_v2 defers the close if an unfinished backup still uses the handle, instead of leaking it.
        sqlite3_close_v2(sqliteConnection)
        self.sqliteConnection = nil
        if let openFileID {
            OpenFiles.unregister(openFileID)
            self.openFileID = nil
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
