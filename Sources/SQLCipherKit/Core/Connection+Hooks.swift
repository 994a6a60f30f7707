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

/// Holds a hook closure for a C callback; kept alive by the connection's registration.
final class HookBox<Closure> {
    let closure: Closure

    init(_ closure: Closure) {
        self.closure = closure
    }

    var pointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> Closure {
        Unmanaged<HookBox>.fromOpaque(pointer!).takeUnretainedValue().closure
    }
}

extension Connection {
    /// Calls `hook` before each commit; returning `false` turns the commit into a rollback (the COMMIT fails with
    /// `SQLITE_CONSTRAINT_COMMITHOOK`). `nil` removes the hook.
    ///
    /// The hook must not use the connection. See [sqlite3_commit_hook](https://www.sqlite.org/c3ref/commit_hook.html).
    public func setCommitHook(_ hook: (() -> Bool)?) throws {
        let box = hook.map { HookBox<() -> Bool>($0) }
        try register("commitHook") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let box {
                sqlite3_commit_hook(sqliteConnection, { context in
                    HookBox<() -> Bool>.from(context)() ? 0 : 1
                }, box.pointer)
            } else {
                sqlite3_commit_hook(sqliteConnection, nil, nil)
            }
        }
    }

    /// Calls `hook` after each rollback (explicit, or after a failed commit). `nil` removes the hook.
    ///
    /// The hook must not use the connection. See [sqlite3_rollback_hook](https://www.sqlite.org/c3ref/commit_hook.html).
    public func setRollbackHook(_ hook: (() -> Void)?) throws {
        let box = hook.map { HookBox<() -> Void>($0) }
        try register("rollbackHook") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let box {
                sqlite3_rollback_hook(sqliteConnection, { context in HookBox<() -> Void>.from(context)() }, box.pointer)
            } else {
                sqlite3_rollback_hook(sqliteConnection, nil, nil)
            }
        }
    }

    /// Calls `hook` for each row inserted, updated or deleted in a rowid table. `nil` removes the hook.
    ///
    /// The hook must not use the connection. See [sqlite3_update_hook](https://www.sqlite.org/c3ref/update_hook.html).
    public func setUpdateHook(_ hook: ((DatabaseChange) -> Void)?) throws {
        let box = hook.map { HookBox<(DatabaseChange) -> Void>($0) }
        try register("updateHook") { connection in
            let sqliteConnection = try connection.checkedConnection()
            guard let box else {
                sqlite3_update_hook(sqliteConnection, nil, nil)
                return
            }
            sqlite3_update_hook(sqliteConnection, { context, operation, database, table, rowID in
                let kind: DatabaseChange.Kind = switch operation {
                case SQLITE_INSERT: .insert
                case SQLITE_DELETE: .delete
                default: .update
                }
                let change = DatabaseChange(
                    kind: kind, databaseName: database.map { String(cString: $0) } ?? "",
                    tableName: table.map { String(cString: $0) } ?? "", rowID: rowID)
                HookBox<(DatabaseChange) -> Void>.from(context)(change)
            }, box.pointer)
        }
    }

    /// Calls `handler` about every `instructionCount` virtual-machine instructions while a statement runs;
    /// returning `true` interrupts it (it fails with `SQLITE_INTERRUPT`). `nil` removes the handler.
    ///
    /// See [sqlite3_progress_handler](https://www.sqlite.org/c3ref/progress_handler.html).
    public func setProgressHandler(every instructionCount: Int = 1000, _ handler: (() -> Bool)?) throws {
        let box = handler.map { HookBox<() -> Bool>($0) }
        try register("progressHandler") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let box {
                sqlite3_progress_handler(sqliteConnection, CInt(clamping: max(1, instructionCount)), { context in
                    HookBox<() -> Bool>.from(context)() ? 1 : 0
                }, box.pointer)
            } else {
                sqlite3_progress_handler(sqliteConnection, 0, nil, nil)
            }
        }
    }

    /// Calls `handler` when a lock is busy, with the number of times it was called for this lock; returning `true`
    /// retries, `false` fails with `SQLITE_BUSY`. Replaces the busy timeout; `nil` restores the timeout of the open
    /// options.
    ///
    /// See [sqlite3_busy_handler](https://www.sqlite.org/c3ref/busy_handler.html).
    public func setBusyHandler(_ handler: ((Int) -> Bool)?) throws {
        let box = handler.map { HookBox<(Int) -> Bool>($0) }
        let timeout = options.busyTimeout
        try register("busyHandler") { connection in
            let sqliteConnection = try connection.checkedConnection()
            if let box {
                sqlite3_busy_handler(sqliteConnection, { context, count in
                    HookBox<(Int) -> Bool>.from(context)(Int(count)) ? 1 : 0
                }, box.pointer)
            } else if let timeout {
                try connection.setBusyTimeout(timeout)
            } else {
                sqlite3_busy_handler(sqliteConnection, nil, nil)
            }
        }
    }
}
