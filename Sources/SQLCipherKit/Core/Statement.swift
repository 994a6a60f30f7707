import CSQLCipher

/// A prepared SQL statement: exactly one statement, compiled once, run many times.
///
/// ```swift
/// let insert = try db.prepare("INSERT INTO note(body, rank) VALUES (?, ?)")
/// try insert.run("one", 1)
/// try insert.run("two", 2)
///
/// let select = try db.prepare("SELECT id, body FROM note WHERE rank > :rank")
/// let rows = try select.cursor(arguments: ["rank": 0])
/// while let row = try rows.next() { let id: Int64 = try row[0] }
/// ```
///
/// Parameters are numbered from 1, as in SQLite. Binding checks the index or name and the number of arguments, and a
/// value that SQLite rejects throws. Bound values never appear in errors or descriptions.
///
/// A statement that ran to its end (``step()`` returned `false`) is reset by the next bind or run, as `sqlite3_step`
/// resets one by itself; a statement still in the middle of its rows (``isBusy``) refuses a new binding until
/// ``reset()``: binding it throws `SQLITE_MISUSE` (``DatabaseError/SQLITE_MISUSE``).
///
/// A statement belongs to its ``Connection`` and, like it, must be used from one thread at a time. When the
/// connection closes, the statement is finalized with it and every later use throws
/// ``DatabaseError/connectionClosed``. Otherwise it is finalized when released.
///
/// See [Prepared Statement Object](https://www.sqlite.org/c3ref/stmt.html).
public final class Statement {
    /// The raw `sqlite3_stmt*`. Valid while the connection is open; never finalize it yourself.
    public let sqliteStatement: OpaquePointer

    @usableFromInline
    let handle: ConnectionHandle

    /// The SQL text of the statement.
    public let sql: String

    /// The number of parameters (the largest parameter index).
    public let parameterCount: Int

    /// The number of result columns when the statement was compiled: the count a ``Row`` read in place has.
    @usableFromInline
    let resultColumnCount: Int

    // The storage of the column lookups (Statement+Columns.swift), kept in the class: an extension cannot store,
    // and the name table is read and written on every `row[name]`, so it stays as it was rather than move into a
    // struct of its own (it is a raw allocation the statement frees in deinit).
    @exclusivity(unchecked)
    var columnIndexByName: [String: Int]?

    /// The names `row[name]` asked for, each with the column it resolved to (-1: none), in the order first asked
    /// (``nameLookupCount`` of them, at most ``maximumNameLookupCount``; allocated at the first lookup by name).
    ///
    /// Code that reads columns by name asks for the same names in the same order on every row, so the next name is
    /// predicted: ``nameLookupPosition`` points after the last one found, and a lookup that matches the prediction
    /// costs one string comparison (for names of up to 15 UTF-8 bytes, one comparison of two words), without hashing
    /// the name. A plain pointer rather than an array: comparing in place does not retain the remembered name.
    // Read and written on every `row[name]`, from the statement's one thread; no access nests.
    @usableFromInline
    @exclusivity(unchecked)
    var nameLookups: UnsafeMutablePointer<NameLookup>?

    @usableFromInline
    @exclusivity(unchecked)
    var nameLookupCount = 0

    @usableFromInline
    @exclusivity(unchecked)
    var nameLookupPosition = 0

    /// The column names last read while the connection was open: once it closes (and finalizes the statement),
    /// rows copied from the statement still need them.
    @exclusivity(unchecked)
    var lastColumnNames: [String]?

    /// What the guard keeps about the ATTACH actions of the statement (``AttachBookkeeping``); its
    /// `attachesDatabase` is read on every step and bind.
    // No dynamic exclusivity check (a statement is used from one thread): on the bound file name it cost two calls
    // into the runtime per bind, on every pool read.
    @usableFromInline
    @exclusivity(unchecked)
    var attachments: AttachBookkeeping

    /// Bumped by each new cursor over the statement; only the newest cursor may step or reset it.
    // Checked on every row; no dynamic exclusivity check (a statement is used from one thread).
    @usableFromInline
    @exclusivity(unchecked)
    var cursorGeneration = 0

    /// The generation of the cursor over the statement that has not finished yet (0: none). The statement cache
    /// hands out no statement with one: before its first step such a statement is not busy, and binding it again
    /// would give the cursor another binding's rows.
    @usableFromInline
    @exclusivity(unchecked)
    var openCursorGeneration = 0

    /// `true` once ``step()`` ran, until the library resets the statement: a statement that may have run (to a row,
    /// or to its end) must be reset before it is bound again. Lets the paths that reset before binding skip the
    /// engine's reset, with its mutex, when the statement is already reset (the usual case: every run the library
    /// finishes resets it). A statement stepped through ``sqliteStatement`` is not seen here; see ``bind(_:at:)``.
    // Written on every step, from the statement's one thread.
    @usableFromInline
    @exclusivity(unchecked)
    var needsReset = false

    /// Identifies the row the statement stands on: changed by every step and reset, and when the connection closes.
    /// A ``Row`` read in place keeps the stamp of its row and refuses to read once the statement moved on.
    // Read on every column a row reads, written on every step, from the statement's one thread.
    @usableFromInline
    @exclusivity(unchecked)
    var rowStamp: UInt = 0

    /// Ends the rows handed out so far (the connection is closing, and the statement with it).
    func invalidateRows() {
        rowStamp &+= 1
    }

    /// Resets the statement in the engine and notes it (``needsReset``); the connection must be open.
    @inlinable
    @inline(__always)
    func resetNow() {
        sqlite3_reset(sqliteStatement)
        needsReset = false
        rowStamp &+= 1
    }

    /// Compiles exactly one statement. Throws for an empty SQL string or one with a second statement after the first.
    convenience init(handle: ConnectionHandle, sql: String) throws {
        let compiler = StatementCompiler(handle: handle)
        let compiled = try sql.withCString { start throws -> CompiledStatement in
            var tail: UnsafePointer<CChar>?
            guard let compiled = try compiler.compile(start, tail: &tail, sql: sql) else {
                throw DatabaseError(.invalidSQL, "the SQL contains no statement", sql: sql)
            }
            if let tail, compiler.containsStatement(tail) {
                sqlite3_finalize(compiled.sqliteStatement)
                let shown = String(String(cString: tail).drop(while: { $0.isWhitespace || $0 == ";" }))
                throw DatabaseError(
                    .invalidSQL,
                    "expected one statement, found more; leftover SQL: `\(shown)`"
                        + " (use Connection.execute(_:) to run several statements)",
                    sql: sql)
            }
            return compiled
        }
        self.init(handle: handle, compiled: compiled, sql: sql)
    }

    /// Adopts a statement the ``StatementCompiler`` compiled; `sql` is its text.
    init(handle: ConnectionHandle, compiled: CompiledStatement, sql: String) {
        self.sqliteStatement = compiled.sqliteStatement
        self.handle = handle
        self.sql = sql
        self.parameterCount = Int(sqlite3_bind_parameter_count(compiled.sqliteStatement))
        self.resultColumnCount = Int(sqlite3_column_count(compiled.sqliteStatement))
        // The guard notes the ATTACH actions it sees compiled: this statement attaches a database.
        self.attachments = AttachBookkeeping(compiled: compiled)
        handle.adopt(self)
    }

    deinit {
        // After the connection closed, the statement was finalized by ConnectionHandle.close().
        if handle.isOpen {
            handle.finalize(sqliteStatement)
        }
        if let nameLookups {
            nameLookups.deinitialize(count: nameLookupCount)
            nameLookups.deallocate()
        }
    }

    /// Throws unless the library may call into the engine with the statement now: its connection is open, and no
    /// callback that must not use the connection is running (``DatabaseError/callbackMisuse``).
    @inlinable
    func checkOpen() throws(DatabaseError) {
        if !handle.isUsable { throw handle.unusableError(sql: sql) }
    }

    @usableFromInline
    func error(code: CInt) -> DatabaseError {
        EncryptionGuard.error(code: code, sql: sql, handle: handle)
    }

    /// `true` when the statement does not write to the database.
    ///
    /// See [sqlite3_stmt_readonly](https://www.sqlite.org/c3ref/stmt_readonly.html).
    public var isReadOnly: Bool {
        handle.isOpen && sqlite3_stmt_readonly(sqliteStatement) != 0
    }

    /// `true` while the statement has stepped but not finished or been reset (it then holds a read transaction).
    public var isBusy: Bool {
        handle.isOpen && sqlite3_stmt_busy(sqliteStatement) != 0
    }
}

@available(*, unavailable, message: "A Statement belongs to one thread; share a DatabaseQueue instead.")
extension Statement: Sendable {}

extension Statement: CustomStringConvertible {
    /// The SQL. Bound values are never shown.
    public var description: String { sql }
}
