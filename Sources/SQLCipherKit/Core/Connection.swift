import CSQLCipher
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A connection to a SQLite database, encrypted by SQLCipher unless explicitly asked not to be.
///
/// ```swift
/// let db = try Connection(path: "notes.db", key: key)      // opens or creates; the key is verified on open
/// try db.execute("CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
/// try db.transaction {
///     let insert = try db.prepare("INSERT INTO note(body) VALUES (?)")
///     for body in ["one", "two"] { try insert.run(body) }
/// }
/// for row in try db.query("SELECT id, body FROM note WHERE id > ?", 0) {
///     let id: Int64 = try row[0]
///     let body: String = try row["body"]
/// }
/// ```
///
/// Opening an existing file reads its first page, so a wrong key, a plaintext file opened with a key, an encrypted
/// file opened without one, and a file that is not a database each fail at once with a distinct
/// ``DatabaseError/Kind`` (and the handle is closed). `temp_store` is forced to MEMORY, since SQLCipher writes
/// temporary files in plaintext.
///
/// A connection must be used from one thread at a time (it is not `Sendable`); ``interruptHandle`` is the one part
/// that may be used from another thread. It closes when ``close()`` is called or when it is released.
///
/// See [Database Connection Handle](https://www.sqlite.org/c3ref/sqlite3.html).
public final class Connection {
    /// Replaced when the connection reopens after a rekey; statements of the old handle then report it closed.
    // This and the statement cache are read on every statement; a connection is used from one thread at a time, so
    // they go without dynamic exclusivity checks (calls into the runtime on every pool read).
    @usableFromInline
    @exclusivity(unchecked)
    private(set) var handle: ConnectionHandle

    /// The raw `sqlite3*`, or `nil` once closed. Do not close it yourself.
    public var sqliteConnection: OpaquePointer? { handle.sqliteConnection }

    /// The path (or URI) the connection was opened with.
    public let path: String

    /// The options the connection was opened with.
    public let options: OpenOptions

    /// The key and settings; kept (in a wiped buffer) to reopen after a rekey and to report which key opens the
    /// file after a failed one.
    private(set) var encryption: Encryption

    /// `true` when the connection was opened with a key.
    public var isEncrypted: Bool { encryption.key != nil }

    /// The cipher settings the connection was opened with.
    public var cipherSettings: CipherSettings { encryption.settings }

    @usableFromInline
    @exclusivity(unchecked)
    var statementCache: StatementCache

    @exclusivity(unchecked)
    var savepointCount = 0

    /// Whether opening settled page 1 of a new (empty) encrypted file under this connection's key and salt (it wrote
    /// it, or found it written with them under its lock): `false` when the file had a page 1 before it opened, or
    /// another connection wrote it first with a salt of its own (see `createEncryptedFile`).
    private(set) var wroteFirstPage = false

    /// Functions, collations, hooks and traces registered on this connection, applied again to the new handle when
    /// the connection reopens (after a rekey). Keyed, so registering the same name again replaces the entry.
    var registrations: [(key: String, apply: (Connection) throws -> Void)] = []

    /// The innermost closure of the caller's that the library runs now with the connection lent to it (the body of a
    /// transaction or savepoint, a writer's closure), and how many run (nested): ``close()``, a rekey or a reopen
    /// is refused meanwhile, as inside the engine's callbacks (``ConnectionHandle/lend(to:_:)``). Kept here rather
    /// than on the handle: a transaction sets them without holding on to the handle across its body.
    @exclusivity(unchecked)
    private(set) var lentClosure: LentConnectionUse?
    @exclusivity(unchecked)
    private(set) var lentClosureDepth = 0

    /// Starts a closure of the caller's that the library runs with the connection lent to it; returns what
    /// ``endLentClosure(_:)`` restores.
    @inline(__always)
    func beginLentClosure(_ use: LentConnectionUse) -> LentConnectionUse? {
        let outer = lentClosure
        lentClosure = use
        lentClosureDepth += 1
        return outer
    }

    /// Ends what ``beginLentClosure(_:)`` started.
    @inline(__always)
    func endLentClosure(_ outer: LentConnectionUse?) {
        lentClosure = outer
        lentClosureDepth -= 1
    }

    /// Runs `body`, a closure of the caller's, with the connection lent to it (see ``lentClosure``): a refusal inside
    /// it that no call of the closure has thrown yet is thrown when it returns (or instead of its error: the refusal
    /// is the cause).
    func runLent<T>(_ use: LentConnectionUse, _ body: () throws -> T) throws -> T {
        let outer = beginLentClosure(use)
        let result: T
        do {
            defer { endLentClosure(outer) }
            result = try body()
        } catch {
            if let misuse = handle.takePendingMisuse() { throw misuse }
            throw error
        }
        if let misuse = handle.takePendingMisuse() { throw misuse }
        return result
    }

    /// Whether the caller's code runs now with the connection lent to it (a callback of the engine's, or a closure
    /// of the library's): the connection must not close or reopen.
    var isLent: Bool { handle.lentDepth > 0 || lentClosureDepth > 0 }

    /// The refusal of `what` while the connection is lent (``isLent``), kept for the call that lent it.
    func refusal(of what: String) -> DatabaseError {
        handle.refusal(of: what, inside: handle.lentTo ?? lentClosure)
    }

    /// The boxes of the hooks installed on the current handle (see `HookBox`), by registration key: SQLite keeps only
    /// their address.
    var callbackBoxes: [String: AnyObject] = [:]

    /// Applies a registration now and keeps it for reopened handles.
    func register(_ key: String, _ apply: @escaping (Connection) throws -> Void) throws {
        try apply(self)
        registrations.removeAll { $0.key == key }
        registrations.append((key, apply))
    }

    // MARK: - Opening

    /// Opens (or creates) an encrypted database with a key.
    ///
    /// - Parameters:
    ///   - path: A file path, or a `file:` URI when `options.isURI` is set.
    ///   - key: The key; a raw key avoids the key derivation cost.
    ///   - settings: Cipher settings; the same must be given at every open of the file.
    ///   - options: Open mode, busy timeout, statement cache size.
    /// - Throws: ``DatabaseError/wrongKey``, ``DatabaseError/notEncrypted`` (the file is plaintext),
    ///   ``DatabaseError/notADatabase``, ``DatabaseError/unsupportedByEngine`` (a setting this SQLCipher lacks), or
    ///   a SQLite error such as `SQLITE_CANTOPEN`.
    public convenience init(
        path: String, key: EncryptionKey, settings: CipherSettings = .engineDefault, options: OpenOptions = .init()
    ) throws {
        try self.init(path: path, encryption: .key(key, settings: settings), options: options)
    }

    /// Opens (or creates) a database, encrypted or, with ``Encryption/none``, plaintext.
    ///
    /// A file the connection creates gets mode 0600 (SQLite gives its `-wal`, `-shm` and `-journal` files the
    /// same mode).
    ///
    /// - Throws: See ``init(path:key:settings:options:)``; with ``Encryption/none``, ``DatabaseError/missingKey``
    ///   when the file is not a plaintext database (probably encrypted).
    public init(path: String, encryption: Encryption, options: OpenOptions = .init()) throws {
        try SQLCipher.requireSQLCipher()
        if encryption.key == nil && !encryption.settings.isEngineDefault {
            throw DatabaseError(
                .invalidArgument,
                "cipher settings were given without a key; a plaintext database has no cipher settings")
        }
        self.path = path
        self.options = options
        self.encryption = encryption
        self.statementCache = StatementCache(capacity: options.statementCacheCapacity)
        self.handle = ConnectionHandle()
        do {
            try open(encryption: encryption)
            do {
                try options.prepareConnection?(self)
            } catch {
                handle.close()
                throw error
            }
        } catch {
            options.logger?.warning("open failed", metadata: ["path": "\(path)", "error": "\(error)"])
            throw error
        }
        options.logger?.debug("opened", metadata: [
            "path": "\(path)", "encrypted": "\(encryption.key != nil)", "engine": "\(SQLCipher.version)",
        ])
    }

    /// Opens a new handle with `encryption`, replacing the current one, which is closed first if it is still open.
    ///
    /// A pool recovering from a rekey that was refused before it touched anything (another connection had the file
    /// open) opens its writer again: replacing an open handle without closing it left its `sqlite3` connection open,
    /// and counted as another connection of the process, which refused every later rekey.
    func open(encryption: Encryption) throws {
        // A callback or closure of the caller's running now uses the handle this would close.
        if isLent { throw refusal(of: "reopening the connection") }
        if handle.isOpen { close() }
        try verifyKeyBeforeWriting(encryption: encryption)
        var createdFile = false
        if options.mode == .readWriteCreate && !options.isURI {
            createdFile = FileCreation.createPrivateFileIfMissing(atPath: path)
        }
        // Measured before the key is given: SQLCipher takes the salt from the file then, or picks one for an empty file.
        let keysEmptyFile = encryption.key != nil && options.mode == .readWriteCreate && !options.isURI
            && regularFileSize(atPath: path) == 0
        do {
            try openHandle(encryption: encryption)
            if keysEmptyFile {
                try createEncryptedFile(encryption: encryption)
            }
            // In the DELETE journal mode a commit is the unlink of the journal, and SQLite flushes the folder after
            // that unlink only at synchronous=EXTRA: at its default (FULL) a power cut soon after COMMIT returned can
            // bring the journal back, and the next open rolls the commit away. EXTRA costs one fsync of the folder
            // per commit in the DELETE mode and no call in the others (Docs/Durability.md). After the first page of
            // a new file is settled: the PRAGMA reads the schema, so on a file another connection is creating it
            // would read that page with this connection's salt.
            try execute("PRAGMA synchronous = EXTRA")
        } catch {
            // A failed open leaves nothing behind: not even the empty file it created.
            handle.close()
            if createdFile { FileCreation.removeIfEmpty(atPath: path) }
            throw error
        }
    }

    /// Writes the first page of a new encrypted database at once, under an exclusive lock: the library's one writer
    /// of a new file's page 1 (the connection factory opens a connection to have it written with a derived key).
    ///
    /// SQLCipher reads a file's salt when the key is given; for an empty file it picks a random one, which the file
    /// gets with its first page. Two connections (or processes) keying the same empty file at the same moment
    /// would each hold a salt of their own, and the one that did not write first could then read nothing ("file
    /// is encrypted or is not a database"). Writing the first page here, under the lock, settles the salt when
    /// the file is opened: a connection that finds the file written by another when it gets the lock opens it
    /// again and reads that salt.
    ///
    /// The cost: `PRAGMA auto_vacuum`, which SQLite applies by itself only while a file has no page yet, takes
    /// effect on a new encrypted file after a `VACUUM`, as on any existing database.
    private func createEncryptedFile(encryption: Encryption) throws {
        do {
            try execute("BEGIN EXCLUSIVE")
        } catch {
            // Another connection wrote the file first, with its own salt (this one cannot read it): open again.
            guard (regularFileSize(atPath: path) ?? 0) > 0 else { throw error }
            options.logger?.debug("another connection created the file first; opening it again", metadata: [
                "path": "\(path)",
            ])
            handle.close()
            try openHandle(encryption: encryption)
            return
        }
        do {
            // BEGIN EXCLUSIVE read page 1 if there was one, so a file written meanwhile has this connection's salt
            // (a salt given with the key is the same for every connection); an empty one gets its first page now.
            // Setting a header field writes page 1, and with it the salt.
            if regularFileSize(atPath: path) == 0 {
                try execute("PRAGMA user_version = 0")
            }
            try execute("COMMIT")
            wroteFirstPage = true
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func openHandle(encryption: Encryption) throws {
        var flags = options.mode.flags | SQLITE_OPEN_NOMUTEX
        if options.isURI { flags |= SQLITE_OPEN_URI }
        var sqliteConnection: OpaquePointer?
        let code = sqlite3_open_v2(path, &sqliteConnection, flags, options.vfsName)
        guard code == SQLITE_OK, let sqliteConnection else {
            let error = DatabaseError.fromSQLite(code: code, connection: sqliteConnection)
            sqlite3_close(sqliteConnection)
            throw DatabaseError(
                kind: error.kind, code: error.extendedResultCode, message: "\(error.message) (path: \(path))")
        }
        statementCache.removeAll()
        handle = ConnectionHandle(sqliteConnection)
        do {
            sqlite3_extended_result_codes(sqliteConnection, 1)
            try setUp(encryption: encryption)
            for registration in registrations {
                try registration.apply(self)
            }
        } catch {
            statementCache.removeAll()
            handle.close()
            throw error
        }
        self.encryption = encryption
        handle.register(filePath: filePath)
    }

    /// Opens a private in-memory database. Nothing is written to disk.
    ///
    /// SQLCipher does not encrypt memory databases; a key is accepted (backups between an encrypted file and
    /// memory need both sides keyed on SQLCipher 4) but protects nothing.
    public static func inMemory(encryption: Encryption = .none, options: OpenOptions = .init()) throws -> Connection {
        try Connection(path: ":memory:", encryption: encryption, options: options)
    }

    /// Opens a private temporary database, deleted when closed. With SQLCipher's `TEMP_STORE` build setting it
    /// lives in memory.
    public static func temporary(options: OpenOptions = .init()) throws -> Connection {
        try Connection(path: "", encryption: .none, options: options)
    }

    deinit {
        handle.close()
    }

    /// Closes the connection. Statements still referenced elsewhere are finalized (later use throws
    /// ``DatabaseError/connectionClosed``). Calling it again does nothing.
    ///
    /// An open transaction is rolled back by SQLite.
    ///
    /// Called from inside one of the connection's callbacks (an SQL function, a collation, the authorizer, a trace,
    /// progress or busy handler, a commit, rollback or update hook) or closures (the body of ``transaction(_:_:)`` or
    /// ``savepoint(_:_:)``, a ``DatabaseWriter``'s closure), while the library or the engine is in the middle of
    /// using the connection, it does not close: the call that ran the callback or closure throws
    /// ``DatabaseError/callbackMisuse`` when it gets control back, and the connection stays open and usable. (Closing
    /// there finalized what the engine was running: the process died with signal 11.)
    public func close() {
        if isLent {
            _ = refusal(of: "close()")
            return
        }
        statementCache.removeAll()
        handle.close()
    }

    /// `true` after ``close()``.
    public var isClosed: Bool { !handle.isOpen }

    /// Closes without removing or truncating the `-wal` by name (`SQLITE_FCNTL_PERSIST_WAL`): for a connection to a
    /// file that was just replaced by a rename, whose `-wal` name now belongs to the new file.
    func closeKeepingSideFiles() {
        if let sqliteConnection = handle.sqliteConnection {
            var persist: CInt = 1
            _ = sqlite3_file_control(sqliteConnection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
        }
        close()
    }

    /// The raw connection, for a call into the engine: throws ``DatabaseError/connectionClosed`` once closed, and
    /// ``DatabaseError/callbackMisuse`` inside a callback that must not use the connection.
    @usableFromInline
    func checkedConnection(sql: String? = nil) throws(DatabaseError) -> OpaquePointer {
        guard handle.isUsable, let sqliteConnection = handle.sqliteConnection else {
            throw handle.unusableError(sql: sql)
        }
        return sqliteConnection
    }

    // MARK: - State

    /// The rowid of the most recent successful INSERT on this connection.
    ///
    /// See [sqlite3_last_insert_rowid](https://www.sqlite.org/c3ref/last_insert_rowid.html).
    public var lastInsertRowID: Int64 {
        handle.sqliteConnection.map { sqlite3_last_insert_rowid($0) } ?? 0
    }

    /// The number of rows changed by the most recent INSERT, UPDATE or DELETE.
    ///
    /// See [sqlite3_changes](https://www.sqlite.org/c3ref/changes.html).
    public var changesCount: Int {
        handle.sqliteConnection.map { Int(sqlite3_changes($0)) } ?? 0
    }

    /// The number of rows changed since the connection opened.
    ///
    /// See [sqlite3_total_changes](https://www.sqlite.org/c3ref/total_changes.html).
    public var totalChangesCount: Int {
        handle.sqliteConnection.map { Int(sqlite3_total_changes($0)) } ?? 0
    }

    /// `true` when the main database is read-only (opened read-only, or the file cannot be written).
    ///
    /// See [sqlite3_db_readonly](https://www.sqlite.org/c3ref/db_readonly.html).
    public var isReadOnly: Bool {
        // A read-only check's connection writes into memory only; for its users it is read-only.
        options.vfsName != nil || handle.sqliteConnection.map { sqlite3_db_readonly($0, "main") == 1 } ?? true
    }

    /// `true` between BEGIN and COMMIT/ROLLBACK (or inside a savepoint).
    ///
    /// See [sqlite3_get_autocommit](https://www.sqlite.org/c3ref/get_autocommit.html).
    public var isInsideTransaction: Bool {
        handle.sqliteConnection.map { sqlite3_get_autocommit($0) == 0 } ?? false
    }

    /// The full path of the main database file as SQLite resolved it; `""` for memory and temporary databases.
    public var filePath: String {
        guard let sqliteConnection = handle.sqliteConnection,
              let name = sqlite3_db_filename(sqliteConnection, "main")
        else { return "" }
        return String(cString: name)
    }

    /// A handle that can interrupt this connection's running statement from another thread.
    public var interruptHandle: InterruptHandle { handle.interruptHandle }

    /// Interrupts the running statement (it fails with `SQLITE_INTERRUPT`). Call it from another thread through
    /// ``interruptHandle``.
    public func interrupt() {
        handle.interruptHandle.interrupt()
    }

    /// Sets how long a statement waits for a lock held by another connection before failing with `SQLITE_BUSY`.
    ///
    /// See [sqlite3_busy_timeout](https://www.sqlite.org/c3ref/busy_timeout.html).
    public func setBusyTimeout(_ timeout: Duration) throws {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(try checkedConnection(), CInt(clamping: milliseconds))
    }

    // MARK: - Preparing

    /// Compiles one SQL statement. The caller owns it; see ``cachedStatement(_:)`` for statements run often.
    ///
    /// - Throws: A SQLite error for invalid SQL (the message and the SQL are in the error);
    ///   ``DatabaseError/invalidSQL`` when the string holds more than one statement (the leftover is named).
    public func prepare(_ sql: String) throws -> Statement {
        _ = try checkedConnection(sql: sql)
        return try Statement(handle: handle, sql: sql)
    }

    /// A compiled statement from the connection's cache (a bounded LRU of ``OpenOptions/statementCacheCapacity``
    /// entries), compiled on first use.
    ///
    /// When the cached statement is in use by an unfinished cursor, a fresh statement is returned instead.
    @inlinable
    public func cachedStatement(_ sql: String) throws -> Statement {
        if let statement = statementCache.statement(for: sql), !statement.isBusy,
           statement.openCursorGeneration == 0 {
            return statement
        }
        return try cacheMiss(sql)
    }

    @usableFromInline
    func cacheMiss(_ sql: String) throws -> Statement {
        let statement = try prepare(sql)
        if statementCache.statement(for: sql) == nil {
            statementCache.insert(statement, for: sql)
        }
        return statement
    }

    // MARK: - Executing

    /// Runs one or more SQL statements separated by semicolons, without parameters.
    ///
    /// - Throws: The first statement's error, naming that statement's SQL; the statements before it stay executed
    ///   (wrap the call in ``transaction(_:_:)`` to make it all-or-nothing).
    public func execute(_ sql: String) throws {
        _ = try checkedConnection(sql: sql)
        let handle = handle
        let compiler = StatementCompiler(handle: handle)
        try compiler.forEachStatement(in: sql) { compiled, text in
            let statement = compiled.sqliteStatement
            defer { sqlite3_finalize(statement) }
            // An ATTACH is checked right after it ran, before the next statement can write into it.
            let attachFileNames = compiled.attachFileNames
            while true {
                let stepCode = !attachFileNames.isEmpty
                    ? try EncryptionGuard.step(attachingStatement: statement, fileNames: attachFileNames, handle: handle)
                    : sqlite3_step(statement)
                if handle.hasPendingMisuse && (stepCode == SQLITE_DONE || stepCode == SQLITE_ROW) {
                    // A callback of the caller's was refused during the step: this call is the one that ran it.
                    throw handle.misuseAfterStep(statement)
                }
                if stepCode == SQLITE_DONE { break }
                if stepCode != SQLITE_ROW {
                    // The failing statement's text only: built on errors, not for every statement.
                    throw EncryptionGuard.error(code: stepCode, sql: text(), handle: handle)
                }
            }
        }
    }

    /// Runs one statement with the given values bound to its parameters 1…n (from the statement cache).
    @inlinable
    public func execute<First: DatabaseValueConvertible, each Rest: DatabaseValueConvertible>(
        _ sql: String, _ first: First, _ rest: repeat each Rest
    ) throws {
        try cachedStatement(sql).run(first, repeat each rest)
    }

    /// Runs one statement with an array or dictionary of arguments (from the statement cache).
    public func execute(_ sql: String, arguments: StatementArguments) throws {
        try cachedStatement(sql).run(arguments: arguments)
    }

    // MARK: - Querying

    /// A cursor over the rows of one statement (from the statement cache): rows are read in place, not copied, and
    /// each is valid until the cursor moves on (read later, it throws ``DatabaseError/rowMisuse``).
    @inlinable
    public func cursor<each Value: DatabaseValueConvertible>(
        _ sql: String, _ values: repeat each Value
    ) throws -> RowCursor {
        try cachedStatement(sql).cursor(repeat each values)
    }

    /// A cursor over the rows of one statement, with an array or dictionary of arguments.
    public func cursor(_ sql: String, arguments: StatementArguments) throws -> RowCursor {
        try cachedStatement(sql).cursor(arguments: arguments)
    }

    /// All rows of one statement, each holding a copy of its values.
    @inlinable
    public func query<each Value: DatabaseValueConvertible>(
        _ sql: String, _ values: repeat each Value
    ) throws -> [Row] {
        try cursor(sql, repeat each values).map { try $0.copy() }
    }

    /// All rows of one statement, with an array or dictionary of arguments.
    public func query(_ sql: String, arguments: StatementArguments) throws -> [Row] {
        try cursor(sql, arguments: arguments).map { try $0.copy() }
    }

    /// The first column of the first row, or `nil` when there is no row.
    ///
    /// ```swift
    /// let count = try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? 0
    /// ```
    ///
    /// - Throws: ``DatabaseError/valueConversion`` when the value does not convert (use an optional type for a
    ///   value that may be NULL).
    @inlinable
    public func scalar<each Value: DatabaseValueConvertible, T: DatabaseValueConvertible>(
        _ sql: String, _ values: repeat each Value, as type: T.Type = T.self
    ) throws -> T? {
        try first(sql, repeat each values, map: { row in try row[0] as T })
    }

    /// The first row, transformed, or `nil` when there is no row.
    ///
    /// The ``Row`` passed to `transform` reads the statement's current row in place and is valid only during the
    /// call: a row kept past it throws ``DatabaseError/rowMisuse`` when read (return ``Row/copy()`` to keep one).
    @inlinable
    public func first<each Value: DatabaseValueConvertible, T>(
        _ sql: String, _ values: repeat each Value, map transform: (Row) throws -> T
    ) throws -> T? {
        var value: T?
        try cachedStatement(sql).forEachRowInPlace(repeat each values) { row in
            value = try transform(row)
            return false
        }
        return value
    }

    /// The first column of every row.
    @inlinable
    public func all<each Value: DatabaseValueConvertible, T: DatabaseValueConvertible>(
        _ sql: String, _ values: repeat each Value, as type: T.Type = T.self
    ) throws -> [T] {
        try all(sql, repeat each values, map: { row in try row[0] as T })
    }

    /// Every row, transformed.
    ///
    /// The ``Row`` passed to `transform` reads the statement's current row in place and is valid only during the
    /// call: a row kept past it throws ``DatabaseError/rowMisuse`` when read (return ``Row/copy()`` to keep one).
    @inlinable
    public func all<each Value: DatabaseValueConvertible, T>(
        _ sql: String, _ values: repeat each Value, map transform: (Row) throws -> T
    ) throws -> [T] {
        var rows: [T] = []
        try cachedStatement(sql).forEachRowInPlace(repeat each values) { row in
            rows.append(try transform(row))
            return true
        }
        return rows
    }
}

@available(*, unavailable, message: "A Connection belongs to one thread; use DatabaseQueue to share one.")
extension Connection: Sendable {}

extension Connection: CustomStringConvertible {
    /// The path and whether the connection is encrypted; never the key.
    public var description: String {
        "Connection(\(path.isEmpty ? "temporary" : path), \(isEncrypted ? "encrypted" : "plaintext")"
            + (isClosed ? ", closed)" : ")")
    }
}
