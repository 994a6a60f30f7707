import Dispatch
import Foundation
import Logging
@testable import SQLCipherKit
import Synchronization
import Testing

/// Serialized: the key-derivation count is process-wide.
@Suite("DatabasePool and DatabaseQueue", .serialized)
struct ConcurrencyTests {
    static func makeAccounts(_ pool: DatabasePool, count: Int = 10) throws {
        try pool.write { db in
            try db.execute("CREATE TABLE account(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
            for id in 1...count { try db.execute("INSERT INTO account(id, balance) VALUES (?, 100)", id) }
        }
    }

    @Test("concurrent readers with a writer: every read sees the invariant, no SQLITE_BUSY reaches the caller")
    func readersWithWriter() async throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(path: dir.path("bank.db"), keyProvider: .fixed(TestKeys.raw))
        try Self.makeAccounts(pool)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for step in 0..<200 {
                    try await pool.write { db in
                        let from = step % 10 + 1, to = (step + 3) % 10 + 1
                        try db.execute("UPDATE account SET balance = balance - 7 WHERE id = ?", from)
                        try db.execute("UPDATE account SET balance = balance + 7 WHERE id = ?", to)
                    }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<100 {
                        let total = try await pool.read { db in try db.scalar("SELECT sum(balance) FROM account", as: Int.self) }
                        #expect(total == 1000)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(pool.readerConnectionCount <= 4)
    }

    @Test("a read keeps its snapshot while the writer commits")
    func snapshot() throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(path: dir.path("snap.db"), keyProvider: .fixed(TestKeys.raw))
        try Self.makeAccounts(pool)
        let (first, second) = try pool.read { db -> (Int?, Int?) in
            let first = try db.scalar("SELECT count(*) FROM account", as: Int.self)
            let done = DispatchSemaphore(value: 0)
            let writer = Thread {
                try? pool.write { db in try db.execute("INSERT INTO account(balance) VALUES (1)") }
                done.signal()
            }
            writer.start()
            done.wait()
            return (first, try db.scalar("SELECT count(*) FROM account", as: Int.self))
        }
        #expect(first == 10 && second == 10)
        #expect(try pool.read { try $0.scalar("SELECT count(*) FROM account", as: Int.self) } == 11)
    }

    @Test("a task waiting for a reader can be cancelled")
    func cancellation() async throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(path: dir.path("cancel.db"), keyProvider: .fixed(TestKeys.raw),
                                    configuration: .init(maximumReaderCount: 1))
        try Self.makeAccounts(pool)
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        // The reader is held on a thread of its own: waiting here for a task to start would block a thread of the
        // cooperative pool, which on a 2-core machine may be the one that task needs.
        let finished = DispatchSemaphore(value: 0)
        let holder = Thread {
            _ = try? pool.read { _ in started.signal(); release.wait() }
            finished.signal()
        }
        holder.start()
        #expect(await awaitSignal(started), "the holder never got the reader")
        let waiting = Task { try await pool.read { db in try db.scalar("SELECT 1", as: Int.self) } }
        // Cancelled once the pool has queued it for the reader: a task cancelled before it waits would test another
        // path (cancelled before the read starts).
        #expect(await suspendingWait { pool.coordinator.readerWaiterCount == 1 }, "the read never waited for the reader")
        waiting.cancel()
        let result = await waiting.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(pool.coordinator.readerWaiterCount == 0, "the cancelled read left its place in the queue")
        release.signal()
        #expect(await awaitSignal(finished))
        #expect(try await pool.read { db in try db.scalar("SELECT 2", as: Int.self) } == 2)
    }

    @Test("close waits for the work in flight, then refuses new work")
    func closeWithWorkInFlight() throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(path: dir.path("close.db"), keyProvider: .fixed(TestKeys.raw))
        try Self.makeAccounts(pool)
        let started = DispatchSemaphore(value: 0)
        let finished = SharedCounter()
        let writer = Thread {
            try? pool.write { db in
                started.signal()
                // The write goes on only once close() has begun: it marks the pool closed, then waits for this write.
                _ = blockingWait { pool.isClosed }
                try db.execute("INSERT INTO account(balance) VALUES (5)")
                finished.increment()
            }
        }
        writer.start()
        started.wait()
        pool.close()
        let didFinish = finished.value == 1
        #expect(didFinish, "close returned before the write finished")
        expectError(.connectionClosed) { try pool.read { _ in 1 } }
        let check = try Connection(path: dir.path("close.db"), key: TestKeys.raw)
        #expect(try check.scalar("SELECT count(*) FROM account", as: Int.self) == 11)
    }

    @Test("a failing key provider gives a clear error")
    func failingKeyProvider() throws {
        let dir = try TemporaryDirectory()
        struct VaultDown: Error {}
        let error = expectError(.invalidKey) {
            try DatabasePool(path: dir.path("a.db"), keyProvider: .custom("vault") { throw VaultDown() })
        }
        #expect(error?.message.contains("vault") == true)
        expectError(.invalidKey) {
            try DatabasePool(path: dir.path("b.db"), keyProvider: .environment("SQLCIPHERKIT_TEST_UNSET_VARIABLE"))
        }
        expectError(.invalidKey) { try DatabaseQueue(path: dir.path("c.db"), keyProvider: .file(dir.path("none.key"))) }
        // A malformed salt is an error, not a crash, even on the derivation path.
        expectError(.invalidKey) {
            try DatabasePool(path: dir.path("d.db"), keyProvider: .fixed(TestKeys.passphrase),
                             configuration: .init(settings: CipherSettings(salt: [1, 2, 3])))
        }
    }

    @Test("a pool of 8 readers derives a passphrase exactly once; the derived key opens the file like the passphrase",
          arguments: [false, true])
    func oneDerivation(existingFile: Bool) async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("derive.db")
        if existingFile {
            try EncryptionTests.makeDatabase(path, key: TestKeys.passphrase, rows: 10)
        }
        let before = KeyDerivation.derivationCount
        // On the readers' queues, the 8 reads run at once whatever the number of cooperative threads.
        let pool = try DatabasePool(path: path, keyProvider: .fixed(TestKeys.passphrase),
                                    configuration: .init(maximumReaderCount: 8, asyncReadExecution: .readerQueue))
        if !existingFile {
            try await pool.write { db in
                try db.execute("CREATE TABLE t(body TEXT)")
                try db.execute("INSERT INTO t VALUES ('x')")
            }
        }
        // Each read holds its reader until all 8 hold one, so 8 readers open (not fewer, reused by reads that did
        // not overlap). The reads wait on the readers' queues, never on the cooperative threads.
        let together = Rendezvous(parties: 8)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let overlapped = try await pool.read { db in
                        let overlapped = together.arrive()
                        _ = try db.scalar("SELECT count(*) FROM t", as: Int.self)
                        return overlapped
                    }
                    #expect(overlapped, "the 8 reads never held their readers at once")
                }
            }
            try await group.waitForAll()
        }
        #expect(pool.readerConnectionCount == 8)
        #expect(KeyDerivation.derivationCount - before == 1)
        pool.close()
        // SQLCipher's own KDF over the passphrase opens what the derived raw key wrote.
        let direct = try Connection(path: path, key: TestKeys.passphrase)
        #expect(try direct.scalar("SELECT count(*) FROM t", as: Int.self) == (existingFile ? 10 : 1))
    }

    @Test("rekey under load: callers never see an error, and the new key opens the file afterwards")
    func rekeyUnderLoad() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("rotate.db")
        let pool = try DatabasePool(path: path, keyProvider: .fixed(TestKeys.passphrase))
        try Self.makeAccounts(pool)
        let stop = SharedCounter()
        let progress = (0..<4).map { _ in SharedCounter() }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<4 {
                group.addTask {
                    var operations = 0
                    while stop.value == 0 {
                        if index == 0 {
                            try await pool.write { db in try db.execute("UPDATE account SET balance = balance WHERE id = 1") }
                        } else {
                            let total = try await pool.read { db in try db.scalar("SELECT sum(balance) FROM account", as: Int.self) }
                            #expect(total == 1000)
                        }
                        operations += 1
                        progress[index].increment()
                    }
                    return operations
                }
            }
            // The rekey starts once every worker runs, and the load stops once each has run again after it: counted,
            // not timed. The rekey blocks until the work in flight drains, so it runs on a thread of its own.
            #expect(await suspendingWait { progress.allSatisfy { $0.value > 0 } }, "the workers never ran")
            _ = try await onThread { try pool.rekey(to: .fixed(TestKeys.otherPassphrase)) }
            let atRekey = progress.map(\.value)
            #expect(await suspendingWait { zip(progress, atRekey).allSatisfy { $0.value >= $1 + 3 } },
                    "the workers did not go on after the rekey")
            stop.increment()
            var total = 0
            for try await operations in group { total += operations }
            #expect(total > 10)
        }
        #expect(try await pool.read { try $0.scalar("SELECT count(*) FROM account", as: Int.self) } == 10)
        pool.close()
        expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
        #expect(try Connection(path: path, key: TestKeys.otherPassphrase).scalar("SELECT count(*) FROM account", as: Int.self) == 10)
    }

    @Test("a pool's rekey refused while another connection has the file open works once that connection closes")
    func rekeyRefusedThenAllowed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("refused.db")
        let pool = try DatabasePool(path: path, keyProvider: .fixed(TestKeys.raw))
        try pool.write { db in try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3)") }
        let other = try Connection(path: path, key: TestKeys.raw)
        let error = expectError(.invalidState) { try pool.rekey(to: .fixed(TestKeys.otherPassphrase)) }
        #expect(error?.message.contains("other connection") == true)
        #expect(try pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
        other.close()
        // Before the fix, the refused rekey's recovery opened the writer again over its open handle, which stayed
        // open and counted as another connection of the process: every later rekey was refused.
        try pool.rekey(to: .fixed(TestKeys.otherPassphrase))
        try pool.write { db in try db.execute("INSERT INTO t VALUES (4)") }
        pool.close()
        expectError(.wrongKey) { try Connection(path: path, key: TestKeys.raw) }
        let fresh = try Connection(path: path, key: TestKeys.otherPassphrase)
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 4)
        // No handle of the pool is left open: a connection alone can rekey the file.
        try fresh.rekey(to: TestKeys.raw)
        let back = try Connection(path: path, key: TestKeys.raw)
        #expect(try back.scalar("SELECT count(*) FROM t", as: Int.self) == 4)
    }

    @Test("a queue serialises reads and writes; reads cannot write; re-entrant use is refused")
    func queue() async throws {
        let dir = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: dir.path("queue.db"), keyProvider: .fixed(TestKeys.raw))
        try await queue.write { db in try db.execute("CREATE TABLE t(x INTEGER)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for value in 0..<50 {
                group.addTask { try await queue.write { db in try db.execute("INSERT INTO t VALUES (?)", value) } }
            }
            try await group.waitForAll()
        }
        #expect(try await queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)
        try Self.checkQueueSynchronously(queue, path: dir.path("queue.db"))
    }

    /// The synchronous API, outside the async test (where the async overloads would be chosen).
    static func checkQueueSynchronously(_ queue: DatabaseQueue, path: String) throws {
        expectError(code: DatabaseError.SQLITE_READONLY) { try queue.read { db in try db.execute("DELETE FROM t") } }
        expectError(.invalidState) { try queue.write { _ in try queue.read { _ in 1 } } }
        try queue.rekey(to: .fixed(TestKeys.otherPassphrase))
        #expect(try queue.read { try $0.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)
        queue.close()
        expectError(.connectionClosed) { try queue.write { _ in 1 } }
        expectError(.wrongKey) { try Connection(path: path, key: TestKeys.raw) }
        let memory = try DatabaseQueue.inMemory()
        #expect(try memory.read { try $0.scalar("SELECT 42", as: Int.self) } == 42)
    }

    @Test("a key provider is asked at every open, so a replaced key file is picked up by new connections")
    func providerAskedAtOpen() throws {
        let dir = try TemporaryDirectory()
        let keyPath = dir.path("db.key")
        try writePrivate("first passphrase", to: keyPath)
        let calls = SharedCounter()
        let provider = KeyProvider.custom { calls.increment(); return try EncryptionKey(contentsOf: keyPath) }
        let pool = try DatabasePool(path: dir.path("db.db"), keyProvider: provider,
                                    configuration: .init(maximumReaderCount: 2))
        try Self.makeAccounts(pool)
        _ = try pool.read { _ in 1 }
        #expect(calls.value == 2)   // writer and one reader
        #expect("\(provider)".contains("custom"))
    }

    @Test("logs record opens, failures and rekeys without key material or bound values")
    func logging() throws {
        let dir = try TemporaryDirectory()
        let records = LogLines()
        let logger = records.logger()
        var options = OpenOptions(logger: logger)
        options.logger?.logLevel = .trace
        let pool = try DatabasePool(path: dir.path("log.db"), keyProvider: .fixed(TestKeys.passphrase),
                                    configuration: .init(openOptions: options))
        try pool.write { db in
            try db.execute("CREATE TABLE t(secret TEXT)")
            try db.execute("INSERT INTO t VALUES (?)", "BOUND-VALUE-\(TestKeys.sentinel)")
        }
        try pool.rekey(to: .fixed(TestKeys.otherPassphrase))
        pool.close()
        _ = try? Connection(path: dir.path("log.db"), key: TestKeys.passphrase, options: options)
        let connection = try Connection(path: dir.path("log.db"), key: TestKeys.otherPassphrase, options: options)
        try connection.backup(toPath: dir.path("log-backup.db"))
        try connection.exportEncrypted(to: dir.path("log-export.db"), key: TestKeys.passphrase)
        try connection.restore(fromPath: dir.path("log-backup.db"))
        try connection.rekey(to: TestKeys.passphrase)
        let lines = records.all
        for message in ["opened", "rekeyed", "open failed", "backed up", "exported", "restored"] {
            #expect(lines.contains { $0.contains(message) }, "no \(message) line")
        }
        for line in lines {
            #expect(!line.contains(TestKeys.sentinel), "\(line)")
        }
    }
}

/// A counter shared between threads and tasks.
final class SharedCounter: Sendable {
    private let storage = Atomic<Int>(0)
    var value: Int { storage.load(ordering: .sequentiallyConsistent) }
    func increment() { storage.add(1, ordering: .sequentiallyConsistent) }
}

