#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// A store that fails one chosen upload of a log segment, the way a store fails under an outage.
final class FailingUploadStore: ReplicaStore {
    /// How the chosen upload fails.
    enum Failure: Sendable, CustomStringConvertible {
        /// Refused before anything reached the store (a connection refused, a body cut off: S3 stores nothing).
        case beforeStoring
        /// The store wrote the object, then the answer was lost (the connection reset after the store's write).
        case afterStoring
        /// The store goes away at that upload: it and every call after it fail until ``FailingUploadStore/comeBack()``.
        case storeGoesAway

        var description: String {
            switch self {
            case .beforeStoring: "refused before the store wrote it"
            case .afterStoring: "written by the store, its answer lost"
            case .storeGoesAway: "the store went away at it"
            }
        }
    }

    let inner: any ReplicaStore
    private struct State {
        var segmentUploads = 0
        var failAt: (upload: Int, failure: Failure)?
        var isDown = false
        var failedKeys: [String] = []
    }
    private let state = Locked(State())

    init(_ inner: any ReplicaStore) {
        self.inner = inner
    }

    var description: String { "failing " + inner.description }

    /// Fails the `upload`th log segment upload from now on (1: the next one).
    func fail(upload: Int, _ failure: Failure) {
        state.withLock { $0.failAt = ($0.segmentUploads + upload, failure) }
    }

    /// After ``Failure/storeGoesAway``: the store answers again.
    func comeBack() {
        state.withLock { $0.isDown = false }
    }

    /// The keys of the uploads that failed.
    var failedKeys: [String] { state.withLock { $0.failedKeys } }

    private func checkUp() throws {
        if state.withLock({ $0.isDown }) { throw ReplicationError(.unreachable, "the test's store is down") }
    }

    /// Runs a log segment's upload (or any other upload) with the failure chosen for it.
    private func upload(_ key: String, _ store: () async throws -> Void) async throws {
        try checkUp()
        guard ReplicaLayout.parse(key).map({ if case .segment = $0 { true } else { false } }) ?? false else {
            return try await store()
        }
        let failure = state.withLock { state -> Failure? in
            state.segmentUploads += 1
            guard let chosen = state.failAt, chosen.upload == state.segmentUploads else { return nil }
            state.failAt = nil
            state.failedKeys.append(key)
            if case .storeGoesAway = chosen.failure { state.isDown = true }
            return chosen.failure
        }
        switch failure {
        case nil:
            try await store()
        case .beforeStoring?, .storeGoesAway?:
            throw ReplicationError(.unreachable, "the test's store refused the upload of \(key)")
        case .afterStoring?:
            try await store()
            throw ReplicationError(.unreachable, "the test's store wrote \(key), then the connection was reset")
        }
    }

    func put(_ key: String, bytes: [UInt8]) async throws {
        try await upload(key) { try await inner.put(key, bytes: bytes) }
    }

    func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        try await upload(key) {
            try await inner.put(key, file: path, offset: offset, length: length, progress: progress)
        }
    }

    func get(_ key: String) async throws -> [UInt8] {
        try checkUp()
        return try await inner.get(key)
    }

    func list(prefix: String) async throws -> [ReplicaObject] {
        try checkUp()
        return try await inner.list(prefix: prefix)
    }

    func delete(_ keys: [String]) async throws {
        try checkUp()
        try await inner.delete(keys)
    }
}

/// A log segment's upload fails the ways a store fails while it goes away: refused, written with its answer lost,
/// the store gone between two segments of one sync. Every acknowledged row must be in what a restore gives, and no
/// index of the replica may be claimed twice or skipped.
@Suite("A failed segment upload")
struct FailedUploadTests {
    /// Segments of about three frames: one sync of 20 rows ships several, so a failure can fall between two.
    static func configure(_ configuration: inout ReplicatorConfiguration) {
        configuration.segmentByteCount = 3 * (4096 + 24)
        configuration.checkpointFrameCount = 100_000
    }

    /// Inserts `rows` rows in transactions of 5 (each a segment of its own or two).
    static func insert(_ fixture: ReplicationFixture, rows: Int) async throws {
        for _ in 0..<(rows / 5) { try await fixture.insert(5) }
    }

    /// Rows counted in a restore of the replica's newest point: a new store object on the same folder, a new
    /// `Replica`, a fresh connection on the restored file.
    static func restoredRows(_ fixture: ReplicationFixture) async throws -> (rows: Int, bytes: [UInt8]) {
        let replica = Replica(store: try FolderReplicaStore(root: fixture.store.root))
        let path = fixture.directory.path("restored-\(UUID().uuidString).db")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        _ = try await replica.restore(to: path, at: .latest)
        let db = try Connection(path: path, encryption: .key(fixture.key, settings: try fixture.settingsWithSalt()))
        defer { db.close() }
        try db.quickCheck()
        let rows = try #require(try db.scalar("SELECT count(*) FROM note", as: Int.self))
        // Rows are numbered from 1 in commit order: a restore holds a prefix of them, without holes.
        #expect(try db.scalar("SELECT max(id) FROM note", as: Int.self) == (rows == 0 ? nil : rows))
        return (rows, try fileBytes(path))
    }

    /// No index of any generation is claimed twice or missing, and nothing in the catalog is wrong.
    static func expectWholeCatalog(_ fixture: ReplicationFixture) async throws {
        let catalog = try await Replica(store: try FolderReplicaStore(root: fixture.store.root)).catalog()
        for generation in catalog.generations {
            #expect(generation.problems.isEmpty, "\(generation.name): \(generation.problems)")
            #expect(generation.missingSegmentIndexes.isEmpty, "\(generation.name): \(generation.missingSegmentIndexes)")
            let indexes = generation.segments.map(\.index)
            #expect(Set(indexes).count == indexes.count, "\(generation.name): an index is claimed twice: \(indexes)")
        }
    }

    @Test(
        "a segment upload that fails, first or second of a sync, is stored again under its own name: the restore holds every acknowledged row",
        arguments: [FailingUploadStore.Failure.beforeStoring, .afterStoring], [1, 2])
    func failedUploadStoredAgain(failure: FailingUploadStore.Failure, upload: Int) async throws {
        try await withReplicationFixture(
            configure: Self.configure,
            target: { directory in FailingUploadStore(try FolderReplicaStore(root: directory.path("replica"))) }
        ) { fixture in
            let store = try #require(fixture.target as? FailingUploadStore)
            try await fixture.insert(5)
            let generation = try await fixture.sync().generation
            try await Self.insert(fixture, rows: 20)
            store.fail(upload: upload, failure)
            await #expect(throws: ReplicationError.self) { try await fixture.sync() }
            #expect(store.failedKeys.count == 1)
            // More commits before the retry: a segment named again would now hold other frames.
            try await Self.insert(fixture, rows: 20)
            let status = try await fixture.sync()
            #expect(status.unshippedFrameCount == 0 && status.consecutiveFailureCount == 0)
            // The same generation goes on: the log still held the segment's frames.
            #expect(status.generation == generation && status.gapCount == 0)
            let restored = try await Self.restoredRows(fixture)
            #expect(restored.rows == 45)
            #expect(restored.bytes == (try fixture.checkpointedCopy()))
            try await Self.expectWholeCatalog(fixture)
            // The failed upload's key is the one stored again (the store holds exactly that object).
            let failedKey = try #require(store.failedKeys.first)
            #expect(FileManager.default.fileExists(atPath: fixture.objectPath(failedKey)))
        }
    }

    @Test("the store goes away between two segments of one sync: meanwhile the restore gives the newest point stored, then every row once the store is back")
    func storeGoesAwayBetweenSegments() async throws {
        try await withReplicationFixture(
            configure: Self.configure,
            target: { directory in FailingUploadStore(try FolderReplicaStore(root: directory.path("replica"))) }
        ) { fixture in
            let store = try #require(fixture.target as? FailingUploadStore)
            try await fixture.insert(5)
            try await fixture.sync()
            try await Self.insert(fixture, rows: 20)
            store.fail(upload: 2, .storeGoesAway)
            await #expect(throws: ReplicationError.self) { try await fixture.sync() }
            try await Self.insert(fixture, rows: 20)
            await #expect(throws: ReplicationError.self) { try await fixture.sync() }
            // What the store holds now restores (a point between the first 5 rows and the 25 committed before the
            // sync that failed), not an error about a missing segment.
            let meanwhile = try await Self.restoredRows(fixture)
            #expect(meanwhile.rows > 5 && meanwhile.rows < 25, "\(meanwhile.rows) rows")
            try await Self.expectWholeCatalog(fixture)
            store.comeBack()
            try await fixture.insert(3)
            try await fixture.sync()
            let restored = try await Self.restoredRows(fixture)
            #expect(restored.rows == 48)
            #expect(restored.bytes == (try fixture.checkpointedCopy()))
            try await Self.expectWholeCatalog(fixture)
        }
    }

    @Test(
        "a replicator killed after a failed upload: the one started next goes on from what the store holds, and the restore holds every row",
        arguments: [FailingUploadStore.Failure.beforeStoring, .afterStoring])
    func killedAfterFailedUpload(failure: FailingUploadStore.Failure) async throws {
        try await withReplicationFixture(
            configure: Self.configure,
            target: { directory in FailingUploadStore(try FolderReplicaStore(root: directory.path("replica"))) }
        ) { fixture in
            let store = try #require(fixture.target as? FailingUploadStore)
            try await fixture.insert(5)
            try await fixture.sync()
            try await Self.insert(fixture, rows: 20)
            store.fail(upload: 2, failure)
            await #expect(throws: ReplicationError.self) { try await fixture.sync() }
            await fixture.replicator.closeAsIfKilled()
            let next = fixture.newReplicator()
            try await Self.insert(fixture, rows: 20)
            fixture.clock.advance(seconds: 1)
            let status: ReplicationStatus
            do {
                status = try await next.syncNow()
            } catch {
                try? await next.stop()
                throw error
            }
            try await next.stop()
            #expect(status.unshippedFrameCount == 0)
            let restored = try await Self.restoredRows(fixture)
            #expect(restored.rows == 45)
            #expect(restored.bytes == (try fixture.checkpointedCopy()))
            try await Self.expectWholeCatalog(fixture)
        }
    }
}
#endif
