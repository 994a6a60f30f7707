import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Temporary files are claimed by an `flock` held by the process that made them, not by the pid in their name: two
/// containers sharing a volume (two PID namespaces) never remove each other's live files, and a leftover whose
/// holder is gone is removed by the next run.
@Suite("leftovers are claimed by lock", .serialized,
       .enabled(if: OtherPIDNamespace.isAvailable, OtherPIDNamespace.unavailableReason))
struct LeftoverClaimTests {
    /// A command that writes `dest.db` beside the holder's file, and how to check what it wrote.
    enum Writer: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case backup, encrypt, decrypt
        /// `Connection.backup(toPath:)`, the library call behind `backup`.
        case libraryBackup

        var testDescription: String { rawValue }

        /// Runs it; returns the CLI's result (`nil` for the library call, which throws instead).
        func run(in scratch: Scratch, keyPath: String, key: EncryptionKey) throws -> CommandResult? {
            switch self {
            case .backup:
                return try runSubprocess(["backup", "src.db", "dest.db", "--key-file", keyPath], in: scratch)
            case .encrypt:
                return try runSubprocess(["encrypt", "plain.db", "dest.db", "--new-key-file", keyPath], in: scratch)
            case .decrypt:
                return try runSubprocess(
                    ["decrypt", "src.db", "dest.db", "--key-file", keyPath, "--allow-plaintext"], in: scratch)
            case .libraryBackup:
                let source = try Connection(path: scratch.path("src.db"), key: key)
                defer { source.close() }
                try source.backup(toPath: scratch.path("dest.db"))
                return nil
            }
        }

        /// The rows of what it wrote, read with a fresh connection.
        func destinationRows(in scratch: Scratch, key: EncryptionKey) throws -> Int {
            let encryption: Encryption = self == .decrypt ? .none : .key(key)
            let copy = try Connection(path: scratch.path("dest.db"), encryption: encryption)
            defer { copy.close() }
            return try copy.scalar("SELECT count(*) FROM item", as: Int.self) ?? -1
        }
    }

    static func prepare() throws -> (Scratch, String, EncryptionKey) {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        _ = try scratch.database("src.db", key: key, rowCount: 500)
        let plain = try Connection(path: scratch.path("plain.db"), encryption: .none)
        try plain.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        try plain.execute("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
            INSERT INTO item(body) SELECT 'row ' || i FROM n
            """)
        plain.close()
        return (scratch, keyPath, key)
    }

    @Test("a temporary file another PID namespace holds is left alone, byte for byte, and the run here succeeds",
          arguments: Writer.allCases)
    func liveFileInOtherNamespace(writer: Writer) throws {
        let (scratch, keyPath, key) = try Self.prepare()
        let holder = try TemporaryFileHolder(beside: scratch.path("dest.db"))
        // Seen from here the pid in the name is nobody's: the pid-based check removed this file.
        #expect(kill(holder.pidInItsNamespace, 0) != 0 && errno == ESRCH)
        let held = try holder.files()
        #expect(held.count == 2)

        let result = try writer.run(in: scratch, keyPath: keyPath, key: key)
        #expect(result.map { $0.status == 0 } ?? true, "\(result.map { "\($0)" } ?? "")")
        #expect(try holder.files() == held, "the live temporary file or its journal was touched")
        #expect(try fileMode(holder.path) == 0o600)
        #expect(try writer.destinationRows(in: scratch, key: key) == 500)

        try holder.finish()
        #expect(temporaryFiles(in: scratch.url.path).isEmpty, "\(temporaryFiles(in: scratch.url.path))")
    }

    @Test("a leftover whose holder was killed (SIGKILL) is removed by the next run, with its journal",
          arguments: [Writer.backup, .libraryBackup])
    func killedHolder(writer: Writer) throws {
        let (scratch, keyPath, key) = try Self.prepare()
        let holder = try TemporaryFileHolder(beside: scratch.path("dest.db"))
        holder.kill()
        #expect(try holder.files().count == 2, "SIGKILL leaves the file and its journal")

        let result = try writer.run(in: scratch, keyPath: keyPath, key: key)
        #expect(result.map { $0.status == 0 } ?? true, "\(result.map { "\($0)" } ?? "")")
        #expect(temporaryFiles(in: scratch.url.path).isEmpty, "\(temporaryFiles(in: scratch.url.path))")
        #expect(try writer.destinationRows(in: scratch, key: key) == 500)
    }

    @Test("the library's own temporary file is left alone by a backup run in another PID namespace")
    func libraryFileSeenFromOtherNamespace() throws {
        let (scratch, keyPath, key) = try Self.prepare()
        let source = try Connection(path: scratch.path("src.db"), key: key)
        defer { source.close() }
        // Both runs replace an existing backup.
        try source.backup(toPath: scratch.path("dest.db"))
        var otherRun: CommandResult?
        var paused: [String: [UInt8]] = [:]
        var afterOtherRun: [String: [UInt8]] = [:]
        func temporaryFilesWithBytes() throws -> [String: [UInt8]] {
            var files: [String: [UInt8]] = [:]
            for name in temporaryFiles(in: scratch.url.path) { files[name] = try fileBytes(scratch.path(name)) }
            return files
        }
        // The first progress call comes with the copy under way in the claimed temporary file: the other run goes
        // then, while this one waits, and must leave that file alone.
        try source.backup(toPath: scratch.path("dest.db"), pagesPerStep: 1) { _ in
            guard otherRun == nil else { return }
            paused = try temporaryFilesWithBytes()
            otherRun = try RunningCommand(
                ["backup", "src.db", "dest.db", "--key-file", keyPath, "--replace"],
                launcher: OtherPIDNamespace.launcher, in: scratch
            ).finish()
            afterOtherRun = try temporaryFilesWithBytes()
        }
        #expect(otherRun?.status == 0, "\(otherRun.map { "\($0)" } ?? "no run")")
        #expect(paused.keys.contains { !$0.hasSuffix("-journal") }, "\(paused.keys)")
        #expect(afterOtherRun == paused, "the run in the other namespace touched this run's temporary files")
        #expect(try Writer.backup.destinationRows(in: scratch, key: key) == 500)
        #expect(temporaryFiles(in: scratch.url.path).isEmpty, "\(temporaryFiles(in: scratch.url.path))")
    }

    @Test("an unclaimed leftover is removed even when the pid in its name is alive here")
    func unclaimedWithLivePID() throws {
        let (scratch, keyPath, key) = try Self.prepare()
        // pid 1 always exists; a file nobody locks (an older version's, or a run killed before it locked) is dead.
        let leftover = scratch.path("dest.db.sqlcipherkit-tmp-1-0123abcd")
        try scratch.writeFile("dest.db.sqlcipherkit-tmp-1-0123abcd", "partial copy", mode: 0o600)
        try scratch.writeFile("dest.db.sqlcipherkit-tmp-1-0123abcd-wal", "wal", mode: 0o600)
        // A journal whose file is gone (its run removed the file, then died).
        try scratch.writeFile("dest.db.sqlcipherkit-tmp-1-fedc-journal", "journal", mode: 0o600)
        // Not a temporary file's name: left alone.
        try scratch.writeFile("dest.db.sqlcipherkit-tmp-1-0123abcd.keep", "keep", mode: 0o600)
        let result = try Writer.backup.run(in: scratch, keyPath: keyPath, key: key)
        #expect(result?.status == 0, "\(result.map { "\($0)" } ?? "")")
        #expect(!FileManager.default.fileExists(atPath: leftover))
        #expect(!FileManager.default.fileExists(atPath: leftover + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path("dest.db.sqlcipherkit-tmp-1-fedc-journal")))
        #expect(FileManager.default.fileExists(atPath: leftover + ".keep"))
    }
}
