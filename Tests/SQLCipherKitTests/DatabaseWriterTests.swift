import Foundation
import SQLCipherKit
import Testing

/// DatabaseQueue and DatabasePool behind the one protocol and the one configuration.
@Suite("DatabaseWriter")
struct DatabaseWriterTests {
    /// The blocking half of the protocol (a synchronous context picks the blocking overloads).
    static func exerciseBlocking(_ writer: some DatabaseWriter) throws -> [Int] {
        try writer.writeWithoutTransaction { db in try db.execute("CREATE TABLE IF NOT EXISTS t(x INTEGER)") }
        try writer.write { db in try db.execute("INSERT INTO t VALUES (1)") }
        // A write that throws rolls back; a read cannot write.
        #expect(throws: DatabaseError.self) {
            try writer.write { db in
                try db.execute("INSERT INTO t VALUES (99)")
                try db.execute("INSERT INTO missing VALUES (1)")
            }
        }
        #expect(throws: DatabaseError.self) { try writer.read { db in try db.execute("INSERT INTO t VALUES (98)") } }
        return try writer.read { db in try db.all("SELECT x FROM t ORDER BY x", as: Int.self) }
    }

    /// Everything the protocol offers, used without knowing which type it is.
    static func exercise(_ writer: some DatabaseWriter) async throws -> [Int] {
        #expect(try exerciseBlocking(writer) == [1])
        try await writer.write { db in try db.execute("INSERT INTO t VALUES (2)") }
        try await writer.writeWithoutTransaction { db in try db.execute("INSERT INTO t VALUES (3)") }
        return try await writer.read { db in try db.all("SELECT x FROM t ORDER BY x", as: Int.self) }
    }

    static func migrateAndClose(_ writer: some DatabaseWriter) throws {
        var migrator = DatabaseMigrator()
        try migrator.register("v1") { db in try db.execute("CREATE TABLE note(body TEXT)") }
        try migrator.migrate(writer)
        #expect(try migrator.hasCompletedMigrations(in: writer))
        #expect(try migrator.appliedMigrations(in: writer) == ["v1"])
        writer.close()
        #expect(writer.isClosed)
        expectError(.connectionClosed) { try writer.read { _ in 0 } }
    }

    @Test("a queue and a pool made with the same settings and options behave the same through the protocol")
    func sameBehaviour() async throws {
        let dir = try TemporaryDirectory()
        var configuration = DatabasePool.Configuration(maximumReaderCount: 2)
        configuration.openOptions.busyTimeout = .seconds(60)
        let queue = try DatabaseQueue(
            path: dir.path("queue.db"), keyProvider: .fixed(TestKeys.raw), settings: configuration.settings,
            options: configuration.openOptions)
        let pool = try DatabasePool(
            path: dir.path("pool.db"), keyProvider: .fixed(TestKeys.raw), configuration: configuration)
        let writers: [any DatabaseWriter] = [queue, pool]
        for writer in writers {
            #expect(try await Self.exercise(writer) == [1, 2, 3], "\(type(of: writer))")
            try Self.migrateAndClose(writer)
        }
        // Both files are encrypted and hold the same rows.
        for name in ["queue.db", "pool.db"] {
            let db = try Connection(path: dir.path(name), key: TestKeys.raw)
            #expect(try db.all("SELECT x FROM t ORDER BY x", as: Int.self) == [1, 2, 3])
            db.close()
            expectError(.wrongKey) { try Connection(path: dir.path(name), key: TestKeys.otherPassphrase) }
        }
    }
}
