import SQLCipherKit
import Testing

@Suite("Smoke")
struct SmokeTests {
    @Test("create, write and read an encrypted database")
    func roundTrip() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("notes.db")
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase)
                try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
                try db.transaction {
                    let insert = try db.prepare("INSERT INTO note(body) VALUES (?)")
                    for body in ["one", "two"] { try insert.run(body) }
                }
            }
            let db = try Connection(path: path, key: TestKeys.passphrase)
            let rows = try db.query("SELECT id, body FROM note WHERE id > ? ORDER BY id", 0)
            #expect(rows.count == 2)
            #expect(try rows[1]["body"] as String == "two")
            #expect(try db.scalar("SELECT count(*) FROM note", as: Int.self) == 2)
            let header = try fileBytes(path).prefix(16)
            #expect(Array(header) != Array("SQLite format 3".utf8) + [0])
            expectError(.wrongKey) {
                _ = try Connection(path: path, key: TestKeys.otherPassphrase)
            }
        }
    }
}
