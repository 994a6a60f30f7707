import CSQLCipher

/// How a transaction takes its locks.
///
/// See [BEGIN TRANSACTION](https://www.sqlite.org/lang_transaction.html).
public enum TransactionKind: String, Sendable {
    /// Locks are taken when first needed: a read lock at the first read, the write lock at the first write. A
    /// deferred transaction that reads and then writes can fail with `SQLITE_BUSY` at the write.
    case deferred = "DEFERRED"
    /// The write lock is taken at BEGIN, so the transaction cannot fail later for lack of it. The default.
    case immediate = "IMMEDIATE"
    /// Like immediate; in rollback-journal mode it also keeps readers out.
    case exclusive = "EXCLUSIVE"
}

extension Connection {
    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws.
    ///
    /// ```swift
    /// try db.transaction {
    ///     try db.execute("UPDATE account SET balance = balance - ? WHERE id = ?", 10, 1)
    ///     try db.execute("UPDATE account SET balance = balance + ? WHERE id = ?", 10, 2)
    /// }
    /// ```
    ///
    /// - When COMMIT itself fails (a deferred foreign key violation, `SQLITE_BUSY`), the transaction is rolled back
    ///   and COMMIT's error is thrown: the caller never has to clean up a half-open transaction.
    /// - `body` must not end the transaction itself. If it runs COMMIT or ROLLBACK (or RELEASE of the savepoint
    ///   that began it), what it did up to then stays committed or rolled back, statements after it ran outside
    ///   any transaction, and `transaction` throws ``DatabaseError/transactionMisuse``, whether the body returned
    ///   or threw (the message then names the body's error): the caller must not take the body's error for a
    ///   rollback that did not happen. When the engine itself rolled the transaction back after an error inside the
    ///   body (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_BUSY`, …), that error is thrown as it is if the body rethrew
    ///   it, and ``DatabaseError/transactionMisuse`` says what happened if the body caught it.
    /// - Transactions do not nest: calling `transaction` inside one throws ``DatabaseError/transactionMisuse``; use
    ///   ``savepoint(_:_:)`` for a nested unit that can roll back alone.
    /// - `body` must not close the connection: ``close()`` inside it is refused, and `transaction` rolls back and
    ///   throws ``DatabaseError/callbackMisuse``.
    ///
    /// - Parameters:
    ///   - kind: Immediate by default, so a write transaction never fails half-way for lack of the write lock.
    ///   - body: The work; its return value is returned.
    /// - Throws: `body`'s error (after the rollback), the BEGIN or COMMIT error, or
    ///   ``DatabaseError/transactionMisuse``.
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        // A deferred BEGIN inside a transaction fails without touching anything, so its nesting is looked for only
        // when it fails (one call into the engine less on every pool read). An immediate or exclusive
        // BEGIN would take the write lock for the open transaction before it failed: checked first.
        if kind != .deferred && isInsideTransaction { throw Self.nestedTransactionError() }
        do {
            try runTransactionStatement(TransactionStatement(begin: kind))
        } catch let error as DatabaseError where error.kind == .callbackMisuse {
            // A callback refused inside BEGIN (a trace handler that closed the connection): BEGIN itself ran.
            rollbackIfActive()
            throw error
        } catch {
            if kind == .deferred && isInsideTransaction { throw Self.nestedTransactionError() }
            throw error
        }
        // The body may not replace the handle (a reopen inside it is refused): `handle` is the same throughout.
        let engineRollbacks = handle.engineRollbackCount
        let result: T
        do {
            result = try runBody(as: .transactionBody, body)
        } catch {
            if handle.hasPendingMisuse, let misuse = handle.takePendingMisuse() {
                rollbackIfActive()
                throw misuse
            }
            if !isInsideTransaction && handle.engineRollbackCount == engineRollbacks {
                throw Self.endedByBody(.transaction, bodyError: error)
            }
            rollbackIfActive()
            throw error
        }
        if handle.hasPendingMisuse, let misuse = handle.takePendingMisuse() {
            // close() inside the body, refused.
            rollbackIfActive()
            throw misuse
        }
        guard isInsideTransaction else {
            throw Self.endedByBody(.transaction, engineRolledBack: handle.engineRollbackCount != engineRollbacks)
        }
        do {
            try runTransactionStatement(.commit)
        } catch {
            rollbackIfActive()
            throw error
        }
        return result
    }

    /// Runs `body` inside a savepoint: released when it returns, rolled back (alone) when it throws.
    ///
    /// Savepoints nest, inside or outside a transaction; outside one, the outermost savepoint acts as a deferred
    /// transaction.
    ///
    /// ```swift
    /// try db.transaction {
    ///     try db.execute("INSERT INTO log(line) VALUES ('kept')")
    ///     try? db.savepoint {
    ///         try db.execute("INSERT INTO log(line) VALUES ('undone')")
    ///         throw CancellationError()
    ///     }
    /// }
    /// ```
    ///
    /// `body` must not end the savepoint itself (COMMIT, ROLLBACK, END, or RELEASE of this savepoint or one around
    /// it; `ROLLBACK TO` keeps it and is fine). If it does, `savepoint` throws ``DatabaseError/transactionMisuse``,
    /// whether the body returned or threw (the message then names the body's error), and leaves the database in this
    /// state:
    /// - what the body committed (a COMMIT, or a RELEASE of the outermost savepoint) stays committed, and what it ran
    ///   after that outside any transaction stays too: nothing can undo it;
    /// - what the body rolled back stays rolled back;
    /// - a transaction still open is rolled back when this savepoint began it (a transaction the body began after
    ///   ending the savepoint); otherwise it belongs to the caller's enclosing transaction or savepoint, which the
    ///   error makes roll back (``transaction(_:_:)`` does).
    ///
    /// `body` must not close the connection: ``close()`` inside it is refused, and `savepoint` rolls back to the
    /// savepoint and throws ``DatabaseError/callbackMisuse``.
    ///
    /// - Parameters:
    ///   - name: The savepoint's name (any text; it is quoted); a unique name by default. Give a name of your own
    ///     only when it is unique among the savepoints open: the detection above finds the savepoint by name.
    ///   - body: The work.
    /// - Throws: `body`'s error after rolling back to the savepoint, the SAVEPOINT / RELEASE error, or
    ///   ``DatabaseError/transactionMisuse``.
    ///
    /// See [SAVEPOINT](https://www.sqlite.org/lang_savepoint.html).
    public func savepoint<T>(_ name: String? = nil, _ body: () throws -> T) throws -> T {
        savepointCount += 1
        let quotedName = Self.quoteIdentifier(name ?? "sqlcipherkit_savepoint_\(savepointCount)")
        let beginsTransaction = !isInsideTransaction
        do {
            try execute("SAVEPOINT \(quotedName)")
        } catch let error as DatabaseError where error.kind == .callbackMisuse {
            // A callback refused inside SAVEPOINT (a trace handler that closed the connection): the savepoint is open.
            try? execute("RELEASE SAVEPOINT \(quotedName)")
            throw error
        }
        let engineRollbacks = handle.engineRollbackCount
        let result: T
        do {
            result = try runBody(as: .savepointBody, body)
            if handle.hasPendingMisuse, let misuse = handle.takePendingMisuse() { throw misuse }
        } catch {
            if let misuse = handle.takePendingMisuse() {
                // close() inside the body, refused: roll back to the savepoint as for any error of the body.
                if isInsideTransaction {
                    try? execute("ROLLBACK TO SAVEPOINT \(quotedName)")
                    try? execute("RELEASE SAVEPOINT \(quotedName)")
                }
                throw misuse
            }
            guard isInsideTransaction else {
                // The engine rolled back by itself (the body rethrows its error), or the body ended the savepoint.
                if handle.engineRollbackCount != engineRollbacks { throw error }
                throw Self.endedByBody(.savepoint, bodyError: error)
            }
            // ROLLBACK TO keeps the savepoint open; RELEASE closes it (and the transaction it may have started).
            do {
                try execute("ROLLBACK TO SAVEPOINT \(quotedName)")
            } catch let rollbackError as DatabaseError where Self.isNoSuchSavepoint(rollbackError) {
                if beginsTransaction { rollbackIfActive() }
                throw Self.endedByBody(.savepoint, bodyError: error)
            } catch {}
            try? execute("RELEASE SAVEPOINT \(quotedName)")
            throw error
        }
        guard isInsideTransaction else {
            throw Self.endedByBody(.savepoint, engineRolledBack: handle.engineRollbackCount != engineRollbacks)
        }
        do {
            try execute("RELEASE SAVEPOINT \(quotedName)")
        } catch let releaseError as DatabaseError where Self.isNoSuchSavepoint(releaseError) {
            if beginsTransaction { rollbackIfActive() }
            throw Self.endedByBody(.savepoint)
        } catch {
            if isInsideTransaction {
                try? execute("ROLLBACK TO SAVEPOINT \(quotedName)")
                try? execute("RELEASE SAVEPOINT \(quotedName)")
            }
            throw error
        }
        return result
    }

    /// Runs a transaction's or a savepoint's body as a closure the connection is lent to (a close or reopen inside it
    /// is refused), counted as an open transaction scope while it runs.
    @inline(__always)
    private func runBody<T>(as use: LentConnectionUse, _ body: () throws -> T) rethrows -> T {
        let outerClosure = beginLentClosure(use)
        handle.openTransactionScopeCount += 1
        defer {
            endLentClosure(outerClosure)
            handle.openTransactionScopeCount -= 1
        }
        return try body()
    }

    /// Whether `error` is SQLite's answer to ROLLBACK TO or RELEASE of a savepoint that is not open.
    private static func isNoSuchSavepoint(_ error: DatabaseError) -> Bool {
        error.kind == .sqlite && error.resultCode == DatabaseError.SQLITE_ERROR
            && error.reason.hasPrefix("no such savepoint")
    }

    /// What ``transaction(_:_:)`` and ``savepoint(_:_:)`` call the scope they opened.
    private enum TransactionScope: String {
        case transaction, savepoint
    }

    /// The error of a transaction or savepoint that its body ended (or the engine rolled back, after an error the
    /// body caught).
    private static func endedByBody(
        _ scope: TransactionScope, bodyError: (any Error)? = nil, engineRolledBack: Bool = false
    ) -> DatabaseError {
        if engineRolledBack {
            return DatabaseError(
                .transactionMisuse,
                "the engine rolled the \(scope.rawValue) back after an error inside \(scope.rawValue) {} (such as"
                    + " SQLITE_FULL, SQLITE_IOERR or SQLITE_BUSY) that the body caught and did not rethrow; nothing of it"
                    + " was committed, and statements after it ran outside any transaction")
        }
        let ending = scope == .transaction ? "COMMIT or ROLLBACK" : "COMMIT, ROLLBACK or RELEASE"
        var reason = "the \(scope.rawValue) was ended by its own body (\(ending) inside \(scope.rawValue) {});"
            + " what it committed stays committed, and statements after it ran outside the \(scope.rawValue)"
        if let bodyError {
            reason += "; the body then threw: \(bodyError)"
        }
        return DatabaseError(.transactionMisuse, reason)
    }

    /// Starts a transaction; pair it with ``commit()`` or ``rollback()``. Prefer ``transaction(_:_:)``.
    public func beginTransaction(_ kind: TransactionKind = .immediate) throws {
        try runTransactionStatement(TransactionStatement(begin: kind))
    }

    /// Commits the open transaction.
    public func commit() throws {
        try runTransactionStatement(.commit)
    }

    /// Rolls back the open transaction.
    public func rollback() throws {
        try runTransactionStatement(.rollback)
    }

    /// Takes the read lock of the deferred transaction just begun (a pool's read gate does this while it holds the
    /// gate), from its own slot: in the statement cache it would alternate with the read's own statement.
    func startRead() throws {
        try runTransactionStatement(.startRead)
    }

    private func rollbackIfActive() {
        // SQLite may already have rolled back by itself (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY, SQLITE_NOMEM).
        if isInsideTransaction {
            try? runTransactionStatement(.rollback)
        }
    }

    /// Runs BEGIN, COMMIT or ROLLBACK from the connection's own slots (they run on every pool access: compiling
    /// them each time, then hashing their SQL to find them in the statement cache, showed in the pool benchmark).
    ///
    /// Once prepared, the statement is stepped and reset through its `sqlite3_stmt` directly: nothing else ever
    /// runs it (it is never handed out, and every run ends with a reset, so it is never mid-run or halted), it has no
    /// parameters, and no ATTACH to check. The connection's close empties the slots as it finalizes them. A callback
    /// inside the step that empties the statement cache (a hook or trace handler setting an authorizer) leaves the
    /// running statement alive until the step is over (see `StatementCache.removeAll()`).
    private func runTransactionStatement(_ which: TransactionStatement) throws {
        if handle.isUsable, let statement = statementCache.transactionStatementPointers[which.rawValue] {
            statementCache.runningTransactionStatementCount += 1
            var code: CInt
            repeat { code = sqlite3_step(statement) } while code == SQLITE_ROW
            if code != SQLITE_DONE || handle.hasPendingMisuse {
                throw transactionStatementFailed(statement, which, code: code)
            }
            sqlite3_reset(statement)
            statementCache.endTransactionStatementRun()
            return
        }
        let statement = try prepare(which.sql)
        statementCache.store(statement, as: which)
        try statement.run()
    }

    /// The error of a transaction statement whose step failed, built before its reset (which would clear it); the
    /// SQL is the slot's, as the callback that failed it may have emptied the slot.
    private func transactionStatementFailed(
        _ statement: OpaquePointer, _ which: TransactionStatement, code: CInt
    ) -> DatabaseError {
        let error = code == SQLITE_DONE
            ? handle.takePendingMisuse() ?? DatabaseError.closed(sql: which.sql)  // a hook refused: see `recordMisuse`
            : EncryptionGuard.error(code: code, sql: which.sql, handle: handle)
        sqlite3_reset(statement)
        statementCache.endTransactionStatementRun()
        return error
    }

    private static func nestedTransactionError() -> DatabaseError {
        DatabaseError(
            .transactionMisuse, "a transaction is already open; transactions do not nest (use savepoint(_:_:) instead)")
    }

    /// Quotes an identifier for SQL: `"name"` with embedded quotes doubled.
    public static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingAll("\"", with: "\"\"") + "\""
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        result.reserveCapacity(count)
        for character in self {
            if character == target { result += replacement } else { result.append(character) }
        }
        return result
    }
}

/// The statements ``Connection/transaction(_:_:)`` runs, and the one a pool's read gate starts a read with, each
/// kept prepared on the connection.
enum TransactionStatement: Int, CaseIterable {
    case beginDeferred, beginImmediate, beginExclusive, commit, rollback
    /// Reads the schema table and returns no row: inside a deferred transaction, it takes the read lock now.
    case startRead

    init(begin kind: TransactionKind) {
        switch kind {
        case .deferred: self = .beginDeferred
        case .immediate: self = .beginImmediate
        case .exclusive: self = .beginExclusive
        }
    }

    var sql: String {
        switch self {
        case .beginDeferred: "BEGIN DEFERRED TRANSACTION"
        case .beginImmediate: "BEGIN IMMEDIATE TRANSACTION"
        case .beginExclusive: "BEGIN EXCLUSIVE TRANSACTION"
        case .commit: "COMMIT TRANSACTION"
        case .rollback: "ROLLBACK TRANSACTION"
        case .startRead: "SELECT 1 FROM sqlite_master LIMIT 0"
        }
    }
}
