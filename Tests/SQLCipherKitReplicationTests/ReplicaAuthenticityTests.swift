#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// Someone who can write to the bucket but has no key, against a restore given the key: every way in that made a
/// restore exit 0 and verify with a state the database never had (a replayed page, an old generation under a newer
/// name, another database with the same key, a segment cut and renamed), on a folder store and on the real object
/// store, checked with an independent client. Each case also restores without the key, to show that it says it
/// checked integrity only.
@Suite("An authenticated replica", .serialized)
struct ReplicaAuthenticityTests {
    /// Runs `body` with a replica with one generation: a snapshot, then segments 1…3, each a transaction that rewrites
    /// the same rows; `body` gets the fixture, the attacker and the generation. The fixture is closed on every way
    /// out.
    private func withReplica(
        _ kind: AttackedStore, _ body: (ReplicationFixture, BucketAttacker, String) async throws -> Void
    ) async throws {
        try await kind.withFixture { fixture, attacker in
            try await fixture.insert(4)
            try await fixture.sync()
            for round in 1...3 {
                try await fixture.pool.write { db in
                    try db.execute("UPDATE note SET body = ? WHERE id <= 4", "round \(round)")
                }
                try await fixture.sync()
            }
            let generation = try #require(await fixture.replicator.status.generation)
            try await body(fixture, attacker, generation)
        }
    }

    private func verification(_ fixture: ReplicationFixture) -> RestoreOptions {
        RestoreOptions(verificationKeys: [VerificationKey(name: "the test key", key: fixture.key)])
    }

    /// Restores with the key and expects it to stop with `kind`, naming `object`, leaving no file.
    private func expectRefused(
        _ fixture: ReplicationFixture, kind: ReplicationError.Kind, naming object: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let destination = fixture.directory.path("restored-\(UUID().uuidString).db")
        let error = await #expect(throws: ReplicationError.self, sourceLocation: sourceLocation) {
            _ = try await fixture.replica.restore(to: destination, options: verification(fixture))
        }
        #expect(error?.kind == kind, "\(error.map(String.init(describing:)) ?? "no error")", sourceLocation: sourceLocation)
        #expect(error?.message.contains(object) == true, "\(error?.message ?? "")", sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: destination), sourceLocation: sourceLocation)
    }

    /// The frames of a segment as stored: where each starts, its page, whether it ends a transaction.
    private func frames(_ bytes: [UInt8], startsLog: Bool, pageSize: Int) -> [(offset: Int, page: Int, isCommit: Bool)] {
        let frameSize = 24 + pageSize
        func word(_ offset: Int) -> Int {
            Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
        }
        return stride(from: startsLog ? 32 : 0, to: bytes.count - frameSize + 1, by: frameSize).map {
            ($0, word($0), word($0 + 4) != 0)
        }
    }

    /// The running checksum a segment ends with (in its last frame's header).
    private func endChecksum(_ bytes: [UInt8], pageSize: Int) -> WALFormat.Checksum {
        WALFormat.Checksum.stored(in: bytes[(bytes.count - 24 - pageSize)...])
    }

    /// The segment renamed as `bytes` would be named by someone without the key: its new SHA-256, its old MAC.
    private func forgedKey(_ key: String, bytes: [UInt8]) throws -> String {
        guard case .segment(let name)? = ReplicaLayout.parse(key) else { throw ReplicationError(.damaged, "not a segment") }
        return ReplicaLayout.segmentKey(ReplicaLayout.SegmentName(
            generation: name.generation, index: name.index, milliseconds: name.milliseconds, startsLog: name.startsLog,
            sha256: SHA256.hex(bytes), mac: name.mac))
    }

    private func startsLog(_ key: String) -> Bool {
        if case .segment(let name)? = ReplicaLayout.parse(key) { return name.startsLog }
        return false
    }

    @Test("an older ciphertext of a page replayed into the last segment, checksums recomputed, is refused with the key",
          arguments: AttackedStore.available)
    func replayedPage(_ kind: AttackedStore) async throws {
        try await withReplica(kind) { fixture, attacker, generation in
            let pageSize = try #require(try await fixture.replica.catalog().generations.last?.pageSize)
            let segments = try await attacker.segments(of: generation)
            let last = try #require(segments.keys.max())
            let lastKey = try #require(segments[last])
            let earlierKey = try #require(segments[1])
            let earlier = try await attacker.read(earlierKey)
            let previous = try await attacker.read(try #require(segments[last - 1]))
            var bytes = try await attacker.read(lastKey)
            try #require(!startsLog(lastKey), "the last segment continues the log of the one before it")
            // A page the last segment writes that the first segment wrote too: put the older ciphertext back.
            let olderFrames = frames(earlier, startsLog: startsLog(earlierKey), pageSize: pageSize)
            let replaced = try #require(frames(bytes, startsLog: false, pageSize: pageSize).first { frame in
                olderFrames.contains { $0.page == frame.page }
            })
            let older = olderFrames.first { $0.page == replaced.page }!
            bytes.replaceSubrange(
                (replaced.offset + 24)..<(replaced.offset + 24 + pageSize),
                with: earlier[(older.offset + 24)..<(older.offset + 24 + pageSize)])
            // SQLite's checksum is unkeyed: anyone recomputes it from the segment before.
            bytes = rechecksummed(
                bytes, pageSize: pageSize, from: endChecksum(previous, pageSize: pageSize),
                bigEndian: UInt32(1).bigEndian == 1)
            let forged = try forgedKey(lastKey, bytes: bytes)
            try await attacker.write(forged, bytes)
            try await attacker.delete(lastKey)
            try await expectRefused(fixture, kind: .notAuthentic, naming: forged)

            // Without a key every checksum holds: the restore succeeds and says that it checked integrity only.
            let report = try await fixture.replica.restore(to: fixture.directory.path("unchecked.db"))
            #expect(report.authenticatedWith == nil)
        }
    }

    @Test("the last segment cut at an earlier commit and renamed to its new SHA-256 is refused with the key",
          arguments: AttackedStore.available)
    func cutSegment(_ kind: AttackedStore) async throws {
        try await withReplica(kind) { fixture, attacker, generation in
            // Two commits in the last segment: a restore cut after the first would lose the second.
            try await fixture.insert(1)
            try await fixture.insert(1)
            try await fixture.sync()
            let pageSize = try #require(try await fixture.replica.catalog().generations.last?.pageSize)
            let segments = try await attacker.segments(of: generation)
            let last = try #require(segments.keys.max())
            let lastKey = try #require(segments[last])
            let bytes = try await attacker.read(lastKey)
            let commits = frames(bytes, startsLog: startsLog(lastKey), pageSize: pageSize).filter(\.isCommit)
            try #require(commits.count >= 2)
            let cut = Array(bytes[..<(commits[0].offset + 24 + pageSize)])
            let forged = try forgedKey(lastKey, bytes: cut)
            try await attacker.write(forged, cut)
            try await attacker.delete(lastKey)
            try await expectRefused(fixture, kind: .notAuthentic, naming: forged)
        }
    }

    @Test("a segment moved to another index is refused with the key", arguments: AttackedStore.available)
    func movedSegment(_ kind: AttackedStore) async throws {
        try await withReplica(kind) { fixture, attacker, generation in
            let segments = try await attacker.segments(of: generation)
            let last = try #require(segments.keys.max())
            // Segment 2 put in place of the last one (the last one removed): every checksum still holds.
            guard case .segment(let moved)? = ReplicaLayout.parse(try #require(segments[2])),
                  case .segment(let replaced)? = ReplicaLayout.parse(try #require(segments[last]))
            else { Issue.record("not segments"); return }
            let forged = ReplicaLayout.segmentKey(ReplicaLayout.SegmentName(
                generation: generation, index: last, milliseconds: replaced.milliseconds, startsLog: moved.startsLog,
                sha256: moved.sha256, mac: moved.mac))
            try await attacker.write(forged, try await attacker.read(try #require(segments[2])))
            try await attacker.delete(try #require(segments[last]))
            try await expectRefused(fixture, kind: .notAuthentic, naming: forged)
        }
    }

    @Test("an old generation copied under a newer sequence number is refused with the key",
          arguments: AttackedStore.available)
    func oldGenerationRenamed(_ kind: AttackedStore) async throws {
        try await withReplica(kind) { fixture, attacker, generation in
            let copy = "0000000099-0badc0de"
            for key in try await attacker.keys() where key.hasPrefix("generations/\(generation)/") {
                try await attacker.write(key.replacingOccurrences(of: generation, with: copy), try await attacker.read(key))
            }
            try await expectRefused(fixture, kind: .notAuthentic, naming: copy)
            // It is listed as not verifying, and the genuine generation still restores when named.
            let catalog = try await fixture.replica.catalog(verifyingWith: verification(fixture).verificationKeys)
            #expect(catalog.generation(named: copy)?.authenticity == .failed)
            let report = try await fixture.replica.restore(
                to: fixture.directory.path("named.db"), at: .generation(generation), options: verification(fixture))
            #expect(report.authenticatedWith == "the test key")
        }
    }

    @Test("a generation of another database with the same key, copied in as the newest, is refused, also with a forged manifest of its replica slipped in below it",
          arguments: AttackedStore.available, [false, true])
    func foreignGeneration(_ kind: AttackedStore, forgesManifestBelow: Bool) async throws {
        try await withReplica(kind) { fixture, attacker, _ in
            // Another database with the same key, whose replica has gone further (sequence numbers past ours).
            try await withReplicationFixture(key: fixture.key) { other in
                try await other.store.put("generations/0000000040-00000000/generation.json", bytes: Array("{}".utf8))
                try await other.insert(2)
                try await other.sync()
                let otherAttacker = BucketAttacker(place: .folder(other.store.root), scratch: other.directory.path(""))
                let foreign = try #require(try await otherAttacker.generations().last)
                #expect(ReplicaLayout.sequence(ofGeneration: foreign) == 41)
                for key in try await otherAttacker.keys() where key.hasPrefix("generations/\(foreign)/") {
                    try await attacker.write(key, try await otherAttacker.read(key))
                }
                if forgesManifestBelow {
                    // The foreign generation's own manifest (its replica identity) under a name just below it: it does not
                    // verify (its MAC covers its name), so it must not vouch for the copy as "the generation before".
                    try await attacker.write(
                        "generations/0000000040-ffffffff/generation.json",
                        try await otherAttacker.read("generations/\(foreign)/generation.json"))
                }
                try await expectRefused(fixture, kind: .notAuthentic, naming: foreign)
            }
        }
    }

    @Test("without the key a restore succeeds on an intact replica and says it checked integrity only; with it, it names the key")
    func reportsAuthenticity() async throws {
        try await withReplica(.folder) { fixture, _, generation in
            let unchecked = try await fixture.replica.restore(to: fixture.directory.path("a.db"))
            #expect(unchecked.authenticatedWith == nil)
            #expect(unchecked.newestPoint?.generation == generation)
            let checked = try await fixture.replica.restore(to: fixture.directory.path("b.db"), options: verification(fixture))
            #expect(checked.authenticatedWith == "the test key")
            #expect(checked.newestPoint == checked.point)
        }
    }
}
#endif
