import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// SIGKILL runs no handler. Before the guardian, a `decrypt` killed mid-copy left its plaintext temporary file on disk
/// until the next run wrote beside the same output; now the guardian process removes it when the command dies.
@Suite("sqlcipherkit's guardian removes what a killed run leaves", .serialized)
struct GuardianTests {
    static let marker = "GUARDIAN-PLAINTEXT-MARKER"

    /// Runs `arguments`, waits until its temporary file exists, kills it with `signal`, then waits (bounded only to
    /// turn a hang into a failure) until no temporary file is left in the folder.
    static func killMidCopy(_ arguments: [String], signal: Int32, in scratch: Scratch) throws -> [String] {
        let run = try RunningCommand(arguments, in: scratch)
        let folder = scratch.url.path
        let appeared = ContinuousClock.now + .seconds(120)
        while temporaryFiles(in: folder).isEmpty && run.isRunning && ContinuousClock.now < appeared {
            usleep(1_000)
        }
        let sawTemporary = !temporaryFiles(in: folder).isEmpty
        kill(run.pid, signal)
        _ = try run.finish()
        #expect(sawTemporary, "the command finished before a temporary file was seen; make the database larger")
        #expect(run.endedBySignal == signal)
        let gone = ContinuousClock.now + .seconds(60)
        while !temporaryFiles(in: folder).isEmpty && ContinuousClock.now < gone {
            usleep(10_000)
        }
        return temporaryFiles(in: folder)
    }

    /// Every file in the folder that holds the marker in plaintext.
    static func plaintextFiles(in scratch: Scratch) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { name in
            guard let bytes = try? fileBytes(scratch.path(name)) else { return false }
            return contains(bytes, marker)
        }
    }

    static func source(_ scratch: Scratch) throws -> (path: String, key: (path: String, key: EncryptionKey)) {
        let key = try scratch.rawKeyFile("a.key")
        let path = scratch.path("big.db")
        let db = try Connection(path: path, key: key.key)
        try db.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        try db.execute("""
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000)
            INSERT INTO item SELECT x, '\(marker) ' || x || ' abcdefghijabcdefghijabcdefghij' FROM c
            """)
        db.close()
        return (path, key)
    }

    @Test("decrypt killed with SIGKILL mid-copy: the plaintext temporary file is removed without another run",
          arguments: [SIGKILL, SIGTERM])
    func decryptKilled(signal: Int32) throws {
        let scratch = try Scratch()
        let (database, key) = try Self.source(scratch)
        let left = try Self.killMidCopy(
            ["decrypt", database, "out.db", "--key-file", key.path, "--allow-plaintext"], signal: signal, in: scratch)
        #expect(left.isEmpty, "left behind: \(left)")
        #expect(try Self.plaintextFiles(in: scratch).isEmpty, "a plaintext file is on disk")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("out.db")))
        #expect(try rowCount(database, key: key.key) == 150_000)
    }

    @Test("backup killed with SIGKILL mid-copy: no temporary file is left, the source is whole")
    func backupKilled() throws {
        let scratch = try Scratch()
        let (database, key) = try Self.source(scratch)
        let left = try Self.killMidCopy(
            ["backup", database, "copy.db", "--key-file", key.path], signal: SIGKILL,
            in: scratch)
        #expect(left.isEmpty, "left behind: \(left)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("copy.db")))
        #expect(try rowCount(database, key: key.key) == 150_000)
    }
}
