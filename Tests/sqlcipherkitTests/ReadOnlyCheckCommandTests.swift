import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `verify` and `info` (and the key check of every command that writes) against the files a crash leaves: a hot
/// journal, a killed in-place rotation, a WAL nobody holds, a WAL of another database, a tampered WAL frame. They
/// answer which key opens the file as SQLite will see it after recovery, with the right exit status, and leave every
/// byte of the folder as it was: no rollback on disk, no -wal or -shm created.
@Suite("sqlcipherkit read-only checks after a crash", .serialized)
struct ReadOnlyCheckCommandTests {
    /// The folder's files with their bytes (the commands' own output files excluded).
    static func folder(_ scratch: Scratch) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
        where !name.hasPrefix(".running-") {
            files[name] = try fileBytes(scratch.path(name))
        }
        return files
    }

    static func result(_ run: CommandResult) -> [String: Any]? {
        jsonEnvelope(run)?["result"] as? [String: Any]
    }

    @Test("a hot journal: verify and info answer with the right key (exit 0, 'hot journal') and a wrong one (exit 3)")
    func hotJournal() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("right.key")
        let wrong = try scratch.rawKeyFile("wrong.key")
        let live = try scratch.database("live.db", key: key.key, rowCount: 2000)
        let db = scratch.path("app.db")
        try CrashedCopy.withHotJournal(of: live, key: key.key, table: "item", keepingRows: 100, to: db)
        try FileManager.default.removeItem(atPath: live)
        let before = try Self.folder(scratch)
        #expect(before["app.db-journal"] != nil)

        let verify = try runSubprocess(["verify", db, "--key-file", key.path], in: scratch)
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.standardOutput.contains("hot journal"), "\(verify)")
        #expect(verify.standardOutput.contains("verified"))
        #expect(try Self.folder(scratch) == before, "verify changed the folder")
        let verifyJSON = runInProcess(["verify", db, "--key-file", key.path, "--json"])
        #expect(Self.result(verifyJSON)?["hotJournal"] as? Bool == true, "\(verifyJSON)")
        #expect(Self.result(verifyJSON)?["verified"] as? Bool == true)

        let wrongVerify = try runSubprocess(["verify", db, "--key-file", wrong.path], in: scratch)
        #expect(wrongVerify.status == CLIExitStatus.keyDoesNotOpenDatabase.rawValue, "\(wrongVerify)")
        #expect(try Self.folder(scratch) == before, "verify with a wrong key changed the folder")

        let info = try runSubprocess(["info", db, "--key-file", key.path], in: scratch)
        #expect(info.status == 0, "\(info)")
        #expect(info.standardOutput.contains("journal") && info.standardOutput.contains("hot:"), "\(info)")
        #expect(info.standardOutput.contains("(the key opens it)"), "\(info)")
        let infoJSON = runInProcess(["info", db, "--key-file", key.path, "--json"])
        #expect(Self.result(infoJSON)?["hotJournal"] as? Bool == true, "\(infoJSON)")
        #expect(Self.result(infoJSON)?["keyOpens"] as? Bool == true)
        let wrongInfo = try runSubprocess(["info", db, "--key-file", wrong.path, "--json"], in: scratch)
        #expect(wrongInfo.status == CLIExitStatus.keyDoesNotOpenDatabase.rawValue, "\(wrongInfo)")
        #expect(Self.result(wrongInfo)?["hotJournal"] as? Bool == true, "\(wrongInfo)")
        let keyless = try runSubprocess(["info", db], in: scratch)
        #expect(keyless.status == 0 && keyless.standardOutput.contains("hot:"), "\(keyless)")
        #expect(try Self.folder(scratch) == before, "info changed the folder")

        // A read-write open rolls the journal back for real: every row as it was committed.
        #expect(try rowCount(db, key: key.key) == 2000)
        #expect(!FileManager.default.fileExists(atPath: db + "-journal"))
        let after = try runSubprocess(["verify", db, "--key-file", key.path, "--json"], in: scratch)
        #expect(after.status == 0 && Self.result(after)?["hotJournal"] as? Bool == false, "\(after)")
    }

    @Test("a killed in-place rotation: 'verify new || verify old' names the old key, and nothing is rolled back")
    func killedInPlaceRotation() throws {
        let scratch = try Scratch()
        let old = try scratch.rawKeyFile("old.key")
        let new = try scratch.rawKeyFile("new.key")
        let source = try scratch.database("source.db", key: old.key, rowCount: 2000)
        let db = scratch.path("app.db")
        try CrashedCopy.withInterruptedRekey(of: source, key: old.key, newKey: new.key, table: "item", to: db)
        try FileManager.default.removeItem(atPath: source)
        let before = try Self.folder(scratch)

        let verifyNew = try runSubprocess(["verify", db, "--key-file", new.path], in: scratch)
        #expect(verifyNew.status == CLIExitStatus.keyDoesNotOpenDatabase.rawValue, "\(verifyNew)")
        let verifyOld = try runSubprocess(["verify", db, "--key-file", old.path], in: scratch)
        #expect(verifyOld.status == 0, "\(verifyOld)")
        #expect(verifyOld.standardOutput.contains("hot journal"), "\(verifyOld)")
        #expect(try Self.folder(scratch) == before, "verify changed the folder")
        // Page 1 already holds the new key, the other pages the old one: the journal is the file's own, and the key
        // check must not advise setting it aside (that would lose the database).
        let exec = try runSubprocess(["exec", db, "--key-file", new.path, "SELECT 1"], in: scratch)
        #expect(exec.status == CLIExitStatus.keyDoesNotOpenDatabase.rawValue, "\(exec)")
        #expect(!exec.standardError.contains("aside"), "\(exec)")
        #expect(try Self.folder(scratch) == before, "exec with the new key changed the folder")

        // Finishing the rotation from the old key (the runbook's next step) works and keeps every row.
        let rotate = try runSubprocess(
            ["rotate", db, "--key-file", old.path, "--new-key-file", new.path, "--method", "in-place"], in: scratch)
        #expect(rotate.status == 0, "\(rotate)")
        #expect(try rowCount(db, key: new.key) == 2000)
        #expect(!opens(db, with: old.key))
    }

    @Test("verify and info of a WAL database nothing holds create no -wal and no -shm")
    func walNothingHolds() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("k.key")
        let db = try scratch.database("app.db", key: key.key, rowCount: 300, journalMode: "WAL")
        let crashed = scratch.path("crashed.db")
        try CrashedCopy.withWAL(of: db, key: key.key, table: "item", to: crashed)
        let before = try Self.folder(scratch)
        #expect(before["app.db-wal"] == nil && before["crashed.db-wal"] != nil)

        for path in [db, crashed] {
            let verify = try runSubprocess(["verify", path, "--key-file", key.path, "--json"], in: scratch)
            #expect(verify.status == 0, "\(verify)")
            let info = try runSubprocess(["info", path, "--key-file", key.path], in: scratch)
            #expect(info.status == 0, "\(info)")
            #expect(try Self.folder(scratch) == before, "\(path): the folder changed")
        }
        let crashedJSON = runInProcess(["verify", crashed, "--key-file", key.path, "--json"])
        let wal = Self.result(crashedJSON)?["writeAheadLog"] as? [String: Any]
        #expect(wal?["intact"] as? Bool == true, "\(crashedJSON)")
        #expect((wal?["commitCount"] as? Int ?? 0) >= 1)
        #expect(wal?["firstDamagedFrame"] is NSNull)
        #expect(try rowCount(crashed, key: key.key) == 350)
    }

    @Test("a same-key WAL of another database that never touches page 1: exec and rotate exit 4, nothing written")
    func foreignWALWithoutPageOne() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("k.key")
        let next = try scratch.rawKeyFile("next.key")
        let db = try scratch.database("app.db", key: key.key, rowCount: 3000, journalMode: "WAL")
        let other = try scratch.database("other.db", key: key.key, rowCount: 3000, journalMode: "WAL")
        let writer = try Connection(path: other, key: key.key)
        try writer.execute("PRAGMA wal_autocheckpoint = 0")
        try writer.execute("UPDATE item SET body = upper(body) WHERE id = 1500")
        try FileManager.default.copyItem(atPath: other + "-wal", toPath: db + "-wal")
        writer.close()
        let before = KeyCheckCommandTests.state(db)

        let exec = try runSubprocess(["exec", db, "--key-file", key.path, "SELECT 1"], in: scratch)
        #expect(exec.status == CLIExitStatus.verificationFailed.rawValue, "\(exec)")
        #expect(exec.standardError.contains("-wal"), "\(exec)")
        #expect(KeyCheckCommandTests.state(db) == before, "exec checkpointed the foreign WAL")
        for method in ["in-place", "copy"] {
            let rotate = try runSubprocess(
                ["rotate", db, "--key-file", key.path, "--new-key-file", next.path, "--method", method], in: scratch)
            #expect(rotate.status != 0, "\(rotate)")
            #expect(KeyCheckCommandTests.state(db) == before, "rotate \(method) changed the database or the WAL")
        }
        #expect(!FileManager.default.fileExists(atPath: db + "-shm"))
        let verify = try runSubprocess(["verify", db, "--key-file", key.path], in: scratch)
        #expect(verify.status == CLIExitStatus.verificationFailed.rawValue, "\(verify)")
        #expect(KeyCheckCommandTests.state(db) == before)

        try FileManager.default.removeItem(atPath: db + "-wal")
        #expect(try rowCount(db, key: key.key) == 3000)
        #expect(opens(db, with: key.key))
    }

    @Test("a tampered WAL frame: verify exits 4 naming the frame and the commits SQLite would drop; --json has them")
    func tamperedWALFrame() throws {
        let scratch = try Scratch()
        let key = try scratch.rawKeyFile("k.key")
        let live = try scratch.database("live.db", key: key.key, rowCount: 100, journalMode: "WAL")
        let writer = try Connection(path: live, key: key.key)
        try writer.execute("PRAGMA wal_autocheckpoint = 0")
        for index in 0..<6 {
            try writer.execute("INSERT INTO item(body) VALUES (?)", "commit \(index)")
        }
        let db = scratch.path("app.db")
        try FileManager.default.copyItem(atPath: live, toPath: db)
        try FileManager.default.copyItem(atPath: live + "-wal", toPath: db + "-wal")
        writer.close()
        // One flipped byte in the page of the frame that ends the second commit.
        var wal = try fileBytes(db + "-wal")
        let layout = WALFrames(wal)
        let damagedFrame = try #require(layout.frameEnding(commit: 2))
        wal[layout.frames[damagedFrame - 1].pageOffset + layout.pageSize / 3] ^= 0x04
        try Data(wal).write(to: URL(fileURLWithPath: db + "-wal"))
        let before = try Self.folder(scratch)

        let verify = try runSubprocess(["verify", db, "--key-file", key.path], in: scratch)
        #expect(verify.status == CLIExitStatus.verificationFailed.rawValue, "\(verify)")
        #expect(verify.standardOutput.contains("frame \(damagedFrame)"), "\(verify)")
        #expect(verify.standardError.contains("5 commit(s)"), "\(verify)")
        #expect(try Self.folder(scratch) == before, "verify changed the folder")

        let json = try runSubprocess(["verify", db, "--key-file", key.path, "--json"], in: scratch)
        #expect(json.status == CLIExitStatus.verificationFailed.rawValue)
        let report = Self.result(json)
        #expect(report?["verified"] as? Bool == false)
        let walReport = report?["writeAheadLog"] as? [String: Any]
        #expect(walReport?["intact"] as? Bool == false, "\(json)")
        #expect(walReport?["firstDamagedFrame"] as? Int == damagedFrame)
        #expect(walReport?["commitCount"] as? Int == 1)
        #expect(walReport?["lostCommitCount"] as? Int == 5)
        #expect(try Self.folder(scratch) == before, "verify --json changed the folder")
    }
}
