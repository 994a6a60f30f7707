#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

extension Replicator {
    /// Uploads the committed frames after the shipped position, in segments, streamed from the log file (the pin
    /// keeps them there). Ends the generation when the log does not continue it.
    func ship() async throws {
        guard let database else { return }
        let scanStartedAt = configuration.now()
        // A sync ships what was committed when it began (the log's last commit, found on its first look at the
        // log); frames committed later are left to the next sync. A writer that outpaces the store must not keep one
        // sync going for ever: its status never updated, no checkpoint, the log growing without bound.
        let walPath = database.walPath
        var committedAtStart: WALPosition?
        var hasLookedAtLog = false
        while let current = generation {
            // A segment whose upload failed is looked for again exactly as it was named: the walk stops at the
            // first commit at or past the limit (frame bytes after the start), which is its last.
            let unconfirmed = current.unconfirmed
            let segmentLimit = unconfirmed.map { $0.run.end.endOffset - $0.run.start.endOffset }
                ?? configuration.segmentByteCount
            let findsEnd = !hasLookedAtLog
            hasLookedAtLog = true
            let (decision, found, end) = try await onQueue {
                () -> (LogContinuation, WALShipping.CommittedRun?, WALPosition?) in
                guard let file = try ReadOnlyFile(path: walPath) else {
                    return (LogContinuation.decide(
                        header: nil, shipped: current.position, expectsRestart: current.expectsRestart,
                        needsHeader: current.needsLogHeader), nil, nil)
                }
                let decision = LogContinuation.decide(
                    header: try WALFormat.header(of: file), shipped: current.position,
                    expectsRestart: current.expectsRestart, needsHeader: current.needsLogHeader)
                guard case .from(let start, let includesHeader) = decision else { return (decision, nil, nil) }
                let end = findsEnd ? try WALShipping.lastCommit(in: file, after: start) : nil
                return (decision, try WALShipping.committedRun(
                    in: file, after: start, includesHeader: includesHeader, maximumBytes: segmentLimit, readTwice: true),
                    end)
            }
            if findsEnd { committedAtStart = end }
            switch (decision, found) {
            case (.broken(let reason, let detail), _):
                hasLookedAtLog = false  // the new generation's log: its end is looked for again
                await breakContinuity(reason, detail)
                try await startGeneration()
                continue
            case (.from(_, let includesHeader), let run?)
                where unconfirmed.map({ $0.isSame(run, startsLog: includesHeader) }) ?? true:
                // After a failed upload the same segment is stored again under the same name: the store may hold it
                // already (the connection failed after the store had written it), and a second object of the index
                // under another name would make that index unusable for every restore (two claim it).
                let segment = unconfirmed?.name ?? segmentName(current, startsLog: includesHeader, sha256: run.sha256)
                do {
                    try await store.put(
                        ReplicaLayout.segmentKey(segment), file: walPath, offset: run.offset, length: run.length,
                        progress: nil)
                } catch {
                    if generation?.name == current.name {
                        generation?.unconfirmed = UnconfirmedSegment(name: segment, run: run)
                    }
                    throw error
                }
                generation?.unconfirmed = nil
                recordShipped(segment, byteCount: run.length, end: run.end)
                if let committedAtStart, run.end.isSameLog(as: committedAtStart),
                   run.end.frame >= committedAtStart.frame {
                    caughtUpAt = scanStartedAt
                    return
                }
            case (.from, _) where unconfirmed != nil, (.nothingYet, _) where unconfirmed != nil:
                // The log no longer holds the frames of the segment whose upload failed (never while the pin
                // holds): the store may hold them under that index or not, so nothing more can be named after it.
                hasLookedAtLog = false
                await breakContinuity(
                    .notContinuous,
                    "the upload of segment \(current.name)/\(current.nextIndex) failed and the write-ahead log no"
                        + " longer holds its frames")
                try await startGeneration()
                continue
            default:
                caughtUpAt = scanStartedAt
                return
            }
        }
    }

    /// A log segment whose upload failed: whether the store holds it is unknown (a connection reset after the store
    /// wrote it looks like one before), so it is uploaded again under the same name before anything after it.
    struct UnconfirmedSegment: Sendable {
        let name: ReplicaLayout.SegmentName
        let run: WALShipping.CommittedRun

        /// Whether `run` is the same frames (the same bytes of the same log).
        func isSame(_ run: WALShipping.CommittedRun, startsLog: Bool) -> Bool {
            run.start == self.run.start && run.end == self.run.end && run.offset == self.run.offset
                && run.length == self.run.length && run.sha256 == self.run.sha256 && startsLog == name.startsLog
        }
    }

    /// The name of the generation's next segment, its MAC chained to the one before it.
    func segmentName(_ current: ActiveGeneration, startsLog: Bool, sha256: String) -> ReplicaLayout.SegmentName {
        let unsigned = ReplicaLayout.SegmentName(
            generation: current.name, index: current.nextIndex, milliseconds: configuration.now().milliseconds,
            startsLog: startsLog, sha256: sha256, mac: "")
        let mac = authentication!.segmentMAC(unsigned, previous: current.chain)
        return ReplicaLayout.SegmentName(
            generation: unsigned.generation, index: unsigned.index, milliseconds: unsigned.milliseconds,
            startsLog: startsLog, sha256: sha256, mac: mac)
    }

    /// Records a segment stored (or captured) as the generation's next index.
    func recordShipped(_ segment: ReplicaLayout.SegmentName, byteCount: Int64, end: WALPosition) {
        guard var current = generation else { return }
        current.nextIndex += 1
        current.chain = segment.mac
        current.position = end
        current.expectsRestart = false
        current.needsLogHeader = false
        generation = current
        statusValue.shippedByteCount += byteCount
        metrics.shippedBytes.increment(by: Int(byteCount))
        if let pending = current.pendingSnapshot, pending.log.isSameLog(as: end), end.frame >= pending.frame {
            // The snapshot copied at the generation's start serves restore points from here on.
            generation?.pendingSnapshot = nil
            generation?.pendingSnapshotIndex = (segment.index, segment.mac)
        }
    }

    /// Uploads the segments captured under the write lock, in order.
    func uploadCaptured() async throws {
        while let next = captured.first {
            try await store.put(next.key, bytes: next.bytes)
            captured.removeFirst()
        }
    }

    /// Checkpoints, with writes paused for a moment: reads the last committed frames into memory, ends the pin,
    /// runs a PASSIVE checkpoint, pins again. Then stores the frames read. When the checkpoint was complete the
    /// main file now holds exactly the database at the last index, and stays so until the next checkpoint (the new
    /// pin holds every checkpoint back): a snapshot can be taken from it, and SQLite may restart the log.
    func checkpointStep() async throws {
        guard let database, let current = generation else { return }
        let residueLimit = configuration.segmentByteCount
        let walPath = database.walPath
        let outcome = try await database.withWritesPaused { () -> CheckpointOutcome in
            var residue: (run: WALShipping.CommittedRun, bytes: [UInt8], startsLog: Bool)?
            if let file = try ReadOnlyFile(path: walPath) {
                let decision = LogContinuation.decide(
                    header: try WALFormat.header(of: file), shipped: current.position,
                    expectsRestart: current.expectsRestart, needsHeader: current.needsLogHeader)
                switch decision {
                case .broken(let reason, let detail):
                    return .broken(reason, detail)
                case .from(let start, let includesHeader):
                    if let run = try WALShipping.committedRun(
                        in: file, after: start, includesHeader: includesHeader, maximumBytes: .max, readTwice: false) {
                        guard run.length <= residueLimit else { return .tooLong }
                        residue = (run, try file.read(count: Int(run.length), at: run.offset), includesHeader)
                    }
                case .nothingYet:
                    break
                }
            }
            let result = try database.checkpointReleasingPinLocked()
            return .done(
                residue: residue.map { CapturedRun(run: $0.run, bytes: $0.bytes, startsLog: $0.startsLog) },
                isComplete: result.logFrameCount >= 0 && result.checkpointedFrameCount == result.logFrameCount)
        }
        switch outcome {
        case .broken(let reason, let detail):
            await breakContinuity(reason, detail)
        case .tooLong:
            // Many frames came in since the last ship: ship them first, checkpoint at the next sync.
            return
        case .done(let residue, let isComplete):
            if let residue, let active = generation {
                let segment = segmentName(active, startsLog: residue.startsLog, sha256: residue.run.sha256)
                captured.append(CapturedSegment(key: ReplicaLayout.segmentKey(segment), bytes: residue.bytes))
                recordShipped(segment, byteCount: residue.run.length, end: residue.run.end)
            }
            guard var updated = generation else { return }
            updated.lastCheckpointAt = configuration.now()
            updated.expectsRestart = isComplete && updated.position != nil
            updated.frozenAt = isComplete ? (updated.nextIndex - 1, updated.position, updated.chain) : nil
            generation = updated
            try await uploadCaptured()
        }
    }

    struct CapturedRun: Sendable {
        let run: WALShipping.CommittedRun
        let bytes: [UInt8]
        let startsLog: Bool
    }

    enum CheckpointOutcome: Sendable {
        case broken(GenerationReason, String)
        case tooLong
        case done(residue: CapturedRun?, isComplete: Bool)
    }
}
#endif
