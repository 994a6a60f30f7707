#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("A damaged or incomplete replica")
struct ReplicaDamageTests {
    /// Runs `body` with a generation with a snapshot at 0 and segments 1…5, and the source's bytes at each index; the
    /// fixture is closed on every way out.
    private func withReplicaWithSegments(
        _ body: (ReplicationFixture, String, [Int: [UInt8]]) async throws -> Void
    ) async throws {
        try await withReplicationFixture { fixture in
            try await fixture.sync()
            var copies: [Int: [UInt8]] = [0: try fixture.checkpointedCopy()]
            for _ in 1...5 {
                try await fixture.insert(3)
                let status = try await fixture.sync()
                copies[try #require(status.lastIndex)] = try fixture.checkpointedCopy()
            }
            let generation = try #require(await fixture.replicator.status.generation)
            #expect(copies.keys.sorted() == [0, 1, 2, 3, 4, 5])
            try await body(fixture, generation, copies)
        }
    }

    private func segmentKey(_ fixture: ReplicationFixture, _ index: Int) async throws -> String {
        let catalog = try await fixture.replica.catalog()
        return try #require(catalog.generations.first?.segment(at: index)).key
    }

    @Test("a flipped byte in a log segment stops the restore, naming the object and the last good point; that point still restores")
    func flippedSegmentByte() async throws {
        try await withReplicaWithSegments { fixture, generation, copies in
            let key = try await segmentKey(fixture, 3)
            try flipByte(in: fixture.objectPath(key), at: 100)
            let destination = fixture.directory.path("restored.db")
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: destination, at: .latest)
            }
            #expect(error?.kind == .damaged)
            #expect(error?.message.contains(key) == true)
            #expect(error?.message.contains("last good restore point is \(generation)/2") == true)
            #expect(!FileManager.default.fileExists(atPath: destination))
            #expect(try folderEntries(fixture.directory.path("")).allSatisfy { !$0.hasPrefix("restored.db") })
            #expect(try await fixture.restoredBytes(.point(generation: generation, index: 2)) == copies[2])
        }
    }

    @Test("a missing log segment stops the restore, naming it and the last good point; listing shows the gap")
    func missingSegment() async throws {
        try await withReplicaWithSegments { fixture, generation, copies in
            let key = try await segmentKey(fixture, 4)
            try FileManager.default.removeItem(atPath: fixture.objectPath(key))
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: fixture.directory.path("restored.db"), at: .latest)
            }
            #expect(error?.kind == .damaged)
            #expect(error?.message.contains("\(generation)/4 is missing") == true)
            #expect(error?.message.contains("last good restore point is \(generation)/3") == true)
            let listed = try #require(try await fixture.replica.catalog().generations.first)
            #expect(listed.missingSegmentIndexes == [4])
            #expect(listed.restorePointRanges == [0...3])
            #expect(try await fixture.restoredBytes(.point(generation: generation, index: 3)) == copies[3])
        }
    }

    @Test("a damaged snapshot part stops the restore at once and names the part")
    func damagedSnapshot() async throws {
        try await withReplicaWithSegments { fixture, _, _ in
            let part = try #require(try fixture.objectFiles().keys.first { $0.hasSuffix(".part") })
            try flipByte(in: fixture.objectPath(part), at: try fileBytes(fixture.objectPath(part)).count / 2)
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: fixture.directory.path("restored.db"), at: .latest)
            }
            #expect(error?.kind == .damaged)
            #expect(error?.message.contains(part) == true)
            #expect(error?.message.contains("no restore point before it") == true)
        }
    }

    @Test("a damaged manifest is reported by the listing, not read as other values")
    func damagedManifest() async throws {
        try await withReplicaWithSegments { fixture, generation, _ in
            let manifest = fixture.objectPath(ReplicaLayout.snapshotManifestKey(generation, index: 0))
            let bytes = try fileBytes(manifest)
            let digit = try #require(bytes.firstIndex(of: UInt8(ascii: "1")))
            try flipByte(in: manifest, at: digit)
            let listed = try #require(try await fixture.replica.catalog().generations.first)
            #expect(listed.snapshots.isEmpty)
            #expect(listed.problems.contains { $0.contains("snapshot.json") && $0.contains("damaged") })
            await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: fixture.directory.path("restored.db"), at: .latest)
            }
        }
    }

    @Test("segments swapped between indexes fail the log's own chain even though each matches its checksum")
    func swappedSegments() async throws {
        try await withReplicaWithSegments { fixture, _, _ in
            let second = try await segmentKey(fixture, 2)
            let third = try await segmentKey(fixture, 3)
            let secondBytes = try fileBytes(fixture.objectPath(second))
            let thirdBytes = try fileBytes(fixture.objectPath(third))
            // Each object keeps a name that matches its content, but at the other's index.
            try FileManager.default.removeItem(atPath: fixture.objectPath(second))
            try FileManager.default.removeItem(atPath: fixture.objectPath(third))
            try await fixture.store.put(second.replacingOccurrences(of: "/0000000002-", with: "/0000000003-"), bytes: secondBytes)
            try await fixture.store.put(third.replacingOccurrences(of: "/0000000003-", with: "/0000000002-"), bytes: thirdBytes)
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: fixture.directory.path("restored.db"), at: .latest)
            }
            #expect(error?.kind == .damaged)
            #expect(error?.message.contains("does not follow on") == true)
        }
    }
}
#endif
