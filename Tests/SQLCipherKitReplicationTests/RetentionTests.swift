#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("Retention and listing")
struct RetentionTests {
    /// Syncs `rounds` times, a new snapshot each time (10 s apart on the test clock), then runs `body`; the fixture
    /// is closed on every way out.
    private func withSnapshotted(
        rounds: Int, retention: ReplicaRetention?, _ body: (ReplicationFixture) async throws -> Void
    ) async throws {
        try await withReplicationFixture(configure: { configuration in
            configuration.snapshotInterval = .seconds(10)
            configuration.retention = retention
            configuration.checkpointFrameCount = 1
        }) { fixture in
            try await fixture.sync()
            for _ in 1...rounds {
                try await fixture.insert(2)
                fixture.clock.advance(seconds: 10)
                try await fixture.sync()
            }
            try await body(fixture)
        }
    }

    @Test("snapshots older than the age limit go with the segments only they need; what is left restores")
    func byAge() async throws {
        try await withSnapshotted(rounds: 5, retention: ReplicaRetention(maximumAge: .seconds(25))) { fixture in
            let generation = try #require(try await fixture.replica.catalog().generations.first)
            #expect(generation.snapshots.count == 3)
            let oldest = try #require(generation.snapshots.first)
            #expect(generation.segments.allSatisfy { $0.index >= oldest.replayFromIndex })
            #expect(generation.firstRestorePoint?.index == oldest.index)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(
                    to: fixture.directory.path("gone.db"), at: .point(generation: generation.name, index: 0))
            }
            #expect(error?.kind == .notFound)
        }
    }

    @Test("at most the given number of snapshots stay, the newest")
    func byCount() async throws {
        try await withSnapshotted(rounds: 4, retention: ReplicaRetention(maximumAge: nil, maximumSnapshotCount: 2)) { fixture in
            let generation = try #require(try await fixture.replica.catalog().generations.first)
            #expect(generation.snapshots.count == 2)
            #expect(generation.snapshots.last?.index == generation.latestRestorePoint?.index)
        }
    }

    @Test("retention removes whole generations that no kept snapshot needs, never the active one")
    func wholeGenerations() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.sync()
            let first = try #require(await fixture.replicator.status.generation)
            try await fixture.replicator.stop()
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(3)
            fixture.clock.advance(seconds: 100)
            try await fixture.sync()
            let second = try #require(await fixture.replicator.status.generation)
            #expect(first != second)
            let report = try await fixture.replica.applyRetention(
                ReplicaRetention(maximumAge: .seconds(50)), now: fixture.clock.now, activeGeneration: second)
            #expect(report.removedGenerations == [first])
            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.map(\.name) == [second])
            #expect(!(try fixture.objectFiles().keys.contains { $0.contains(first) }))
        }
    }

    @Test("the listing names generations by sequence number, and restore points with their times")
    func listing() async throws {
        try await withSnapshotted(rounds: 2, retention: nil) { fixture in
            let generation = try #require(try await fixture.replica.catalog().generations.first)
            #expect(ReplicaLayout.sequence(ofGeneration: generation.name) == 1)
            #expect(generation.restorePointRanges == [0...(generation.segments.last?.index ?? 0)])
            let points = generation.restorePointRanges.flatMap { $0 }.compactMap(generation.restorePoint(at:))
            #expect(points.map(\.time) == points.map(\.time).sorted())
            #expect(generation.engine?.contains("SQLCipher") == true)
        }
    }
}
#endif
