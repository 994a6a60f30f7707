import Dispatch
import Foundation
@testable import SQLCipherKit
import Testing

/// Pools and queues keyed with a passphrase on a new, empty file: the key they derive once must come from the salt
/// the file actually gets, whoever writes page 1 first.
@Suite("Pools on a new file")
struct PoolNewFileTests {
    enum Opener: String, CaseIterable, Sendable {
        case pool, queue
    }

    /// Opens the file one way, writes `rows` rows tagged `tag`, and returns a closure that counts all rows.
    private static func openAndWrite(
        _ opener: Opener, path: String, tag: String, rows: Int
    ) throws -> @Sendable () throws -> Int {
        let key = TestKeys.passphrase
        let write: (Connection) throws -> Void = { db in
            try db.execute("CREATE TABLE IF NOT EXISTS t(tag TEXT, n INTEGER)")
            for index in 0..<rows { try db.execute("INSERT INTO t VALUES (?, ?)", tag, index) }
        }
        switch opener {
        case .pool:
            let pool = try DatabasePool(path: path, keyProvider: .fixed(key))
            try pool.write(write)
            return { try pool.read { try $0.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1 } }
        case .queue:
            let queue = try DatabaseQueue(path: path, keyProvider: .fixed(key))
            try queue.write(write)
            return { try queue.read { try $0.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1 } }
        }
    }

    @Test("two pools (or a pool and a queue) opened in parallel on one new file both write and read each other's rows",
          arguments: [(Opener.pool, Opener.pool), (.queue, .pool), (.queue, .queue)])
    func parallelOpeners(first: Opener, second: Opener) throws {
        for round in 0..<4 {
            let dir = try TemporaryDirectory()
            let path = dir.path("new-\(round).db")
            let start = DispatchSemaphore(value: 0)
            let results = Shared<[String: String]>([:])
            let counters = Shared<[@Sendable () throws -> Int]>([])
            let group = DispatchGroup()
            for (index, opener) in [first, second].enumerated() {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    start.wait()
                    do {
                        let count = try Self.openAndWrite(opener, path: path, tag: "writer\(index)", rows: 50)
                        counters.withLock { $0.append(count) }
                    } catch {
                        results.withLock { $0["writer\(index)"] = "\(error)" }
                    }
                }
            }
            start.signal()
            start.signal()
            // Bounded only to turn a hang into a failure.
            #expect(group.wait(timeout: .now() + 120) == .success)
            for (name, error) in results.withLock({ $0 }) {
                Issue.record("round \(round), \(name) (\(first)/\(second)) failed: \(error)")
            }
            // Each reads the other's rows.
            for count in counters.withLock({ $0 }) {
                #expect(try count() == 100)
            }
            counters.withLock { $0.removeAll() }
            // A fresh connection with the passphrase opens what both wrote.
            let fresh = try Connection(path: path, key: TestKeys.passphrase)
            #expect(try fresh.scalar("SELECT count(DISTINCT tag) FROM t", as: Int.self) == 2)
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 100)
            fresh.close()
            #expect(!contains(try fileBytes(path), "writer0"))
        }
    }

    @Test("a pool created on a new file writes its salt first; a Connection opened afterwards uses it", arguments: [false, true])
    func poolThenConnection(connectionWritesFirst: Bool) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("new.db")
        let pool = try DatabasePool(path: path, keyProvider: .fixed(TestKeys.passphrase))
        // The file has its salt before anything else writes: 16 bytes that are not the plaintext magic.
        let salt = Array(try fileBytes(path).prefix(16))
        #expect(salt.count == 16 && salt != EncryptionTests.magic)
        let connection = try Connection(path: path, key: TestKeys.passphrase)
        if connectionWritesFirst {
            try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            try pool.write { try $0.execute("INSERT INTO t VALUES (2)") }
        } else {
            try pool.write { try $0.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
            try connection.execute("INSERT INTO t VALUES (2)")
        }
        #expect(try pool.read { try $0.scalar("SELECT count(*) FROM t", as: Int.self) } == 2)
        #expect(try connection.scalar("SELECT count(*) FROM t", as: Int.self) == 2)
        #expect(Array(try fileBytes(path).prefix(16)) == salt)
        pool.close()
        connection.close()
    }

    @Test("a pool whose switch to WAL meets another connection's write lock waits for it instead of failing")
    func walSwitchWaitsForWriter() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("rollback.db")
        // A file in rollback-journal mode, as a second pool or process finds it while the first is still opening it.
        let other = try Connection(path: path, key: TestKeys.passphrase)
        defer { other.close() }
        try other.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        // The other connection holds the reserved lock: the pool's switch reads (shared lock), then needs the
        // exclusive one, which SQLite refuses at once without calling the busy handler.
        try other.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (2)")
        let refused = DispatchSemaphore(value: 0)
        let resolved = URL(fileURLWithPath: path).path
        DatabasePool.testHookWALSwitchBusy.withLock { hooks in hooks[resolved] = { refused.signal() } }
        defer { _ = DatabasePool.testHookWALSwitchBusy.withLock { $0.removeValue(forKey: resolved) } }
        let outcome = Shared<Result<Int, any Error>?>(nil)
        let opened = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { opened.signal() }
            do {
                let pool = try DatabasePool(
                    path: path, keyProvider: .fixed(TestKeys.passphrase),
                    configuration: .init(openOptions: .init(busyTimeout: .seconds(120))))
                defer { pool.close() }
                let count = try pool.read { try $0.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1 }
                outcome.withLock { $0 = .success(count) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        // Either the pool meets the lock and says so (then the lock is released), or it gave up: both are told
        // explicitly; the bounds only turn a hang into a failure.
        while refused.wait(timeout: .now() + 1) == .timedOut {
            if opened.wait(timeout: .now()) == .success { opened.signal(); break }
        }
        try other.execute("COMMIT")
        #expect(opened.wait(timeout: .now() + 120) == .success)
        switch outcome.withLock({ $0 }) {
        case .success(let count)?: #expect(count == 2)
        case .failure(let error)?: Issue.record("the pool did not open: \(error)")
        case nil: Issue.record("the pool did not finish opening")
        }
        // A fresh connection finds the file in WAL mode with both rows.
        let fresh = try Connection(path: path, key: TestKeys.passphrase)
        defer { fresh.close() }
        #expect(try fresh.pragmaText("journal_mode")?.lowercased() == "wal")
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 2)
    }
}
