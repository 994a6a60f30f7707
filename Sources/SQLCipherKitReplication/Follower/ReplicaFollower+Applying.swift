#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ReplicaFollower {
    func startNow() async throws -> Status {
        guard copy == nil else { return statusValue }
        try takeLock()
        do {
            return try await startLocked()
        } catch {
            await closeCopy()
            throw error
        }
    }

    /// One follower per copy: two would append to one log. A `flock` (not a POSIX lock, which SQLite's own locks
    /// would share and a close would drop) on a file beside the copy, held while the follower has it open.
    private func takeLock() throws {
        guard lockDescriptor < 0 else { return }
        let lockPath = path + ".follower-lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw fileSystemFailure("cannot open \(lockPath)") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw DatabaseError(
                .busy, "another follower has \(path) (it holds \(lockPath)); stop it first: one follower per copy")
        }
        lockDescriptor = descriptor
    }

    func releaseLock() {
        guard lockDescriptor >= 0 else { return }
        close(lockDescriptor)
        lockDescriptor = -1
    }

    private func startLocked() async throws -> Status {
        var existing = try FollowerState.read(statePath)
        var status = stat()
        if let found = existing, found.isRestoring {
            // A restore into the copy began and did not finish: whatever is there is this follower's, half done.
            removeDatabaseFiles(atPath: path)
            existing = nil
        } else if existing == nil && lstat(path, &status) == 0 {
            throw ReplicationError(
                .destinationExists,
                "\(path) exists and is not a follower's copy (there is no \(statePath)); nothing was written",
                remedy: .replaceOnPurpose)
        } else if existing != nil && lstat(path, &status) != 0 {
            throw DatabaseError(
                .invalidState,
                "\(statePath) says a follower's copy is at \(path), but there is no such file; remove \(statePath)"
                    + " to restore the copy again")
        }
        if existing == nil { existing = try await restoreCopy() }
        guard let existing else { return statusValue }
        state = existing
        let path = path
        let key = key
        copy = try await offCooperativePool { try FollowerCopy(path: path, key: key, state: existing) }
        statusValue.point = statusValue.point ?? RestorePoint(generation: existing.generation, index: existing.index, time: .distantPast)
        logger.info("follower started", metadata: [
            "path": "\(path)", "generation": "\(existing.generation)", "index": "\(existing.index)",
        ])
        do {
            try await catchUpNow()
        } catch let error as DatabaseError where Self.stopsFollowing(error) {
            throw error
        } catch {
            // The store may be down: the copy serves what it holds, and the status says since when.
        }
        return statusValue
    }

    /// Restores the replica's newest point into the copy (a state file saying so first, so that a crash part-way
    /// is recognised and the copy restored again).
    private func restoreCopy() async throws -> FollowerState {
        try FollowerState(
            isRestoring: true, generation: "", sequence: 0, index: 0, position: nil, pageSize: 0
        ).write(statePath)
        let restored: (report: RestoreReport, position: WALPosition?, plan: RestorePlan, catalog: ReplicaCatalog)
        do {
            // A generation being started is left out: its snapshot is not complete yet.
            restored = try await replica.restoreKeepingPosition(
                to: path, options: RestoreOptions(verificationKeys: [key])) { try $0.planFollowingStart().plan }
        } catch {
            unlink(statePath)
            throw error
        }
        let generation = restored.plan.generation
        let state = FollowerState(
            isRestoring: false, generation: generation.name, sequence: generation.sequence,
            index: restored.plan.point.index, position: restored.position,
            pageSize: restored.position?.pageSize ?? generation.pageSize ?? 0,
            plaintextHeaderSize: generation.plaintextHeaderSize, salt: generation.salt.map(Hex.string),
            replicaIdentity: generation.replicaIdentity)
        try state.write(statePath)
        statusValue.point = restored.plan.point
        if restored.catalog.newestPoint == restored.plan.point { statusValue.lastCaughtUp = configuration.now() }
        metrics.appliedBytes.increment(by: Int(restored.report.byteCount))
        metrics.generations.increment()
        logger.info("follower restored its copy", metadata: [
            "point": "\(restored.plan.point)", "bytes": "\(restored.report.byteCount)",
        ])
        return state
    }

    @discardableResult
    func catchUpNow() async throws -> Status {
        guard let current = state, copy != nil else {
            throw DatabaseError(.invalidState, "the follower of \(path) is not started (or was stopped)")
        }
        guard !statusValue.isPromoted else {
            throw DatabaseError(.invalidState, "the follower of \(path) was promoted; it follows no more")
        }
        do {
            let catalog = try await replica.catalog(verifyingWith: [key])
            // A new generation whose first snapshot is not complete yet is pending, not damaged: the plan leaves it
            // out, and the generation before it is applied to its end meanwhile.
            let (plan, starting) = try catalog.planFollowingStart()
            let newest = plan.generation
            if newest.name == current.generation {
                if plan.point.index < current.index {
                    // The generation being started follows an earlier point of this one than the copy holds (the
                    // old primary shipped on after a promotion): its snapshot replaces every page once complete.
                    if starting.isEmpty { throw rolledBack("its newest point is \(plan.point)", current: current) }
                    statusValue.point = newest.restorePoint(at: current.index) ?? statusValue.point
                } else {
                    if plan.point.index > current.index {
                        statusValue.pointsBehind = plan.point.index - current.index
                        try await applySegments(of: newest, through: plan.point.index, plan: plan)
                    }
                    statusValue.point = plan.point
                }
            } else if newest.sequence > current.sequence {
                statusValue.pointsBehind = max(1, statusValue.pointsBehind)
                try await follow(plan)
                statusValue.point = plan.point
            } else {
                throw rolledBack("its newest generation is \(newest.name)", current: current)
            }
            statusValue.pointsBehind = 0
            statusValue.lastError = nil
            metrics.pointsBehind.record(0)
            if let pending = starting.last {
                // Not current: the primary's writes since go into the generation being started. The copy holds
                // everything that can be restored, with no error, and the next look follows the new generation.
                metrics.staleness.record(statusValue.staleness(at: configuration.now()).seconds)
                if statusValue.startingGeneration != pending.name {
                    logger.info(
                        "a new generation is being started; the follower waits for its first snapshot",
                        metadata: [
                            "generation": "\(pending.name)",
                            "point": "\(statusValue.point.map { "\($0)" } ?? "none")",
                        ])
                }
                statusValue.startingGeneration = pending.name
            } else {
                statusValue.lastCaughtUp = configuration.now()
                statusValue.startingGeneration = nil
                metrics.staleness.record(0)
            }
            return statusValue
        } catch {
            statusValue.lastError = "\(error)"
            statusValue.startingGeneration = nil
            metrics.failures.increment()
            let staleness = statusValue.staleness(at: configuration.now())
            metrics.staleness.record(staleness.seconds)
            metrics.pointsBehind.record(statusValue.pointsBehind)
            // How stale the copy its readers see may be: since the last look that found it current.
            logger.warning("follower could not catch up; the copy keeps its last state", metadata: [
                "error": "\(error)", "point": "\(statusValue.point.map { "\($0)" } ?? "none")",
                "stale": "\(staleness.seconds) s",
            ])
            throw error
        }
    }

    private func rolledBack(_ found: String, current: FollowerState) -> ReplicationError {
        ReplicationError(
            .damaged,
            "the replica went back: \(found), older than \(current.generation)/\(current.index), which this follower"
                + " applied (objects were removed from the store); the copy keeps its state",
            remedy: .checkReplicaURL)
    }

    /// Applies the segments after the copy's point up to `last`, each published on its own.
    private func applySegments(of generation: ReplicaGeneration, through last: Int, plan: RestorePlan) async throws {
        guard let first = state?.index else { return }
        for index in (first + 1)...last {
            guard let current = state, let copy else { return }
            guard let segment = generation.segment(at: index), generation.restorePoint(at: index) != nil else {
                // Gone (retention removed what this follower had not applied yet): the newest snapshot's plan
                // restores the point whole. Damage would have stopped the plan.
                if plan.snapshot.index > current.index { return try await follow(plan) }
                throw ReplicationError(
                    .damaged,
                    "the log segment \(generation.name)/\(index) cannot be used; follow stopped"
                        + ReplicaGeneration.lastGoodText(generation.restorePoint(at: current.index)),
                    remedy: .nameRestorePoint(lastGood: generation.restorePoint(at: current.index)))
            }
            let bytes = try await replica.downloadSegment(segment, of: generation, operation: "follow")
            let statePath = statePath
            let applier = FrameApplier(position: current.position, pageSize: current.pageSize)
            let next = try await offCooperativePool { () throws -> FollowerState in
                var applier = applier
                try copy.appender.begin()
                do {
                    try applier.apply(bytes, of: segment, in: generation, operation: "follow") { page, bytes, commit in
                        try copy.appender.append(pageNumber: page, page: bytes, commitPageCount: commit)
                    }
                    try copy.appender.commit()
                } catch {
                    copy.appender.rollback()
                    throw error
                }
                var next = current
                next.index = index
                next.position = applier.position
                try next.write(statePath)
                return next
            }
            state = next
            statusValue.point = generation.restorePoint(at: index)
            statusValue.pointsBehind = last - index
            metrics.appliedBytes.increment(by: bytes.count)
        }
    }

    /// Follows a newer generation (or catches up past what retention removed): its point restored into a
    /// temporary file beside the copy, checked with the key, then every page of it appended as one transaction.
    private func follow(_ plan: RestorePlan) async throws {
        guard let current = state, let copy else { return }
        let generation = plan.generation
        if let salt = generation.salt.map(Hex.string), let mine = current.salt, salt != mine {
            throw DatabaseError(
                .invalidState,
                "generation \(generation.name) holds another database (its salt differs from the copy's): a follower"
                    + " follows one database; restore the replica into a new file to follow this one")
        }
        if let pageSize = generation.pageSize, pageSize != current.pageSize {
            throw DatabaseError(
                .invalidState,
                "generation \(generation.name) has pages of \(pageSize) bytes, the copy \(current.pageSize): restore"
                    + " the replica into a new file to follow it")
        }
        let temporary = path + ".follower-restore"
        removeDatabaseFiles(atPath: temporary)
        defer { removeDatabaseFiles(atPath: temporary) }
        let restored = try await replica.restoreKeepingPosition(
            to: temporary, at: .point(generation: generation.name, index: plan.point.index),
            options: RestoreOptions(verificationKeys: [key]))
        let pageSize = current.pageSize
        let statePath = statePath
        let next = FollowerState(
            isRestoring: false, generation: generation.name, sequence: generation.sequence,
            index: plan.point.index, position: restored.position, pageSize: pageSize,
            plaintextHeaderSize: generation.plaintextHeaderSize ?? current.plaintextHeaderSize,
            salt: generation.salt.map(Hex.string) ?? current.salt,
            replicaIdentity: generation.replicaIdentity ?? current.replicaIdentity)
        try await offCooperativePool {
            guard let file = try ReadOnlyFile(path: temporary) else {
                throw fileSystemFailure("the restored copy \(temporary) disappeared")
            }
            let size = try file.size()
            guard pageSize > 0, size > 0, size % Int64(pageSize) == 0, size / Int64(pageSize) <= Int64(UInt32.max) else {
                throw DatabaseError(.damaged, "the restored copy \(temporary) is not a whole number of pages")
            }
            let pageCount = UInt32(size / Int64(pageSize))
            let pagesPerRead = 256
            var buffer = [UInt8](repeating: 0, count: pagesPerRead * pageSize)
            try copy.appender.begin()
            do {
                var page: UInt32 = 1
                while page <= pageCount {
                    let count = min(pagesPerRead, Int(pageCount - page + 1))
                    let offset = Int64(page - 1) * Int64(pageSize)
                    let read = try buffer.withUnsafeMutableBytes {
                        try file.read(into: $0, count: count * pageSize, at: offset)
                    }
                    guard read == count * pageSize else {
                        throw DatabaseError(.damaged, "the restored copy \(temporary) changed while it was read")
                    }
                    try buffer.withUnsafeBytes { bytes in
                        for number in 0..<count {
                            let pageNumber = page + UInt32(number)
                            try copy.appender.append(
                                pageNumber: pageNumber,
                                page: UnsafeRawBufferPointer(rebasing: bytes[(number * pageSize)..<((number + 1) * pageSize)]),
                                commitPageCount: pageNumber == pageCount ? pageCount : 0)
                        }
                    }
                    page += UInt32(count)
                }
                try copy.appender.commit()
            } catch {
                copy.appender.rollback()
                throw error
            }
            try next.write(statePath)
        }
        state = next
        statusValue.point = plan.point
        metrics.appliedBytes.increment(by: Int(restored.report.byteCount))
        metrics.generations.increment()
        logger.info("follower followed a new generation", metadata: [
            "generation": "\(generation.name)", "reason": "\(generation.reason.map { "\($0)" } ?? "unknown")",
            "point": "\(plan.point)",
        ])
    }

    func promoteNow(makeReplicator: @escaping @Sendable () throws -> Replicator) async throws -> Replicator {
        guard state != nil, copy != nil, !statusValue.isPromoted else {
            throw DatabaseError(.invalidState, "the follower of \(path) is not started, stopped, or promoted already")
        }
        // 1. The old primary is fenced first: from here on it stops at its next sync, and the lease it finds names
        //    the generation the promoted copy will write (its sequence number the next one).
        let before = try await replica.catalog(verifyingWith: [key])
        let generationName = ReplicaLayout.newGenerationName(sequence: (before.generations.last?.sequence ?? 0) + 1)
        let lease = ReplicaLease(store: replica.store, duration: .seconds(15))
        try await lease.acquire(
            generation: generationName, now: configuration.now(), force: true, wait: configuration.wait)
        await lease.abandon()
        // 2. Everything it shipped until then.
        try await catchUpNow()
        guard let current = state else { throw DatabaseError(.invalidState, "the follower lost its state") }
        let catalog = try await replica.catalog(verifyingWith: [key])
        guard let generation = catalog.generation(named: current.generation),
              let chain = generation.chainValue(at: current.index)
        else {
            throw ReplicationError(
                .damaged, "generation \(current.generation) is no longer in the replica; nothing was promoted")
        }
        let link = GenerationLink(
            generation: generation.name, sequence: generation.sequence, index: current.index, chain: chain)
        // 3. The copy is handed over: closed here, written by its new primary from now on. The follower lock stays
        //    held until the state file is gone, so that no follower starts on the copy meanwhile.
        await closeCopy(releasingLock: false)
        let replicator: Replicator
        do {
            replicator = try makeReplicator()
            await replicator.takeOver(after: link, generationName: generationName)
            try await replicator.start()
        } catch {
            // Not promoted: the copy is a follower's again.
            let path = path
            let key = key
            if (try? takeLock()) != nil {
                copy = try? await offCooperativePool { try FollowerCopy(path: path, key: key, state: current) }
            }
            throw error
        }
        unlink(statePath)
        try? syncToDisk(atPath: parentFolder(of: statePath))
        releaseLock()
        statusValue.isPromoted = true
        logger.notice("follower promoted to primary", metadata: ["follows": "\(link.generation)/\(link.index)"])
        return replicator
    }

    func closeCopy(releasingLock: Bool = true) async {
        defer { if releasingLock { releaseLock() } }
        guard let copy else { return }
        self.copy = nil
        await offCooperativePool { copy.close() }
    }
}
#endif
