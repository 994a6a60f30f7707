import Dispatch
import Foundation
@testable import SQLCipherKit
import Synchronization
import Testing

/// The gate that async pool reads running in place take turns through at the start and end of their transactions
/// (`ReadLockGate`), tested alone: a pool decides by timing whether a read runs in place, the gate does not.
@Suite("Pool read-lock gate")
struct PoolReadLockGateTests {
    /// Runs `body` on a thread of its own and waits for it; a hang (a gate left locked: its mutex is not recursive)
    /// becomes a failure after 60 s instead of stopping the suite.
    static func finishes(_ comment: Comment, _ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread {
            body()
            done.signal()
        }.start()
        let finished = done.wait(timeout: .now() + 60) == .success
        if !finished { Issue.record(comment) }
        return finished
    }

    static func makeDatabase(_ dir: TemporaryDirectory) throws -> Connection {
        let db = try Connection(path: dir.path("gate.db"), key: TestKeys.raw)
        _ = try db.pragmaText("journal_mode = WAL")
        try db.execute("CREATE TABLE t(x INTEGER)")
        try db.execute("INSERT INTO t VALUES (1), (2), (3)")
        return db
    }

    @Test("a read through the gate commits, and the gate is free afterwards, also when the read fails")
    func gateIsReleased() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.makeDatabase(dir)
        defer { db.close() }
        let gate = ReadLockGate()
        struct Failure: Error {}
        // `Connection` is not Sendable: the thread below uses it only while this one waits.
        nonisolated(unsafe) let connection = db
        let finished = Self.finishes("the gate stayed locked after a read") {
            let sum = try? gate.readTransaction(connection) { db in try db.scalar("SELECT sum(x) FROM t", as: Int.self) }
            #expect(sum == 6)
            #expect(!connection.isInsideTransaction)
            #expect(throws: Failure.self) {
                try gate.readTransaction(connection) { _ in throw Failure() }
            }
            #expect(!connection.isInsideTransaction)
            // The body ends the transaction itself: misuse, reported after the body returned with the gate taken.
            let misuse = #expect(throws: DatabaseError.self) {
                try gate.readTransaction(connection) { db in try db.execute("COMMIT") }
            }
            #expect(misuse?.kind == .transactionMisuse)
            #expect(throws: DatabaseError.self) {
                try gate.readTransaction(connection) { db in try db.execute("SELECT * FROM missing_table") }
            }
            // Each of these would deadlock on a gate left locked.
            gate.withLock {}
            let count = try? gate.readTransaction(connection) { db in
                try db.scalar("SELECT count(*) FROM t", as: Int.self)
            }
            #expect(count == 3)
        }
        #expect(finished)
    }

    @Test("the transaction's snapshot is taken when it starts, before the body's first statement")
    func snapshotAtStart() throws {
        let dir = try TemporaryDirectory()
        let db = try Self.makeDatabase(dir)
        defer { db.close() }
        let writer = try Connection(path: dir.path("gate.db"), key: TestKeys.raw)
        defer { writer.close() }
        let sum = try ReadLockGate().readTransaction(db) { db in
            try writer.execute("UPDATE t SET x = x + 10")
            return try db.scalar("SELECT sum(x) FROM t", as: Int.self)
        }
        #expect(sum == 6)
        #expect(try db.scalar("SELECT sum(x) FROM t", as: Int.self) == 36)
    }
}
