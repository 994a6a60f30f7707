#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// A value one task gives and one other task awaits (once).
final class OneShot<Value: Sendable>: Sendable {
    private let state = Locked<(value: Value?, waiter: CheckedContinuation<Value, Never>?)>((nil, nil))

    /// Gives the value (a second call does nothing) and resumes the task that waits for it.
    func fulfil(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: value)
    }

    /// The value, once given.
    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let given = state.withLock { state -> Value? in
                if let value = state.value { return value }
                state.waiter = continuation
                return nil
            }
            if let given { continuation.resume(returning: given) }
        }
    }
}

/// A folder store that holds the first upload whose key the test names, until the test lets it go: the replica is
/// then exactly as a replicator leaves it part-way, for as long as the test looks at it.
final class HoldingStore: ReplicaStore {
    private struct Hold {
        let matches: @Sendable (String) -> Bool
        /// The key held, or `nil` when the sync ended without reaching it.
        let reached = OneShot<String?>()
        /// Whether the held upload fails.
        let released = OneShot<Bool>()
    }

    let inner: FolderReplicaStore
    private let armed = Locked<Hold?>(nil)
    private let current = Locked<Hold?>(nil)

    init(_ inner: FolderReplicaStore) {
        self.inner = inner
    }

    var description: String { "holding " + inner.description }

    /// Runs `sync` in a task, holding the first upload whose key `matches`, and returns the key it is held at (it
    /// waits there until ``release(failing:)``), or `nil` when the sync ended (returned or threw) without reaching
    /// such an upload.
    func sync<T: Sendable>(
        holding matches: @escaping @Sendable (String) -> Bool, _ sync: @escaping @Sendable () async throws -> T
    ) async -> (key: String?, task: Task<T, any Error>) {
        let hold = Hold(matches: matches)
        armed.withLock { $0 = hold }
        current.withLock { $0 = hold }
        let task = Task {
            defer { hold.reached.fulfil(nil) }
            return try await sync()
        }
        return (await hold.reached.value(), task)
    }

    /// Lets the held upload go on, or fail as an unreachable store fails.
    func release(failing: Bool = false) {
        current.withLock { $0 }?.released.fulfil(failing)
    }

    private func pass(_ key: String) async throws {
        let hold = armed.withLock { armed -> Hold? in
            guard let hold = armed, hold.matches(key) else { return nil }
            armed = nil
            return hold
        }
        guard let hold else { return }
        hold.reached.fulfil(key)
        if await hold.released.value() {
            throw ReplicationError(.unreachable, "the test failed the upload of \(key)")
        }
    }

    func put(_ key: String, bytes: [UInt8]) async throws {
        try await pass(key)
        try await inner.put(key, bytes: bytes)
    }

    func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        try await pass(key)
        try await inner.put(key, file: path, offset: offset, length: length, progress: progress)
    }

    func get(_ key: String) async throws -> [UInt8] { try await inner.get(key) }

    func list(prefix: String) async throws -> [ReplicaObject] { try await inner.list(prefix: prefix) }

    func delete(_ keys: [String]) async throws { try await inner.delete(keys) }
}

/// While the primary starts a new generation, the generation is in the store before its first snapshot is
/// complete. A follower that looks then waits for it (no error, the copy at the old generation's end) and follows it
/// once it is complete; a new generation that is damaged is still damage.
@Suite("A follower and a generation being started")
struct FollowerStartingGenerationTests {
    /// Where the replicator is held while it starts the new generation.
    enum StartingState: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// Exact snapshot, held before its first part: `generation.json` alone.
        case manifestOnly
        /// Exact snapshot, held before its `snapshot.json`: `generation.json` and every part.
        case partsWithoutSnapshotManifest
        /// Another connection's reader held frames (no exact snapshot): `generation.json`, the log from its start in
        /// segments, every part, held before the `snapshot.json`.
        case logWithoutSnapshotManifest

        var testDescription: String { rawValue }

        /// Whether the upload of `key` is where the replicator is held, in a generation other than `old`.
        func holds(_ key: String, old: String) -> Bool {
            switch ReplicaLayout.parse(key) {
            case .snapshotPart(let generation, _, _, _)?: self == .manifestOnly && generation != old
            case .snapshotManifest(let generation, _)?: self != .manifestOnly && generation != old
            default: false
            }
        }
    }

    /// What the scenario left: the old generation's name and last index, its rows, and the store.
    struct Scenario {
        let fixture: ReplicationFixture
        let store: HoldingStore
        let follower: ReplicaFollower
        let old: String
        let oldLast: Int
        let oldRows: Int
        let newRows: Int
    }

    /// A replica whose first generation holds 13 rows in three segments, a follower that applied the first of them
    /// only (5 rows), then the replicator stopped and the log checkpointed away with more rows written around it:
    /// the next sync starts a second generation with `newRows` rows, held at `state`. `body` runs while it is held
    /// (the sync's task given) and must release it.
    private func withStartingGeneration(
        _ state: StartingState,
        _ body: (Scenario, String, Task<ReplicationStatus, any Error>) async throws -> Void
    ) async throws {
        try await withReplicationFixture(target: { directory in
            HoldingStore(try FolderReplicaStore(root: directory.path("held")))
        }) { fixture in
            let store = try #require(fixture.target as? HoldingStore)
            try await fixture.insert(5)
            try await fixture.sync()
            let follower = FollowerTests.follower(fixture)
            try await follower.start()
            #expect(try FollowerTests.count(follower.path, fixture) == 5)
            // The old generation's last segments, shipped while the follower does not look.
            try await fixture.insert(5)
            try await fixture.sync()
            try await fixture.insert(3)
            try await fixture.sync()
            let old = try #require(await fixture.replicator.status.generation)
            let oldLast = try #require(await fixture.replicator.status.lastIndex)
            // The log no longer continues the replica: the next sync starts another generation.
            try await fixture.replicator.stop()
            try await fixture.insert(4)
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(6)
            var newRows = 23
            var reader: Connection?
            if state == .logWithoutSnapshotManifest {
                // A reader in the log: the generation's checkpoint cannot copy past it.
                let connection = try Connection(
                    path: fixture.databasePath, encryption: .key(fixture.key, settings: fixture.settings))
                reader = connection
                try connection.execute("BEGIN")
                #expect(try connection.scalar("SELECT count(*) FROM note", as: Int.self) == 23)
                try await fixture.insert(2)
                newRows = 25
            }
            fixture.clock.advance(seconds: 1)
            let replicator = fixture.replicator
            let (key, syncing) = await store.sync(holding: { state.holds($0, old: old) }) {
                try await replicator.syncNow()
            }
            // The generation's checkpoint is done: the reader is no longer needed.
            try reader?.execute("ROLLBACK")
            reader?.close()
            guard let held = key else {
                let result = await syncing.result
                Issue.record("the sync ended without being held: \(result)")
                return
            }
            let scenario = Scenario(
                fixture: fixture, store: store, follower: follower, old: old, oldLast: oldLast, oldRows: 13,
                newRows: newRows)
            do {
                try await body(scenario, held, syncing)
            } catch {
                store.release(failing: true)
                _ = await syncing.result
                await follower.stop()
                throw error
            }
            await follower.stop()
        }
    }

    @Test(
        "a follower that looks while the new generation's first snapshot is incomplete applies the old generation to its end without an error, and follows the new one once it is complete",
        arguments: StartingState.allCases)
    func waitsForAGenerationBeingStarted(_ state: StartingState) async throws {
        try await withStartingGeneration(state) { scenario, held, syncing in
            let fixture = scenario.fixture
            let follower = scenario.follower
            // The store holds the new generation, without a snapshot.json.
            let catalog = try await fixture.replica.catalog(verifyingWith: [FollowerTests.verificationKey(fixture)])
            let new = try #require(catalog.generations.last)
            #expect(new.name != scenario.old && held.hasPrefix(ReplicaLayout.generationPrefix(new.name)))
            #expect(new.snapshots.isEmpty)
            #expect(new.segments.isEmpty == (state != .logWithoutSnapshotManifest))
            #expect(catalog.startingGenerations.map(\.name) == [new.name])

            for _ in 1...2 {  // and again at the next poll
                let status = try await follower.catchUp()
                #expect(status.lastError == nil)
                #expect(status.point?.generation == scenario.old && status.point?.index == scenario.oldLast)
                #expect(status.startingGeneration == new.name)
                #expect(try FollowerTests.count(follower.path, fixture) == scenario.oldRows)
            }
            #expect(!FileManager.default.fileExists(atPath: follower.path + ".follower-restore"))
            // A follower started now restores the same state.
            let late = FollowerTests.follower(fixture, path: fixture.directory.path("late.db"))
            let started = try await late.start()
            #expect(started.lastError == nil && started.point?.generation == scenario.old)
            #expect(started.point?.index == scenario.oldLast)
            #expect(try FollowerTests.count(late.path, fixture) == scenario.oldRows)

            scenario.store.release()
            let synced = try await syncing.value
            #expect(synced.generation == new.name)
            for copy in [follower, late] {
                let status = try await copy.catchUp()
                #expect(status.lastError == nil && status.startingGeneration == nil)
                #expect(status.point?.generation == new.name)
                #expect(status.lastCaughtUp != nil)
                #expect(try FollowerTests.count(copy.path, fixture) == scenario.newRows)
            }
            await late.stop()
        }
    }

    /// How the new generation is damaged.
    enum Damage: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// Still being started, its `generation.json`'s MAC altered: incomplete, and provably not authentic.
        case startingManifestNotAuthentic
        /// Complete, its `snapshot.json` with a byte flipped: it no longer matches its SHA-256.
        case snapshotManifestDamaged
        /// Complete, a part its `snapshot.json` lists deleted.
        case partMissing

        var testDescription: String { rawValue }
    }

    @Test("a damaged new generation is still damage: the follower reports it and its copy keeps the old state",
          arguments: Damage.allCases)
    func damagedNewGenerationIsReported(_ damage: Damage) async throws {
        try await withStartingGeneration(.partsWithoutSnapshotManifest) { scenario, _, syncing in
            let fixture = scenario.fixture
            let follower = scenario.follower
            _ = try await follower.catchUp()
            #expect(try FollowerTests.count(follower.path, fixture) == scenario.oldRows)
            let generations = try await fixture.replica.catalog().generations
            let new = try #require(generations.last).name
            if damage != .startingManifestNotAuthentic {
                scenario.store.release()
                _ = try await syncing.value
            }
            let root = scenario.store.inner.root
            let objects = try await scenario.store.inner.list(prefix: ReplicaLayout.generationPrefix(new)).map(\.key)
            switch damage {
            case .startingManifestNotAuthentic:
                // The last character of the MAC's hex, before the final newline: '0' and '1', '2' and '3', … swap.
                let path = root + "/" + ReplicaLayout.generationManifestKey(new)
                try flipByte(in: path, at: try fileBytes(path).count - 2)
            case .snapshotManifestDamaged:
                try flipByte(in: root + "/" + ReplicaLayout.snapshotManifestKey(new, index: 0), at: 20)
            case .partMissing:
                let part = try #require(objects.first { $0.hasSuffix(".part") })
                try FileManager.default.removeItem(atPath: root + "/" + part)
            }
            let catalog = try await fixture.replica.catalog(verifyingWith: [FollowerTests.verificationKey(fixture)])
            #expect(catalog.startingGenerations.isEmpty)
            await #expect(throws: ReplicationError.self) { try await follower.catchUp() }
            let status = await follower.status
            let expected = switch damage {
            case .startingManifestNotAuthentic: "does not verify"
            case .snapshotManifestDamaged: "does not match its SHA-256"
            case .partMissing: "is missing from the store"
            }
            #expect(status.lastError?.contains(expected) == true, "\(status.lastError ?? "no error")")
            #expect(status.startingGeneration == nil)
            #expect(status.point?.generation == scenario.old && status.point?.index == scenario.oldLast)
            #expect(try FollowerTests.count(follower.path, fixture) == scenario.oldRows)
            if damage == .startingManifestNotAuthentic {
                scenario.store.release()
                _ = try await syncing.value
            }
        }
    }

    @Test("a generation whose start failed part-way is not waited for: the next one, complete, is followed")
    func abandonedGenerationIsPassedOver() async throws {
        try await withStartingGeneration(.partsWithoutSnapshotManifest) { scenario, _, syncing in
            let fixture = scenario.fixture
            let follower = scenario.follower
            scenario.store.release(failing: true)
            await #expect(throws: ReplicationError.self) { try await syncing.value }
            let abandoned = try #require(try await fixture.replica.catalog().generations.last).name
            // The next sync starts another generation, which follows the old one's last point.
            let status = try await fixture.sync()
            let next = try #require(status.generation)
            #expect(next != abandoned && next != scenario.old)
            let catalog = try await fixture.replica.catalog(verifyingWith: [FollowerTests.verificationKey(fixture)])
            #expect(catalog.startingGenerations.isEmpty)
            #expect(catalog.generation(named: abandoned)?.problems.contains { $0.contains("never completed") } == true)
            let followed = try await follower.catchUp()
            #expect(followed.lastError == nil && followed.point?.generation == next)
            #expect(try FollowerTests.count(follower.path, fixture) == scenario.newRows)
        }
    }
}
#endif
