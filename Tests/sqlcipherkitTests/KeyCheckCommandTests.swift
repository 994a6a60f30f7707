import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The reproductions against the real binary: `exec` and `rotate` with a wrong key (or the right one) beside
/// a `-wal` or hot `-journal` that is the database's own, stale, or another database's. The key check must write
/// nothing: every byte of the database and its side files is as it was after a refusal.
@Suite("sqlcipherkit key checks write nothing", .serialized)
struct KeyCheckCommandTests {
    /// The database and its side files, byte for byte (`nil` for a missing one).
    static func state(_ path: String) -> [String: [UInt8]?] {
        var files: [String: [UInt8]?] = [:]
        for suffix in ["", "-wal", "-journal"] {
            files[suffix] = try? fileBytes(path + suffix)
        }
        return files
    }

    @Test("exec and rotate with a wrong key beside the database's own WAL: exit 3, every byte as it was")
    func wrongKeyOwnWAL() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("right.key")
        let wrong = try scratch.rawKeyFile("wrong.key")
        let next = try scratch.rawKeyFile("next.key")
        let live = try scratch.database("live.db", key: key.key, rowCount: 300, journalMode: "WAL")
        let db = scratch.path("app.db")
        try CrashedCopy.withWAL(of: live, key: key.key, table: "item", to: db)
        let before = Self.state(db)

        let exec = try runSubprocess(["exec", db, "--key-file", wrong.path, "SELECT 1"], in: scratch)
        #expect(exec.status == CLIExitStatus.keyDoesNotOpenDatabase.rawValue, "\(exec)")
        #expect(Self.state(db) == before, "exec with a wrong key changed the database or its WAL")
        for method in ["copy", "in-place"] {
            let rotate = try runSubprocess(
                ["rotate", db, "--key-file", wrong.path, "--new-key-file", next.path, "--method", method], in: scratch)
            #expect(rotate.status != 0, "\(rotate)")
            #expect(Self.state(db) == before, "rotate \(method) with a wrong key changed the database or its WAL")
        }

        // The right key then recovers every committed row, the WAL's included.
        #expect(try rowCount(db, key: key.key) == 350)
    }

    @Test("a WAL of another database beside it: exec and rotate refuse with either key, every byte as it was")
    func foreignWAL() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("right.key")
        let wrong = try scratch.rawKeyFile("wrong.key")
        let next = try scratch.rawKeyFile("next.key")
        let db = try scratch.database("app.db", key: key.key, rowCount: 300, journalMode: "WAL")
        let otherLive = try scratch.database("other-live.db", key: wrong.key, rowCount: 100, journalMode: "WAL")
        try CrashedCopy.withWAL(of: otherLive, key: wrong.key, table: "item", to: scratch.path("other.db"))
        try FileManager.default.copyItem(atPath: scratch.path("other.db-wal"), toPath: db + "-wal")
        let before = Self.state(db)

        for keyFile in [wrong.path, key.path] {
            let exec = try runSubprocess(["exec", db, "--key-file", keyFile, "SELECT count(*) FROM item"], in: scratch)
            #expect(exec.status != 0, "\(exec)")
            #expect(Self.state(db) == before, "exec changed the database or the foreign WAL")
            for method in ["copy", "in-place"] {
                let rotate = try runSubprocess(
                    ["rotate", db, "--key-file", keyFile, "--new-key-file", next.path, "--method", method],
                    in: scratch)
                #expect(rotate.status != 0, "\(rotate)")
                #expect(Self.state(db) == before, "rotate \(method) changed the database or the foreign WAL")
            }
        }
        // With the right key the error names the side file, not the key.
        let exec = try runSubprocess(["exec", db, "--key-file", key.path, "SELECT 1"], in: scratch)
        #expect(exec.status == CLIExitStatus.verificationFailed.rawValue, "\(exec)")
        #expect(exec.standardError.contains("-wal"), "\(exec)")

        // Without the foreign WAL the database is whole.
        try FileManager.default.removeItem(atPath: db + "-wal")
        try? FileManager.default.removeItem(atPath: db + "-shm")
        #expect(try rowCount(db, key: key.key) == 300)
    }

    @Test("a hot journal and a wrong key: exec and rotate leave the file and the journal as they were")
    func wrongKeyHotJournal() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("right.key")
        let wrong = try scratch.rawKeyFile("wrong.key")
        let next = try scratch.rawKeyFile("next.key")
        let live = try scratch.database("live.db", key: key.key, rowCount: 2000)
        let db = scratch.path("app.db")
        try CrashedCopy.withHotJournal(of: live, key: key.key, table: "item", keepingRows: 100, to: db)
        let before = Self.state(db)
        #expect(before["-journal"] != nil)

        let exec = try runSubprocess(["exec", db, "--key-file", wrong.path, "SELECT 1"], in: scratch)
        #expect(exec.status == CLIExitStatus.keyDoesNotOpenDatabase.rawValue, "\(exec)")
        #expect(Self.state(db) == before, "exec with a wrong key rolled the journal back or changed the file")
        let rotate = try runSubprocess(
            ["rotate", db, "--key-file", wrong.path, "--new-key-file", next.path], in: scratch)
        #expect(rotate.status != 0, "\(rotate)")
        #expect(Self.state(db) == before, "rotate with a wrong key rolled the journal back or changed the file")

        // The right key rolls the unfinished transaction back: every row as it was committed.
        #expect(try rowCount(db, key: key.key) == 2000)
        #expect(opens(db, with: key.key))
    }
}
