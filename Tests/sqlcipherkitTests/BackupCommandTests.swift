import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit backup")
struct BackupCommandTests {
    @Test("backs up under the same key or another one; the copy verifies")
    func backup() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (otherPath, otherKey) = try scratch.rawKeyFile("other")
        let db = try scratch.database("notes.db", key: key, rowCount: 300)
        let same = runInProcess(["backup", db, scratch.path("same.db"), "--key-file", keyPath])
        #expect(same.status == 0, "\(same)")
        #expect(try rowCount(scratch.path("same.db"), key: key) == 300)
        let other = try runSubprocess(
            ["backup", "notes.db", "other.db", "--key-file", keyPath, "--dest-key-file", otherPath], in: scratch)
        #expect(other.status == 0, "\(other)")
        #expect(other.standardError.isEmpty)
        #expect(try rowCount(scratch.path("other.db"), key: otherKey) == 300)
        #expect(!opens(scratch.path("other.db"), with: key))
        #expect(try fileMode(scratch.path("other.db")) == 0o600)
    }

    @Test("refuses an existing destination without --replace, a wrong key (3), a missing source")
    func badInput() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (otherPath, otherKey) = try scratch.rawKeyFile("other")
        let db = try scratch.database("notes.db", key: key)
        let existing = try scratch.database("existing.db", key: otherKey)
        let before = try fileBytes(existing)
        #expect(runInProcess(["backup", db, existing, "--key-file", keyPath]).status == 1)
        #expect(try fileBytes(existing) == before)
        #expect(runInProcess(["backup", db, existing, "--key-file", keyPath, "--replace"]).status == 0)
        #expect(opens(existing, with: key))
        #expect(runInProcess(["backup", db, scratch.path("b.db"), "--key-file", otherPath]).status == 3)
        #expect(runInProcess(["backup", scratch.path("nope.db"), scratch.path("c.db"), "--key-file", keyPath]).status == 1)
        #expect(parsingStatus(["backup", db, db, "--key-file", keyPath]) == .usage)
    }
}
