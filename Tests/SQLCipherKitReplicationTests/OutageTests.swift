#if Replication  // trait Replication (Package.swift)
import Foundation
import MetricsTestKit
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Synchronization
import Testing

/// A folder store that can be switched off: every call then fails as an unreachable store does.
final class SwitchableStore: ReplicaStore {
    let inner: FolderReplicaStore
    private let isDownValue = Locked(false)
    private let failedCallCount = Locked(0)

    init(_ inner: FolderReplicaStore) {
        self.inner = inner
    }

    var isDown: Bool {
        get { isDownValue.withLock { $0 } }
        set { isDownValue.withLock { $0 = newValue } }
    }

    var failedCalls: Int { failedCallCount.withLock { $0 } }

    private let beforeFilePutValue = Locked<(@Sendable (String) async throws -> Void)?>(nil)

    /// Called with the key before each upload from a file (a log segment, a snapshot), while the store is up.
    var beforeFilePut: (@Sendable (String) async throws -> Void)? {
        get { beforeFilePutValue.withLock { $0 } }
        set { beforeFilePutValue.withLock { $0 = newValue } }
    }

    var description: String { "switchable " + inner.description }

    private func check() throws {
        guard isDown else { return }
        failedCallCount.withLock { $0 += 1 }
        throw ReplicationError(.unreachable, "the test switched the store off")
    }

    func put(_ key: String, bytes: [UInt8]) async throws {
        try check()
        try await inner.put(key, bytes: bytes)
    }

    func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        try check()
        try await beforeFilePut?(key)
        try await inner.put(key, file: path, offset: offset, length: length, progress: progress)
    }

    func get(_ key: String) async throws -> [UInt8] {
        try check()
        return try await inner.get(key)
    }

    func list(prefix: String) async throws -> [ReplicaObject] {
        try check()
        return try await inner.list(prefix: prefix)
    }

    func delete(_ keys: [String]) async throws {
        try check()
        try await inner.delete(keys)
    }
}

@Suite("An outage of the store")
struct OutageTests {
    @Test("a writer that outpaces the store does not keep one sync going: a sync ships what was committed when it began")
    func syncShipsWhatWasCommittedAtItsStart() async throws {
        try await withReplicationFixture(target: { directory in
            SwitchableStore(try FolderReplicaStore(root: directory.path("switchable")))
        }) { fixture in
            let store = try #require(fixture.target as? SwitchableStore)
            try await fixture.insert(10)
            try await fixture.sync()
            // Every log upload lets the writer commit another transaction first (up to 50): the log always has more.
            let logUploads = Atomic(0)
            store.beforeFilePut = { key in
                guard key.hasSuffix(".wal") else { return }
                let count = logUploads.add(1, ordering: .sequentiallyConsistent).newValue
                if count <= 50 { try await fixture.insert(20) }
            }
            try await fixture.insert(10)
            let bounded = try await fixture.sync()
            #expect(logUploads.load(ordering: .sequentiallyConsistent) == 1, "one sync shipped what was committed after it began")
            #expect(bounded.generation != nil)
            // What came later goes with the next sync; the replica then holds every row.
            store.beforeFilePut = nil
            let after = try await fixture.sync()
            #expect(after.unshippedFrameCount == 0)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
        }
    }

    @Test("the database keeps serving; past the log limit the replicator checkpoints, records a gap and starts a new generation once the store is back")
    func gapAndNewGeneration() async throws {
        try await withTemporaryDirectory { folder in
            let key = try EncryptionKey.generateRaw()
            let pool = try DatabasePool(path: folder.path("notes.db"), keyProvider: .fixed(key))
            try await pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
            let store = SwitchableStore(try FolderReplicaStore(root: folder.path("replica")))
            let metrics = TestMetrics()
            var configuration = ReplicatorConfiguration(
                snapshotInterval: nil, retention: nil, maximumWALByteCount: 256 * 1024, metricsName: "notes")
            configuration.checkpointFrameCount = 100_000
            configuration.metricsFactory = metrics
            let replicator = Replicator(pool: pool, store: store, configuration: configuration)
            let database = [("database", "notes")]
            func insert(_ count: Int) async throws {
                try await pool.write { db in
                    for _ in 0..<count {
                        try db.execute("INSERT INTO note(body) VALUES (?)", String(repeating: "x", count: 2000))
                    }
                }
            }
            try await insert(5)
            try await replicator.syncNow()
            let first = try #require(await replicator.status.generation)
            let firstCopy = try checkpointedCopy(of: folder.path("notes.db"), key: key, in: folder)

            store.isDown = true
            try await insert(20)
            await #expect(throws: ReplicationError.self) { try await replicator.syncNow() }
            var status = await replicator.status
            #expect(status.consecutiveFailureCount == 1)
            #expect(status.gapCount == 0)
            #expect(status.generation == first)
            // Writes go on while the store is down, until the log is past its limit.
            try await insert(200)
            await #expect(throws: ReplicationError.self) { try await replicator.syncNow() }
            status = await replicator.status
            #expect(status.gapCount == 1)
            #expect(status.consecutiveFailureCount == 2)
            let rows = try await pool.read { db in try db.scalar("SELECT count(*) FROM note", as: Int.self) }
            #expect(rows == 225)
            #expect(try metrics.expectCounter("sqlcipherkit_replication_failures_total", database).totalValue == 2)
            #expect(try metrics.expectCounter("sqlcipherkit_replication_gaps_total", database).totalValue == 1)
            #expect((try metrics.expectGauge("sqlcipherkit_replication_lag_frames", database).lastValue ?? 0) > 0)

            store.isDown = false
            try await insert(3)
            try await replicator.syncNow()
            status = await replicator.status
            #expect(status.generation != first)
            #expect(status.consecutiveFailureCount == 0)
            // One generation for the first sync, one after the gap, each counted under its reason.
            #expect(try metrics.expectCounter(
                "sqlcipherkit_replication_generations_total", database + [("reason", "firstGeneration")]).totalValue == 1)
            #expect(try metrics.expectCounter(
                "sqlcipherkit_replication_generations_total", database + [("reason", "gap")]).totalValue == 1)
            #expect(try metrics.expectCounter("sqlcipherkit_replication_shipped_bytes_total", database).totalValue > 0)
            #expect(try metrics.expectGauge("sqlcipherkit_replication_lag_seconds", database).lastValue == 0)
            #expect(try metrics.expectGauge(
                "sqlcipherkit_replication_last_success_timestamp_seconds", database).lastValue != nil)
            let catalog = try await Replica(store: store).catalog()
            #expect(catalog.generations.count == 2)
            #expect(catalog.generations.last?.reason == .gap)
            // Both generations restore: the first to its last shipped point, the second to now.
            let restoredFirst = folder.path("first.db")
            _ = try await Replica(store: store).restore(to: restoredFirst, at: .generation(first))
            #expect(try fileBytes(restoredFirst) == firstCopy)
            let restoredNow = folder.path("now.db")
            _ = try await Replica(store: store).restore(to: restoredNow, at: .latest)
            #expect(try fileBytes(restoredNow) == (try checkpointedCopy(of: folder.path("notes.db"), key: key, in: folder)))
            try await replicator.stop()
            pool.close()
        }
    }

    @Test("a failing store fails the sync, not the writes; the next sync ships what was waiting")
    func retriesWithoutGap() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.sync()
            let store = SwitchableStore(fixture.store)
            let replicator = Replicator(pool: fixture.pool, store: store, configuration: fixture.replicator.configuration)
            try await fixture.replicator.stop()
            try await replicator.syncNow()
            store.isDown = true
            try await fixture.insert(4)
            await #expect(throws: ReplicationError.self) { try await replicator.syncNow() }
            #expect(store.failedCalls > 0)
            store.isDown = false
            fixture.clock.advance(seconds: 1)
            let status = try await replicator.syncNow()
            #expect(status.gapCount == 0)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            try await replicator.stop()
        }
    }
}

/// The database at `path` as a checkpointed file would be (see ``ReplicationFixture/checkpointedCopy()``).
func checkpointedCopy(of path: String, key: EncryptionKey, in folder: TemporaryDirectory) throws -> [UInt8] {
    let copy = folder.path("oracle-\(UUID().uuidString).db")
    defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) } }
    try FileManager.default.copyItem(atPath: path, toPath: copy)
    if FileManager.default.fileExists(atPath: path + "-wal") {
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
    }
    let db = try Connection(path: copy, key: key)
    try db.checkpoint(.truncate)
    db.close()
    return try fileBytes(copy)
}
#endif
