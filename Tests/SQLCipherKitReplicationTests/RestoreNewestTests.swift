#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// A restore of the newest state is the newest state or an error: a damaged or missing manifest of the newest
/// generation, a generation whose snapshot never completed, two generations of one sequence number, a host whose
/// clock runs ahead — none may make it restore an older generation and exit 0.
@Suite("Restoring the newest state", .serialized)
struct RestoreNewestTests {
    /// Runs `body` with two generations: the first with 8 rows, the second (after the replicator started again on a
    /// log that no longer continues it) with 18; `body` gets the fixture, the attacker and both generations' names
    /// (old, new). The fixture is closed on every way out.
    private func withTwoGenerations(
        _ kind: AttackedStore = .folder, secondClockOffset: Double = 0,
        _ body: (ReplicationFixture, BucketAttacker, String, String) async throws -> Void
    ) async throws {
        try await kind.withFixture { fixture, attacker in
            try await fixture.insert(8)
            try await fixture.sync()
            let old = try #require(await fixture.replicator.status.generation)
            // Stop, checkpoint the log away (TRUNCATE: the log no longer continues the replica), write, start again.
            try await fixture.replicator.stop()
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(10)
            fixture.clock.advance(seconds: secondClockOffset)
            let status = try await fixture.sync()
            let new = try #require(status.generation)
            #expect(new != old)
            try await body(fixture, attacker, old, new)
        }
    }

    private func rowCount(_ path: String, key: EncryptionKey) throws -> Int {
        let db = try Connection(path: path, key: key)
        defer { db.close() }
        return try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? -1
    }

    @Test("a flipped byte in the newest generation's generation.json stops the restore, naming it",
          arguments: AttackedStore.available)
    func damagedGenerationManifest(_ kind: AttackedStore) async throws {
        try await withTwoGenerations(kind) { fixture, attacker, old, new in
            try await attacker.flip("generations/\(new)/generation.json", at: 40)
            try await expectStopped(fixture, naming: new, lastGood: old)
        }
    }

    @Test("a deleted generation.json of the newest generation stops the restore")
    func missingGenerationManifest() async throws {
        try await withTwoGenerations { fixture, attacker, old, new in
            try await attacker.delete("generations/\(new)/generation.json")
            try await expectStopped(fixture, naming: new, lastGood: old)
        }
    }

    @Test("a damaged or deleted only snapshot.json of the newest generation stops the restore",
          arguments: [true, false])
    func missingSnapshotManifest(_ deletes: Bool) async throws {
        try await withTwoGenerations { fixture, attacker, old, new in
            let key = try #require(try await attacker.keys().first { $0.hasPrefix("generations/\(new)/snapshots/") && $0.hasSuffix("snapshot.json") })
            if deletes { try await attacker.delete(key) } else { try await attacker.flip(key, at: 20) }
            try await expectStopped(fixture, naming: new, lastGood: old)
        }
    }

    /// The restore stops with `damaged`, names the generation and the last good point of the one before; naming
    /// that generation restores it on purpose.
    private func expectStopped(
        _ fixture: ReplicationFixture, naming generation: String, lastGood old: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let destination = fixture.directory.path("latest.db")
        let error = await #expect(throws: ReplicationError.self, sourceLocation: sourceLocation) {
            _ = try await fixture.replica.restore(to: destination)
        }
        #expect(error?.kind == .damaged, sourceLocation: sourceLocation)
        #expect(error?.message.contains(generation) == true, "\(error?.message ?? "")", sourceLocation: sourceLocation)
        guard case .nameRestorePoint(let point?)? = error?.remedy else {
            Issue.record("no last good point in \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(point.generation == old, sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: destination), sourceLocation: sourceLocation)
        // On purpose: the older generation restores, 8 rows.
        let named = fixture.directory.path("named.db")
        _ = try await fixture.replica.restore(to: named, at: .generation(old))
        #expect(try rowCount(named, key: fixture.key) == 8, sourceLocation: sourceLocation)
    }

    @Test("a host whose clock ran 13 minutes ahead cannot make an older generation the newest")
    func clockSkew() async throws {
        // The first generation is written by a host 13 minutes ahead, the second by one with the right time: its
        // times are earlier, its sequence number is higher.
        try await AttackedStore.folder.withFixture { fixture, attacker in
            fixture.clock.advance(seconds: 13 * 60)
            try await fixture.insert(10)
            try await fixture.sync()
            try await fixture.replicator.stop()
            fixture.clock.advance(seconds: -13 * 60)
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(10)
            try await fixture.sync()
            let generations = try await attacker.generations()
            #expect(generations.count == 2)
            let catalog = try await fixture.replica.catalog()
            let first = try #require(catalog.generations.first?.createdAt)
            let second = try #require(catalog.generations.last?.createdAt)
            #expect(second < first)
            let restored = fixture.directory.path("restored.db")
            let report = try await fixture.replica.restore(to: restored)
            #expect(report.point.generation == generations.last)
            #expect(try rowCount(restored, key: fixture.key) == 20)
        }
    }

    @Test("two generations with one sequence number stop the restore, naming both")
    func duplicateSequence() async throws {
        try await withTwoGenerations { fixture, attacker, _, new in
            let twin = String(new.prefix(11)) + "ffffffff"
            for key in try await attacker.keys() where key.hasPrefix("generations/\(new)/") {
                try await attacker.write(key.replacingOccurrences(of: new, with: twin), try await attacker.read(key))
            }
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: fixture.directory.path("r.db"))
            }
            #expect(error?.kind == .damaged)
            #expect(error?.message.contains(new) == true && error?.message.contains(twin) == true)
        }
    }

    @Test("an index past the generation's end is no such restore point, not damage")
    func indexPastTheEnd() async throws {
        try await withTwoGenerations { fixture, _, _, new in
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: fixture.directory.path("r.db"), at: .point(generation: new, index: 99))
            }
            #expect(error?.kind == .notFound)
            #expect(error?.message.contains("no such restore point") == true)
        }
    }

    @Test("a folder or prefix that holds nothing is an error naming the URL to check, not an empty replica")
    func emptyReplica() async throws {
        try await withTemporaryDirectory { directory in
            let replica = Replica(store: try FolderReplicaStore(root: directory.path("no-such-folder")))
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await replica.restore(to: directory.path("r.db"))
            }
            #expect(error?.kind == .notFound)
            #expect(error?.remedy == .checkReplicaURL)
            #expect(try await replica.catalog().isEmpty)
            #expect(!FileManager.default.fileExists(atPath: directory.path("no-such-folder")))
        }
    }

    @Test("generation.json does not carry the database's file name")
    func noDatabaseName() async throws {
        try await AttackedStore.folder.withFixture { fixture, attacker in
            try await fixture.insert(1)
            let status = try await fixture.sync()
            let manifest = try await attacker.read("generations/\(try #require(status.generation))/generation.json")
            #expect(!contains(manifest, "notes.db"))
            #expect(!contains(manifest, "notes"))
        }
    }
}
#endif
