#if SQLKit  // trait SQLKit (Package.swift)
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitSQLKit
import SQLKit
import Testing

@Suite("The SQLKit driver over DatabasePool")
struct SQLCipherSQLDatabaseTests {
    @Test("the dialect follows the engine's version: 3.15.2 lacks what 3.53 has")
    func dialectCapabilities() {
        let old = SQLCipherDialect(capabilities: .init(sqliteVersion: SQLCipher.Version(3, 15, 2)))
        let new = SQLCipherDialect(capabilities: .init(sqliteVersion: SQLCipher.Version(3, 53, 4)))
        #expect(!old.supportsReturning && new.supportsReturning)
        #expect(old.upsertSyntax == .unsupported && new.upsertSyntax == .standard)
        for feature in [SQLCipherDialect.Capabilities.Feature.windowFunctions, .dropColumn, .booleanLiterals] {
            #expect(!old.capabilities.supports(feature) && new.capabilities.supports(feature))
        }
        #expect(old.capabilities.missingReason(.returning)?.contains("3.35.0") == true)
        #expect((old.literalBoolean(true) as? SQLRaw)?.sql == "1")
        #expect((new.literalBoolean(true) as? SQLRaw)?.sql == "TRUE")
        // The linked engine decides, never the headers.
        let linked = SQLCipherDialect().capabilities.sqliteVersion
        #expect(linked.description == SQLCipher.sqliteVersion)
    }

    @Test("reads run on readers, writes on the writer, a transaction sees its own writes and rolls back on throw")
    func routingAndTransactions() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pool = try DatabasePool(path: directory.path("s.db"), keyProvider: .fixed(TestKeys.raw))
        defer { pool.close() }
        let sql = SQLCipherSQLDatabase(pool: pool)
        try await sql.create(table: "t").column("id", type: .int, .primaryKey).column("v", type: .text).run()
        #expect(pool.readerConnectionCount == 0)
        try await sql.insert(into: "t").columns("v").values(SQLBind("a")).run()
        #expect(try await sql.select().column("v").from("t").all(decodingColumn: "v", as: String.self) == ["a"])
        #expect(pool.readerConnectionCount == 1)

        try await sql.transaction { tx in
            try await tx.insert(into: "t").columns("v").values(SQLBind("b")).run()
            let inside = try await tx.select().column(SQLFunction("count", args: SQLLiteral.all), as: "n").from("t")
                .first(decodingColumn: "n", as: Int.self)
            #expect(inside == 2)
        }
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await sql.transaction { tx in
                try await tx.insert(into: "t").columns("v").values(SQLBind("c")).run()
                throw Boom()
            }
        }
        let values = try await sql.select().column("v").from("t").orderBy("id").all(decodingColumn: "v", as: String.self)
        #expect(values == ["a", "b"])
    }

    @Test("concurrent transactions and reads do not interleave on the writer")
    func concurrentTransactions() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pool = try DatabasePool(path: directory.path("c.db"), keyProvider: .fixed(TestKeys.raw))
        defer { pool.close() }
        let sql = SQLCipherSQLDatabase(pool: pool)
        try await sql.create(table: "counter").column("n", type: .int).run()
        try await sql.insert(into: "counter").columns("n").values(SQLBind(0)).run()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await sql.transaction { tx in
                        let n = try await tx.select().column("n").from("counter").first(decodingColumn: "n", as: Int.self)
                        try await tx.update("counter").set("n", to: SQLBind((n ?? 0) + 1)).run()
                    }
                }
                group.addTask { _ = try await sql.select().column("n").from("counter").all() }
            }
            try await group.waitForAll()
        }
        #expect(try await sql.select().column("n").from("counter").first(decodingColumn: "n", as: Int.self) == 20)
    }

    @Test("values are stored as fluent-sqlite-driver stores them; bound values never reach the log")
    func storageAndLogging() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pool = try DatabasePool(path: directory.path("v.db"), keyProvider: .fixed(TestKeys.raw))
        defer { pool.close() }
        let lines = LogLines()
        let logger = lines.logger("capture")
        let sql = SQLCipherSQLDatabase(pool: pool, logger: logger, queryLogLevel: .info)
        try await sql.create(table: "v").column("d", type: .real).column("u", type: .text).column("b", type: .int)
            .column("j", type: .text).column("s", type: .text).run()
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let uuid = UUID()
        try await sql.insert(into: "v").columns("d", "u", "b", "j", "s")
            .values(SQLBind(date), SQLBind(uuid), SQLBind(true), SQLBind(["x": 1]), SQLBind(TestKeys.sentinel)).run()
        let types = try await pool.read { db in
            try db.query("SELECT typeof(d), typeof(u), typeof(b), typeof(j) FROM v").map { row -> [String] in
                try (0..<4).map { try row[$0] }
            }
        }
        #expect(types == [["real", "text", "integer", "text"]])
        let row = try #require(try await sql.select().columns("d", "u", "b", "j").from("v").first())
        #expect(try row.decode(column: "d", as: Date.self) == date)
        #expect(try row.decode(column: "u", as: UUID.self) == uuid)
        #expect(try row.decode(column: "b", as: Bool.self))
        #expect(try row.decode(column: "j", as: [String: Int].self) == ["x": 1])
        #expect(!lines.text.isEmpty && !lines.text.contains(TestKeys.sentinel))
        #expect(!String(describing: row).contains(uuid.uuidString))
    }
    @Test("each statement is timed on its own: a slow one goes to the readers' queues, a new one still runs in place")
    func perStatementTiming() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var configuration = DatabasePool.Configuration(maximumReaderCount: 2)
        configuration.openOptions.prepareConnection = { db in
            // in_place(): 1 when the statement runs in the calling task (its task-local value is visible there),
            // 0 on a reader's dispatch queue.
            try db.createFunction("in_place", argumentCount: 0) { _ in InPlaceProbe.isCallingTask ? 1 : 0 }
            // pause(ms): at least that long, whatever the machine's speed: makes a statement long.
            try db.createFunction("pause", argumentCount: 1) { arguments in
                Thread.sleep(forTimeInterval: Double(Int.fromDatabaseValue(arguments[0]) ?? 0) / 1000)
                return 0
            }
        }
        let pool = try DatabasePool(
            path: directory.path("timing.db"), keyProvider: .fixed(TestKeys.raw), configuration: configuration)
        defer { pool.close() }
        let sql = SQLCipherSQLDatabase(pool: pool)
        let slow = { (milliseconds: Int) -> SQLQueryString in
            "SELECT pause(\(bind: milliseconds)) AS p, in_place() AS q"
        }
        let lookup: SQLQueryString = "SELECT in_place() AS q"
        // The texts the driver times them by, from its own serializer, must not share an average.
        let slowText = sql.serialize(slow(0)).sql
        let lookupText = sql.serialize(lookup).sql
        try #require(slowText == sql.serialize(slow(20)).sql, "one statement whatever its bound value: \(slowText)")
        try #require(
            DatabasePool.readTimingSlot(of: slowText) != DatabasePool.readTimingSlot(of: lookupText),
            "the two statements share an average: \(slowText) / \(lookupText)")
        func ranInPlace(_ query: SQLQueryString) async throws -> Bool {
            try await InPlaceProbe.$isCallingTask.withValue(true) {
                let row = try #require(try await sql.raw(query).first())
                return try row.decode(column: "q", as: Int.self) == 1
            }
        }
        // 20 ms at least, wherever it runs: its statement's average is then far over the 100 µs limit.
        _ = try await ranInPlace(slow(20))
        #expect(try await !ranInPlace(slow(0)))
        // A statement never read before runs in place: with one average for the whole pool it went to the queue.
        #expect(try await ranInPlace(lookup))
        // The notes example's lookup and count, as this driver writes them, have averages of their own too.
        let exampleLookup = sql.select().column("body").from("note").where("id", .equal, 1).limit(1).query
        let exampleCount = sql.select().column(SQLFunction("count", args: SQLLiteral.all), as: "n").from("note")
            .limit(1).query
        #expect(
            DatabasePool.readTimingSlot(of: sql.serialize(exampleLookup).sql)
                != DatabasePool.readTimingSlot(of: sql.serialize(exampleCount).sql))
    }
}

/// Whether a statement runs in the calling task: task-local values are visible there, not on a dispatch queue.
private enum InPlaceProbe {
    @TaskLocal static var isCallingTask = false
}

#endif
