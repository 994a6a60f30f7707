#if Examples  // trait Examples (Package.swift); otherwise Fallback.swift
import Foundation
import Hummingbird
import Logging
import SQLCipherKit
import SQLCipherKitServices
import SQLCipherKitSQLKit
import SQLKit
import ServiceLifecycle

/// A small notes service on an encrypted file: Hummingbird + SQLKit over a ``DatabaseService`` (graceful shutdown,
/// health check, live key rotation). See Docs/Services.md.
///
/// Usage: sqlcipherkit-hummingbird-example [--cache-size N] [--cipher-page-size N] DATABASE KEY-FILE [PORT]
///        sqlcipherkit-hummingbird-example --plaintext [--cache-size N] DATABASE [PORT]
///   POST /notes        body = the note's text → the new note's id
///   GET  /notes/count  → the number of notes
///   GET  /notes/{id}   → the note's text
///   GET  /health       → 200 when the key in KEY-FILE still opens DATABASE
/// Rotate the key while it runs: write the new key to KEY-FILE.next (mode 0600).
///
/// For measuring what encryption costs (`.ci/bench-service`, Docs/Performance.md "Speed II"): `--plaintext` serves
/// the same routes from a **plaintext** file through `DatabasePool.unencrypted` (no key file, no rotation, `/health`
/// says so), and `--cache-size N` sets `PRAGMA cache_size = N` on every connection of the pool (N > 0: pages; N < 0:
/// KiB), so fewer pages are read, decrypted and checked again. `--cipher-page-size N` creates (and opens) the
/// encrypted file with `CipherSettings(pageSize: N)`: SQLCipher 3.4.1 makes 1 KiB pages by default, SQLCipher 4
/// 4 KiB, and much of a page's decryption cost is per page, not per byte.
@main
struct HummingbirdExample {
    static let usage = "usage: sqlcipherkit-hummingbird-example [--cache-size N] [--cipher-page-size N]"
        + " DATABASE KEY-FILE [PORT]\n"
        + "       sqlcipherkit-hummingbird-example --plaintext [--cache-size N] DATABASE [PORT]"

    static func main() async throws {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var isPlaintext = false
        var cacheSize: Int?
        var cipherPageSize: Int?
        while let option = arguments.first, option.hasPrefix("--") {
            arguments.removeFirst()
            switch option {
            case "--plaintext":
                isPlaintext = true
            case "--cache-size":
                guard let text = arguments.first, let value = Int(text), value != 0 else {
                    refuse("--cache-size needs a non-zero number (pages, or KiB when negative)")
                }
                arguments.removeFirst()
                cacheSize = value
            case "--cipher-page-size":
                guard let text = arguments.first, let value = Int(text), value >= 512, value <= 65536,
                    value & (value - 1) == 0
                else {
                    refuse("--cipher-page-size needs a power of two from 512 to 65536")
                }
                arguments.removeFirst()
                cipherPageSize = value
            default:
                refuse("unknown option \(option)")
            }
        }
        let positionalCount = isPlaintext ? 1 : 2
        guard arguments.count >= positionalCount, arguments.count <= positionalCount + 1 else { refuse(nil) }
        // An option after the file names would otherwise be taken for a port and dropped: options come first.
        if let misplaced = arguments.first(where: { $0.hasPrefix("--") }) {
            refuse("\(misplaced): options come before DATABASE")
        }
        let port: Int
        if arguments.count > positionalCount {
            guard let value = Int(arguments[positionalCount]), (0...65535).contains(value) else {
                refuse("PORT must be a number from 0 to 65535 (0: any free port)")
            }
            port = value
        } else {
            port = 8080
        }
        var logger = Logger(label: "notes")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .info

        var poolConfiguration = DatabasePool.Configuration()
        if let cipherPageSize {
            guard !isPlaintext else { refuse("--cipher-page-size is for an encrypted file") }
            poolConfiguration.settings = CipherSettings(pageSize: cipherPageSize)
        }
        if let cacheSize {
            poolConfiguration.openOptions.prepareConnection = { db in
                try db.execute("PRAGMA cache_size = \(cacheSize)")
            }
        }
        let database: DatabaseService?
        let pool: DatabasePool
        if isPlaintext {
            database = nil
            pool = try DatabasePool.unencrypted(path: arguments[0], configuration: poolConfiguration)
        } else {
            let service = try DatabaseService(
                path: arguments[0], keyFile: arguments[1],
                configuration: DatabaseService.Configuration(
                    pool: poolConfiguration, metricsName: "notes", logger: logger))
            database = service
            pool = service.pool
        }
        let sql = SQLCipherSQLDatabase(pool: pool, logger: logger, metrics: SQLCipherSQLMetrics(database: "notes"))
        try await sql.create(table: "note").ifNotExists()
            .column("id", type: .int, .primaryKey(autoIncrement: false))
            .column("body", type: .text, .notNull)
            .run()

        let app = Application(
            router: router(sql: sql, database: database),
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in
                print("listening on 127.0.0.1:\(channel.localAddress?.port ?? port)")
                fflush(nil)
            },
            logger: logger)
        // The database first: the group stops services in reverse order, so the server finishes its requests
        // before the pool closes.
        let services: [any Service] = database.map { [$0, app] } ?? [app]
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        if database == nil { pool.close() }
    }

    /// Prints `message` and the usage to standard error, and exits with 64 (a usage error).
    static func refuse(_ message: String?) -> Never {
        FileHandle.standardError.write(Data(((message.map { $0 + "\n" } ?? "") + usage + "\n").utf8))
        exit(64)
    }

    static func router(sql: SQLCipherSQLDatabase, database: DatabaseService?) -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/notes") { request, _ -> String in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 16))
            let id = try await sql.transaction { sql in
                try await sql.insert(into: "note").columns("body").values(SQLBind(body)).run()
                return try await sql.raw("SELECT last_insert_rowid() AS id").first(decodingColumn: "id", as: Int.self)
            }
            return "\(id ?? 0)"
        }
        router.get("/notes/count") { _, _ -> String in
            let count = try await sql.select().column(SQLFunction("count", args: SQLLiteral.all), as: "n")
                .from("note").first(decodingColumn: "n", as: Int.self)
            return "\(count ?? 0)"
        }
        router.get("/notes/{id}") { _, context -> String in
            let id = try context.parameters.require("id", as: Int.self)
            guard let body = try await sql.select().column("body").from("note").where("id", .equal, id)
                .first(decodingColumn: "body", as: String.self)
            else { throw HTTPError(.notFound) }
            return body
        }
        router.get("/health") { _, _ -> String in
            guard let database else { return "plaintext: no key to check" }
            do {
                return try await database.checkHealth().description
            } catch {
                throw HTTPError(.serviceUnavailable, message: "the database key check failed")
            }
        }
        return router
    }
}
#endif
