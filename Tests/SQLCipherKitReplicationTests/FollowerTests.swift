#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// A follower keeps a local copy current from the replica, shows readers of any process one shipped commit at a
/// time, stops at damage, and takes over as primary, fencing the old one.
@Suite("Following a replica and promoting the follower")
struct FollowerTests {
    static func verificationKey(_ fixture: ReplicationFixture) -> VerificationKey {
        VerificationKey(name: "the test key", key: fixture.key, settings: fixture.settings)
    }

    static func follower(_ fixture: ReplicationFixture, path: String? = nil) -> ReplicaFollower {
        var configuration = ReplicaFollower.Configuration(pollInterval: .milliseconds(10))
        let clock = fixture.clock
        configuration.now = { clock.now }
        return ReplicaFollower(
            replica: fixture.replica, path: path ?? fixture.directory.path("follower.db"),
            key: verificationKey(fixture), configuration: configuration)
    }

    /// Rows of `note` through a connection opened now.
    static func count(_ path: String, _ fixture: ReplicationFixture) throws -> Int {
        let db = try Connection(path: path, encryption: .key(fixture.key, settings: fixture.settings))
        defer { db.close() }
        return try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? -1
    }

    @Test("restored once, then each shipped segment applied: another process reads each shipped state whole, and no byte of the copy is plaintext")
    func followsSegments() async throws {
        guard PeerProcess.isAvailable else { try Test.cancel("skipped: \(PeerProcess.unavailableReason)") }
        try await withReplicationFixture { fixture in
            try await fixture.insert(10)
            try await fixture.sync()
            let follower = Self.follower(fixture)
            let path = follower.path
            let started = try await follower.start()
            #expect(try Self.count(path, fixture) == 10)
            #expect(started.point?.generation == (await fixture.replicator.status.generation))
            #expect(started.lastCaughtUp != nil)
            #expect(try fileMode(follower.statePath) == 0o600)
            let peer = try fixture.key.withRawKeyText {
                try PeerProcess(database: path, rawKeyText: String(decoding: $0, as: UTF8.self))
            }
            defer { peer.stop() }
            var expected = 10
            for round in 1...5 {
                try await fixture.insert(20 * round)
                try await fixture.sync()
                // Shipped, not applied yet: the other process still reads the state before.
                #expect(try peer.count("note").get() == expected)
                expected += 20 * round
                let status = try await follower.catchUp()
                #expect(try peer.count("note").get() == expected)
                #expect(status.point?.index == (await fixture.replicator.status.lastIndex))
                #expect(status.pointsBehind == 0 && status.lastError == nil)
            }
            peer.stop()
            await follower.stop()
            #expect(try Self.count(path, fixture) == expected)
            for suffix in ["", "-wal", ".follower"] where FileManager.default.fileExists(atPath: path + suffix) {
                #expect(!contains(try fileBytes(path + suffix), plaintextMarker), "\(suffix) holds plaintext")
            }
        }
    }

    @Test("a new generation (a replicator that could not continue) is followed through its snapshot, and a follower started again goes on from its state file")
    func followsGenerationsAndRestarts() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let follower = Self.follower(fixture)
            try await follower.start()
            let first = try #require(await fixture.replicator.status.generation)
            try await fixture.replicator.stop()
            try await fixture.insert(5)
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(5)
            let again = fixture.newReplicator()
            _ = try await again.syncNow()
            let second = try #require(await again.status.generation)
            #expect(second != first)
            let status = try await follower.catchUp()
            #expect(status.point?.generation == second)
            #expect(try Self.count(follower.path, fixture) == 15)
            // Stopped, the primary goes on, and a new follower on the same copy goes on from where it was.
            await follower.stop()
            try await fixture.insert(7)
            fixture.clock.advance(seconds: 1)
            _ = try await again.syncNow()
            let restarted = Self.follower(fixture, path: follower.path)
            let resumed = try await restarted.start()
            #expect(resumed.point?.generation == second)
            #expect(resumed.point?.index == (await again.status.lastIndex))
            #expect(try Self.count(follower.path, fixture) == 22)
            await restarted.stop()
            try await again.stop()
        }
    }

    @Test("a damaged segment stops the applying at the last good point: the copy keeps serving it, the status says why, and nothing half-applied shows")
    func damagedSegment() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let follower = Self.follower(fixture)
            try await follower.start()
            try await fixture.insert(5)
            try await fixture.sync()
            try await fixture.insert(5)
            try await fixture.sync()
            let catalog = try await fixture.replica.catalog()
            let generation = try #require(catalog.generations.last)
            let damaged = try #require(generation.segment(at: generation.lastIndex - 1))
            try flipByte(in: fixture.objectPath(damaged.key), at: 100)
            await #expect(throws: ReplicationError.self) { try await follower.catchUp() }
            let status = await follower.status
            #expect(status.lastError?.contains("does not match its SHA-256") == true)
            #expect(status.point?.index == generation.lastIndex - 2)
            #expect(try Self.count(follower.path, fixture) == 5)
            await follower.stop()
        }
    }

    @Test("a follower that cannot catch up says in its log how stale its copy may be: the time since it was last current")
    func staleCopyIsLogged() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let lines = LogLines()
            var configuration = ReplicaFollower.Configuration(pollInterval: .milliseconds(10), logger: lines.logger())
            let clock = fixture.clock
            configuration.now = { clock.now }
            let follower = ReplicaFollower(
                replica: fixture.replica, path: fixture.directory.path("follower.db"), key: Self.verificationKey(fixture),
                configuration: configuration)
            try await follower.start()
            let current = try #require(await follower.status.lastCaughtUp)
            try await fixture.insert(5)
            try await fixture.sync()
            let catalog = try await fixture.replica.catalog()
            let generation = try #require(catalog.generations.last)
            let damaged = try #require(generation.segment(at: generation.lastIndex))
            try flipByte(in: fixture.objectPath(damaged.key), at: 100)
            clock.advance(seconds: 30)
            await #expect(throws: ReplicationError.self) { try await follower.catchUp() }
            let stale = clock.now.timeIntervalSince(current)
            #expect(stale == 31)
            let warning = try #require(lines.all.first { $0.contains("could not catch up") })
            #expect(warning.contains("stale=\(stale) s"), "\(warning)")
            #expect(try Self.count(follower.path, fixture) == 5)
            await follower.stop()
        }
    }

    @Test("another connection writing to the copy stops the follower: the copy no longer matches the replica")
    func writtenCopyIsRefused() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let follower = Self.follower(fixture)
            try await follower.start()
            try await fixture.insert(5)
            try await fixture.sync()
            try await follower.catchUp()
            let other = try Connection(path: follower.path, encryption: .key(fixture.key, settings: fixture.settings))
            try other.execute("INSERT INTO note(id, body) VALUES (1000, 'local write')")
            other.close()
            try await fixture.insert(5)
            try await fixture.sync()
            await #expect(throws: DatabaseError.self) { try await follower.catchUp() }
            await follower.stop()
        }
    }

    @Test("a file at the copy's path that no follower restored is never written to")
    func existingFileIsRefused() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let path = fixture.directory.path("occupied.db")
            #expect(FileManager.default.createFile(atPath: path, contents: Data("someone's file".utf8)))
            let follower = Self.follower(fixture, path: path)
            await #expect(throws: ReplicationError.self) { try await follower.start() }
            #expect(try fileBytes(path) == Array("someone's file".utf8))
        }
    }

    @Test("a second follower on the same copy is refused while the first has it, and starts once the first stopped")
    func oneFollowerPerCopy() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let first = Self.follower(fixture)
            try await first.start()
            let state = try fileBytes(first.statePath)
            let second = Self.follower(fixture, path: first.path)
            do {
                try await second.start()
                Issue.record("a second follower started on a copy the first has")
            } catch let error as DatabaseError {
                #expect(error.kind == .busy)
            }
            #expect(try fileBytes(first.statePath) == state)
            await first.stop()
            try await fixture.insert(5)
            try await fixture.sync()
            try await second.start()
            #expect(try Self.count(first.path, fixture) == 10)
            await second.stop()
        }
    }

    @Test("promoted, the follower fences the old primary, its generation follows the last point it applied, and a restore holds every shipped write and none the fenced primary made after")
    func promotion() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(10)
            try await fixture.sync()
            let follower = Self.follower(fixture)
            try await follower.start()
            try await fixture.insert(10)
            try await fixture.sync()
            let oldGeneration = try #require(await fixture.replicator.status.generation)
            let shippedIndex = try #require(await fixture.replicator.status.lastIndex)
            // The old primary is only partitioned: it goes on running. The follower is promoted.
            let newPool = try DatabasePool(
                path: follower.path, keyProvider: .fixed(fixture.key),
                configuration: DatabasePool.Configuration(settings: fixture.settings))
            let replicator = try await follower.promote(pool: newPool, configuration: fixture.configuration)
            #expect(await follower.status.isPromoted)
            #expect(!FileManager.default.fileExists(atPath: follower.statePath))
            try await newPool.write { db in
                for id in 5001...5010 { try db.execute("INSERT INTO note(id, body) VALUES (?, 'after promotion')", id) }
            }
            fixture.clock.advance(seconds: 1)
            let newStatus = try await replicator.syncNow()
            let newGeneration = try #require(newStatus.generation)
            #expect(newGeneration != oldGeneration)
            // The old primary writes on and tries to ship: fenced, naming the new primary's generation.
            try await fixture.insert(10)
            do {
                try await fixture.sync()
                Issue.record("the old primary shipped after the promotion")
            } catch let error as ReplicationError {
                #expect(error.kind == .fenced)
                #expect(error.reason.contains(newGeneration))
            }
            let catalog = try await fixture.replica.catalog(verifyingWith: [Self.verificationKey(fixture)])
            let promoted = try #require(catalog.generation(named: newGeneration))
            #expect(promoted.reason == .promoted)
            #expect(promoted.previousGeneration == oldGeneration)
            #expect(promoted.manifest?.previous?.index == shippedIndex)
            let restoredPath = fixture.directory.path("third-host.db")
            _ = try await fixture.replica.restore(
                to: restoredPath, options: RestoreOptions(verificationKeys: [Self.verificationKey(fixture)]))
            let db = try Connection(path: restoredPath, encryption: .key(fixture.key, settings: fixture.settings))
            #expect(try db.scalar("SELECT count(*) FROM note WHERE id <= 20", as: Int.self) == 20)
            #expect(try db.scalar("SELECT count(*) FROM note WHERE id > 5000", as: Int.self) == 10)
            #expect(try db.scalar("SELECT count(*) FROM note WHERE id BETWEEN 21 AND 5000", as: Int.self) == 0)
            db.close()
            try await replicator.stop()
            newPool.close()
        }
    }
}
#endif
