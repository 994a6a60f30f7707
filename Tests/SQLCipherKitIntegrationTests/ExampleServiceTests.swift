#if Examples  // trait Examples (Package.swift)
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SQLCipherKit
import SQLCipherKitTestSupport
import Synchronization
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

    @Test("Vapor with LiveKeyRotation alone, no swift-service-lifecycle: a key handed over is rotated in while it serves")
    func vaporLiveKeyRotationWithoutServiceLifecycle() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.path("notes.key")
        let databasePath = directory.path("notes.db")
        try writeKeyFile(Self.keyText, to: keyFile)
        let port = try freeLocalPort()
        let service = try ServiceProcess(
            "sqlcipherkit-vapor-example", arguments: ["serve", "--hostname", "127.0.0.1", "--port", "\(port)"],
            environment: [
                "NOTES_DATABASE": databasePath, "NOTES_KEY_FILE": keyFile, "LOG_LEVEL": "notice",
                "NOTES_LIVE_ROTATION": "bare",
            ],
            in: directory)
        _ = try await service.waitForOutput("Server start")
        let newKeyText = "x'" + String(repeating: "5e6f", count: 16) + "'"
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            // A failure in here shuts the client down before it is reported (a client dropped unshut crashes the run).
            let base = "http://127.0.0.1:\(port)"
            let author = try await http(client, .POST, "\(base)/authors", body: #"{"name":"Ada"}"#, json: true)
            let authorID = try #require(try jsonObject(author.body)["id"] as? String)
            func post(_ body: String) async throws -> Int {
                let json = #"{"body":"\#(body)","author":{"id":"\#(authorID)"}}"#
                return try await http(client, .POST, "\(base)/notes", body: json, json: true).status
            }
            #expect(try await post("secret note before") == 200)

            try writeKeyFile(newKeyText, to: keyFile + ".next")
            // The app's own log says when the watch it started in a plain Task rotated the key.
            _ = try await service.waitForOutput("rotated the database key live")
            #expect(try await post("secret note after") == 200, "the pool serves on the new key")
            let orphan = try await http(
                client, .POST, "\(base)/orphans", body: #"{"body":"orphan","author":{"id":"\#(UUID())"}}"#, json: true)
            #expect(orphan.status != 200, "the pool LiveKeyRotation opened enforces foreign keys: \(orphan.body)")
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        #expect(try await service.terminate() == 0, "output:\n\(service.output)")
        #expect(!service.output.contains("Fatal error"), "\(service.output)")

        #expect(String(decoding: try fileBytes(keyFile), as: UTF8.self) == newKeyText + "\n")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next"))
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".rotating"))
        let bytes = try fileBytes(databasePath)
        #expect(!contains(bytes, "SQLite format 3") && !contains(bytes, "secret note"))
        let oldKey = try EncryptionKey(sqlcipherRawKeyText: Self.keyText)
        #expect(throws: DatabaseError.self, "a fresh connection with the old key does not open the file") {
            let db = try Connection(path: databasePath, encryption: .key(oldKey), options: OpenOptions(mode: .readOnly))
            defer { db.close() }
            _ = try db.scalar("SELECT count(*) FROM notes", as: Int.self)
        }
        let newKey = try EncryptionKey(sqlcipherRawKeyText: newKeyText)
        let db = try Connection(path: databasePath, encryption: .key(newKey), options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        #expect(try db.scalar("SELECT count(*) FROM notes", as: Int.self) == 2)
    }

    @Test("SIGTERM under load: the server finishes its requests before the database closes; exit 0, WAL checkpointed",
          arguments: [false, true])
    func vaporShutdownUnderLoad(throughDatabaseService: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.path("notes.key")
        let databasePath = directory.path("notes.db")
        try writeKeyFile(Self.keyText, to: keyFile)
        let port = try freeLocalPort()
        let service = try ServiceProcess(
            "sqlcipherkit-vapor-example", arguments: ["serve", "--hostname", "127.0.0.1", "--port", "\(port)"],
            environment: [
                "NOTES_DATABASE": databasePath, "NOTES_KEY_FILE": keyFile, "LOG_LEVEL": "notice",
                "NOTES_LIVE_ROTATION": throughDatabaseService ? "1" : "0",
            ],
            in: directory)
        _ = try await service.waitForOutput("Server start")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let base = "http://127.0.0.1:\(port)"
        let author = try await http(client, .POST, "\(base)/authors", body: #"{"name":"Ada"}"#, json: true)
        let authorID = try #require(try jsonObject(author.body)["id"] as? String)

        // The same foreign-key guarantee whichever way the database was opened.
        let orphan = try await http(
            client, .POST, "\(base)/orphans", body: #"{"body":"orphan","author":{"id":"\#(UUID())"}}"#, json: true)
        #expect(orphan.status != 200, "an orphan note was accepted: \(orphan.body)")
        if throughDatabaseService {
            #expect(try await http(client, .GET, "\(base)/health").status == 200)
        }

        let state = VaporLoadState()
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var index = 0
                        while index < 20_000 {
                            let body = #"{"body":"note \#(worker)-\#(index)","author":{"id":"\#(authorID)"}}"#
                            do {
                                let response = try await http(client, .POST, "\(base)/notes", body: body, json: true)
                                if response.status == 200 {
                                    state.acknowledged.add(1, ordering: .relaxed)
                                } else if !state.isTerminating.load(ordering: .relaxed) {
                                    state.unexpected.withLock { $0.append("\(response.status): \(response.body)") }
                                }
                            } catch {
                                // Once the server stops accepting, requests fail to connect: the load is over.
                                if state.isTerminating.load(ordering: .relaxed) { return }
                                state.unexpected.withLock { $0.append("\(error)") }
                            }
                            index += 1
                        }
                    }
                }
            }
        }
        // SIGTERM while the requests keep coming (waiting for a count, not for time; bounded only as a hang guard).
        for _ in 0..<1200 where state.acknowledged.load(ordering: .relaxed) < 200 {
            try await Task.sleep(for: .milliseconds(50))
        }
        state.isTerminating.store(true, ordering: .relaxed)
        let status = try await service.terminate()
        await load.value
        try await client.shutdown()

        #expect(status == 0, "output:\n\(service.output)")
        #expect(!service.output.contains("Fatal error"), "\(service.output)")
        #expect(state.unexpected.withLock { $0 }.isEmpty, "\(state.unexpected.withLock { $0.prefix(3) })")
        #expect((try? FileManager.default.attributesOfItem(atPath: databasePath + "-wal")[.size] as? Int) ?? 0 == 0,
                "the WAL was checkpointed when the database closed")
        let key = try EncryptionKey(sqlcipherRawKeyText: Self.keyText)
        let db = try Connection(path: databasePath, encryption: .key(key), options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        #expect(try db.scalar("SELECT count(*) FROM notes", as: Int.self) ?? 0 >= state.acknowledged.load(ordering: .relaxed))
        #expect(try db.scalar("SELECT count(*) FROM notes WHERE body = 'orphan'", as: Int.self) == 0)
    }
}

/// What the load on the Vapor example saw.
final class VaporLoadState: Sendable {
    let acknowledged = Atomic(0)
    let isTerminating = Atomic(false)
    let unexpected = Mutex<[String]>([])
}
#endif
