#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("Generations and continuity")
struct ContinuityTests {
    @Test("a rekey starts a new generation; the old one restores with the old key only, and says so with the new one")
    func rekeyStartsGeneration() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(8)
            try await fixture.sync()
            let before = (try await fixture.lastPoint(), try fixture.checkpointedCopy())
            let newKey = try EncryptionKey.generateRaw()
            try await fixture.replicator.withReplicationPaused {
                try fixture.pool.rekey(to: .fixed(newKey))
            }
            try await fixture.insert(4)
            try await fixture.sync()
            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.count == 2)
            let second = try #require(catalog.generations.last)
            // Written with the old key, the generation before does not verify with the new one.
            #expect(second.reason == .previousNotAuthentic)
            #expect(second.reasonDetail?.contains("the key was changed since") == true)
            #expect(second.previousGeneration == catalog.generations.first?.name)

            let oldKey = VerificationKey(name: "the old key", key: fixture.key, settings: fixture.settings)
            let rotatedKey = VerificationKey(name: "the new key", key: newKey, settings: fixture.settings)
            let restored = try await fixture.restoredBytes(
                before.0, options: RestoreOptions(verificationKeys: [rotatedKey, oldKey]))
            #expect(restored == before.1)
            let destination = fixture.directory.path("old-generation.db")
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(
                    to: destination, at: before.0, options: RestoreOptions(verificationKeys: [rotatedKey]))
            }
            #expect(error?.kind == .notAuthentic)
            #expect(error?.message.contains("the new key") == true)
            if case .point(let generation, _) = before.0 {
                #expect(error?.remedy == .verifyWithKeyOfGeneration(generation))
            }
            #expect(!FileManager.default.fileExists(atPath: destination))

            let report = try await fixture.replica.restore(
                to: fixture.directory.path("new-generation.db"), at: .latest,
                options: RestoreOptions(verificationKeys: [oldKey, rotatedKey]))
            #expect(report.verifiedWith == "the new key")
            #expect(report.point.generation == second.name)
        }
    }

    @Test("a log checkpointed and restarted while the replicator was stopped starts a new generation")
    func restartNotSeen() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let first = try #require(await fixture.replicator.status.generation)
            try await fixture.replicator.stop()
            try await fixture.insert(5)
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(5)
            try await fixture.sync()
            let status = await fixture.replicator.status
            #expect(status.generation != first)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
        }
    }

    @Test("a new replicator (a restarted process) that cannot continue the replica says why, and links the generation it follows")
    func restartedProcessReason() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let first = try #require(await fixture.replicator.status.generation)
            try await fixture.replicator.stop()
            try await fixture.insert(5)
            _ = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try await fixture.insert(5)
            let again = fixture.newReplicator()
            _ = try await again.syncNow()
            try await again.stop()
            let catalog = try await fixture.replica.catalog()
            let second = try #require(catalog.generations.last)
            #expect(second.name != first)
            #expect(second.previousGeneration == first)
            // Before: "firstGeneration: the replica had no generation to continue", beside a link to the one before.
            #expect(second.reason == .notContinuous)
            #expect(second.reasonDetail?.contains(first) == true)
        }
    }

    @Test("a replicator started again goes on with the generation when the log still holds its last shipped frame")
    func resumes() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.sync()
            try await fixture.insert(5)
            try await fixture.sync()
            let first = await fixture.replicator.status
            #expect(first.lastIndex == 1)
            try await fixture.replicator.stop()
            try await fixture.insert(5)
            try await fixture.sync()
            let second = await fixture.replicator.status
            #expect(second.generation == first.generation)
            #expect(second.lastIndex == (first.lastIndex ?? -10) + 1)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
        }
    }

    /// Shipped so far: a first log of 10 transactions (the generation's start checkpoints it), then a second log of 3
    /// (shipped, then checkpointed whole by the replicator). The slots after the second log's frames still hold
    /// frames of the first, longer one.
    private func shipTwoLogs(_ fixture: ReplicationFixture) async throws -> ReplicationStatus {
        for _ in 1...10 { try await fixture.insert(4) }
        try await fixture.sync()
        for _ in 1...3 { try await fixture.insert(3) }
        let status = try await fixture.sync()
        #expect(status.lastIndex == 1)
        return status
    }

    @Test("killed after its own complete checkpoint, the log restarted since: a replicator started again goes on with the generation")
    func resumesOnRestartedLog() async throws {
        try await withReplicationFixture(configure: { $0.checkpointFrameCount = 1 }) { fixture in
            let first = try await shipTwoLogs(fixture)
            await fixture.replicator.closeAsIfKilled()
            try await fixture.insert(1)  // SQLite restarts the log: salt-1 plus one, written over the first slots
            let again = fixture.newReplicator()
            try await again.syncNow()
            let status = await again.status
            #expect(status.generation == first.generation)
            #expect(status.lastIndex == 2)
            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.count == 1)
            #expect(catalog.generations.last?.segments.last?.startsLog == true)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            try await again.stop()
        }
    }

    @Test("a log restarted by another connection (whose header says checkpoint sequence 1) continues the generation")
    func restartByAnotherConnection() async throws {
        try await withReplicationFixture(configure: { $0.checkpointFrameCount = 1 }) { fixture in
            let first = try await shipTwoLogs(fixture)  // the pool's writer restarted the log once: sequence 1 or more
            // A second pool on the file: its writer did not recover the log, so the restart it makes writes sequence 1.
            let other = try DatabasePool(
                path: fixture.databasePath, keyProvider: .fixed(fixture.key),
                configuration: DatabasePool.Configuration(settings: fixture.settings))
            try await other.write { db in
                try db.execute("INSERT INTO note(id, body) VALUES (1000, ?)", String(repeating: plaintextMarker, count: 4))
            }
            let header = try #require(try ReadOnlyFile(path: fixture.databasePath + "-wal").flatMap(WALFormat.header))
            #expect(header.checkpointSequence == 1)
            let status = try await fixture.sync()
            #expect(status.generation == first.generation)
            #expect(status.lastIndex == 2)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            other.close()
        }
    }

    @Test("resumed at the start of a restarted log with no commit in it yet: the exact snapshot taken there restores onward")
    func snapshotAtStartOfUnshippedLog() async throws {
        try await withReplicationFixture(configure: {
            $0.checkpointFrameCount = 1
            $0.snapshotInterval = .seconds(5)
        }) { fixture in
            let body = String(repeating: "long row ", count: 340)
            for id in 1...60 {  // a long first log: its frames stay in the slots past the shorter logs after it
                try await fixture.pool.write { db in try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, body) }
            }
            try await fixture.sync()
            for id in 61...80 {
                try await fixture.pool.write { db in try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, body) }
            }
            let first = try await fixture.sync()  // shipped, then checkpointed whole
            let logPath = fixture.databasePath + "-wal"
            let shippedLog = try #require(try ReadOnlyFile(path: logPath).flatMap(WALFormat.header))
            await fixture.replicator.closeAsIfKilled()
            // Another connection's transaction spills pages to the log before it commits: SQLite restarts the log and
            // writes frames with no commit among them.
            let spiller = try Connection(path: fixture.databasePath, key: fixture.key, settings: fixture.settings)
            try spiller.execute("PRAGMA cache_size = 2")
            try spiller.execute("BEGIN IMMEDIATE")
            for id in 81...86 { try spiller.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, body) }
            let restartedLog = try #require(try ReadOnlyFile(path: logPath).flatMap(WALFormat.header))
            #expect(restartedLog.salt1 == shippedLog.salt1 &+ 1, "the spilled transaction restarted the log")
            fixture.clock.advance(seconds: 10)  // a snapshot is due
            let again = fixture.newReplicator()
            try await again.syncNow()
            #expect(await again.status.generation == first.generation)
            try spiller.execute("COMMIT")
            spiller.close()
            fixture.clock.advance(seconds: 1)
            try await again.syncNow()
            let catalog = try await fixture.replica.catalog()
            #expect(catalog.generations.count == 1)
            #expect(catalog.generations.last?.snapshots.last?.index == first.lastIndex)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            try await again.stop()
        }
    }

    @Test("the old log went on past the last shipped frame before SQLite restarted it: a new generation, nothing lost")
    func refusesRestartAfterUnshippedFrames() async throws {
        try await withReplicationFixture(configure: { $0.checkpointFrameCount = 1 }) { fixture in
            for _ in 1...10 { try await fixture.insert(4) }
            try await fixture.sync()
            for _ in 1...3 { try await fixture.insert(3) }
            // A reader at the log's end: the replicator's checkpoint still copies every frame, but SQLite cannot restart
            // the log while the reader is there, so the next commits go on in the same log.
            let reader = try Connection(path: fixture.databasePath, key: fixture.key, settings: fixture.settings)
            try reader.execute("BEGIN")
            _ = try reader.scalar("SELECT count(*) FROM note", as: Int.self)
            let first = try await fixture.sync()
            #expect(first.lastIndex == 1)
            await fixture.replicator.closeAsIfKilled()
            try await fixture.insert(2)  // after the shipped frames, in the same log: never shipped
            try reader.execute("COMMIT")
            reader.close()
            let checkpoint = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            #expect(checkpoint.checkpointedFrameCount == checkpoint.logFrameCount)
            try await fixture.insert(1)  // now SQLite restarts the log: salt-1 plus one, as after the replicator's checkpoint
            let again = fixture.newReplicator()
            try await again.syncNow()
            let status = await again.status
            #expect(status.generation != first.generation)
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
            let restored = fixture.directory.path("restored-rows.db")
            _ = try await fixture.replica.restore(to: restored, at: .latest)
            let rows = try Connection(path: restored, key: fixture.key, settings: fixture.settings)
            #expect(try rows.scalar("SELECT count(*) FROM note", as: Int.self) == 40 + 9 + 2 + 1)
            rows.close()
            try await again.stop()
        }
    }

    @Test("while the replicator runs, another connection's checkpoint copies nothing it has not shipped into the main file")
    func pinHoldsCheckpointsBack() async throws {
        try await withReplicationFixture { fixture in
            try await fixture.insert(5)
            try await fixture.sync()
            let mainFile = try fileBytes(fixture.databasePath)
            try await fixture.insert(20)
            let result = try await fixture.pool.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            #expect(result.checkpointedFrameCount < result.logFrameCount)
            #expect(try fileBytes(fixture.databasePath) == mainFile)
            try await fixture.sync()
            #expect(try await fixture.restoredBytes(.latest) == (try fixture.checkpointedCopy()))
        }
    }

    @Test("the replicator refuses a plaintext database: its replica would hold the rows as they are")
    func refusesPlaintext() async throws {
        try await withTemporaryDirectory { folder in
            let pool = try DatabasePool.unencrypted(path: folder.path("plain.db"))
            try await pool.write { db in try db.execute("CREATE TABLE t(x)") }
            let replicator = Replicator(pool: pool, store: try FolderReplicaStore(root: folder.path("replica")))
            let error = await #expect(throws: DatabaseError.self) { try await replicator.start() }
            #expect(error?.kind == .invalidArgument)
            #expect(!FileManager.default.fileExists(atPath: folder.path("replica")))
            pool.close()
        }
    }

    @Test("as a sidecar it ships what another process writes, and its restore equals the source")
    func sidecar() async throws {
        try await withTemporaryDirectory { folder in
            let path = folder.path("service.db")
            let key = try EncryptionKey.generateRaw()
            let keyFile = folder.path("service.key")
            try key.write(toKeyFile: keyFile)
            let setup = try Connection(path: path, key: key)
            _ = try setup.scalar("PRAGMA journal_mode = WAL", as: String.self)
            try setup.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
            setup.close()
            let store = try FolderReplicaStore(root: folder.path("replica"))
            let replicator = Replicator(
                databasePath: path, keyProvider: .fixed(key), store: store,
                configuration: ReplicatorConfiguration(snapshotInterval: nil, retention: nil))
            try await replicator.syncNow()
            // Another process writes: the command-line tool, one transaction per run.
            for round in 1...3 {
                let status = try runTool(["exec", path, "--key-file", keyFile,
                                          "INSERT INTO t(body) VALUES ('\(plaintextMarker) \(round)')"])
                #expect(status == 0)
                try await replicator.syncNow()
            }
            let expected = try checkpointedCopy(of: path, key: key, in: folder)
            let restored = folder.path("restored.db")
            _ = try await Replica(store: store).restore(to: restored, at: .latest)
            #expect(try fileBytes(restored) == expected)
            let rows = try Connection(path: restored, key: key)
            #expect(try rows.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
            rows.close()
            let generation = try #require(try await Replica(store: store).catalog().generations.first)
            #expect(generation.segments.count == 3)
            try await replicator.stop()
        }
    }
}

/// Runs the `sqlcipherkit` binary built beside the tests and waits for it.
func runTool(_ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("sqlcipherkit")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}
#endif
