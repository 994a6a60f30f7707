import Foundation
import SQLCipherKit
import Testing

private struct Boom: Error, CustomStringConvertible {
    var description: String { "boom" }
}

/// Counts how many times each migration ran.
private final class RunLog: Sendable {
    private let runs = Shared<[String]>([])
    func record(_ identifier: String) { runs.withLock { $0.append(identifier) } }
    var identifiers: [String] { runs.withLock { $0 } }
}

private func standardMigrator(_ log: RunLog = RunLog()) throws -> DatabaseMigrator {
    var migrator = DatabaseMigrator()
    try migrator.register("v1-create-note") { db in
        log.record("v1-create-note")
        try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    }
    try migrator.register("v2-note-rank") { db in
        log.record("v2-note-rank")
        try db.execute("ALTER TABLE note ADD COLUMN rank INTEGER NOT NULL DEFAULT 0")
    }
    try migrator.register("v3-seed") { db in
        log.record("v3-seed")
        try db.execute("INSERT INTO note(body, rank) VALUES ('first', 1)")
    }
    return migrator
}

private func tableExists(_ db: Connection, _ name: String) throws -> Bool {
    try db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", name, as: Int.self) == 1
}

@Suite("DatabaseMigrator")
struct MigrationTests {
    @Test("migrations run once, in order, each recorded; a second run does nothing")
    func runsInOrderOnce() throws {
        try withTemporaryDirectory { directory in
            let db = try Connection(path: directory.path("m.db"), key: TestKeys.raw)
            let log = RunLog()
            let migrator = try standardMigrator(log)
            #expect(try migrator.appliedMigrations(in: db) == [])
            #expect(try migrator.hasCompletedMigrations(in: db) == false)
            #expect(try tableExists(db, DatabaseMigrator.tableName) == false, "reading the state creates nothing")

            try migrator.migrate(db)
            #expect(log.identifiers == ["v1-create-note", "v2-note-rank", "v3-seed"])
            #expect(try migrator.appliedMigrations(in: db) == migrator.registeredMigrations)
            #expect(try migrator.hasCompletedMigrations(in: db))
            let appliedAt = try db.all("SELECT applied_at FROM sqlcipherkit_migrations", as: String.self)
            #expect(appliedAt.count == 3 && appliedAt.allSatisfy { $0.count == 23 })

            try migrator.migrate(db)
            #expect(log.identifiers.count == 3)
            #expect(try db.scalar("SELECT count(*) FROM note", as: Int.self) == 1)
        }
    }

    @Test("registering an identifier twice, or an empty one, is an error")
    func duplicateRegistration() throws {
        var migrator = DatabaseMigrator()
        try migrator.register("v1") { _ in }
        let error = expectError(.invalidArgument) { try migrator.register("v1") { _ in } }
        #expect(error?.message.contains("`v1`") == true)
        expectError(.invalidArgument) { try migrator.register("") { _ in } }
        #expect(migrator.registeredMigrations == ["v1"])
    }

    @Test("a failing migration rolls back alone; the error names it and keeps the SQLite error's kind and code")
    func failingMigrationRollsBackAlone() throws {
        try withTemporaryDirectory { directory in
            let db = try Connection(path: directory.path("m.db"), key: TestKeys.raw)
            var migrator = DatabaseMigrator()
            try migrator.register("v1-ok") { db in try db.execute("CREATE TABLE a(x)") }
            try migrator.register("v2-broken") { db in
                try db.execute("CREATE TABLE b(x)")
                try db.execute("INSERT INTO b VALUES (1)")
                try db.execute("INSERT INTO missing_table VALUES (1)")
            }
            try migrator.register("v3-never") { db in try db.execute("CREATE TABLE c(x)") }
            let error = expectError(.sqlite) { try migrator.migrate(db) }
            #expect(error?.message.contains("migration `v2-broken`") == true)
            #expect(error?.message.contains("missing_table") == true)
            #expect(error?.sql == "INSERT INTO missing_table VALUES (1)")
            #expect(try migrator.appliedMigrations(in: db) == ["v1-ok"])
            #expect(try tableExists(db, "a"))
            #expect(try tableExists(db, "b") == false)
            #expect(try tableExists(db, "c") == false)
            #expect(db.isInsideTransaction == false)
        }
    }

    @Test("an error that is not a DatabaseError becomes migrationFailed, naming the migration")
    func foreignError() throws {
        let db = try Connection.inMemory()
        var migrator = DatabaseMigrator()
        try migrator.register("v1-throws") { db in
            try db.execute("CREATE TABLE a(x)")
            throw Boom()
        }
        let error = expectError(.migrationFailed) { try migrator.migrate(db) }
        #expect(error?.message.contains("migration `v1-throws`") == true)
        #expect(error?.message.contains("boom") == true)
        #expect(try tableExists(db, "a") == false)
    }

    @Test("a database migrated by a newer version is refused before anything runs")
    func refusesUnknownMigrations() throws {
        try withTemporaryDirectory { directory in
            let db = try Connection(path: directory.path("m.db"), key: TestKeys.raw)
            var newer = try standardMigrator()
            try newer.register("v4-from-the-future") { db in try db.execute("CREATE TABLE future(x)") }
            try newer.migrate(db, upTo: "v1-create-note")
            try newer.migrate(db, upTo: "v4-from-the-future")
            #expect(try newer.appliedMigrations(in: db).count == 4)

            var older = DatabaseMigrator()
            let log = RunLog()
            try older.register("v1-create-note") { _ in log.record("v1") }
            try older.register("v1b-only-in-older") { _ in log.record("v1b") }
            let error = expectError(.invalidState) { try older.migrate(db) }
            #expect(error?.message.contains("`v2-note-rank`") == true)
            #expect(error?.message.contains("`v4-from-the-future`") == true)
            #expect(log.identifiers.isEmpty)
            #expect(try older.appliedMigrations(in: db).contains("v1b-only-in-older") == false)
        }
    }

    @Test("migrate(upTo:) stops after the named migration; an unknown name is an error")
    func upTo() throws {
        let db = try Connection.inMemory()
        let migrator = try standardMigrator()
        try migrator.migrate(db, upTo: "v2-note-rank")
        #expect(try migrator.appliedMigrations(in: db) == ["v1-create-note", "v2-note-rank"])
        #expect(try migrator.hasCompletedMigrations(in: db) == false)
        expectError(.invalidArgument) { try migrator.migrate(db, upTo: "v9") }
        try migrator.migrate(db)
        #expect(try migrator.hasCompletedMigrations(in: db))
    }

    @Test("migrating inside a transaction is refused")
    func insideTransaction() throws {
        let db = try Connection.inMemory()
        let migrator = try standardMigrator()
        try db.beginTransaction()
        expectError(.invalidState) { try migrator.migrate(db) }
        try db.rollback()
    }

    @Test("a migration that ends its own transaction is a transaction misuse naming it")
    func migrationEndsTransaction() throws {
        let db = try Connection.inMemory()
        var migrator = DatabaseMigrator()
        try migrator.register("v1-commits") { db in try db.execute("COMMIT") }
        let error = expectError(.transactionMisuse) { try migrator.migrate(db) }
        #expect(error?.message.contains("migration `v1-commits`") == true)
    }

    @Test("DatabaseQueue and DatabasePool overloads migrate encrypted files", arguments: ["queue", "pool"])
    func queueAndPool(kind: String) throws {
        try withTemporaryDirectory { directory in
            let path = directory.path("\(kind).db")
            let migrator = try standardMigrator()
            if kind == "queue" {
                let queue = try DatabaseQueue(path: path, keyProvider: .fixed(TestKeys.passphrase))
                #expect(try migrator.hasCompletedMigrations(in: queue) == false)
                try migrator.migrate(queue)
                #expect(try migrator.appliedMigrations(in: queue) == migrator.registeredMigrations)
                #expect(try migrator.hasCompletedMigrations(in: queue))
                queue.close()
            } else {
                let pool = try DatabasePool(path: path, keyProvider: .fixed(TestKeys.passphrase))
                #expect(try migrator.hasCompletedMigrations(in: pool) == false)
                try migrator.migrate(pool)
                #expect(try migrator.appliedMigrations(in: pool) == migrator.registeredMigrations)
                #expect(try migrator.hasCompletedMigrations(in: pool))
                #expect(try pool.read { db in try db.scalar("SELECT body FROM note", as: String.self) } == "first")
                pool.close()
            }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            #expect(!contains(try fileBytes(path), "sqlcipherkit_migrations"), "the file is encrypted")
        }
    }

    @Test("two migrators racing on one file apply each migration once")
    func concurrentMigrators() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("race.db")
        let log = RunLog()
        let migrator = try standardMigrator(log)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    // One waits for the other's lock for as long as that takes on a loaded machine (the default 5 s
                    // would make the outcome depend on how fast the other runs).
                    let db = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: .seconds(120)))
                    try migrator.migrate(db)
                    db.close()
                }
            }
            try await group.waitForAll()
        }
        #expect(log.identifiers.sorted() == migrator.registeredMigrations.sorted())
        let db = try Connection(path: path, key: TestKeys.raw)
        #expect(try db.scalar("SELECT count(*) FROM note", as: Int.self) == 1)
    }
}
