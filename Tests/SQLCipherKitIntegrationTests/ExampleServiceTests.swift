import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SQLCipherKit
import Testing

/// The example services, run as real processes on 127.0.0.1 and driven over HTTP.
@Suite("Example services")
struct ExampleServiceTests {
    static let keyText = "x'" + String(repeating: "77aa88bb", count: 8) + "'"

    @Test("the Vapor/Fluent example migrates, creates, eager-loads and paginates on an encrypted file")
    func vaporExample() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try writeKeyFile(Self.keyText, to: directory.path("notes.key"))
        let port = try freeLocalPort()
        let service = try ServiceProcess(
            "sqlcipherkit-vapor-example", arguments: ["serve", "--hostname", "127.0.0.1", "--port", "\(port)"],
            environment: [
                "NOTES_DATABASE": directory.path("notes.db"), "NOTES_KEY_FILE": directory.path("notes.key"),
                "LOG_LEVEL": "notice",
            ],
            in: directory)
        _ = try await service.waitForOutput("Server start")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let base = "http://127.0.0.1:\(port)"

        let author = try await http(client, .POST, "\(base)/authors", body: #"{"name":"Ada"}"#, json: true)
        #expect(author.status == 200, "\(author.body)")
        let authorID = try #require(try jsonObject(author.body)["id"] as? String)
        for index in 0..<15 {
            let note = try await http(
                client, .POST, "\(base)/notes", body: #"{"body":"secret note \#(index)","author":{"id":"\#(authorID)"}}"#,
                json: true)
            #expect(note.status == 200, "\(note.body)")
        }
        let missingAuthor = try await http(
            client, .POST, "\(base)/notes", body: #"{"body":"x","author":{"id":"\#(UUID())"}}"#, json: true)
        #expect(missingAuthor.status == 400)

        let page = try await http(client, .GET, "\(base)/notes?page=2&per=10")
        #expect(page.status == 200)
        let json = try jsonObject(page.body)
        let items = json["items"] as? [[String: Any]] ?? []
        #expect(items.count == 5)
        let firstAuthor = items.first?["author"] as? [String: Any]
        let authorName = firstAuthor?["name"] as? String
        #expect(authorName == "Ada")
        let metadata = json["metadata"] as? [String: Any]
        let total = metadata?["total"] as? Int
        #expect(total == 15)
        try await client.shutdown()
        #expect(try await service.terminate() == 0)

        // Encrypted on disk: neither the SQLite header nor a note's text.
        let bytes = try fileBytes(directory.path("notes.db"))
        #expect(!contains(bytes, "SQLite format 3") && !contains(bytes, "secret note"))
        let key = try EncryptionKey(sqlcipherRawKeyText: Self.keyText)
        let db = try Connection(path: directory.path("notes.db"), encryption: .key(key))
        defer { db.close() }
        #expect(try db.scalar("SELECT count(*) FROM notes", as: Int.self) == 15)
    }
}
