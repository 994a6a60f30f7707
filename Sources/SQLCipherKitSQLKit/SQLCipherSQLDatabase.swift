#if SQLKit  // trait SQLKit (Package.swift)
import Logging
import NIOCore
import NIOPosix
import SQLCipherKit
import SQLKit

/// An SQLKit `SQLDatabase` over a ``DatabasePool``: SQLKit's query builders, and every library built on SQLKit,
/// on an encrypted SQLCipher file.
///
/// ```swift
/// let pool = try DatabasePool(path: "app.db", keyProvider: .file("/run/secrets/app.key"))
/// let sql = SQLCipherSQLDatabase(pool: pool)
/// try await sql.create(table: "note").ifNotExists()
///     .column("id", type: .int, .primaryKey).column("body", type: .text, .notNull).run()
/// try await sql.insert(into: "note").columns("body").values(SQLBind("hello")).run()
/// let rows = try await sql.select().column("body").from("note").all()
/// ```
///
/// - Statements that only read (`SELECT`, `WITH … SELECT`, `VALUES`, `EXPLAIN`, confirmed by SQLite's
///   `sqlite3_stmt_readonly`) run on a reader connection, in parallel with the writer and with each other; every
///   other statement runs on the single writer, outside a transaction (it commits on its own).
/// - ``transaction(_:)`` keeps the writer in one `BEGIN IMMEDIATE … COMMIT` for the whole closure; every statement
///   of the closure, reads included, runs there and sees the transaction's own writes. A closure that throws rolls
///   back.
/// - SQLite runs on the pool's dispatch queues: neither an event loop nor a thread of Swift's cooperative pool is
///   ever blocked. `eventLoop` only completes the `EventLoopFuture` API.
/// - ``dialect`` is decided from the version of the SQLite inside the loaded SQLCipher (``SQLCipherDialect``).
///
/// Rows are handed to `onRow` on the pool's dispatch queue, as soon as each is read.
public struct SQLCipherSQLDatabase: SQLDatabase {
    /// The pool statements run on.
    public let pool: DatabasePool
    /// The logger for statements (at ``queryLogLevel``; SQL text only, never bound values).
    public let logger: Logger
    /// The event loop that completes futures.
    public let eventLoop: any EventLoop
    /// The level statements are logged at; `nil` logs none.
    public let queryLogLevel: Logger.Level?
    /// Encodes bound values.
    public let encoder: SQLCipherDataEncoder
    /// Decodes row values.
    public let decoder: SQLCipherDataDecoder
    /// Where timings and failures are reported (see Docs/Services.md for the names).
    public let metrics: SQLCipherSQLMetrics?
    /// The open transaction this database runs in, if any.
    let session: WriterSession?

    /// An SQLKit database over `pool`.
    ///
    /// - Parameters:
    ///   - pool: The pool; its lifetime is the caller's (close it when done).
    ///   - eventLoop: Completes the futures of the `EventLoopFuture` API; by default one of NIO's singleton group.
    ///   - logger: Statement logging.
    ///   - queryLogLevel: The level for each statement's SQL; `nil` logs none.
    ///   - encoder: How bound values become SQLite values.
    ///   - decoder: How SQLite values are read back.
    ///   - metrics: Timings and failures (swift-metrics); `nil` records nothing.
    public init(
        pool: DatabasePool,
        eventLoop: (any EventLoop)? = nil,
        logger: Logger = Logger(label: "sqlcipherkit.sql"),
        queryLogLevel: Logger.Level? = .debug,
        encoder: SQLCipherDataEncoder = SQLCipherDataEncoder(),
        decoder: SQLCipherDataDecoder = SQLCipherDataDecoder(),
        metrics: SQLCipherSQLMetrics? = nil
    ) {
        self.pool = pool
        self.eventLoop = eventLoop ?? MultiThreadedEventLoopGroup.singleton.any()
        self.logger = logger
        self.queryLogLevel = queryLogLevel
        self.encoder = encoder
        self.decoder = decoder
        self.metrics = metrics
        self.session = nil
    }

    private init(_ other: SQLCipherSQLDatabase, session: WriterSession?, logger: Logger? = nil) {
        self.pool = other.pool
        self.eventLoop = other.eventLoop
        self.logger = logger ?? other.logger
        self.queryLogLevel = other.queryLogLevel
        self.encoder = other.encoder
        self.decoder = other.decoder
        self.metrics = other.metrics
        self.session = session
    }

    /// The same database with another logger (and event loop), for one request.
    public func with(logger: Logger, eventLoop: (any EventLoop)? = nil) -> SQLCipherSQLDatabase {
        var copy = SQLCipherSQLDatabase(self, session: session, logger: logger)
        if let eventLoop { copy = copy.with(eventLoop: eventLoop) }
        return copy
    }

    private func with(eventLoop: any EventLoop) -> SQLCipherSQLDatabase {
        SQLCipherSQLDatabase(
            pool: pool, eventLoop: eventLoop, logger: logger, queryLogLevel: queryLogLevel, encoder: encoder,
            decoder: decoder, metrics: metrics
        ).withSession(session)
    }

    private func withSession(_ session: WriterSession?) -> SQLCipherSQLDatabase {
        SQLCipherSQLDatabase(self, session: session)
    }

    /// `true` inside ``transaction(_:)``.
    public var isInsideTransaction: Bool { session != nil }

    /// The linked engine's SQLite version.
    public var version: (any SQLDatabaseReportedVersion)? { SQLCipherReportedVersion() }

    /// The dialect of the linked engine (capabilities decided from its version).
    public var dialect: any SQLDialect { SQLCipherDialect() }

    // MARK: - Running statements

    public func execute(
        sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void
    ) -> EventLoopFuture<Void> {
        eventLoop.makeFutureWithTask { try await self.execute(sql: query, onRow) }
    }

    public func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let (sql, binds) = serialize(query)
        if let queryLogLevel {
            // The SQL only: bound values may be confidential.
            logger.log(level: queryLogLevel, "\(sql)")
        }
        let values = try binds.map { try encoder.encode($0) }
        try await run(sql: sql, values: values, rowIDColumn: nil, onRow)
    }

    /// Runs an INSERT on the writer, then hands `onRow` one row with `column` = the rowid it inserted (read on the
    /// same connection right after it): what `RETURNING` gives on engines that lack it.
    package func execute(
        sql query: any SQLExpression, reportingLastInsertRowIDAs column: String,
        _ onRow: @escaping @Sendable (any SQLRow) -> Void
    ) async throws {
        let (sql, binds) = serialize(query)
        if let queryLogLevel { logger.log(level: queryLogLevel, "\(sql)") }
        let values = try binds.map { try encoder.encode($0) }
        try await run(sql: sql, values: values, rowIDColumn: column, onRow)
    }

    /// Runs one statement with already-encoded values, on the transaction's writer, a reader, or the writer.
    func run(
        sql: String, values: [DatabaseValue], rowIDColumn: String?, _ onRow: @escaping @Sendable (any SQLRow) -> Void
    ) async throws {
        let decoder = self.decoder
        let metrics = self.metrics
        let requested = ContinuousClock.now
        // `onRow` runs on the writer's or a reader's thread, and the caller reads what it collected there once this
        // call returns (SQLKit's `first()` keeps its rows in a `nonisolated(unsafe) var`). The continuation that
        // brings the statement's end back orders the two, but ThreadSanitizer does not see that ordering and
        // reported the read as a race; a lock released after the last row and taken before returning makes it
        // visible to it (one uncontended lock pair per statement). Not `Locked(())`: a value of no size shares its
        // address with the lock's pointer, and the sanitizer reports those two as a race too.
        let rowsHandedOver = Locked(false)
        defer { _ = rowsHandedOver.withLock { $0 } }
        func step(_ kind: SQLCipherSQLMetrics.Operation) -> @Sendable (Connection) throws -> Void {
            { db in
                defer { rowsHandedOver.withLock { $0 = true } }
                let started = ContinuousClock.now
                metrics?.recordWait(kind, started - requested)
                defer { metrics?.recordDuration(kind, ContinuousClock.now - started) }
                try Self.step(sql: sql, values: values, on: db, decoder: decoder, onRow)
                if let rowIDColumn {
                    onRow(SQLCipherRow(columns: [rowIDColumn], values: [.integer(db.lastInsertRowID)], decoder: decoder))
                }
            }
        }
        do {
            if let session {
                try await session.perform(step(.transaction))
                return
            }
            if rowIDColumn == nil, Self.mayRead(sql) {
                // Prepared on a reader; a statement SQLite says writes (`WITH … INSERT`) goes to the writer. Timed
                // by its text: where the pool runs it (in place or on a reader's queue) follows how long this
                // statement took lately, not how long the pool's other statements did.
                let readStep = step(.read)
                let ranOnReader = try await pool.read(timedAs: sql) { db -> Bool in
                    guard try db.cachedStatement(sql).isReadOnly else { return false }
                    try readStep(db)
                    return true
                }
                if ranOnReader { return }
            }
            try await pool.writeWithoutTransaction(step(.write))
        } catch {
            metrics?.recordFailure(session != nil ? .transaction : Self.mayRead(sql) ? .read : .write)
            throw error
        }
    }

    /// Whether the statement may be a pure read, from its first keyword (SQLite confirms before it runs there).
    static func mayRead(_ sql: String) -> Bool {
        var keyword = Substring(sql).drop(while: { $0.isWhitespace || $0 == "(" })
        keyword = keyword.prefix(while: { $0.isLetter })
        switch keyword.uppercased() {
        case "SELECT", "WITH", "VALUES", "EXPLAIN": return true
        default: return false
        }
    }

    /// Runs a statement on `db` and hands each row, copied, to `onRow`.
    static func step(
        sql: String, values: [DatabaseValue], on db: Connection, decoder: SQLCipherDataDecoder,
        _ onRow: @Sendable (any SQLRow) -> Void
    ) throws {
        let statement = try db.cachedStatement(sql)
        let cursor = try statement.cursor(arguments: StatementArguments(values))
        guard statement.columnCount > 0 else {
            while try cursor.next() != nil {}
            return
        }
        let columns = statement.columnNames
        while let row = try cursor.next() {
            onRow(SQLCipherRow(columns: columns, values: try row.databaseValues, decoder: decoder))
        }
    }

    // MARK: - Transactions

    /// Runs `body` in one immediate transaction on the writer: commits when it returns, rolls back when it throws.
    ///
    /// Every statement run through the database `body` receives goes to the writer, inside the transaction (reads
    /// see its uncommitted writes). Inside a transaction, `transaction(_:)` runs `body` in the same transaction.
    ///
    /// - Warning: Inside `body`, write only through the database it receives: a write through the pool or through
    ///   another `SQLCipherSQLDatabase` waits for the writer, which this transaction holds until `body` returns.
    public func transaction<T: Sendable>(
        _ body: @escaping @Sendable (SQLCipherSQLDatabase) async throws -> T
    ) async throws -> T {
        if session != nil { return try await body(self) }
        let session = WriterSession()
        let pool = self.pool
        let writer = Task {
            do {
                try await pool.write { db in try session.serve(db) }
            } catch {
                session.fail(error)
                throw error
            }
        }
        let result: T
        do {
            result = try await body(withSession(session))
        } catch {
            session.finish(commit: false)
            _ = await writer.result
            throw error
        }
        session.finish(commit: true)
        try await writer.value
        return result
    }

    /// Runs `body` in a transaction (SQLKit's session API): see ``transaction(_:)``.
    public func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }
}
#endif
