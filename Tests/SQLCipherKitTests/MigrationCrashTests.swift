import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real process killed with SIGKILL in the middle of a migration: the migration must be either applied with its
/// record or not at all, and running the migrator again must complete.
///
/// The child is this test binary itself, run with `--filter MigrationCrashChild` and environment variables that make
/// ``MigrationCrashChild/run()`` migrate instead of returning at once (the package has no room for a helper
/// executable, and the child must be a separate process for the kill to be real).
enum MigrationCrashEnvironment {
    static let databaseVariable = "SQLCIPHERKIT_MIGRATION_CHILD"
    static let readyVariable = "SQLCIPHERKIT_MIGRATION_CHILD_READY"
    static let modeVariable = "SQLCIPHERKIT_MIGRATION_CHILD_MODE"

    /// Rows of 1 KiB inserted by the big migration: about 6 MiB, more than the page cache holds, so pages of the
    /// unfinished transaction reach the database file (or the WAL) before the kill.
    static let bigRowCount = 6_000

    /// The migrations of both processes. In the child, `v2-big` may hang after its inserts (mode `hang`) so the
    /// parent can kill it at a known point.
    static func migrator(hangAfterInsertsSignalling readyPath: String? = nil) throws -> DatabaseMigrator {
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
                while true { usleep(100_000) }
            }
        }
        try migrator.register("v3-index") { db in
            try db.execute("CREATE INDEX note_body ON note(body)")
        }
        return migrator
    }

    /// The test binary: the child runs it again.
    static var testBinaryPath: String? {
        #if os(Linux)
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        #else
        return nil  // On Apple platforms the tests run inside xctest's process.
        #endif
    }
}

/// The child side: does nothing unless the parent set the environment.
@Suite("MigrationCrashChild")
struct MigrationCrashChild {
    @Test("child process of the migration crash test (returns at once when run on its own)")
    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let path = environment[MigrationCrashEnvironment.databaseVariable] else { return }
        let readyPath = environment[MigrationCrashEnvironment.modeVariable] == "hang"
            ? environment[MigrationCrashEnvironment.readyVariable] : nil
        let db = try Connection(path: path, key: TestKeys.raw)
        try MigrationCrashEnvironment.migrator(hangAfterInsertsSignalling: readyPath).migrate(db)
    }
}

@Suite("Migrations survive SIGKILL", .serialized, .enabled(if: MigrationCrashEnvironment.testBinaryPath != nil))
struct MigrationCrashTests {
    private static func startChild(database: String, mode: String, readyPath: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: MigrationCrashEnvironment.testBinaryPath!)
        process.arguments = ["--testing-library", "swift-testing", "--filter", "MigrationCrashChild"]
        var environment = ProcessInfo.processInfo.environment
        environment[MigrationCrashEnvironment.databaseVariable] = database
        environment[MigrationCrashEnvironment.modeVariable] = mode
        environment[MigrationCrashEnvironment.readyVariable] = readyPath
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// A database with `v1` applied and one note, in the given journal mode.
    private static func prepare(_ path: String, journalMode: String) throws {
        let db = try Connection(path: path, key: TestKeys.raw)
        defer { db.close() }
        _ = try db.scalar("PRAGMA journal_mode = \(journalMode)", as: String.self)
        try MigrationCrashEnvironment.migrator().migrate(db, upTo: "v1-create-note")
        try db.execute("INSERT INTO note(body) VALUES ('kept')")
    }

    /// Checks the file after a kill: intact, and `v2-big` either fully applied with its record or not at all.
    /// Returns whether it was applied.
    private static func checkAfterKill(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let db = try Connection(path: path, key: TestKeys.raw)
        defer { db.close() }
        try db.quickCheck()
        let applied = try MigrationCrashEnvironment.migrator().appliedMigrations(in: db)
        let bigExists = try db.scalar(
            "SELECT count(*) FROM sqlite_master WHERE name = 'big'", as: Int.self) == 1
        let body = try db.scalar("SELECT body FROM note", as: String.self)
        if applied.contains("v2-big") {
            #expect(bigExists, sourceLocation: sourceLocation)
            #expect(try db.scalar("SELECT count(*) FROM big", as: Int.self) == MigrationCrashEnvironment.bigRowCount,
                    sourceLocation: sourceLocation)
            #expect(body == "kept (migrated)", sourceLocation: sourceLocation)
            return true
        }
        #expect(applied == ["v1-create-note"], sourceLocation: sourceLocation)
        #expect(!bigExists, sourceLocation: sourceLocation)
        #expect(body == "kept", sourceLocation: sourceLocation)
        return false
    }

    private static func migrateToTheEnd(_ path: String) throws {
        let db = try Connection(path: path, key: TestKeys.raw)
        defer { db.close() }
        let migrator = try MigrationCrashEnvironment.migrator()
        try migrator.migrate(db)
        #expect(try migrator.appliedMigrations(in: db) == migrator.registeredMigrations)
        #expect(try db.scalar("SELECT count(*) FROM big", as: Int.self) == MigrationCrashEnvironment.bigRowCount)
        #expect(try db.scalar("SELECT body FROM note", as: String.self) == "kept (migrated)")
        try db.quickCheck()
    }

    @Test("killed inside a migration's transaction: nothing of it remains, and migrating again completes",
          arguments: ["DELETE", "WAL"])
    func killedInsideMigration(journalMode: String) throws {
        try withTemporaryDirectory { directory in
            let path = directory.path("crash.db")
            let readyPath = directory.path("ready")
            try Self.prepare(path, journalMode: journalMode)

            let child = try Self.startChild(database: path, mode: "hang", readyPath: readyPath)
            let deadline = ContinuousClock.now + .seconds(120)
            while !FileManager.default.fileExists(atPath: readyPath) && child.isRunning && ContinuousClock.now < deadline {
                usleep(20_000)
            }
            #expect(FileManager.default.fileExists(atPath: readyPath), "the child reached the end of its inserts")
            // The uncommitted transaction has written pages: a hot journal or uncommitted WAL frames.
            let sideFile = path + (journalMode == "WAL" ? "-wal" : "-journal")
            #expect(FileManager.default.fileExists(atPath: sideFile))
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal)

            #expect(try Self.checkAfterKill(path) == false)
            try Self.migrateToTheEnd(path)
        }
    }

    @Test("killed at random moments: each time all or nothing, and migrating again completes")
    func killedAtRandomMoments() throws {
        try withTemporaryDirectory { directory in
            // The typical duration of an uninterrupted child run, process start included.
            let timing = directory.path("timing.db")
            try Self.prepare(timing, journalMode: "DELETE")
            let start = ContinuousClock.now
            let run = try Self.startChild(database: timing, mode: "complete", readyPath: directory.path("unused"))
            run.waitUntilExit()
            let typical = ContinuousClock.now - start
            #expect(run.terminationStatus == 0)
            #expect(try Self.checkAfterKill(timing), "the child applied the migrations")
            try Self.migrateToTheEnd(timing)
            let typicalMicroseconds = Int(typical.components.seconds) * 1_000_000
                + Int(typical.components.attoseconds / 1_000_000_000_000)

            var outcomes: [String: Int] = [:]
            for iteration in 0..<8 {
                let path = directory.path("random-\(iteration).db")
                try Self.prepare(path, journalMode: iteration.isMultiple(of: 2) ? "DELETE" : "WAL")
                let child = try Self.startChild(database: path, mode: "complete", readyPath: directory.path("unused"))
                usleep(UInt32(Int.random(in: (typicalMicroseconds / 2)...(typicalMicroseconds * 5 / 4))))
                kill(child.processIdentifier, SIGKILL)
                child.waitUntilExit()
                let applied = try Self.checkAfterKill(path)
                let outcome = (child.terminationReason == .uncaughtSignal ? "killed" : "finished")
                    + (applied ? ", applied" : ", not applied")
                outcomes[outcome, default: 0] += 1
                try Self.migrateToTheEnd(path)
            }
            print("migration crash test on SQLCipher \(SQLCipher.version): typical child run"
                + " \(typicalMicroseconds / 1000) ms; " + outcomes.sorted { $0.key < $1.key }
                    .map { "\($0.value) \($0.key)" }.joined(separator: ", "))
        }
    }
}
