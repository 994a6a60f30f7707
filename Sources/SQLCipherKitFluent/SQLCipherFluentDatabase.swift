#if Fluent  // trait Fluent (Package.swift)
import FluentKit
import FluentSQL
import Logging
import NIOCore
import SQLCipherKit
import SQLCipherKitSQLKit
import SQLKit

/// A Fluent `Database` (and SQLKit `SQLDatabase`) over ``SQLCipherSQLDatabase``.
struct SQLCipherFluentDatabase: Database, SQLDatabase {
    let sql: SQLCipherSQLDatabase
    let context: DatabaseContext

    var inTransaction: Bool { sql.isInsideTransaction }

    private var capabilities: SQLCipherDialect.Capabilities { SQLCipherDialect.Capabilities.linked }

    // MARK: - Fluent queries

    func execute(query: DatabaseQuery, onOutput: @escaping @Sendable (any DatabaseOutput) -> Void)
        -> EventLoopFuture<Void>
    {
        eventLoop.makeFutureWithTask { try await self.run(query: query, onOutput: onOutput) }
    }

    private func run(query: DatabaseQuery, onOutput: @escaping @Sendable (any DatabaseOutput) -> Void) async throws {
        var expression = SQLQueryConverter(delegate: SQLCipherConverterDelegate()).convert(query)
        // A create reports the new row's ID (Fluent reads it for database-generated IDs).
        let idColumn: String? = if case .create = query.action, query.customIDKey != .some(.string("")) {
            (query.customIDKey ?? .id).description
        } else {
            nil
        }
        // Fluent reads rows on the database's event loop (it asserts so): collect them, then hand them over there.
        let rows = RowCollector()
        let onRow: @Sendable (any SQLRow) -> Void = { row in rows.append(row) }
        if let idColumn {
            if capabilities.supports(.returning) {
                expression = SQLKit.SQLList([expression, SQLReturning(SQLColumn(idColumn))], separator: SQLRaw(" "))
                try await sql.execute(sql: expression, onRow)
            } else {
                // No RETURNING before SQLite 3.35: the rowid of the insert, read on the same connection after it.
                try await sql.execute(sql: expression, reportingLastInsertRowIDAs: idColumn, onRow)
            }
        } else {
            try await sql.execute(sql: expression, onRow)
        }
        let collected = rows.take()
        guard !collected.isEmpty else { return }
        try await eventLoop.submit {
            for row in collected { onOutput(SQLRowOutput(row: row, schema: nil)) }
        }.get()
    }

    func execute(schema: DatabaseSchema) -> EventLoopFuture<Void> {
        var schema = schema
        if schema.action == .update {
            // SQLite has no enums (they are TEXT), and ALTER TABLE can only add, rename and drop columns.
            schema.updateFields = schema.updateFields.filter {
                if case .dataType(_, .enum) = $0 { return false }
                return true
            }
            guard schema.createConstraints.isEmpty, schema.updateFields.isEmpty, schema.deleteConstraints.isEmpty
            else {
                return eventLoop.makeFailedFuture(DatabaseError(
                    .unsupportedByEngine,
                    "SQLite's ALTER TABLE can only add, rename and drop columns, not change constraints or"
                        + " column types; make a new table and copy the rows"))
            }
            if !schema.deleteFields.isEmpty, let reason = capabilities.missingReason(.dropColumn) {
                return eventLoop.makeFailedFuture(DatabaseError(
                    .unsupportedByEngine, reason))
            }
            if schema.createFields.isEmpty, schema.deleteFields.isEmpty {
                return eventLoop.makeSucceededVoidFuture()
            }
        }
        let expression = SQLSchemaConverter(delegate: SQLCipherConverterDelegate()).convert(schema)
        return sql.execute(sql: expression) { _ in }
    }

    func execute(enum: DatabaseEnum) -> EventLoopFuture<Void> {
        // Enums are TEXT columns in SQLite: nothing to create.
        eventLoop.makeSucceededVoidFuture()
    }

    // MARK: - Transactions and connections

    func transaction<T>(_ closure: @escaping @Sendable (any Database) -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        if inTransaction { return closure(self) }
        let sql = self.sql
        let context = self.context
        return eventLoop.makeFutureWithTask {
            try await sql.transaction { transactionSQL in
                let database = SQLCipherFluentDatabase(sql: transactionSQL, context: context)
                return try await closure(database).map { UncheckedResult(value: $0) }.get()
            }
        }.map { $0.value }
    }

    func withConnection<T>(_ closure: @escaping @Sendable (any Database) -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        // The pool hands out a connection per statement; there is no connection to pin outside a transaction.
        closure(self)
    }

    // MARK: - SQLDatabase

    var logger: Logger { context.logger }
    var eventLoop: any EventLoop { context.eventLoop }
    var version: (any SQLDatabaseReportedVersion)? { sql.version }
    var dialect: any SQLDialect { sql.dialect }
    var queryLogLevel: Logger.Level? { sql.queryLogLevel }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void)
        -> EventLoopFuture<Void>
    {
        sql.execute(sql: query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        try await sql.execute(sql: query, onRow)
    }

    func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await closure(self)
    }
}

/// Carries a transaction's result out of a `Sendable` context: Fluent's future-based transaction API does not
/// require `T: Sendable`; the value is handed over once, after the closure finished.
private struct UncheckedResult<T>: @unchecked Sendable {
    let value: T
}

/// Rows gathered on the pool's queue, handed to Fluent on its event loop.
private final class RowCollector: Sendable {
    private let rows = Locked<[any SQLRow]>([])
    func append(_ row: any SQLRow) { rows.withLock { $0.append(row) } }
    func take() -> [any SQLRow] { rows.withLock { $0 } }
}

/// Column types for Fluent's data types, as fluent-sqlite-driver names them.
struct SQLCipherConverterDelegate: SQLConverterDelegate {
    func customDataType(_ dataType: DatabaseSchema.DataType) -> (any SQLExpression)? {
        switch dataType {
        case .string: SQLRaw("TEXT")
        case .datetime: SQLRaw("REAL")
        case .int64: SQLRaw("INTEGER")
        case .enum: SQLRaw("TEXT")
        default: nil
        }
    }
}

/// A row as Fluent reads it: fields by key, with the schema prefix joins use (`planets_name`).
struct SQLRowOutput: DatabaseOutput {
    let row: any SQLRow
    let schema: String?

    var description: String { String(describing: row) }

    private func column(_ key: FieldKey) -> String {
        (schema.map { FieldKey.prefix(.prefix(.string($0), "_"), key) } ?? key).description
    }

    func schema(_ schema: String) -> any DatabaseOutput { SQLRowOutput(row: row, schema: schema) }

    func contains(_ key: FieldKey) -> Bool { row.contains(column: column(key)) }

    func decodeNil(_ key: FieldKey) throws -> Bool { try row.decodeNil(column: column(key)) }

    func decode<T: Decodable>(_ key: FieldKey, as type: T.Type) throws -> T {
        try row.decode(column: column(key), as: T.self)
    }
}

extension SQLCipherKit.DatabaseError: FluentKit.DatabaseError {
    /// A syntax or schema error (SQLite's generic `SQLITE_ERROR`, or a statement the library refused).
    public var isSyntaxError: Bool {
        kind == .invalidSQL || (kind == .sqlite && resultCode == SQLCipherKit.DatabaseError.SQLITE_ERROR)
    }

    /// A constraint failed (`SQLITE_CONSTRAINT` and its extended codes).
    public var isConstraintFailure: Bool {
        resultCode == SQLCipherKit.DatabaseError.SQLITE_CONSTRAINT
    }

    /// The connection or pool was closed, or could not be opened.
    public var isConnectionClosed: Bool {
        kind == .connectionClosed || resultCode == SQLCipherKit.DatabaseError.SQLITE_CANTOPEN
    }
}
#endif
