#if Examples  // trait Examples (Package.swift)
import AsyncHTTPClient
import Foundation
import SQLCipherKit
import SQLCipherKitTestSupport
import Testing

/// The Hummingbird example's measuring options (`.ci/bench-service`): what they make on disk, and their misuse.
@Suite("Hummingbird example options")
struct ExampleOptionsTests {
    static let keyText = "x'" + String(repeating: "5a6b7c8d", count: 8) + "'"

    @Test("--cipher-page-size 4096 makes a file of 4 KiB encrypted pages that only those settings open")
    func cipherPageSize() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let databasePath = directory.path("notes.db")
        let keyFile = directory.path("notes.key")
        try writeKeyFile(Self.keyText, to: keyFile)
        let (service, port) = try await ServiceProcess.notesExample(
            ["--cipher-page-size", "4096"], database: databasePath, keyFile: keyFile, in: directory)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let note = "a note kept on four-kilobyte pages"
        let posted = try await http(client, .POST, "http://127.0.0.1:\(port)/notes", body: note)
        let count = try await http(client, .GET, "http://127.0.0.1:\(port)/notes/count")
        try await client.shutdown()
        #expect(try await service.terminate() == 0, "service output:\n\(service.output)")
        #expect(posted.status == 200 && count.body == "1")

        let key = try EncryptionKey(sqlcipherRawKeyText: Self.keyText)
        let db = try Connection(
            path: databasePath, encryption: .key(key, settings: CipherSettings(pageSize: 4096)),
            options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        #expect(try db.scalar("SELECT body FROM note", as: String.self) == note)
        #expect(try db.scalar("PRAGMA cipher_page_size", as: String.self) == "4096")
        // 1 KiB pages (SQLCipher 3.4.1's default) do not open it.
        #expect(throws: DatabaseError.self) {
            let other = try Connection(
                path: databasePath, encryption: .key(key, settings: CipherSettings(pageSize: 1024)),
                options: OpenOptions(mode: .readOnly))
            other.close()
        }
        let bytes = try fileBytes(databasePath)
        #expect(bytes.count > 0 && bytes.count % 4096 == 0, "\(bytes.count) bytes")
        #expect(!contains(bytes, note))
        for side in ["-wal", "-journal"] where FileManager.default.fileExists(atPath: databasePath + side) {
            #expect(!contains(try fileBytes(databasePath + side), note), "plaintext in \(side)")
        }
        #expect(!service.output.contains(Self.keyText))
    }

    @Test("misuse is refused with exit 64 and a message on standard error, before any file is made",
          arguments: [
              (["--cipher-page-size", "1000", "DB", "KEY", "0"], "--cipher-page-size needs a power of two"),
              (["--cipher-page-size", "256", "DB", "KEY", "0"], "--cipher-page-size needs a power of two"),
              (["--cipher-page-size", "DB", "KEY", "0"], "--cipher-page-size needs a power of two"),
              (["--plaintext", "--cipher-page-size", "4096", "DB", "0"], "--cipher-page-size is for an encrypted file"),
              // An option after the file names, which used to be taken for a port and dropped.
              (["DB", "KEY", "--cipher-page-size"], "--cipher-page-size: options come before DATABASE"),
              (["DB", "KEY", "eighty"], "PORT must be a number"),
              (["DB", "KEY", "0", "--cipher-page-size", "4096"], "usage:"),
          ])
    func misuse(arguments: [String], refusal: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.path("notes.key")
        try writeKeyFile(Self.keyText, to: keyFile)
        let databasePath = directory.path("notes.db")
        let resolved = arguments.map { $0 == "DB" ? databasePath : $0 == "KEY" ? keyFile : $0 }
        let service = try ServiceProcess("sqlcipherkit-hummingbird-example", arguments: resolved, in: directory)
        #expect(try await service.waitForExit() == 64, "service output:\n\(service.output)")
        #expect(service.output.contains(refusal), "service output:\n\(service.output)")
        #expect(service.output.contains("usage: sqlcipherkit-hummingbird-example"))
        #expect(!FileManager.default.fileExists(atPath: databasePath))
        #expect(!service.output.contains(Self.keyText))
    }
}
#endif
