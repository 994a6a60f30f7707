#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// One writer per replica. Two replicators on one database and prefix wrote different segments under the same
/// index, and a restore stopped where they diverged: 22 acknowledged rows unrestorable. Now the second refuses, a
/// replicator whose lease was taken stops, and one that died is taken over.
@Suite("The replica's lease", .serialized)
struct ReplicaLeaseTests {
    @Test("a second replicator of the same replica refuses while the first runs, naming it; after a stop it starts")
    func secondReplicatorRefused() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(2)
            try await fixture.sync()
            let second = fixture.newReplicator()
            let error = await #expect(throws: ReplicationError.self) { try await second.syncNow() }
            #expect(error?.kind == .leaseHeld)
            #expect(error?.message.contains("process \(getpid())") == true, "\(error?.message ?? "")")
            #expect(error?.remedy == .stopOtherReplicator)
            // Nothing of the second was written: one generation, its segments in one line.
            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.count == 1)
            #expect(catalog.generations[0].problems.isEmpty)

            try await fixture.replicator.stop()
            try await fixture.insert(2)
            let status = try await second.syncNow()
            #expect(status.generation != nil)
            try await second.stop()
            #expect(try await fixture.replica.catalog().generations.allSatisfy { $0.problems.isEmpty })
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
        }
    }

    @Test("a replicator whose process died leaves its lease, and the next one takes it over at once")
    func deadHolderTakenOver() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(2)
            try await fixture.sync()
            await fixture.replicator.closeAsIfKilled()
            #expect(try await fixture.store.getVersioned(ReplicaLayout.leaseKey) != nil)
            let next = fixture.newReplicator()
            try await fixture.insert(1)
            let status = try await next.syncNow()
            #expect(status.lastIndex != nil)
            try await next.stop()
            #expect(try await fixture.store.getVersioned(ReplicaLayout.leaseKey) == nil)
        }
    }

    @Test("a replicator whose lease another took stops for good before shipping more, naming the new holder")
    func fenced() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(2)
            let before = try await fixture.sync()
            // Another replicator takes the lease by force (as a promoted follower does).
            let usurper = ReplicaLease(store: fixture.store, duration: .seconds(15))
            try await usurper.acquire(generation: "0000000099-00000000", now: Date(), force: true, wait: { _ in })
            try await fixture.insert(3)
            let objectsBefore = try await fixture.store.list(prefix: "generations/").map(\.key)
            let error = await #expect(throws: ReplicationError.self) { try await fixture.replicator.syncNow() }
            #expect(error?.kind == .fenced)
            #expect(error?.message.contains("0000000099-00000000") == true, "\(error?.message ?? "")")
            #expect(try await fixture.store.list(prefix: "generations/").map(\.key) == objectsBefore)
            #expect(before.lastIndex != nil)
            // run() ends with such an error instead of retrying (here: the usurper still holds the lease).
            let again = fixture.newReplicator()
            let refused = await #expect(throws: ReplicationError.self) { try await again.run() }
            #expect(refused?.kind == .leaseHeld)
            await usurper.release()
        }
    }

    @Test("a lease of a replicator on another machine is taken over only after it went a lease's duration unrenewed")
    func otherHostWaitedFor() async throws {
        for renews in [true, false] {
            try await withReplicationFixture { fixture in
                let foreign = LeaseRecord(
                    format: 2, holder: String(repeating: "ab", count: 16), host: "another-host", bootID: "x",
                    pidNamespace: "pid:[1]", pid: 4242, processStart: 7, generation: nil, renewal: 1,
                    durationMilliseconds: 15000, renewedAtMilliseconds: 0)
                let encoder = JSONEncoder()
                try await fixture.store.put(ReplicaLayout.leaseKey, bytes: Array(try encoder.encode(foreign)))
                // The replicator waits for the lease's duration through its configuration's wait: here the test
                // renews the foreign lease meanwhile, or does not.
                let waited = Locked<[Duration]>([])
                let store = fixture.store
                var configuration = fixture.configuration
                configuration.wait = { duration in
                    waited.withLock { $0.append(duration) }
                    if renews {
                        var renewed = foreign
                        renewed.renewal += 1
                        try await store.put(ReplicaLayout.leaseKey, bytes: Array(try JSONEncoder().encode(renewed)))
                    }
                }
                let replicator = Replicator(pool: fixture.pool, store: fixture.store, configuration: configuration)
                try await fixture.insert(1)
                if renews {
                    let error = await #expect(throws: ReplicationError.self) { try await replicator.syncNow() }
                    #expect(error?.kind == .leaseHeld)
                    #expect(error?.message.contains("another-host") == true)
                } else {
                    let status = try await replicator.syncNow()
                    #expect(status.generation != nil)
                    try await replicator.stop()
                }
                #expect(waited.withLock { $0 } == [.milliseconds(15000)])
            }
        }
    }

    @Test("a lease that states a duration of years (anyone with bucket access can write one) is waited for at most ten minutes, and the wait names its holder")
    func statedDurationBounded() async throws {
        try await withTemporaryDirectory { directory in
            let store = try FolderReplicaStore(root: directory.path("store"))
            let forged = LeaseRecord(
                format: 2, holder: String(repeating: "cd", count: 16), host: "attacker-host", bootID: "x",
                pidNamespace: "pid:[1]", pid: 4242, processStart: 7, generation: nil, renewal: 1,
                durationMilliseconds: .max, renewedAtMilliseconds: 0)
            try await store.put(ReplicaLayout.leaseKey, bytes: Array(try JSONEncoder().encode(forged)))
            let told = Locked<[String]>([])
            let waited = Locked<[Duration]>([])
            let lease = ReplicaLease(store: store, duration: .seconds(15))
            try await lease.acquire(
                generation: nil, now: Date(),
                waiting: { holder, duration in told.withLock { $0.append("\(holder) \(duration)") } },
                wait: { duration in waited.withLock { $0.append(duration) } })
            #expect(waited.withLock { $0 } == [ReplicaLease.longestWait])
            #expect(told.withLock { $0 }.count == 1)
            #expect(told.withLock { $0 }.first?.contains("attacker-host") == true)
            #expect(await lease.isHeld)
        }
    }

    @Test("a folder store writes conditionally: absent, then only the version read")
    func folderConditionalWrites() async throws {
        try await withTemporaryDirectory { directory in
            let store = try FolderReplicaStore(root: directory.path("store"))
            #expect(try await store.put("lease.json", bytes: [1], if: .absent) == .written)
            #expect(try await store.put("lease.json", bytes: [2], if: .absent) == .conditionFailed)
            let read = try #require(try await store.getVersioned("lease.json"))
            #expect(read.bytes == [1])
            #expect(try await store.put("lease.json", bytes: [3], if: .version("0" + String(read.version!.dropFirst())))
                == .conditionFailed)
            #expect(try await store.put("lease.json", bytes: [4], if: .version(read.version!)) == .written)
            #expect(try await store.get("lease.json") == [4])
        }
    }

    @Test("OpenStack Swift's S3 API does not write conditionally: the store says so and writes nothing",
          .enabled(if: ObjectStore.isInstalled, ObjectStore.notInstalled))
    func s3ConditionalWrites() async throws {
        let store = try ObjectStore.store(bucket: try await ObjectStore.makeBucket())
        try await store.put("lease.json", bytes: [1])
        #expect(try await store.put("lease.json", bytes: [2], if: .absent) == .unsupported)
        let read = try #require(try await store.getVersioned("lease.json"))
        #expect(read.version != nil)
        #expect(try await store.put("lease.json", bytes: [3], if: .version(read.version!)) == .unsupported)
        #expect(try await store.get("lease.json") == [1])
    }

    @Test("two replicators on one S3 replica: the second refuses", .enabled(if: ObjectStore.isInstalled, ObjectStore.notInstalled))
    func s3SecondReplicator() async throws {
        let bucket = try await ObjectStore.makeBucket()
        try await withReplicationFixture(target: { _ in try ObjectStore.store(bucket: bucket) }) { fixture in
            try await fixture.insert(1)
            try await fixture.sync()
            let error = await #expect(throws: ReplicationError.self) { try await fixture.newReplicator().syncNow() }
            #expect(error?.kind == .leaseHeld)
        }
    }
}
#endif
