#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Synchronization
import Testing

/// The store itself goes away: a real object store of the test's own (its own folder and free ports, so the shared
/// one keeps serving the other tests, and two runs on one machine do not meet) is stopped for 30 seconds while a
/// writer keeps writing and the replicator runs, then started again. It is stopped for good on every way out of the
/// test, and by its guard process when the test process is killed.
@Suite("An outage of a real object store", .enabled(if: ObjectStore.isInstalled, ObjectStore.notInstalled))
struct S3OutageTests {
    /// Turns a hang into a failure. Long: under load a task may wait minutes for a cooperative thread, and only the
    /// events waited for (failed syncs, acknowledged writes, a caught-up replicator) decide the outcome.
    static let hangLimit: Duration = .seconds(600)

    @Test("stopped for 30 s under load and started again: every write is served, replication catches up on its own, and the restore holds every acknowledged write")
    func storeStoppedAndStarted() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let instance = try await ObjectStore.Instance.started(folder: scratch.path("store"))
        defer { instance.shutDown() }
        let bucket = try await instance.makeBucket()
        let fixture = try ReplicationFixture(
            configure: { configuration in
                configuration.syncInterval = .milliseconds(200)
                configuration.maximumRetryInterval = .seconds(2)
                configuration.now = { Date() }
            },
            target: { _ in try instance.store(bucket: bucket) })
        // Closed on every way out, as withReplicationFixture does, but without its closure: with this body inside
        // the closure the test failed every time on the 2-core machine (the wait for the store to be caught up
        // ended while the replicator still failed), and passes written this way; why is not understood yet.
        do {
            let replicator = fixture.replicator
            let running = Task { try await replicator.run() }

            // A steady writer that never stops on its own: each insert is acknowledged (returned) or the test fails.
            // The pause between transactions only paces the load (about 2 KB a write); nothing waits on it.
            let stopWriting = Atomic(false)
            let acknowledged = Atomic(0)
            let writer = Task {
                while !stopWriting.load(ordering: .acquiring) {
                    try await fixture.insert(5)
                    acknowledged.add(5, ordering: .releasing)
                    try await Task.sleep(for: .milliseconds(2))
                }
            }

            // The first generation, shipped now rather than waited for (on a loaded machine run()'s task may start late).
            let beforeOutage = try await replicator.syncNow()
            #expect(beforeOutage.generation != nil, "\(beforeOutage)")
            let generation = beforeOutage.generation

            // The outage: the store's processes are stopped.
            try await instance.stop()
            let outageStart = ContinuousClock.now
            let writtenBeforeOutage = acknowledged.load(ordering: .acquiring)
            // The replicator sees it (syncs fail, explicitly counted) ...
            #expect(await suspendingWait(within: Self.hangLimit) { await replicator.status.consecutiveFailureCount >= 2 })
            // ... and writes go on: the outage lasts 30 s and at least 100 more writes.
            try await Task.sleep(until: outageStart + .seconds(30))
            #expect(await suspendingWait(within: Self.hangLimit) {
                acknowledged.load(ordering: .acquiring) >= writtenBeforeOutage + 100
            })
            let failuresDuringOutage = await replicator.status.consecutiveFailureCount
            #expect(failuresDuringOutage >= 2)
            #expect(await replicator.status.lastError != nil)

            // The store comes back: replication catches up without being told (run() retries with its back-off).
            try await instance.start()
            _ = await suspendingWait(within: Self.hangLimit) {
                let status = await replicator.status
                return status.consecutiveFailureCount == 0 && status.lastError == nil
            }
            let afterOutage = await replicator.status
            #expect(
                afterOutage.consecutiveFailureCount == 0 && afterOutage.lastError == nil,
                "replication did not catch up after the store came back: \(afterOutage)")

            stopWriting.store(true, ordering: .releasing)
            try await writer.value  // rethrows a failed write: none may fail
            let written = acknowledged.load(ordering: .acquiring)
            #expect(written > writtenBeforeOutage)

            let status = try await replicator.syncNow()
            #expect(status.unshippedFrameCount == 0)
            // The log was far below its limit: no gap, the same generation went on across the outage.
            #expect(status.gapCount == 0)
            #expect(status.generation == generation)
            running.cancel()
            try await running.value

            // Restored from the bucket into a new file: every acknowledged row, counted with a fresh connection.
            let restored = scratch.path("restored.db")
            _ = try await fixture.replica.restore(to: restored, at: .latest)
            let db = try Connection(path: restored, encryption: .key(fixture.key, settings: try fixture.settingsWithSalt()))
            #expect(try db.scalar("SELECT count(*) FROM note", as: Int.self) == written)
            #expect(try db.scalar("SELECT max(id) FROM note", as: Int.self) == written)
            try db.quickCheck()
            db.close()
        } catch {
            await fixture.close()
            throw error
        }
        await fixture.close()
    }
}
#endif
