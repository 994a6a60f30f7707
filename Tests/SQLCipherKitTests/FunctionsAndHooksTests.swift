import Foundation
import SQLCipherKit
import Testing

@Suite("SQL functions, collations and hooks")
struct FunctionsAndHooksTests {
    static func database(_ dir: TemporaryDirectory) throws -> Connection {
        let db = try Connection(path: dir.path("functions.db"), key: TestKeys.raw)
        try db.execute("CREATE TABLE person(name TEXT, age INTEGER)")
        for (name, age) in [("Ada", 36), ("Grace", 85), ("Alan", 41)] {
            try db.execute("INSERT INTO person VALUES (?, ?)", name, age)
        }
        return db
    }

    @Test("scalar functions: arguments, result types, errors, argument counts")
    func scalarFunctions() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        try db.createFunction("reverse", argumentCount: 1, isDeterministic: true) { arguments in
            String.fromDatabaseValue(arguments[0]).map { String($0.reversed()) }
        }
        #expect(try db.all("SELECT reverse(name) FROM person ORDER BY rowid", as: String.self) == ["adA", "ecarG", "nalA"])
        #expect(try db.scalar("SELECT reverse(NULL)", as: String?.self) == .some(nil))

        try db.createFunction("sum_all") { arguments in
            arguments.compactMap { Int64.fromDatabaseValue($0) }.reduce(0, +)
        }
        #expect(try db.scalar("SELECT sum_all(1, 2, 3, 4)", as: Int.self) == 10)
        #expect(try db.scalar("SELECT sum_all()", as: Int.self) == 0)

        try db.createFunction("blob_of", argumentCount: 1) { _ in [UInt8]() }
        #expect(try db.scalar("SELECT typeof(blob_of(1))", as: String.self) == "blob")

        struct Refused: Error, CustomStringConvertible { var description: String { "refused by Swift" } }
        try db.createFunction("fail", argumentCount: 0) { _ in throw Refused() }
        let error = expectError(code: DatabaseError.SQLITE_ERROR) { try db.execute("SELECT fail()") }
        #expect(error?.message.contains("refused by Swift") == true)

        expectError(code: DatabaseError.SQLITE_ERROR) { try db.execute("SELECT reverse(1, 2)") }
        expectError(.invalidArgument) { try db.createFunction("bad", argumentCount: 200) { _ in nil } }
        // Deterministic functions may be used in an index on an expression.
        try db.execute("CREATE INDEX person_reversed ON person(reverse(name))")
    }

    @Test("aggregates run per group, including empty groups and errors")
    func aggregates() throws {
        struct Product: DatabaseAggregate {
            var product: Int64 = 1
            mutating func step(_ arguments: [DatabaseValue]) throws {
                guard let value = Int64.fromDatabaseValue(arguments[0]) else {
                    throw DatabaseError(kind: .valueConversion, code: DatabaseError.SQLITE_MISMATCH, message: "not an integer")
                }
                product *= value
            }
            func finalize() throws -> (any DatabaseValueConvertible)? { product }
        }
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        try db.createAggregate("product", argumentCount: 1) { Product() }
        #expect(try db.scalar("SELECT product(age) FROM person", as: Int.self) == 36 * 85 * 41)
        #expect(try db.all("SELECT product(age) FROM person GROUP BY name ORDER BY name", as: Int.self) == [36, 41, 85])
        #expect(try db.scalar("SELECT product(age) FROM person WHERE 0", as: Int.self) == 1)
        let error = expectError(code: DatabaseError.SQLITE_ERROR) { try db.execute("SELECT product(name) FROM person") }
        #expect(error?.message.contains("not an integer") == true)
    }

    @Test("collations order and compare")
    func collations() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        try db.createCollation("by_length") { a, b in a.count - b.count }
        #expect(try db.all("SELECT name FROM person ORDER BY name COLLATE by_length, name", as: String.self)
            == ["Ada", "Alan", "Grace"])
        #expect(try db.scalar("SELECT 'abc' = 'xyz' COLLATE by_length", as: Bool.self) == true)
    }

    @Test("commit, rollback and update hooks report, and a commit hook can veto")
    func hooks() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        var commits = 0, rollbacks = 0
        var changes: [DatabaseChange] = []
        var allowCommit = true
        try db.setCommitHook { commits += 1; return allowCommit }
        try db.setRollbackHook { rollbacks += 1 }
        try db.setUpdateHook { changes.append($0) }
        try db.execute("INSERT INTO person VALUES ('Edsger', 72)")
        try db.execute("UPDATE person SET age = 73 WHERE name = 'Edsger'")
        try db.execute("DELETE FROM person WHERE name = 'Edsger'")
        #expect(commits == 3)
        #expect(changes.map(\.kind) == [.insert, .update, .delete])
        #expect(changes.allSatisfy { $0.tableName == "person" && $0.databaseName == "main" })

        allowCommit = false
        expectError(code: DatabaseError.SQLITE_CONSTRAINT) { try db.execute("INSERT INTO person VALUES ('Barbara', 80)") }
        #expect(rollbacks == 1)
        #expect(try db.scalar("SELECT count(*) FROM person", as: Int.self) == 3)
        #expect(changes.count == 4, "the vetoed insert was reported before the veto rolled it back")

        try db.setCommitHook(nil)
        try db.setUpdateHook(nil)
        try db.execute("INSERT INTO person VALUES ('Barbara', 80)")
        #expect(changes.count == 4)
    }

    @Test("an authorizer can deny and ignore, but cannot lift the encryption guard")
    func authorizer() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        try db.setAuthorizer { request in
            if request.actionCode == AuthorizerRequest.delete { return .deny }
            if request.actionCode == AuthorizerRequest.read && request.argument2 == "age" { return .ignore }
            return .allow
        }
        expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("DELETE FROM person") }
        #expect(try db.all("SELECT age FROM person", as: Int?.self) == [nil, nil, nil])
        try db.setAuthorizer { _ in .allow }
        expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA temp_store = FILE") }
        expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute("PRAGMA key = 'x'") }
        try db.setAuthorizer(nil)
        #expect(try db.all("SELECT age FROM person ORDER BY age", as: Int.self) == [36, 41, 85])
    }

    @Test("a progress handler can interrupt a long query; a busy handler decides on retries")
    func progressAndBusy() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        var calls = 0
        try db.setProgressHandler(every: 1000) { calls += 1; return calls > 5 }
        expectError(code: DatabaseError.SQLITE_INTERRUPT) {
            try db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        }
        try db.setProgressHandler(nil)

        let other = try Connection(path: dir.path("functions.db"), key: TestKeys.raw)
        try other.execute("BEGIN IMMEDIATE")
        var attempts: [Int] = []
        try db.setBusyHandler { count in attempts.append(count); return count < 3 }
        expectError(code: DatabaseError.SQLITE_BUSY) { try db.execute("INSERT INTO person VALUES ('X', 1)") }
        #expect(attempts == [0, 1, 2, 3])
        try other.execute("ROLLBACK")
        try db.setBusyHandler(nil)
        try db.execute("INSERT INTO person VALUES ('X', 1)")
    }

    @Test("functions, hooks and traces survive a rekey; a pool registers functions on every connection")
    func registrationsSurviveRekeyAndPools() async throws {
        let dir = try TemporaryDirectory()
        let db = try Self.database(dir)
        try db.createFunction("twice", argumentCount: 1) { arguments in Int64.fromDatabaseValue(arguments[0]).map { $0 * 2 } }
        var traced = 0
        try db.trace { _ in traced += 1 }
        try db.rekey(to: TestKeys.otherPassphrase)
        #expect(try db.scalar("SELECT twice(21)", as: Int.self) == 42)
        #expect(traced > 0)
        db.close()

        var options = OpenOptions()
        options.prepareConnection = { connection in
            try connection.createFunction("twice", argumentCount: 1) { arguments in
                Int64.fromDatabaseValue(arguments[0]).map { $0 * 2 }
            }
        }
        // On the readers' queues, the first 3 reads hold their readers until all 3 do: 3 readers open for certain
        // (not fewer, reused by reads that did not overlap), and each must have the function.
        let pool = try DatabasePool(
            path: dir.path("functions.db"), keyProvider: .fixed(TestKeys.otherPassphrase),
            configuration: .init(maximumReaderCount: 3, openOptions: options, asyncReadExecution: .readerQueue))
        let together = Rendezvous(parties: 3)
        try await withThrowingTaskGroup(of: (Int?, Bool).self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await pool.read { db in
                        let overlapped = together.arrive()
                        return (try db.scalar("SELECT twice(4)", as: Int.self), overlapped)
                    }
                }
            }
            for try await (value, overlapped) in group {
                #expect(value == 8)
                #expect(overlapped, "3 reads never held their readers at once")
            }
        }
        #expect(pool.readerConnectionCount == 3)
        #expect(try await pool.write { db in try db.scalar("SELECT twice(5)", as: Int.self) } == 10)
        pool.close()
    }
}
