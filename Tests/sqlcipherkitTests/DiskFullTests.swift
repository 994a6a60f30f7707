import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit
#if canImport(Glibc)
import Glibc
#endif

/// A full disk during every command that writes: a real one, a small tmpfs mounted for the test (root only, as CI
/// runs). The command fails saying the disk is full, the database is byte for byte as it was and opens with its old
/// key, and nothing is left behind: no temporary file, no half-written destination, no plaintext.
@Suite(
    "sqlcipherkit on a full disk", .serialized,
    .enabled(if: FullDisk.isAvailable, Comment(rawValue: FullDisk.unavailableReason)))
struct DiskFullTests {
    static let rows = 20_000

    /// A database of `rows` rows on a tmpfs with about half its size free, and its key files.
    struct Setup {
        let disk: FullDisk
        let database: String
        let key: (path: String, key: EncryptionKey)
        let next: (path: String, key: EncryptionKey)
        let bytes: [UInt8]
    }

    static func setUp(_ scratch: Scratch, journalMode: String) throws -> Setup {
        let key = try scratch.rawKeyFile("a.key")
        let next = try scratch.rawKeyFile("b.key")
        let built = try scratch.database("built.db", key: key.key, rowCount: rows, journalMode: journalMode)
        let size = try fileBytes(built).count
        let disk = try FullDisk(at: scratch.path("disk"), bytes: size + size / 2)
        let database = disk.path("app.db")
        try FileManager.default.copyItem(atPath: built, toPath: database)
        return Setup(disk: disk, database: database, key: key, next: next, bytes: try fileBytes(database))
    }

    /// The database is as it was, opens with the old key only, and holds every row; the disk holds nothing else.
    static func expectUntouched(_ setup: Setup, _ result: CommandResult, _ label: String) throws {
        #expect(result.status != 0, "\(label): \(result)")
        #expect(try fileBytes(setup.database) == setup.bytes, "\(label): the database changed")
        #expect(opens(setup.database, with: setup.key.key), "\(label)")
        #expect(!opens(setup.database, with: setup.next.key), "\(label)")
        #expect(try rowCount(setup.database, key: setup.key.key) == rows, "\(label)")
        let left = try FileManager.default.contentsOfDirectory(atPath: setup.disk.url.path).filter { $0 != "app.db" }
        #expect(left.isEmpty, "\(label): left on the disk: \(left)")
    }

    @Test("rotate in place and by copy: refused as a full disk, the database as it was", arguments: ["DELETE", "WAL"])
    func rotate(journalMode: String) throws {
        let scratch = try Scratch()
        let setup = try Self.setUp(scratch, journalMode: journalMode)
        defer { setup.disk.unmount() }
        for method in ["in-place", "copy"] {
            let result = try runSubprocess(
                ["rotate", setup.database, "--key-file", setup.key.path, "--new-key-file", setup.next.path,
                 "--method", method, "--json"], in: scratch)
            try Self.expectUntouched(setup, result, "rotate \(method), \(journalMode)")
            let report = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
            let database = ((report?["result"] as? [String: Any])?["databases"] as? [[String: Any]])?.first
            let error = database?["error"] as? [String: Any]
            #expect(error?["kind"] as? String == "diskFull", "rotate \(method), \(journalMode): \(result)")
            #expect(database?["keyState"] as? String == "old")
        }
    }

    @Test("a hot journal on a disk with less free space than the database: verify and the key check accept the key")
    func hotJournalNeedsNoSpace() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("a.key")
        let live = try scratch.database("live.db", key: key.key, rowCount: Self.rows)
        let crashed = scratch.path("crashed.db")
        try CrashedCopy.withHotJournal(of: live, key: key.key, table: "item", keepingRows: 100, to: crashed)
        let size = try fileBytes(crashed).count
        let journalSize = try fileBytes(crashed + "-journal").count
        // Room for the two files and half the database's size: a copy of the database could not fit.
        let disk = try FullDisk(at: scratch.path("disk"), bytes: size + journalSize + size / 2)
        defer { disk.unmount() }
        let database = disk.path("app.db")
        try FileManager.default.copyItem(atPath: crashed, toPath: database)
        try FileManager.default.copyItem(atPath: crashed + "-journal", toPath: database + "-journal")
        let free = try FileManager.default.attributesOfFileSystem(forPath: disk.url.path)[.systemFreeSize] as? Int
        #expect((free ?? 0) < size, "the disk must have less free space than the database: \(free ?? -1) < \(size)")
        let bytes = try fileBytes(database)
        let journal = try fileBytes(database + "-journal")

        let verify = try runSubprocess(["verify", database, "--key-file", key.path], in: scratch)
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.standardOutput.contains("hot journal"), "\(verify)")
        #expect(try fileBytes(database) == bytes && fileBytes(database + "-journal") == journal)

        // The key check before a read-write open, then the rollback itself: neither needs more space.
        let exec = try runSubprocess(["exec", database, "--key-file", key.path, "SELECT count(*) FROM item"], in: scratch)
        #expect(exec.status == 0, "\(exec)")
        #expect(exec.standardOutput.contains("\(Self.rows)"), "\(exec)")
        #expect(!FileManager.default.fileExists(atPath: database + "-journal"))
        #expect(try rowCount(database, key: key.key) == Self.rows)
        let left = try FileManager.default.contentsOfDirectory(atPath: disk.url.path).filter { $0 != "app.db" }
        #expect(left.isEmpty, "left on the disk: \(left)")
    }

    @Test("backup, decrypt and encrypt onto a full disk leave no destination, no temporary file, no plaintext")
    func copies() throws {
        let scratch = try Scratch()
        let setup = try Self.setUp(scratch, journalMode: "DELETE")
        defer { setup.disk.unmount() }
        let backup = try runSubprocess(
            ["backup", setup.database, setup.disk.path("copy.db"), "--key-file", setup.key.path], in: scratch)
        try Self.expectUntouched(setup, backup, "backup")
        #expect(backup.standardError.contains("full"), "\(backup)")

        let decrypt = try runSubprocess(
            ["decrypt", setup.database, setup.disk.path("plain.db"), "--key-file", setup.key.path,
             "--allow-plaintext"], in: scratch)
        try Self.expectUntouched(setup, decrypt, "decrypt")

        // encrypt: a plaintext source on the full disk, an encrypted copy that cannot fit.
        try FileManager.default.removeItem(atPath: setup.database)
        let plain = try Connection(path: scratch.path("plain.db"), encryption: .none)
        try plain.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        try plain.execute("""
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000)
            INSERT INTO item SELECT x, 'plaintext row ' || x || ' abcdefghijabcdefghijabcdefghij' FROM c
            """)
        plain.close()
        let source = setup.disk.path("plain-source.db")
        try FileManager.default.copyItem(atPath: scratch.path("plain.db"), toPath: source)
        // Leave about half the source's size free: the encrypted copy cannot fit.
        let sourceSize = try fileBytes(source).count
        let free = try FileManager.default.attributesOfFileSystem(forPath: setup.disk.url.path)[.systemFreeSize]
            as? Int ?? 0
        _ = FileManager.default.createFile(
            atPath: setup.disk.path("filler"), contents: Data(count: max(0, free - sourceSize / 2)))
        let encrypt = try runSubprocess(
            ["encrypt", source, setup.disk.path("encrypted.db"), "--new-key-file", setup.key.path], in: scratch)
        #expect(encrypt.status != 0, "\(encrypt)")
        let left = try FileManager.default.contentsOfDirectory(atPath: setup.disk.url.path)
        #expect(left.sorted() == ["filler", "plain-source.db"], "\(left)")
        #expect(encrypt.standardError.contains("full"), "\(encrypt)")
    }
}
