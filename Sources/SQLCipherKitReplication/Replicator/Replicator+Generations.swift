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

    /// Starts a generation: checkpoints and pins with writes paused, writes `generation.json` (its sequence number one
    /// more than the replica's newest, its link to the generation before it, its MAC), then the snapshot.
    ///
    /// When the checkpoint was complete the snapshot is exact (index 0, the log goes on from where the main file
    /// is). Otherwise (a reader of another connection still needed older frames) the main file may receive some
    /// pages of the log while it is copied, up to the pin: the log is shipped from its first frame, and the
    /// snapshot serves restore points from the segment that reaches the pin's frame on.
    func startGeneration() async throws {
        guard let database, let authentication else { return }
        let now = configuration.now()
        let newest = try await newestGenerations()
        let sequence = (newest.sequence ?? 0) + 1
        var name = ReplicaLayout.newGenerationName(sequence: sequence)
        if let chosen = promotedGenerationName, ReplicaLayout.sequence(ofGeneration: chosen) == sequence { name = chosen }
        promotedGenerationName = nil
        let identity = replicaIdentity ?? newest.replicaIdentity
            ?? Hex.string((0..<16).map { _ in UInt8.random(in: 0...255) })
        let walPath = database.walPath
        let start = try await database.withWritesPaused { () -> GenerationStart in
            let result = try database.checkpointReleasingPinLocked()
            guard let file = try ReadOnlyFile(path: walPath), let header = try WALFormat.header(of: file) else {
                return GenerationStart(log: nil, end: nil, isComplete: true)
            }
            let log = WALPosition(start: header)
            return GenerationStart(
                log: log, end: try WALShipping.lastCommit(in: file, after: log) ?? log,
                isComplete: result.checkpointedFrameCount == result.logFrameCount)
        }
        let salt = try await database.locked { try database.salt() }
        let previous = previousLink ?? newest.link
        var (reason, detail) = nextGenerationReason
        if reason == .firstGeneration, let previous {
            // A replicator that just started (a new process) found a generation it could not resume.
            (reason, detail) = (
                .notContinuous,
                "the replicator started and the log on disk does not continue generation \(previous.generation)")
        }
        let manifest = GenerationManifest(
            format: replicaFormat, generation: name, sequence: sequence, replica: identity,
            createdAtMilliseconds: now.milliseconds, reason: reason, reasonDetail: detail,
            previous: previous, pageSize: database.pageSize,
            plaintextHeaderSize: database.plaintextHeaderSize, salt: salt.map(Hex.string),
            engine: "SQLCipher \(SQLCipher.version), SQLite \(SQLCipher.sqliteVersion)",
            replicator: "SQLCipherKit \(SQLCipherKitVersion.string)")
        let (bytes, mac) = try StoredManifest.encode(manifest) {
            authentication.generationMAC(generation: name, jsonSHA256: $0)
        }
        // The lease names the generation before any of its objects exists: a replicator that takes over reads it.
        try await lease.check(generation: name, now: now)
        try await store.put(ReplicaLayout.generationManifestKey(name), bytes: bytes)
        replicaIdentity = identity
        metrics.generationStarted(reason: reason)
        logger.info("replication generation started", metadata: [
            "generation": "\(name)", "reason": "\(reason)", "detail": "\(detail)",
            "exactSnapshot": "\(start.isComplete)",
        ])
        do {
            if start.isComplete {
                try await writeSnapshot(
                    generation: name, index: 0, isExact: true, logPosition: start.end, chain: mac)
                generation = ActiveGeneration(
                    name: name, sequence: sequence, nextIndex: 1, chain: mac, position: start.end,
                    expectsRestart: start.end != nil, needsLogHeader: false, lastSnapshotAt: now, lastSnapshotIndex: 0,
                    lastCheckpointAt: now, frozenAt: (0, start.end, mac), pendingSnapshot: nil,
                    pendingSnapshotIndex: nil)
            } else if let log = start.log, let end = start.end {
                generation = ActiveGeneration(
                    name: name, sequence: sequence, nextIndex: 1, chain: mac, position: log, expectsRestart: false,
                    needsLogHeader: true, lastSnapshotAt: now, lastSnapshotIndex: 0, lastCheckpointAt: now,
                    frozenAt: nil,
                    pendingSnapshot: PendingSnapshot(frame: end.frame, log: log, createdAtMilliseconds: now.milliseconds),
                    pendingSnapshotIndex: nil)
                try await ship()
                guard generation?.name == name, let pending = generation?.pendingSnapshotIndex else {
                    throw ReplicationError(.sourceChanged, "the log changed while generation \(name) started")
                }
                try await writeSnapshot(
                    generation: name, index: pending.index, isExact: false, logPosition: nil, chain: pending.chain)
                generation?.pendingSnapshotIndex = nil
                generation?.lastSnapshotIndex = pending.index
            }
        } catch {
            // Without its snapshot the generation cannot be restored: the next sync starts another, which follows
            // the last generation that was complete.
            if generation?.name == name { generation = nil }
            nextGenerationReason = (.previousIncomplete, "generation \(name) could not be completed (\(error))")
            throw error
        }
        previousLink = nil
        nextGenerationReason = (.notContinuous, "the write-ahead log did not continue generation \(name)")
    }

    /// What a new generation continues: the replica's newest sequence number, its identity and the last point of
    /// its newest readable generation (the new one's link), from the listing and the manifests. Not only generations
    /// that verify with this database's key: after a rekey the one before was written with the old key, and the
    /// replica goes on.
    func newestGenerations() async throws -> (sequence: Int?, replicaIdentity: String?, link: GenerationLink?) {
        let catalog = try await Replica(store: store).catalog()
        let readable = catalog.generations.last { $0.manifest != nil }
        let link = readable.flatMap { generation -> GenerationLink? in
            let index = generation.latestRestorePoint?.index ?? 0
            return generation.chainValue(at: index).map {
                GenerationLink(generation: generation.name, sequence: generation.sequence, index: index, chain: $0)
            }
        }
        return (catalog.generations.last?.sequence, readable?.replicaIdentity, link)
    }

    /// The store's catalog, every MAC checked with this database's key.
    func loadCatalog() async throws -> ReplicaCatalog {
        guard let authentication else { return try await Replica(store: store).catalog() }
        return try await ReplicaCatalog.load(
            from: store, authentications: ReplicaCatalog.AuthenticationCache(fixed: authentication))
    }

    /// Takes an exact snapshot when the last checkpoint was complete (the main file is the database at the last
    /// index, pinned), then applies retention.
    func takeExactSnapshot() async throws {
        guard let current = generation, let frozen = current.frozenAt, frozen.index > current.lastSnapshotIndex
        else { return }
        try await writeSnapshot(
            generation: current.name, index: frozen.index, isExact: true, logPosition: frozen.position,
            chain: frozen.chain)
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
    /// `snapshot.json` (with the MAC chain's value at `index`, and its own MAC), which makes the snapshot count.
    func writeSnapshot(
        generation name: String, index: Int, isExact: Bool, logPosition: WALPosition?, chain: String
    ) async throws {
        guard let database, let authentication else { return }
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
            format: replicaFormat, index: index, replayFromIndex: isExact ? index + 1 : 1,
            createdAtMilliseconds: createdAt.milliseconds, byteCount: offset, isExact: isExact, parts: parts,
            logPosition: logPosition, chain: chain)
        let (bytes, _) = try StoredManifest.encode(manifest) {
            authentication.snapshotMAC(generation: name, index: index, jsonSHA256: $0)
        }
        try await store.put(ReplicaLayout.snapshotManifestKey(name, index: index), bytes: bytes)
        logger.info("replica snapshot stored", metadata: [
            "generation": "\(name)", "index": "\(index)", "bytes": "\(offset)", "exact": "\(isExact)",
        ])
    }

    /// Goes on with the store's newest generation when the log on disk still continues it: it still holds the last
    /// shipped frame (same salts, same running checksum), or it is the log SQLite began right after that frame once
    /// the replicator's own checkpoint had copied everything (``WALShipping/isRestart(in:header:of:)``; a process
    /// killed within a sync interval of its checkpoint leaves that). Nothing was checkpointed away unshipped since,
    /// so no new snapshot is needed.
    ///
    /// Only a generation that verifies with this database's key, in full up to its last segment, is continued: a
    /// generation written with another key (before a rotation), or one whose last objects do not verify, ends here
    /// and the next starts with a snapshot.
    func resumeIfContinuous() async throws {
        guard let database else { return }
        let catalog = try await loadCatalog()
        guard let latest = catalog.generations.last else { return }
        replicaIdentity = catalog.generations.last { $0.manifest != nil }?.replicaIdentity
        guard latest.authenticity != .failed, latest.manifest != nil else {
            let fact = "the replica's newest generation \(latest.name) does not verify with this database's key: the"
                + " key was changed since (a rekey), or the generation was not written with it"
            // A pause named by its caller (a live rotation) is the cause; the key change is what it did.
            if nextGenerationReason.0 == .paused {
                nextGenerationReason.1 += "; " + fact
            } else {
                nextGenerationReason = (.previousNotAuthentic, fact)
            }
            return
        }
        guard let lastPoint = latest.latestRestorePoint, lastPoint.index == latest.lastIndex,
              latest.pageSize == database.pageSize, let lastSnapshot = latest.snapshots.last,
              let chain = latest.chainValue(at: lastPoint.index)
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
            guard let file = try ReadOnlyFile(path: walPath), let header = try WALFormat.header(of: file) else {
                return nil
            }
            if header.salt1 == target.salt1, header.salt2 == target.salt2 {
                let log = WALPosition(start: header)
                if log.checksum == target.checksum { return (log, false) }
                return try WALShipping.commit(in: file, after: log, withChecksum: target.checksum).map { ($0, false) }
            }
            guard try WALShipping.isRestart(in: file, header: header, of: target) else { return nil }
            return (WALPosition(start: header), true)
        }
        guard let found else { return }
        let now = configuration.now()
        generation = ActiveGeneration(
            name: latest.name, sequence: latest.sequence, nextIndex: lastPoint.index + 1, chain: chain,
            position: found.position, expectsRestart: false, needsLogHeader: found.isRestartedLog,
            lastSnapshotAt: lastSnapshot.createdAt, lastSnapshotIndex: lastSnapshot.index, lastCheckpointAt: now,
            frozenAt: nil, pendingSnapshot: nil, pendingSnapshotIndex: nil)
        previousLink = nil
        logger.info("replication resumed", metadata: [
            "generation": "\(latest.name)", "index": "\(lastPoint.index)",
            "logRestartedSince": "\(found.isRestartedLog)",
        ])
    }
}
#endif
