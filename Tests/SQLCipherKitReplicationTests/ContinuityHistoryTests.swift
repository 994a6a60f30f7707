#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// Random histories of what can happen to a replicated database, each from a seed (a failure names its seed and
/// step, and replays): writes through the replicated pool and through a second pool (whose writer restarts the log
/// with a checkpoint sequence of its own), checkpoints by that second pool, a reader of another connection held
/// across syncs and kills, the replicator killed and a new one started (``Replicator/closeAsIfKilled()``), syncs
/// (a snapshot falls due every third).
/// After every sync the replica's newest point, restored, must be the source byte for byte: whether the replicator
/// went on with the generation (the continuity rules) or started a new one.
@Suite("Generations and continuity: random histories")
struct ContinuityHistoryTests {
    /// SplitMix64: the same history for the same seed.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test(
        "every sync of a random history restores to the source, byte for byte", arguments: UInt64(1)...UInt64(24))
    func randomHistory(seed: UInt64) async throws {
        var random = SeededGenerator(state: seed)
        try await withReplicationFixture(configure: {
            $0.checkpointFrameCount = 3
            $0.snapshotInterval = .seconds(3)
        }) { fixture in
            let other = try DatabasePool(
                path: fixture.databasePath, keyProvider: .fixed(fixture.key),
                configuration: DatabasePool.Configuration(settings: fixture.settings))
            var replicator = fixture.replicator
            var reader: Connection?
            var nextOtherID = 100_000
            var kills = 0
            var syncs = 0
            for step in 0..<48 {
                let what = Int.random(in: 0..<10, using: &random)
                switch what {
                case 0, 1, 2:
                    try await fixture.insert(Int.random(in: 1...4, using: &random))
                case 3:
                    let count = Int.random(in: 1...3, using: &random)
                    let first = nextOtherID
                    nextOtherID += count
                    try await other.write { db in
                        for id in first..<(first + count) {
                            try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, plaintextMarker + " other \(id)")
                        }
                    }
                case 4:
                    _ = try await other.writeWithoutTransaction { db in try db.checkpoint(.passive) }
                case 5:
                    if let open = reader {
                        try open.execute("COMMIT")
                        open.close()
                        reader = nil
                    } else {
                        let open = try Connection(path: fixture.databasePath, key: fixture.key, settings: fixture.settings)
                        try open.execute("BEGIN")
                        _ = try open.scalar("SELECT count(*) FROM note", as: Int.self)
                        reader = open
                    }
                case 6:
                    await replicator.closeAsIfKilled()
                    replicator = fixture.newReplicator()
                    kills += 1
                default:
                    fixture.clock.advance(seconds: 1)
                    try await replicator.syncNow()
                    syncs += 1
                    let restored = try await fixture.restoredBytes(.latest)
                    #expect(restored == (try fixture.checkpointedCopy()), "seed \(seed), step \(step): restore differs")
                }
            }
            if let open = reader {
                try open.execute("COMMIT")
                open.close()
            }
            fixture.clock.advance(seconds: 1)
            try await replicator.syncNow()
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()), "seed \(seed), at the end")
            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.allSatisfy { $0.problems.isEmpty })
            // Not a pass condition, a record of what the history exercised (shown with --verbose).
            print("seed \(seed): \(syncs + 1) syncs, \(kills) kills, \(catalog.generations.count) generations")
            try await replicator.stop()
            other.close()
        }
    }
}
#endif
