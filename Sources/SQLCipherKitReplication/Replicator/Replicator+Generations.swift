#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

extension Replicator {
    /// What the write-paused start of a generation found.
    struct GenerationStart: Sendable {
        /// The log's start, `nil` when there is no log.
        let log: WALPosition?
        /// After its last commit.
        let end: WALPosition?
        /// The checkpoint copied every frame: the main file is the database at `end`, and stays so (pinned).
        let isComplete: Bool
    }

    /// Starts a generation: checkpoints and pins with writes paused, writes `generation.json`, then the snapshot.
    ///
    /// When the checkpoint was complete the snapshot is exact (index 0, the log goes on from where the main file
    /// is). Otherwise (a reader of another connection still needed older frames) the main file may receive some
    /// pages of the log while it is copied, up to the pin: the log is shipped from its first frame, and the
    /// snapshot serves restore points from the segment that reaches the pin's frame on.
    func startGeneration() async throws {
        guard let database else { return }
        let now = configuration.now()
        let name = ReplicaLayout.newGenerationName(at: now.milliseconds)
        let walPath = database.walPath
        let start = try await database.withWritesPaused { () -> GenerationStart in
            database.unpinLocked()
            let result = try database.checkpointLocked()
            try database.pinLocked()
            guard let file = try ReadOnlyFile(path: walPath), let header = try WALReader.header(of: file) else {
                return GenerationStart(log: nil, end: nil, isComplete: true)
            }
            let log = WALPosition(start: header)
            return GenerationStart(
                log: log, end: try WALReader.lastCommit(in: file, after: log) ?? log,
                isComplete: result.checkpointedFrameCount == result.logFrameCount)
        }
        let manifest = GenerationManifest(
            format: GenerationManifest.currentFormat, generation: name, createdAtMilliseconds: now.milliseconds,
            reason: nextGenerationReason, previousGeneration: previousGeneration,
            databaseName: URL(fileURLWithPath: database.path).lastPathComponent, pageSize: database.pageSize,
            plaintextHeaderSize: database.plaintextHeaderSize,
            plaintextHeaderSalt: database.plaintextHeaderSalt.map(Hex.string),
            engine: "SQLCipher \(SQLCipher.version), SQLite \(SQLCipher.sqliteVersion)",
            replicator: "SQLCipherKit \(SQLCipherKitVersion.string)")
        try await store.put(ReplicaLayout.generationManifestKey(name), bytes: try ManifestCoding.encode(manifest))
        metrics.generations.increment()
        logger.info("replication generation started", metadata: [
            "generation": "\(name)", "reason": "\(nextGenerationReason)", "exactSnapshot": "\(start.isComplete)",
        ])
        do {
            if start.isComplete {
                try await writeSnapshot(generation: name, index: 0, isExact: true, logPosition: start.end)
                generation = ActiveGeneration(
                    name: name, nextIndex: 1, position: start.end, expectsRestart: start.end != nil,
                    needsLogHeader: false, lastSnapshotAt: now, lastSnapshotIndex: 0, lastCheckpointAt: now,
                    frozenAt: (0, start.end), pendingSnapshot: nil, pendingSnapshotIndex: nil)
            } else if let log = start.log, let end = start.end {
                generation = ActiveGeneration(
                    name: name, nextIndex: 1, position: log, expectsRestart: false, needsLogHeader: true,
                    lastSnapshotAt: now, lastSnapshotIndex: 0, lastCheckpointAt: now, frozenAt: nil,
                    pendingSnapshot: PendingSnapshot(frame: end.frame, log: log, createdAtMilliseconds: now.milliseconds),
                    pendingSnapshotIndex: nil)
                try await ship()
                guard generation?.name == name, let index = generation?.pendingSnapshotIndex else {
                    throw ReplicationError(.sourceChanged, "the log changed while generation \(name) started")
                }
                try await writeSnapshot(generation: name, index: index, isExact: false, logPosition: nil)
                generation?.pendingSnapshotIndex = nil
                generation?.lastSnapshotIndex = index
            }
        } catch {
            // Without its snapshot the generation cannot be restored: the next sync starts another.
            if generation?.name == name { generation = nil }
            nextGenerationReason = "generation \(name) could not be completed (\(error))"
            throw error
        }
        previousGeneration = name
        nextGenerationReason = "the write-ahead log did not continue generation \(name)"
    }

    /// Takes an exact snapshot when the last checkpoint was complete (the main file is the database at the last
    /// index, pinned), then applies retention.
    func takeExactSnapshot() async throws {
        guard let current = generation, let frozen = current.frozenAt, frozen.index > current.lastSnapshotIndex
        else { return }
        try await writeSnapshot(
            generation: current.name, index: frozen.index, isExact: true, logPosition: frozen.position)
        generation?.lastSnapshotAt = configuration.now()
        generation?.lastSnapshotIndex = frozen.index
        if let retention = configuration.retention {
            let report = try await Replica(store: store).applyRetention(
                retention, now: configuration.now(), activeGeneration: current.name)
            if report.removedObjectCount > 0 {
                logger.info("replica retention applied", metadata: [
                    "removedSnapshots": "\(report.removedSnapshots.count)",
                    "removedGenerations": "\(report.removedGenerations.count)",
                    "removedObjects": "\(report.removedObjectCount)",
                ])
            }
        }
    }

    /// Copies the main file into parts (through SQLite's own file handle, with the pin held), then writes
    /// `snapshot.json`, which makes the snapshot count.
    func writeSnapshot(generation name: String, index: Int, isExact: Bool, logPosition: WALPosition?) async throws {
        guard let database else { return }
        let createdAt = configuration.now()
        let partSize = configuration.snapshotPartByteCount
        var parts: [SnapshotManifest.Part] = []
        var offset: Int64 = 0
        while true {
            let start = offset
            let (bytes, sha256) = try await database.locked { () -> ([UInt8], String) in
                let bytes = try database.readMainFileLocked(count: partSize, at: start)
                return (bytes, SHA256.hex(bytes))
            }
            if bytes.isEmpty { break }
            try await store.put(
                ReplicaLayout.snapshotPartKey(name, index: index, part: parts.count, sha256: sha256), bytes: bytes)
            parts.append(SnapshotManifest.Part(byteCount: Int64(bytes.count), sha256: sha256))
            offset += Int64(bytes.count)
            statusValue.shippedByteCount += Int64(bytes.count)
            metrics.shippedBytes.increment(by: bytes.count)
            if bytes.count < partSize { break }
        }
        let manifest = SnapshotManifest(
            format: GenerationManifest.currentFormat, index: index, replayFromIndex: isExact ? index + 1 : 1,
            createdAtMilliseconds: createdAt.milliseconds, byteCount: offset, isExact: isExact, parts: parts,
            logPosition: logPosition)
        try await store.put(
            ReplicaLayout.snapshotManifestKey(name, index: index), bytes: try ManifestCoding.encode(manifest))
        logger.info("replica snapshot stored", metadata: [
            "generation": "\(name)", "index": "\(index)", "bytes": "\(offset)", "exact": "\(isExact)",
        ])
    }

    /// Goes on with the store's latest generation when the log on disk still continues it: it still holds the last
    /// shipped frame (same salts, same running checksum), or it is the log SQLite began right after that frame once
    /// the replicator's own checkpoint had copied everything (``WALReader/isRestart(in:header:of:)``; a process
    /// killed within a sync interval of its checkpoint leaves that). Nothing was checkpointed away unshipped since,
    /// so no new snapshot is needed.
    func resumeIfContinuous() async throws {
        guard let database else { return }
        let catalog = try await Replica(store: store).catalog()
        guard let latest = catalog.generations.last, let lastPoint = latest.latestRestorePoint,
              latest.pageSize == database.pageSize, let lastSnapshot = latest.snapshots.last
        else { return }
        var target: (salt1: UInt32, salt2: UInt32, checksum: WALFormat.Checksum)?
        if let segment = latest.segment(at: lastPoint.index), lastPoint.index == latest.segments.last?.index {
            let bytes = try await store.get(segment.key)
            let frameSize = WALFormat.frameHeaderSize + database.pageSize
            guard SHA256.hex(bytes) == segment.sha256, bytes.count >= frameSize else { return }
            let header = bytes.withUnsafeBytes {
                WALFormat.FrameHeader(UnsafeRawBufferPointer(rebasing: $0[(bytes.count - frameSize)...]))
            }
            target = (header.salt1, header.salt2, header.checksum)
        } else if lastPoint.index == lastSnapshot.index, latest.segments.last.map({ $0.index < lastPoint.index }) ?? true,
                  let position = lastSnapshot.manifest.logPosition {
            target = (position.salt1, position.salt2, position.checksum)
        }
        guard let target else { return }
        let walPath = database.walPath
        let found = try await onQueue { () -> (position: WALPosition, isRestartedLog: Bool)? in
            guard let file = try ReadOnlyFile(path: walPath), let header = try WALReader.header(of: file) else {
                return nil
            }
            if header.salt1 == target.salt1, header.salt2 == target.salt2 {
                let log = WALPosition(start: header)
                if log.checksum == target.checksum { return (log, false) }
                return try WALReader.commit(in: file, after: log, withChecksum: target.checksum).map { ($0, false) }
            }
            guard try WALReader.isRestart(in: file, header: header, of: target) else { return nil }
            return (WALPosition(start: header), true)
        }
        guard let found else { return }
        let now = configuration.now()
        generation = ActiveGeneration(
            name: latest.name, nextIndex: lastPoint.index + 1, position: found.position, expectsRestart: false,
            needsLogHeader: found.isRestartedLog, lastSnapshotAt: lastSnapshot.createdAt,
            lastSnapshotIndex: lastSnapshot.index, lastCheckpointAt: now, frozenAt: nil, pendingSnapshot: nil,
            pendingSnapshotIndex: nil)
        previousGeneration = latest.name
        logger.info("replication resumed", metadata: [
            "generation": "\(latest.name)", "index": "\(lastPoint.index)",
            "logRestartedSince": "\(found.isRestartedLog)",
        ])
    }
}
#endif
