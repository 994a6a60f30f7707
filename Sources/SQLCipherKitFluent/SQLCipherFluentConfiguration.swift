#if Fluent  // trait Fluent (Package.swift)
import Dispatch
import FluentKit
import Logging
import NIOCore
import SQLCipherKit
import SQLCipherKitSQLKit

extension DatabaseConfigurationFactory {
    /// An encrypted SQLCipher file through Fluent: the one-line replacement for `.sqlite(.file("app.db"))`.
    ///
    /// ```swift
    /// // before: app.databases.use(.sqlite(.file("app.db")), as: .sqlite)
    /// app.databases.use(.sqlcipher(file: "app.db", keyProvider: .file("/run/secrets/app.key")), as: .sqlcipher)
    /// ```
    ///
    /// The file is opened (or created) as a ``DatabasePool`` in WAL mode when Fluent first makes the driver; reads
    /// run on reader connections in parallel, writes on the single writer, and Fluent transactions keep the writer
    /// in one `BEGIN IMMEDIATE … COMMIT`. Foreign keys are enforced, as with fluent-sqlite-driver. Values are
    /// stored in the same storage classes as fluent-sqlite-driver's, so a plaintext file encrypted with
    /// `sqlcipherkit encrypt` reads the same.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - keyProvider: Where the key comes from (asked each time a connection opens).
    ///   - configuration: Readers, cipher settings and open options for the pool.
    ///   - sqlLogLevel: The level each statement's SQL is logged at (never bound values); `nil` logs none.
    ///   - encoder: How bound values become SQLite values.
    ///   - decoder: How SQLite values are read back.
    ///   - metrics: Timings and failures (swift-metrics); `nil` records nothing.
    /// - Returns: A configuration for `Databases.use(_:as:)`.
    public static func sqlcipher(
        file path: String,
        keyProvider: KeyProvider,
        configuration: DatabasePool.Configuration = DatabasePool.Configuration(),
        sqlLogLevel: Logger.Level? = .debug,
        encoder: SQLCipherDataEncoder = SQLCipherDataEncoder(),
        decoder: SQLCipherDataDecoder = SQLCipherDataDecoder(),
        metrics: SQLCipherSQLMetrics? = nil
    ) -> Self {
        DatabaseConfigurationFactory {
            SQLCipherFluentConfiguration(
                source: .file(path, keyProvider, configuration), middleware: [], sqlLogLevel: sqlLogLevel,
                encoder: encoder, decoder: decoder, metrics: metrics)
        }
    }

    /// Fluent over a pool you opened and close yourself (for example a `DatabaseService`'s, rotated live).
    ///
    /// Fluent relies on foreign keys, and ``sqlcipher(file:keyProvider:configuration:sqlLogLevel:encoder:decoder:metrics:)``
    /// turns them on; so the pool must have been opened with ``OpenOptions/enforcesForeignKeys``
    /// (`configuration.openOptions.enforcesForeignKeys = true`). A pool without it is refused: every query fails
    /// with ``DatabaseError/invalidArgument`` saying so, rather than accepting rows that point nowhere.
    public static func sqlcipher(
        pool: DatabasePool,
        sqlLogLevel: Logger.Level? = .debug,
        encoder: SQLCipherDataEncoder = SQLCipherDataEncoder(),
        decoder: SQLCipherDataDecoder = SQLCipherDataDecoder(),
        metrics: SQLCipherSQLMetrics? = nil
    ) -> Self {
        DatabaseConfigurationFactory {
            SQLCipherFluentConfiguration(
                source: .pool(pool), middleware: [], sqlLogLevel: sqlLogLevel, encoder: encoder, decoder: decoder,
                metrics: metrics)
        }
    }
}

struct SQLCipherFluentConfiguration: DatabaseConfiguration {
    enum Source: Sendable {
        case file(String, KeyProvider, DatabasePool.Configuration)
        case pool(DatabasePool)
    }

    let source: Source
    var middleware: [any AnyModelMiddleware]
    let sqlLogLevel: Logger.Level?
    let encoder: SQLCipherDataEncoder
    let decoder: SQLCipherDataDecoder
    let metrics: SQLCipherSQLMetrics?

    func makeDriver(for databases: Databases) -> any DatabaseDriver {
        let pool: Result<DatabasePool, any Error>
        let ownsPool: Bool
        switch source {
        case .pool(let given):
            pool = given.enforcesForeignKeys ? .success(given) : .failure(DatabaseError(
                .invalidArgument,
                "the pool given to Fluent does not enforce foreign keys, which Fluent relies on: open it with"
                    + " configuration.openOptions.enforcesForeignKeys = true"))
            ownsPool = false
        case .file(let path, let keyProvider, var configuration):
            // Fluent relies on foreign keys; SQLite leaves them off unless asked on each connection.
            configuration.openOptions.enforcesForeignKeys = true
            pool = Result { try DatabasePool(path: path, keyProvider: keyProvider, configuration: configuration) }
            ownsPool = true
        }
        if case .failure(let error) = pool {
            Logger(label: "sqlcipherkit.fluent").error("the database could not be opened", metadata: [
                "error": "\(error)",
            ])
        }
        return SQLCipherFluentDriver(
            pool: pool, ownsPool: ownsPool, sqlLogLevel: sqlLogLevel, encoder: encoder, decoder: decoder,
            metrics: metrics)
    }
}

struct SQLCipherFluentDriver: DatabaseDriver {
    let pool: Result<DatabasePool, any Error>
    let ownsPool: Bool
    let sqlLogLevel: Logger.Level?
    let encoder: SQLCipherDataEncoder
    let decoder: SQLCipherDataDecoder
    let metrics: SQLCipherSQLMetrics?

    func makeDatabase(with context: DatabaseContext) -> any Database {
        switch pool {
        case .success(let pool):
            let sql = SQLCipherSQLDatabase(
                pool: pool, eventLoop: context.eventLoop, logger: context.logger, queryLogLevel: sqlLogLevel,
                encoder: encoder, decoder: decoder, metrics: metrics)
            return SQLCipherFluentDatabase(sql: sql, context: context)
        case .failure(let error):
            return UnopenedDatabase(context: context, error: error)
        }
    }

    func shutdown() {
        guard ownsPool, case .success(let pool) = pool else { return }
        pool.close()
    }

    func shutdownAsync() async {
        guard ownsPool, case .success(let pool) = pool else { return }
        // close() waits for the work in flight: wait on a dispatch thread, not a cooperative one.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                pool.close()
                continuation.resume()
            }
        }
    }
}

/// The database of a driver whose file could not be opened: every call fails with the open's error.
private struct UnopenedDatabase: Database {
    let context: DatabaseContext
    let error: any Error

    var inTransaction: Bool { false }

    func execute(query: DatabaseQuery, onOutput: @escaping @Sendable (any DatabaseOutput) -> Void)
        -> EventLoopFuture<Void>
    {
        eventLoop.makeFailedFuture(error)
    }

    func execute(schema: DatabaseSchema) -> EventLoopFuture<Void> { eventLoop.makeFailedFuture(error) }

    func execute(enum: DatabaseEnum) -> EventLoopFuture<Void> { eventLoop.makeFailedFuture(error) }

    func transaction<T>(_ closure: @escaping @Sendable (any Database) -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        eventLoop.makeFailedFuture(error)
    }

    func withConnection<T>(_ closure: @escaping @Sendable (any Database) -> EventLoopFuture<T>)
        -> EventLoopFuture<T>
    {
        eventLoop.makeFailedFuture(error)
    }
}

extension DatabaseID {
    /// The identifier for an SQLCipher database: `app.databases.use(.sqlcipher(…), as: .sqlcipher)`.
    public static var sqlcipher: DatabaseID { DatabaseID(string: "sqlcipher") }
}
#endif
