#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("Restore gives the source's bytes")
struct RestoreExactnessTests {
    @Test("every restore point equals a checkpointed copy of the source taken then, through checkpoints, log restarts, a VACUUM and snapshots")
    func severalPointsInTime() async throws {
        try await withReplicationFixture(configure: { configuration in
            configuration.checkpointFrameCount = 6
            configuration.snapshotInterval = .seconds(100)
        }) { fixture in
            var points: [(target: RestoreTarget, bytes: [UInt8])] = []
            func record() async throws {
                points.append((try await fixture.lastPoint(), try fixture.checkpointedCopy()))
            }
            try await fixture.sync()
            try await record()
            for round in 1...6 {
                try await fixture.insert(round * 4)
                try await fixture.sync()
                try await record()
                if round == 3 {
                    // A new snapshot is due: taken exactly where the replicator's own complete checkpoint left the file.
                    fixture.clock.advance(seconds: 200)
                }
            }
            try await fixture.pool.write { db in try db.execute("DELETE FROM note WHERE id % 2 = 0") }
            try await fixture.pool.writeWithoutTransaction { db in try db.vacuum() }
            try await fixture.sync()
            try await record()
            try await fixture.insert(3)
            try await fixture.sync()
            try await record()

            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.count == 1)
            #expect(try #require(catalog.generations.first).snapshots.count >= 2)
            for point in points {
                let restored = try await fixture.restoredBytes(point.target)
                #expect(restored == point.bytes, "restore point \(point.target)")
            }
            // The newest point by time is the last one recorded.
            let generation = try #require(catalog.generations.first)
            let latest = try #require(generation.latestRestorePoint)
            #expect(try await fixture.restoredBytes(.time(latest.time)) == points.last?.bytes)
            #expect(try await fixture.restoredBytes(.latest) == points.last?.bytes)
        }
    }

    @Test("a database with a plaintext header is restored byte for byte, and verifies with its key and the replica's salt",
          .enabled(if: Engine.isVersion4, "a plaintext header needs SQLCipher 4; SQLCipher 3.4.1 has none"))
    func plaintextHeader() async throws {
        let salt = (0..<16).map { UInt8($0 * 7 + 3) }
        try await withReplicationFixture(settings: .plaintextHeader(size: 32, salt: salt), configure: { $0.checkpointFrameCount = 4 }) { fixture in
            try await fixture.insert(10)
            try await fixture.sync()
            let first = (try await fixture.lastPoint(), try fixture.checkpointedCopy())
            try await fixture.insert(30)
            try await fixture.sync()
            let second = (try await fixture.lastPoint(), try fixture.checkpointedCopy())
            #expect(Array(second.1.prefix(16)) == Array("SQLite format 3\0".utf8))

            #expect(try await fixture.restoredBytes(first.0) == first.1)
            // Verification needs the salt, which the file does not hold: the replica's generation.json has it.
            let key = VerificationKey(name: "the key", key: fixture.key, settings: .plaintextHeader(size: 32))
            let restored = try await fixture.restoredBytes(second.0, options: RestoreOptions(verificationKeys: [key]))
            #expect(restored == second.1)
            let generation = try #require(try await fixture.replica.catalog().generations.first)
            #expect(generation.plaintextHeaderSize == 32)
            #expect(generation.salt == salt)
        }
    }

    @Test("a generation started while another reader holds old frames ships the log from its start and restores exactly")
    func snapshotWhileAReaderHoldsFrames() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            // A reader in the log: the generation's checkpoint cannot copy past it, so the main file may still change.
            let reader = try Connection(path: fixture.databasePath, key: fixture.key)
            try reader.execute("BEGIN")
            #expect(try reader.scalar("SELECT count(*) FROM note", as: Int.self) == 5)
            try await fixture.insert(5)
            try await fixture.sync()
            try reader.execute("ROLLBACK")
            reader.close()
            let generation = try #require(try await fixture.replica.catalog().generations.first)
            let snapshot = try #require(generation.snapshots.first)
            #expect(!snapshot.isExact)
            #expect(snapshot.replayFromIndex == 1)
            #expect(generation.segments.first?.startsLog == true)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            try await fixture.insert(5)
            try await fixture.sync()
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
        }
    }

    @Test("a restore writes a new file of mode 0600 and never touches an existing one unless asked to replace it")
    func neverOverwrites() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let destination = fixture.directory.path("existing.db")
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: destination))
            await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: destination, at: .latest)
            }
            #expect(try fileBytes(destination) == Array("keep me".utf8))

            let fresh = fixture.directory.path("fresh.db")
            let report = try await fixture.replica.restore(to: fresh, at: .latest)
            let mode = (try FileManager.default.attributesOfItem(atPath: fresh)[.posixPermissions] as? Int ?? 0) & 0o777
            #expect(mode == 0o600)
            #expect(report.byteCount == Int64(try fileBytes(fresh).count))

            _ = try await fixture.replica.restore(
                to: destination, at: .latest, options: RestoreOptions(replacesExisting: true))
            #expect(try fileBytes(destination) == (try fileBytes(fresh)))
            #expect(try folderEntries(fixture.directory.path("")).allSatisfy { !$0.contains("sqlcipherkit-tmp") })
        }
    }
}
#endif
