import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The migrations of the migration crash test (Tests/SQLCipherKitTests/MigrationCrashTests.swift), shared by the test
/// and the child process it kills (``TestChild``, role ``role``).
public enum MigrationCrashScenario {
    /// The child's role: `migration-crash DATABASE MODE READY_PATH`, the key in ``TestChild/keyVariable``.
    public static let role = "migration-crash"

    /// What the child does: run every migration (`complete`), or stop for good after the inserts of `v2-big`,
    /// having created the ready file (`hang`), so the test can kill it at a known point.
    public enum Mode: String, Sendable {
        case complete, hang
    }

    /// Rows of 1 KiB inserted by the big migration: about 6 MiB, more than the page cache holds, so pages of the
    /// unfinished transaction reach the database file (or the WAL) before the kill.
    public static let bigRowCount = 6_000

    /// The migrations of both processes. `v2-big` hangs after its inserts when given a ready file to create.
    public static func migrator(hangAfterInsertsSignalling readyPath: String? = nil) throws -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        try migrator.register("v1-create-note") { db in
            try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        }
        try migrator.register("v2-big") { db in
            try db.execute("CREATE TABLE big(id INTEGER PRIMARY KEY, filler BLOB NOT NULL)")
            let insert = try db.prepare("INSERT INTO big(filler) VALUES (randomblob(1024))")
            for _ in 0..<bigRowCount { try insert.run() }
            try db.execute("UPDATE note SET body = body || ' (migrated)'")
            if let readyPath {
                _ = FileManager.default.createFile(atPath: readyPath, contents: Data())
                while true { pause() }
            }
        }
        try migrator.register("v3-index") { db in
            try db.execute("CREATE INDEX note_body ON note(body)")
        }
        return migrator
    }

    /// The child's side: opens `database` with the key in ``TestChild/keyVariable`` and migrates it.
    public static func runChild(database: String, mode: Mode, readyPath: String) throws {
        let db = try Connection(path: database, key: EncryptionKey(environmentVariable: TestChild.keyVariable))
        defer { db.close() }
        try migrator(hangAfterInsertsSignalling: mode == .hang ? readyPath : nil).migrate(db)
    }
}
