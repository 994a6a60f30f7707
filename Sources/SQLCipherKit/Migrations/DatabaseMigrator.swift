/// Brings a database schema up to date with named, ordered migrations, each applied once.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// try migrator.register("v1-create-note") { db in
///     try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
/// }
/// try migrator.register("v2-note-created-at") { db in
///     try db.execute("ALTER TABLE note ADD COLUMN created_at TEXT")
/// }
/// try migrator.migrate(pool)          // or a Connection, or a DatabaseQueue
/// ```
///
/// - Each migration runs in its own immediate transaction, together with the insertion of its record in the
///   `sqlcipherkit_migrations(identifier, applied_at)` table: after a crash, a power loss or a failure, a migration is
///   either applied with its record or not at all. A failing migration rolls back alone; the ones before it stay
///   applied, and the error names it.
/// - Migrations run in the order they were registered. Identifiers are never reused: once shipped, a migration is
///   not edited, a new one is registered instead.
/// - A database that records a migration this migrator does not know (it was migrated by a newer version of the
///   application) is refused before anything runs.
/// - Concurrent migrators (two processes starting at once) are safe: each migration's transaction checks again
///   that no one applied it meanwhile.
///
/// A migration receives the connection and must not end the transaction it runs in (`COMMIT`, `ROLLBACK`,
/// ``Connection/transaction(_:_:)``); savepoints are fine. PRAGMAs that are no-ops inside a transaction
/// (`foreign_keys`, `journal_mode`) belong outside the migrator.
public struct DatabaseMigrator: Sendable {
    /// The name of the table that records applied migrations.
    public static let tableName = "sqlcipherkit_migrations"

    private struct Migration: Sendable {
        let identifier: String
        let migrate: @Sendable (Connection) throws -> Void
    }

    private var migrations: [Migration] = []

    /// Creates a migrator without migrations.
    public init() {}

    /// The identifiers of the registered migrations, in the order they run.
    public var registeredMigrations: [String] {
        migrations.map(\.identifier)
    }

    /// Registers a migration; migrations run in the order they are registered.
    ///
    /// - Parameters:
    ///   - identifier: A unique, stable name, recorded in the database once the migration is applied.
    ///   - migrate: The schema or data change. It runs inside a transaction and must not end it.
    /// - Throws: ``DatabaseError/invalidArgument`` when the identifier is empty or already registered.
    public mutating func register(
        _ identifier: String, migrate: @escaping @Sendable (Connection) throws -> Void
    ) throws {
        guard !identifier.isEmpty else {
            throw DatabaseError(
                .invalidArgument,
                "a migration identifier must not be empty")
        }
        guard !migrations.contains(where: { $0.identifier == identifier }) else {
            throw DatabaseError(
                .invalidArgument,
                "the migration `\(identifier)` is registered twice; identifiers must be unique")
        }
        migrations.append(Migration(identifier: identifier, migrate: migrate))
    }

    // MARK: - Migrating

    /// Applies every registered migration the database has not applied yet, in order.
    ///
    /// - Parameter db: A connection outside any transaction.
    /// - Throws: ``DatabaseError/invalidState`` when the connection is inside a transaction, or when the database
    ///   records migrations this migrator does not know (nothing is run then); the failing migration's error,
    ///   its message prefixed with the migration's identifier (a ``DatabaseError`` keeps its kind and code; any
    ///   other error becomes ``DatabaseError/migrationFailed``). Migrations before the failing one stay applied.
    public func migrate(_ db: Connection) throws {
        try migrate(db, upTo: nil)
    }

    /// Applies the registered migrations up to and including `lastIdentifier`, in order.
    ///
    /// - Parameters:
    ///   - db: A connection outside any transaction.
    ///   - lastIdentifier: The last migration to apply.
    /// - Throws: ``DatabaseError/invalidArgument`` when `lastIdentifier` is not registered; see ``migrate(_:)-(Connection)``.
    public func migrate(_ db: Connection, upTo lastIdentifier: String) throws {
        try migrate(db, upTo: Optional(lastIdentifier))
    }

    /// Applies every pending migration on the writer connection of a ``DatabaseQueue`` or ``DatabasePool``,
    /// outside its transactions (a pool's readers go on reading meanwhile and see each migration once it commits).
    ///
    /// - Parameter writer: The database queue or pool.
    /// - Throws: See ``migrate(_:)-(Connection)``.
    public func migrate(_ writer: some DatabaseWriter) throws {
        try writer.writeWithoutTransaction { db in try migrate(db) }
    }

    private func migrate(_ db: Connection, upTo lastIdentifier: String?) throws {
        var pending = migrations
        if let lastIdentifier {
            guard let last = migrations.firstIndex(where: { $0.identifier == lastIdentifier }) else {
                throw DatabaseError(
                    .invalidArgument,
                    "no migration named `\(lastIdentifier)` is registered")
            }
            pending = Array(migrations[...last])
        }
        guard !db.isInsideTransaction else {
            throw DatabaseError(
                .invalidState,
                "migrations run each in their own transaction; call migrate outside any transaction")
        }
        let applied = Set(try appliedMigrations(in: db))
        try refuseUnknown(applied)
        for migration in pending where !applied.contains(migration.identifier) {
            try apply(migration, to: db)
        }
    }

    private func apply(_ migration: Migration, to db: Connection) throws {
        do {
            try db.transaction(.immediate) {
                try db.execute(
                    "CREATE TABLE IF NOT EXISTS \(Self.quotedTableName)"
                        + "(identifier TEXT NOT NULL PRIMARY KEY, applied_at TEXT NOT NULL)")
                // Another connection may have applied it since the check in migrate().
                let isApplied = try db.scalar(
                    "SELECT count(*) FROM \(Self.quotedTableName) WHERE identifier = ?", migration.identifier,
                    as: Int.self) ?? 0 > 0
                if isApplied { return }
                try migration.migrate(db)
                try db.execute(
                    "INSERT INTO \(Self.quotedTableName)(identifier, applied_at)"
                        + " VALUES (?, strftime('%Y-%m-%d %H:%M:%f', 'now'))",
                    migration.identifier)
            }
        } catch let error as DatabaseError {
            throw DatabaseError(
                kind: error.kind, code: error.extendedResultCode,
                message: "migration `\(migration.identifier)` failed and was rolled back: \(error.message)",
                sql: error.sql)
        } catch {
            throw DatabaseError(
                .migrationFailed,
                "migration `\(migration.identifier)` failed and was rolled back: \(error)")
        }
    }

    private func refuseUnknown(_ applied: Set<String>) throws {
        let known = Set(registeredMigrations)
        let unknown = applied.subtracting(known).sorted()
        guard unknown.isEmpty else {
            throw DatabaseError(
                .invalidState,
                "the database has applied migration(s) this version does not know: "
                    + unknown.map { "`\($0)`" }.joined(separator: ", ")
                    + " (it was migrated by a newer version of the application); nothing was run")
        }
    }

    // MARK: - Reading the state

    /// The identifiers of the migrations the database records as applied, in the order they were applied
    /// (including any this migrator does not know). Reads only; creates nothing.
    ///
    /// - Parameter db: A connection.
    /// - Returns: The applied identifiers; empty for a database never migrated.
    /// - Throws: A SQLite error.
    public func appliedMigrations(in db: Connection) throws -> [String] {
        let tableCount = try db.scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", Self.tableName,
            as: Int.self) ?? 0
        guard tableCount > 0 else { return [] }
        return try db.all("SELECT identifier FROM \(Self.quotedTableName) ORDER BY rowid", as: String.self)
    }

    /// The applied migrations, read in a read transaction of a ``DatabaseQueue`` or ``DatabasePool``.
    ///
    /// - Parameter writer: The database queue or pool.
    /// - Returns: See ``appliedMigrations(in:)-(Connection)``.
    /// - Throws: A SQLite error.
    public func appliedMigrations(in writer: some DatabaseWriter) throws -> [String] {
        try writer.read { db in try appliedMigrations(in: db) }
    }

    /// `true` when every registered migration is applied.
    ///
    /// - Parameter db: A connection.
    /// - Returns: Whether ``migrate(_:)-(Connection)`` has nothing left to do.
    /// - Throws: A SQLite error.
    public func hasCompletedMigrations(in db: Connection) throws -> Bool {
        Set(try appliedMigrations(in: db)).isSuperset(of: registeredMigrations)
    }

    /// `true` when every registered migration is applied, read in a read transaction of a ``DatabaseQueue`` or
    /// ``DatabasePool``.
    ///
    /// - Parameter writer: The database queue or pool.
    /// - Returns: See ``hasCompletedMigrations(in:)-(Connection)``.
    /// - Throws: A SQLite error.
    public func hasCompletedMigrations(in writer: some DatabaseWriter) throws -> Bool {
        try writer.read { db in try hasCompletedMigrations(in: db) }
    }

    private static var quotedTableName: String { Connection.quoteIdentifier(tableName) }
}
