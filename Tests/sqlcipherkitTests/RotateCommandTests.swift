import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit rotate")
struct RotateCommandTests {
    @Test("rotates with either method, keeping every row", arguments: ["copy", "in-place"])
    func rotates(method: String) throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("notes.db", key: oldKey, rowCount: 200)
        let result = try runSubprocess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--method", method], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.contains("rotated"))
        #expect(opens(db, with: newKey) && !opens(db, with: oldKey))
        #expect(try rowCount(db, key: newKey) == 200)
        #expect(result.standardError.isEmpty)  // no progress bar: stderr is not a terminal
    }

    @Test("with several databases, a failing one is left byte-identical and the others are rotated")
    func severalDatabasesOneFailing() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        let (_, otherKey) = try scratch.rawKeyFile("other.key")
        let first = try scratch.database("a.db", key: oldKey)
        let failing = try scratch.database("b.db", key: otherKey)
        let third = try scratch.database("c.db", key: oldKey, journalMode: "WAL")
        let before = try fileBytes(failing)
        let result = try runSubprocess(
            ["rotate", first, failing, third, "--key-file", oldPath, "--new-key-file", newPath, "--json"],
            in: scratch)
        #expect(result.status == 3, "\(result)")
        #expect(try fileBytes(failing) == before)
        #expect(opens(first, with: newKey) && opens(third, with: newKey))
        #expect(opens(failing, with: otherKey))
        let envelope = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        let report = envelope?["result"] as? [String: Any]
        #expect(report?["rotatedCount"] as? Int == 2)
        #expect(report?["failedCount"] as? Int == 1)
        let databases = report?["databases"] as? [[String: Any]] ?? []
        #expect(databases.map { $0["rotated"] as? Bool } == [true, false, true])
        #expect((databases[1]["error"] as? [String: Any])?["kind"] as? String == "wrongKey")
        #expect(databases[1]["keyState"] as? String == "neither")
    }

    @Test("--backup-dir keeps a verified copy under the old key")
    func backupDirectory() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, _) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("notes.db", key: oldKey)
        try FileManager.default.createDirectory(atPath: scratch.path("backups"), withIntermediateDirectories: false)
        let result = runInProcess(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--backup-dir", scratch.path("backups")])
        #expect(result.status == 0, "\(result)")
        let copies = try FileManager.default.contentsOfDirectory(atPath: scratch.path("backups"))
        #expect(copies.count == 1)
        #expect(try rowCount(scratch.path("backups/\(copies[0])"), key: oldKey) == 20)
    }

    @Test("bad input: same key twice, no database, unknown method, negative lock timeout, missing file")
    func badInput() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, _) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("notes.db", key: oldKey)
        let same = runInProcess(["rotate", db, "--key-file", oldPath, "--new-key-file", oldPath])
        #expect(same.status == 2, "\(same)")
        #expect(parsingStatus(["rotate", "--key-file", oldPath, "--new-key-file", newPath]) == .usage)
        #expect(parsingStatus(["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--method", "x"]) == .usage)
        #expect(parsingStatus(
            ["rotate", db, "--key-file", oldPath, "--new-key-file", newPath, "--lock-timeout", "-1"]) == .usage)
        #expect(parsingStatus(["rotate", db, db, "--key-file", oldPath, "--new-key-file", newPath]) == .usage)
        let missing = runInProcess(["rotate", scratch.path("nope.db"), "--key-file", oldPath, "--new-key-file", newPath])
        #expect(missing.status == 1, "\(missing)")
        #expect(opens(db, with: oldKey))
    }
}
