import Dispatch
import Foundation
@testable import SQLCipherKit
import SQLCipherKitTestSupport
import Testing

/// The read transaction a pool keeps open between its reads (`DatabasePool.Configuration.holdsReadLockBetweenReads`):
/// what it holds back, when it gives the lock back, and that reads see what they would see without it.
///
/// A truncating checkpoint on another connection is the probe: it fails with `SQLITE_BUSY` (busy timeout zero) while
/// any read transaction that started before the last commit is open, and otherwise leaves a `-wal` of zero bytes.
/// What the tests check while the lock is held, they check with a hold limit of an hour, so nothing races its timer.
@Suite("Pool read lock held between reads")
struct PoolReadLockHolderTests {
    /// A pool on a new file with 3 rows; holds last `holdLimit` (an hour unless said: what the tests check while the
    /// lock is held must not race its timer).
    static func makePool(
        _ dir: TemporaryDirectory, holds: Bool = true, key: EncryptionKey = TestKeys.raw,
        holdLimit: Duration = .seconds(3600)
    ) throws -> DatabasePool {
        let pool = try DatabasePool(
            path: dir.path("held.db"), keyProvider: .fixed(key),
            configuration: .init(maximumReaderCount: 2, holdsReadLockBetweenReads: holds))
        pool.setReadLockHoldLimit(holdLimit)
        try pool.write { db in
            try db.execute("CREATE TABLE t(x INTEGER)")
            try db.execute("INSERT INTO t VALUES (1), (2), (3)")
        }
        return pool
    }

    static func count(_ pool: DatabasePool) throws -> Int {
        try pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1 }
    }

    /// Another connection to the file, as another process would have: its checkpoints do not wait.
    static func other(_ dir: TemporaryDirectory, key: EncryptionKey = TestKeys.raw) throws -> Connection {
        try Connection(path: dir.path("held.db"), key: key, options: OpenOptions(busyTimeout: .zero))
    }

    static func walSize(_ dir: TemporaryDirectory) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: dir.path("held.db-wal")))?[.size] as? Int) ?? -1
    }

    @Test("the second read takes the lock, which holds back another connection's truncating checkpoint")
    func secondReadTakesIt() throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir)
        defer { pool.close() }
        let other = try Self.other(dir)
        defer { other.close() }
        // Frames in the WAL (the table and rows above), so a read transaction holds back its restart.
        #expect(Self.walSize(dir) > 0)
        #expect(try Self.count(pool) == 3)
        #expect(!pool.isHoldingReadLock, "one read alone takes no hold")
        #expect(try Self.count(pool) == 3)
        #expect(pool.isHoldingReadLock)
        let busy = #expect(throws: DatabaseError.self, "the held read transaction is a reader in the way") {
            try other.checkpoint(.truncate)
        }
        #expect(busy?.resultCode == DatabaseError.SQLITE_BUSY)
        #expect(Self.walSize(dir) > 0)
        #expect(pool.isHoldingReadLock)
    }

    @Test("the pool's own writer never finds it: a write or a truncating checkpoint through the pool gives it back")
    func writerGivesItBack() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir)
        defer { pool.close() }
        for _ in 0..<3 { _ = try Self.count(pool) }
        #expect(pool.isHoldingReadLock)
        // The synchronous writer, on a thread of its own (this test is async).
        let result = try await onThread { try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) } }
        #expect(result.logFrameCount == 0)
        #expect(Self.walSize(dir) == 0, "the checkpoint truncated the -wal to zero bytes")
        #expect(!pool.isHoldingReadLock)

        // The same through the async writer, after a write that put frames in the WAL again.
        try await pool.write { db in try db.execute("INSERT INTO t VALUES (4)") }
        for _ in 0..<3 { _ = try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } }
        #expect(pool.isHoldingReadLock)
        _ = try await pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        #expect(Self.walSize(dir) == 0)
        // A fresh connection counts the rows in the main file alone.
        let fresh = try Self.other(dir)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 4)
    }

    @Test("reads while it is held see every commit: the pool's own, and another connection's")
    func readsSeeTheNewestCommit() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir)
        defer { pool.close() }
        let other = try Self.other(dir)
        defer { other.close() }
        for _ in 0..<2 { _ = try Self.count(pool) }
        #expect(pool.isHoldingReadLock)
        // A commit the holder has not seen: it keeps its snapshot, the reads take the new one.
        try other.execute("INSERT INTO t VALUES (10)")
        #expect(pool.isHoldingReadLock)
        #expect(try Self.count(pool) == 4)
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 4)
        #expect(try await pool.read { db in try db.scalar("SELECT max(x) FROM t", as: Int.self) } == 10)
        try await pool.write { db in try db.execute("DELETE FROM t WHERE x = 10") }
        #expect(try Self.count(pool) == 3)
        #expect(try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 3)
    }

    @Test("it gives the lock back by itself after its limit, and the other connection's checkpoint then succeeds")
    func endsByItself() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, holdLimit: ReadLockHolder.holdLimit)
        defer { pool.close() }
        let released = DispatchSemaphore(value: 0)
        pool.observeReadLockReleases { released.signal() }
        for _ in 0..<2 { _ = try Self.count(pool) }
        // The release is what is waited for, not a time: the limit only decides when it comes.
        #expect(await awaitSignal(released), "the hold was never given back")
        #expect(!pool.isHoldingReadLock)
        let other = try Self.other(dir)
        defer { other.close() }
        let result = try other.checkpoint(.truncate)
        #expect(result.logFrameCount == 0)
        #expect(Self.walSize(dir) == 0)
    }

    @Test("another process's truncating checkpoint completes while the pool keeps reading: the hold ends by itself",
          .enabled(
            if: PeerProcess.isAvailable,
            "needs python3 with sqlcipher3 (pip install sqlcipher3==0.6.4), as .ci/test installs"))
    func otherProcessCheckpoints() throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, holdLimit: ReadLockHolder.holdLimit)
        defer { pool.close() }
        let peer = try PeerProcess(database: dir.path("held.db"), rawKeyText: TestKeys.rawText)
        defer { peer.stop() }
        // Reads one after another on a thread of their own until the peer is done; each must see the 3 rows.
        let stop = Locked(false)
        let reads = Locked((count: 0, wrong: 0))
        let done = DispatchSemaphore(value: 0)
        Thread {
            while !stop.withLock({ $0 }) {
                let seen = try? Self.count(pool)
                reads.withLock { reads in
                    reads.count += 1
                    if seen != 3 { reads.wrong += 1 }
                }
            }
            done.signal()
        }.start()
        // The peer starts only once the pool holds the lock: its checkpoint meets the hold.
        #expect(blockingWait { pool.isHoldingReadLock }, "the reads never took the hold")
        #expect(Self.walSize(dir) > 0)
        // The peer waits up to 60 s for the readers in its way (its busy timeout): the first column is 0 when the
        // checkpoint completed, 1 when readers were still in the way.
        let busy = try peer.value("PRAGMA wal_checkpoint(TRUNCATE)")
        stop.withLock { $0 = true }
        #expect(done.wait(timeout: .now() + 120) == .success, "the reads did not stop")
        #expect((try? busy.get()) == "0", "the other process's checkpoint did not complete: \(busy)")
        #expect(Self.walSize(dir) == 0, "the -wal was truncated and nothing wrote since")
        #expect(reads.withLock { $0.wrong } == 0)
        #expect(reads.withLock { $0.count } >= 2)
        #expect(try peer.count("t").get() == 3)
    }

    @Test("close gives it back: another connection then checkpoints and truncates at once")
    func closeGivesItBack() throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir)
        for _ in 0..<2 { _ = try Self.count(pool) }
        #expect(pool.isHoldingReadLock)
        pool.close()
        #expect(!pool.isHoldingReadLock)
        let other = try Self.other(dir)
        defer { other.close() }
        _ = try other.checkpoint(.truncate)
        #expect(Self.walSize(dir) == 0)
        #expect(try other.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
    }

    @Test("a rekey with it held succeeds, and the next hold opens with the new key")
    func rekeyWhileHeld() throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, key: TestKeys.raw)
        defer { pool.close() }
        for _ in 0..<2 { _ = try Self.count(pool) }
        #expect(pool.isHoldingReadLock)
        let outcome = try pool.rekey(to: .fixed(TestKeys.passphrase))
        #expect(outcome.isWALTruncated, "nothing held the WAL back: the rekey truncated it")
        #expect(!pool.isHoldingReadLock)
        // Held again, through a connection the holder opened with the new key (with the old one it could not start
        // a read, and would give up holding).
        for _ in 0..<2 { #expect(try Self.count(pool) == 3) }
        #expect(pool.isHoldingReadLock)
        // The file: the new key opens it, the old one does not.
        let fresh = try Self.other(dir, key: TestKeys.passphrase)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
        #expect(throws: DatabaseError.self) {
            let old = try Self.other(dir, key: TestKeys.raw)
            defer { old.close() }
            _ = try old.scalar("SELECT count(*) FROM t", as: Int.self)
        }
    }

    @Test("the holder's key fails: reads go on without the hold and do not ask again; a reopen brings it back")
    func holderOpenFails() throws {
        struct ProviderFailure: Error {}
        let dir = try TemporaryDirectory()
        let calls = Locked(0)
        // Asked by the writer (1), the first reader (2), then the holder (3): that one fails.
        let provider = KeyProvider.custom {
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            if call == 3 { throw ProviderFailure() }
            return TestKeys.raw
        }
        let pool = try DatabasePool(
            path: dir.path("held.db"), keyProvider: provider, configuration: .init(maximumReaderCount: 1))
        defer { pool.close() }
        pool.setReadLockHoldLimit(.seconds(3600))
        try pool.write { db in
            try db.execute("CREATE TABLE t(x INTEGER)")
            try db.execute("INSERT INTO t VALUES (1), (2), (3)")
        }
        for _ in 0..<10 { #expect(try Self.count(pool) == 3) }
        #expect(!pool.isHoldingReadLock)
        #expect(calls.withLock { $0 } == 3, "the provider is asked once by the holder, not at every other read")
        // Another connection's truncating checkpoint finds no reader in the way.
        let other = try Self.other(dir)
        _ = try other.checkpoint(.truncate)
        other.close()
        #expect(Self.walSize(dir) == 0)

        try pool.reopen(keyProvider: .fixed(TestKeys.raw))
        for _ in 0..<2 { #expect(try Self.count(pool) == 3) }
        #expect(pool.isHoldingReadLock)
    }

    @Test("turned off, or reading once between writes, the pool holds nothing between reads")
    func notHeld() throws {
        let dir = try TemporaryDirectory()
        let off = try Self.makePool(dir, holds: false)
        for _ in 0..<5 { _ = try Self.count(off) }
        #expect(!off.isHoldingReadLock)
        let other = try Self.other(dir)
        defer { other.close() }
        _ = try other.checkpoint(.truncate)
        #expect(Self.walSize(dir) == 0)
        off.close()

        let dir2 = try TemporaryDirectory()
        let pool = try Self.makePool(dir2)
        defer { pool.close() }
        for value in 0..<5 {
            #expect(try Self.count(pool) == 3 + value)
            try pool.write { db in try db.execute("INSERT INTO t VALUES (?)", value) }
            #expect(!pool.isHoldingReadLock, "a read after each write is the first since the hold was given back")
        }
    }

    @Test("reads and writes at once: every read sees at least every commit acknowledged before it started")
    func concurrentReadsAndWrites() async throws {
        let dir = try TemporaryDirectory()
        let pool = try Self.makePool(dir, holdLimit: ReadLockHolder.holdLimit)
        defer { pool.close() }
        let acknowledged = Locked(3)
        let writes = 200
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for value in 0..<writes {
                    try await pool.write { db in try db.execute("INSERT INTO t VALUES (?)", value) }
                    acknowledged.withLock { $0 += 1 }
                }
            }
            for _ in 0..<3 {
                group.addTask {
                    while acknowledged.withLock({ $0 }) < 3 + writes {
                        let before = acknowledged.withLock { $0 }
                        let seen = try await pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) }
                        #expect((seen ?? -1) >= before)
                        await Task.yield()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try Self.count(pool) == 3 + writes)
        _ = try await pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        #expect(Self.walSize(dir) == 0)
        let fresh = try Self.other(dir)
        defer { fresh.close() }
        #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 3 + writes)
    }
}
