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
/// Usage: sqlcipherkit-hummingbird-example DATABASE KEY-FILE [PORT]
///   POST /notes        body = the note's text → the new note's id
///   GET  /notes/count  → the number of notes
///   GET  /notes/{id}   → the note's text
///   GET  /health       → 200 when the key in KEY-FILE still opens DATABASE
/// Rotate the key while it runs: write the new key to KEY-FILE.next (mode 0600).
@main
struct HummingbirdExample {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3 else {
            print("usage: sqlcipherkit-hummingbird-example DATABASE KEY-FILE [PORT]")
            exit(64)
        }
        let port = arguments.count > 3 ? Int(arguments[3]) ?? 8080 : 8080
        var logger = Logger(label: "notes")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .info

        let database = try DatabaseService(
            path: arguments[1], keyFile: arguments[2],
            configuration: DatabaseService.Configuration(metricsName: "notes", logger: logger))
        let sql = SQLCipherSQLDatabase(
            pool: database.pool, logger: logger, metrics: SQLCipherSQLMetrics(database: "notes"))
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
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [database, app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    static func router(sql: SQLCipherSQLDatabase, database: DatabaseService) -> Router<BasicRequestContext> {
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
