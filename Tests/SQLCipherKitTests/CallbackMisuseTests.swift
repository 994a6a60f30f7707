import Foundation
import SQLCipherKit
import Testing

/// `close()` (or a rekey, or any use SQLite forbids) from inside one of the connection's own callbacks or closures.
/// Before: an SQL function, a collation, the authorizer, a trace, progress or busy handler that closed the connection
/// killed the process (signal 11: the engine went on with what `close()` had finalized); a transaction's body that
/// closed it was reported as "ended by its own body".
@Suite("Callbacks and closures that close the connection")
struct CallbackMisuseTests {
    /// Each place the caller's code runs with the connection lent to it, and a statement that runs it.
    enum Callback: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case function, aggregate, collation, authorizer, trace, progressHandler, busyHandler
        case commitHook, rollbackHook, updateHook, transactionBody, savepointBody

        var testDescription: String { rawValue }

        /// Installs the callback (calling `misuse` once, the first time it runs), then runs what calls it.
        /// `other` holds the write lock when the busy handler is asked.
        func run(on db: Connection, other: Connection, _ misuse: @escaping () -> Void) throws {
            var isDone = false
            let once = {
                if !isDone {
                    isDone = true
                    misuse()
                }
            }
            switch self {
            case .function:
                try db.createFunction("misuse", argumentCount: 1) { arguments in
                    once()
                    return arguments[0]
                }
                try db.execute("INSERT INTO t VALUES (misuse('inserted by the failing statement'))")
            case .aggregate:
                try db.createAggregate("misuse", argumentCount: 1) { Aggregate(misuse: once) }
                try db.execute("INSERT INTO t SELECT misuse(x) FROM t")
            case .collation:
                try db.createCollation("misuse") { left, right in
                    once()
                    return left < right ? -1 : (left > right ? 1 : 0)
                }
                try db.execute("INSERT INTO t SELECT x || ' again' FROM t ORDER BY x COLLATE misuse")
            case .authorizer:
                try db.setAuthorizer { _ in
                    once()
                    return .allow
                }
                try db.execute("INSERT INTO t VALUES ('inserted by the failing statement')")
            case .trace:
                try db.trace { _ in once() }
                _ = try db.all("SELECT x FROM t", as: String.self)
            case .progressHandler:
                try db.setProgressHandler(every: 1) {
                    once()
                    return false
                }
                try db.execute("INSERT INTO t VALUES ('inserted by the failing statement')")
            case .busyHandler:
                try db.setBusyHandler { _ in
                    once()
                    return true
                }
                try other.execute("BEGIN IMMEDIATE")
                defer { try? other.execute("ROLLBACK") }
                try db.execute("INSERT INTO t VALUES ('inserted by the failing statement')")
            case .commitHook:
                try db.setCommitHook {
                    once()
                    return true
                }
                try db.execute("INSERT INTO t VALUES ('inserted by the failing statement')")
            case .rollbackHook:
                try db.setRollbackHook { once() }
                try db.execute("BEGIN")
                try db.execute("INSERT INTO t VALUES ('rolled back')")
                try db.execute("ROLLBACK")
            case .updateHook:
                try db.setUpdateHook { _ in once() }
                try db.execute("INSERT INTO t VALUES ('inserted by the failing statement')")
            case .transactionBody:
                try db.transaction {
                    try db.execute("INSERT INTO t VALUES ('inserted by the failing transaction')")
                    once()
                    try db.execute("INSERT INTO t VALUES ('inserted after the close')")
                }
            case .savepointBody:
                try db.savepoint {
                    try db.execute("INSERT INTO t VALUES ('inserted by the failing savepoint')")
                    once()
                }
            }
        }

        /// Removes what ``run(on:other:_:)`` installed.
        func uninstall(from db: Connection) throws {
            switch self {
            case .authorizer: try db.setAuthorizer(nil)
            case .trace: try db.trace(nil)
            case .progressHandler: try db.setProgressHandler(nil)
            case .busyHandler: try db.setBusyHandler(nil)
            case .commitHook: try db.setCommitHook(nil)
            case .rollbackHook: try db.setRollbackHook(nil)
            case .updateHook: try db.setUpdateHook(nil)
            default: break
            }
        }
    }

    struct Aggregate: DatabaseAggregate {
        let misuse: () -> Void
        var count = 0
        mutating func step(_ arguments: [DatabaseValue]) throws {
            misuse()
            count += 1
        }
        func finalize() throws -> (any DatabaseValueConvertible)? { count }
    }

    /// An encrypted file with 3 committed rows, a connection to it, and another that holds locks without waiting.
    private static func open(_ dir: borrowing TemporaryDirectory) throws -> (Connection, Connection, String) {
        let path = dir.path("callbacks.db")
        let db = try Connection(path: path, key: TestKeys.raw)
        try db.execute("CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('one'), ('two'), ('three')")
        let other = try Connection(path: path, key: TestKeys.raw, options: OpenOptions(busyTimeout: nil))
        return (db, other, path)
    }

    /// The rows a fresh connection reads.
    private static func committedRows(_ path: String) throws -> [String] {
        let fresh = try Connection(path: path, key: TestKeys.raw)
        defer { fresh.close() }
        return try fresh.all("SELECT x FROM t ORDER BY rowid", as: String.self)
    }

    @Test("close() inside each callback or closure is refused with callbackMisuse; the connection stays usable and closable, the data intact",
          arguments: Callback.allCases)
    func closeIsRefused(callback: Callback) throws {
        try withTemporaryDirectory { dir in
            let (db, other, path) = try Self.open(dir)
            let error = expectError(.callbackMisuse) { try callback.run(on: db, other: other) { db.close() } }
            #expect(error?.message.contains("close()") == true, "\(error.map { "\($0)" } ?? "")")
            #expect(!db.isClosed)
            #expect(!db.isInsideTransaction)
            try callback.uninstall(from: db)
            // The statement (or transaction) that ran the callback changed nothing: only the committed rows are there.
            #expect(try db.all("SELECT x FROM t ORDER BY rowid", as: String.self) == ["one", "two", "three"])
            try db.execute("INSERT INTO t VALUES ('four')")
            db.close()
            #expect(db.isClosed)
            other.close()
            #expect(try Self.committedRows(path) == ["one", "two", "three", "four"])
        }
    }

    @Test("a rekey inside a callback is refused with callbackMisuse and changes nothing (it closed the handle: signal 11)",
          arguments: [Callback.function, .collation, .trace, .updateHook, .transactionBody])
    func rekeyIsRefused(callback: Callback) throws {
        try withTemporaryDirectory { dir in
            let (db, other, path) = try Self.open(dir)
            other.close()
            var rekeyError: (any Error)?
            expectError(.callbackMisuse) {
                try callback.run(on: db, other: other) {
                    do { try db.rekey(to: TestKeys.passphrase) } catch { rekeyError = error }
                }
            }
            #expect((rekeyError as? DatabaseError)?.kind == .callbackMisuse)
            try callback.uninstall(from: db)
            db.close()
            #expect(try Self.committedRows(path) == ["one", "two", "three"])
        }
    }

    @Test("a hook or handler SQLite forbids to use the connection gets callbackMisuse for any statement (a progress handler's statement recursed until signal 11)",
          arguments: [Callback.authorizer, .progressHandler, .busyHandler, .commitHook, .rollbackHook, .updateHook])
    func useInsideRestrictedCallbackIsRefused(callback: Callback) throws {
        try withTemporaryDirectory { dir in
            let (db, other, path) = try Self.open(dir)
            var innerError: (any Error)?
            expectError(.callbackMisuse) {
                try callback.run(on: db, other: other) {
                    do { try db.execute("DELETE FROM t") } catch { innerError = error }
                }
            }
            #expect((innerError as? DatabaseError)?.kind == .callbackMisuse)
            #expect(!db.isClosed)
            try callback.uninstall(from: db)
            #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
            db.close()
            other.close()
            #expect(try Self.committedRows(path) == ["one", "two", "three"])
        }
    }

    @Test("a trace handler that closes the connection at BEGIN or SAVEPOINT leaves no transaction open")
    func traceAtTransactionStart() throws {
        try withTemporaryDirectory { dir in
            let (db, other, path) = try Self.open(dir)
            other.close()
            for start in ["BEGIN", "SAVEPOINT"] {
                var isDone = false
                try db.trace { event in
                    if !isDone && event.sql.hasPrefix(start) {
                        isDone = true
                        db.close()
                    }
                }
                expectError(.callbackMisuse) {
                    if start == "BEGIN" {
                        try db.transaction { try db.execute("INSERT INTO t VALUES ('not inserted')") }
                    } else {
                        try db.savepoint { try db.execute("INSERT INTO t VALUES ('not inserted')") }
                    }
                }
                #expect(!db.isInsideTransaction, "\(start)")
                try db.trace(nil)
            }
            db.close()
            #expect(try Self.committedRows(path) == ["one", "two", "three"])
        }
    }

    @Test("an SQL function may still run statements on its connection")
    func functionMayUseTheConnection() throws {
        try withTemporaryDirectory { dir in
            let (db, other, _) = try Self.open(dir)
            other.close()
            try db.createFunction("count_t", argumentCount: 0) { _ in try db.scalar("SELECT count(*) FROM t", as: Int.self) }
            #expect(try db.scalar("SELECT count_t()", as: Int.self) == 3)
        }
    }

    @Test("close() inside a queue's or a pool's closure is refused: the pool keeps its connections and goes on working")
    func closeInsidePoolClosures() throws {
        try withTemporaryDirectory { dir in
            let pool = try DatabasePool(path: dir.path("pool.db"), keyProvider: .fixed(TestKeys.raw))
            try pool.write { db in try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
            // Before: writeWithoutTransaction closed the pool's writer, and every later write failed as closed.
            expectError(.callbackMisuse) { try pool.writeWithoutTransaction { db in db.close() } }
            expectError(.callbackMisuse) { try pool.write { db in db.close() } }
            expectError(.callbackMisuse) { try pool.read { db in db.close() } }
            try pool.write { db in try db.execute("INSERT INTO t VALUES (2)") }
            #expect(try pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 2)
            pool.close()

            let queue = try DatabaseQueue(path: dir.path("queue.db"), keyProvider: .fixed(TestKeys.raw))
            try queue.write { db in try db.execute("CREATE TABLE t(x)") }
            expectError(.callbackMisuse) { try queue.writeWithoutTransaction { db in db.close() } }
            expectError(.callbackMisuse) { try queue.read { db in db.close() } }
            try queue.write { db in try db.execute("INSERT INTO t VALUES (1)") }
            #expect(try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 1)
            queue.close()
        }
    }

    @Test("close() inside a pool's async closures is refused too")
    func closeInsideAsyncPoolClosures() async throws {
        try await withTemporaryDirectory { dir in
            let pool = try DatabasePool(path: dir.path("pool.db"), keyProvider: .fixed(TestKeys.raw))
            try await pool.write { db in try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
            for attempt in 0..<2 {
                do {
                    if attempt == 0 {
                        try await pool.writeWithoutTransaction { db in db.close() }
                    } else {
                        try await pool.read { db in db.close() }
                    }
                    Issue.record("close() inside the closure was not refused")
                } catch let error as DatabaseError {
                    #expect(error.kind == .callbackMisuse)
                }
            }
            #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 1)
            pool.close()
        }
    }

    @Test("DatabasePool.close() inside a read closure closes the pool once the closure returns")
    func poolCloseInsideRead() throws {
        try withTemporaryDirectory { dir in
            let pool = try DatabasePool(path: dir.path("pool.db"), keyProvider: .fixed(TestKeys.raw))
            try pool.write { db in try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
            let count = try pool.read { db in
                pool.close()
                // The closure's connection is still the closure's until it returns.
                return try db.scalar("SELECT count(*) FROM t", as: Int.self)
            }
            #expect(count == 1)
            #expect(pool.isClosed)
            expectError(.connectionClosed) { try pool.read { _ in } }
        }
    }

    @Test("a connection released by its own callback is closed only after the statement (no crash)")
    func releasedInsideCallback() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("released.db")
            var db: Connection? = try Connection(path: path, key: TestKeys.raw)
            try db?.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            weak let weakConnection = db
            try db?.createFunction("release", argumentCount: 0) { _ in
                db = nil
                return 1
            }
            #expect(try db?.scalar("SELECT release()", as: Int.self) == 1)
            // The call kept the connection alive while the statement ran; it was released (and closed) after.
            #expect(db == nil)
            #expect(weakConnection == nil)
            let fresh = try Connection(path: path, key: TestKeys.raw)
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        }
    }
}
