import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real process killed with SIGKILL in the middle of a migration: the migration must be either applied with its
/// record or not at all, and running the migrator again must complete.
///
/// The child is `sqlcipherkit-test-child` (``TestChild``, role ``MigrationCrashScenario/role``): the same
/// migrations (``MigrationCrashScenario/migrator(hangAfterInsertsSignalling:)``) in a process of its own, so that the
/// kill is real. The key reaches it through its environment.
@Suite("Migrations survive SIGKILL", .serialized, .enabled(if: TestChild.isSupported,
    "the child program is found beside the test binary, and on Apple platforms the tests run inside xctest"))
struct MigrationCrashTests {
    private static func startChild(
        database: String, mode: MigrationCrashScenario.Mode, readyPath: String
    ) throws -> Process {
        try TestChild.start(
            MigrationCrashScenario.role, [database, mode.rawValue, readyPath], keyText: TestKeys.rawText)
    }

    /// A database with `v1` applied and one note, in the given journal mode.
    private static func prepare(_ path: String, journalMode: String) throws {
        let db = try Connection(path: path, key: TestKeys.raw)
        defer { db.close() }
        _ = try db.scalar("PRAGMA journal_mode = \(journalMode)", as: String.self)
        try MigrationCrashScenario.migrator().migrate(db, upTo: "v1-create-note")
        try db.execute("INSERT INTO note(body) VALUES ('kept')")
    }

    /// Checks the file after a kill: intact, and `v2-big` either fully applied with its record or not at all.
    /// Returns whether it was applied.
    private static func checkAfterKill(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let db = try Connection(path: path, key: TestKeys.raw)
        defer { db.close() }
        try db.quickCheck()
        let applied = try MigrationCrashScenario.migrator().appliedMigrations(in: db)
        let bigExists = try db.scalar(
            "SELECT count(*) FROM sqlite_master WHERE name = 'big'", as: Int.self) == 1
        let body = try db.scalar("SELECT body FROM note", as: String.self)
        if applied.contains("v2-big") {
            #expect(bigExists, sourceLocation: sourceLocation)
            #expect(try db.scalar("SELECT count(*) FROM big", as: Int.self) == MigrationCrashScenario.bigRowCount,
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
        let migrator = try MigrationCrashScenario.migrator()
        try migrator.migrate(db)
        #expect(try migrator.appliedMigrations(in: db) == migrator.registeredMigrations)
        #expect(try db.scalar("SELECT count(*) FROM big", as: Int.self) == MigrationCrashScenario.bigRowCount)
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

            let child = try Self.startChild(database: path, mode: .hang, readyPath: readyPath)
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
            let run = try Self.startChild(database: timing, mode: .complete, readyPath: directory.path("unused"))
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
                let child = try Self.startChild(database: path, mode: .complete, readyPath: directory.path("unused"))
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
