#if Examples  // trait Examples (Package.swift); otherwise Fallback.swift
import Fluent
import SQLCipherKit
import SQLCipherKitFluent
import SQLCipherKitServices
import Vapor

/// A small Vapor + Fluent app on an encrypted file: the configuration differs from a fluent-sqlite-driver app by
/// one line (see `configure`). Docs/Services.md walks through it.
///
/// Environment: NOTES_DATABASE (default notes.db), NOTES_KEY_FILE (default notes.key); NOTES_LIVE_ROTATION=1 opens
/// the file through a `DatabaseService` instead (live key rotation through `<key file>.next`, a health check);
/// NOTES_LIVE_ROTATION=bare through a `LiveKeyRotation` alone (live key rotation, no swift-service-lifecycle).
/// Run: sqlcipherkit-vapor-example serve --hostname 127.0.0.1 --port 8080
///   POST /authors  {"name": …}                 → the author
///   POST /notes    {"body": …, "author": {"id": …}} → the note
///   GET  /notes?page=1&per=10                  → a page of notes with their authors (eager loaded)
///   GET  /health                               → 200 when the key file opens the database (NOTES_LIVE_ROTATION=1)
@main
enum VaporExample {
    static func main() async throws {
        var environment = try Environment.detect()
        try LoggingSystem.bootstrap(from: &environment)
        let app = try await Application.make(environment)
        var closeDatabase: (@Sendable () async -> Void)?
        do {
            closeDatabase = try await configure(app)
            try await app.execute()
        } catch {
            app.logger.report(error: error)
            try? await shutDown(app, closeDatabase)
            throw error
        }
        try await shutDown(app, closeDatabase)
    }

    /// Stops in the order requests need: the server first (it finishes the requests in flight), then the
    /// databases. `Application.asyncShutdown()` alone shuts Fluent down before it stops the server, so a request
    /// still running would find no database.
    static func shutDown(_ app: Application, _ closeDatabase: (@Sendable () async -> Void)?) async throws {
        await app.server.shutdown()
        try await app.asyncShutdown()
        await closeDatabase?()
    }

    /// Configures the app; returns what closes the database after Fluent, when the app opened it itself.
    static func configure(_ app: Application) async throws -> (@Sendable () async -> Void)? {
        let path = Environment.get("NOTES_DATABASE") ?? "notes.db"
        let keyFile = Environment.get("NOTES_KEY_FILE") ?? "notes.key"
        var closeDatabase: (@Sendable () async -> Void)?
        switch Environment.get("NOTES_LIVE_ROTATION") {
        case "1":
            // A DatabaseService rotates the key live and answers health checks; Fluent runs over its pool, which
            // must enforce foreign keys as `.sqlcipher(file:)` does.
            var configuration = DatabaseService.Configuration(metricsName: "notes", logger: app.logger)
            configuration.pool.openOptions.enforcesForeignKeys = true
            let database = try DatabaseService(path: path, keyFile: keyFile, configuration: configuration)
            app.databases.use(.sqlcipher(pool: database.pool), as: .sqlcipher)
            let service = Task { try await database.run() }
            app.get("health") { _ async throws -> String in try await database.checkHealth().description }
            closeDatabase = {
                // A DatabaseService closes its pool, after the work in flight, when its run() ends.
                service.cancel()
                _ = try? await service.value
            }
        case "bare":
            // Live rotation alone, with Vapor's lifecycle: BareLiveRotation.swift imports SQLCipherKitLiveRotation,
            // not SQLCipherKitServices.
            closeDatabase = try useLiveKeyRotation(app, path: path, keyFile: keyFile)
        default:
            // Before (plaintext): app.databases.use(.sqlite(.file(path)), as: .sqlite)
            app.databases.use(.sqlcipher(file: path, keyProvider: .file(keyFile)), as: .sqlcipher)
        }

        app.migrations.add(CreateAuthor(), CreateNote())
        try await app.autoMigrate()

        app.post("authors") { request async throws -> Author in
            let author = try request.content.decode(Author.self)
            try await author.create(on: request.db)
            return author
        }
        app.post("notes") { request async throws -> Note in
            let note = try request.content.decode(Note.self)
            // A transaction: the author must exist when the note is written.
            try await request.db.transaction { db in
                guard try await Author.find(note.$author.id, on: db) != nil else { throw Abort(.badRequest) }
                try await note.create(on: db)
            }
            return note
        }
        app.post("orphans") { request async throws -> Note in
            // No check of the author: the foreign key alone must refuse a note whose author does not exist.
            let note = try request.content.decode(Note.self)
            try await note.create(on: request.db)
            return note
        }
        app.get("notes") { request async throws -> Page<Note> in
            try await Note.query(on: request.db).with(\.$author).sort(\.$id).paginate(for: request)
        }
        return closeDatabase
    }
}

final class Author: Model, Content, @unchecked Sendable {
    static let schema = "authors"
    @ID(key: .id) var id: UUID?
    @Field(key: "name") var name: String
    @Children(for: \.$author) var notes: [Note]

    init() {}
}

final class Note: Model, Content, @unchecked Sendable {
    static let schema = "notes"
    @ID(custom: .id, generatedBy: .database) var id: Int?
    @Field(key: "body") var body: String
    @Parent(key: "author_id") var author: Author

    init() {}
}

struct CreateAuthor: AsyncMigration {
    func prepare(on database: any Database) async throws {
        try await database.schema(Author.schema).id().field("name", .string, .required).create()
    }

    func revert(on database: any Database) async throws {
        try await database.schema(Author.schema).delete()
    }
}

struct CreateNote: AsyncMigration {
    func prepare(on database: any Database) async throws {
        try await database.schema(Note.schema)
            .field(.id, .int, .identifier(auto: true))
            .field("body", .string, .required)
            .field("author_id", .uuid, .required, .references(Author.schema, .id))
            .create()
    }

    func revert(on database: any Database) async throws {
        try await database.schema(Note.schema).delete()
    }
}
#endif
