import Fluent
import SQLCipherKit
import SQLCipherKitFluent
import Vapor

/// A small Vapor + Fluent app on an encrypted file: the configuration differs from a fluent-sqlite-driver app by
/// one line (see `configure`). Docs/Services.md walks through it.
///
/// Environment: NOTES_DATABASE (default notes.db), NOTES_KEY_FILE (default notes.key).
/// Run: sqlcipherkit-vapor-example serve --hostname 127.0.0.1 --port 8080
///   POST /authors  {"name": …}                 → the author
///   POST /notes    {"body": …, "author": {"id": …}} → the note
///   GET  /notes?page=1&per=10                  → a page of notes with their authors (eager loaded)
@main
enum VaporExample {
    static func main() async throws {
        var environment = try Environment.detect()
        try LoggingSystem.bootstrap(from: &environment)
        let app = try await Application.make(environment)
        do {
            try await configure(app)
            try await app.execute()
        } catch {
            app.logger.report(error: error)
            try? await app.asyncShutdown()
            throw error
        }
        try await app.asyncShutdown()
    }

    static func configure(_ app: Application) async throws {
        let path = Environment.get("NOTES_DATABASE") ?? "notes.db"
        let keyFile = Environment.get("NOTES_KEY_FILE") ?? "notes.key"
        // Before (plaintext): app.databases.use(.sqlite(.file(path)), as: .sqlite)
        app.databases.use(.sqlcipher(file: path, keyProvider: .file(keyFile)), as: .sqlcipher)

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
        app.get("notes") { request async throws -> Page<Note> in
            try await Note.query(on: request.db).with(\.$author).sort(\.$id).paginate(for: request)
        }
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
