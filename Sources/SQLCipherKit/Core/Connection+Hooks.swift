import CSQLCipher

/// A change reported by the update hook.
public struct DatabaseChange: Sendable, Hashable {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        case insert, update, delete
    }

    /// What happened.
    public let kind: Kind
    /// The database name (`main`, an attached schema).
    public let databaseName: String
    /// The table.
    public let tableName: String
    /// The rowid of the row.
    public let rowID: Int64
}

/// Holds a callback closure for a C callback, with the handle it runs for (which lends the connection to it: see
/// ``ConnectionHandle/lend(to:_:)``). Made for each handle the callback is installed on; a hook's box is kept by the
/// connection (``Connection/callbackBoxes``), a function's or collation's by SQLite (released when the function is
/// replaced or the connection closes).
final class HookBox<Closure> {
    let closure: Closure
    let handle: ConnectionHandle

    init(_ closure: Closure, handle: ConnectionHandle) {
        self.closure = closure
        self.handle = handle
    }

    var pointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> HookBox {
        Unmanaged<HookBox>.fromOpaque(pointer!).takeUnretainedValue()
    }
}

extension Connection {
    /// Calls `hook` before each commit; returning `false` turns the commit into a rollback (the COMMIT fails with
    /// `SQLITE_CONSTRAINT_COMMITHOOK`). `nil` removes the hook.
    ///
    /// The hook must not use the connection (SQLite forbids it): a call into the connection from inside it throws
    /// ``DatabaseError/callbackMisuse``, ``close()`` does nothing, and the commit is then refused and fails with
    /// that error. See [sqlite3_commit_hook](https://www.sqlite.org/c3ref/commit_hook.html).
    public func setCommitHook(_ hook: (() -> Bool)?) throws {
        try register("commitHook") { connection in
            let sqliteConnection = try connection.checkedConnection()
            let handle = connection.handle
            if let hook {
                let box = HookBox<() -> Bool>(hook, handle: handle)
                sqlite3_commit_hook(sqliteConnection, { context in
                    let box = HookBox<() -> Bool>.from(context)
                    let handle = box.handle
                    if handle.refusesCommits { return 1 }
                    let allows = handle.lend(to: .commitHook) { box.closure() }
                    return allows && !handle.hasPendingMisuse ? 0 : 1
                }, box.pointer)
                connection.callbackBoxes["commitHook"] = box
            } else {
                sqlite3_commit_hook(sqliteConnection, nil, nil)
                connection.callbackBoxes["commitHook"] = nil
            }
            handle.noteUserCommitHook(isInstalled: hook != nil)
        }
    }

    /// Calls `hook` after each rollback (explicit, or after a failed commit). `nil` removes the hook.
    ///
    /// The hook must not use the connection (SQLite forbids it): a call into the connection from inside it throws
    /// ``DatabaseError/callbackMisuse``, ``close()`` does nothing, and the statement that rolled back then throws
    /// that error. See [sqlite3_rollback_hook](https://www.sqlite.org/c3ref/commit_hook.html).
    public func setRollbackHook(_ hook: (() -> Void)?) throws {
        try register("rollbackHook") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let hook {
                let box = HookBox<() -> Void>(hook, handle: connection.handle)
                sqlite3_rollback_hook(sqliteConnection, { context in
                    let box = HookBox<() -> Void>.from(context)
                    box.handle.lend(to: .rollbackHook) { box.closure() }
                }, box.pointer)
                connection.callbackBoxes["rollbackHook"] = box
            } else {
                sqlite3_rollback_hook(sqliteConnection, nil, nil)
                connection.callbackBoxes["rollbackHook"] = nil
            }
        }
    }

    /// Calls `hook` for each row inserted, updated or deleted in a rowid table. `nil` removes the hook.
    ///
    /// The hook must not use the connection (SQLite forbids it): a call into the connection from inside it throws
    /// ``DatabaseError/callbackMisuse``, ``close()`` does nothing, and the statement that called the hook then fails
    /// with that error (with no transaction open, its change is rolled back). See
    /// [sqlite3_update_hook](https://www.sqlite.org/c3ref/update_hook.html).
    public func setUpdateHook(_ hook: ((DatabaseChange) -> Void)?) throws {
        try register("updateHook") { connection in
            let sqliteConnection = try connection.checkedConnection()
            guard let hook else {
                sqlite3_update_hook(sqliteConnection, nil, nil)
                connection.callbackBoxes["updateHook"] = nil
                return
            }
            let box = HookBox<(DatabaseChange) -> Void>(hook, handle: connection.handle)
            sqlite3_update_hook(sqliteConnection, { context, operation, database, table, rowID in
                let kind: DatabaseChange.Kind = switch operation {
                case SQLITE_INSERT: .insert
                case SQLITE_DELETE: .delete
                default: .update
                }
                let change = DatabaseChange(
                    kind: kind, databaseName: database.map { String(cString: $0) } ?? "",
                    tableName: table.map { String(cString: $0) } ?? "", rowID: rowID)
                let box = HookBox<(DatabaseChange) -> Void>.from(context)
                box.handle.lend(to: .updateHook) { box.closure(change) }
            }, box.pointer)
            connection.callbackBoxes["updateHook"] = box
        }
    }

    /// Calls `handler` about every `instructionCount` virtual-machine instructions while a statement runs;
    /// returning `true` interrupts it (it fails with `SQLITE_INTERRUPT`). `nil` removes the handler.
    ///
    /// The handler must not use the connection (SQLite forbids it): a call into the connection from inside it throws
    /// ``DatabaseError/callbackMisuse``, ``close()`` does nothing, and the statement is then interrupted and fails
    /// with that error. See [sqlite3_progress_handler](https://www.sqlite.org/c3ref/progress_handler.html).
    public func setProgressHandler(every instructionCount: Int = 1000, _ handler: (() -> Bool)?) throws {
        try register("progressHandler") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let handler {
                let box = HookBox<() -> Bool>(handler, handle: connection.handle)
                sqlite3_progress_handler(sqliteConnection, CInt(clamping: max(1, instructionCount)), { context in
                    let box = HookBox<() -> Bool>.from(context)
                    let interrupts = box.handle.lend(to: .progressHandler) { box.closure() }
                    return interrupts || box.handle.hasPendingMisuse ? 1 : 0
                }, box.pointer)
                connection.callbackBoxes["progressHandler"] = box
            } else {
                sqlite3_progress_handler(sqliteConnection, 0, nil, nil)
                connection.callbackBoxes["progressHandler"] = nil
            }
        }
    }

    /// Calls `handler` when a lock is busy, with the number of times it was called for this lock; returning `true`
    /// retries, `false` fails with `SQLITE_BUSY`. Replaces the busy timeout; `nil` restores the timeout of the open
    /// options.
    ///
    /// The handler must not use the connection (SQLite forbids it): a call into the connection from inside it throws
    /// ``DatabaseError/callbackMisuse``, ``close()`` does nothing, and the statement then stops waiting and fails with
    /// that error. See [sqlite3_busy_handler](https://www.sqlite.org/c3ref/busy_handler.html).
    public func setBusyHandler(_ handler: ((Int) -> Bool)?) throws {
        let timeout = options.busyTimeout
        try register("busyHandler") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let handler {
                let box = HookBox<(Int) -> Bool>(handler, handle: connection.handle)
                sqlite3_busy_handler(sqliteConnection, { context, count in
                    let box = HookBox<(Int) -> Bool>.from(context)
                    let retries = box.handle.lend(to: .busyHandler) { box.closure(Int(count)) }
                    return retries && !box.handle.hasPendingMisuse ? 1 : 0
                }, box.pointer)
                connection.callbackBoxes["busyHandler"] = box
            } else {
                if let timeout {
                    try connection.setBusyTimeout(timeout)
                } else {
                    sqlite3_busy_handler(sqliteConnection, nil, nil)
                }
                connection.callbackBoxes["busyHandler"] = nil
            }
        }
    }
}
