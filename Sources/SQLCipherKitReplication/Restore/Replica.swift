#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A replica in a store: list it, restore from it, prune it. A restore writes the stored (encrypted) bytes back, so
/// none of this needs the database key; with one, every object is authenticated (its MAC, ``ReplicaAuthentication``)
/// and the result opened and checked before it is put in place. Without one, only checksums are checked: anyone who
/// can write to the store could have written what is restored.
///
/// ```swift
/// let replica = Replica(store: try replicaStore(for: "file:///mnt/replica/notes"))
/// let report = try await replica.restore(to: "/srv/notes-restored.db", at: .time(cutoff))
/// print("restored \(report.point), \(report.byteCount) bytes")
/// ```
public struct Replica: Sendable {
    /// Where the replica is.
    package let store: any ReplicaStore

    /// A replica in `store`.
    public init(store: any ReplicaStore) {
        self.store = store
    }

    /// Its generations, snapshots and restore points.
    ///
    /// - Parameter keys: Keys to check every MAC with (the first that verifies a generation's manifest checks the
    ///   rest of it); none: checksums and structure only.
    /// - Throws: ``ReplicationError`` from the store.
    public func catalog(verifyingWith keys: [VerificationKey] = []) async throws -> ReplicaCatalog {
        try await ReplicaCatalog.load(from: store, keys: keys)
    }

    /// Writes the database as it was at `target` into a new file at `path`, byte for byte as the source file was
    /// at that point (checkpointed): the snapshot's bytes, then every log frame up to the restore point applied,
    /// cut to the size its last commit gives.
    ///
    /// The newest state or an error: `.latest` (and `.time`) stop, naming the object, when anything newer than the
    /// point they would choose cannot be read (a damaged or missing manifest, a generation whose snapshot never
    /// completed, two generations with one sequence number, a generation of another replica); only a target that
    /// names a generation or point restores something older on purpose. Generations are ordered by their sequence
    /// numbers, never by a host's clock.
    ///
    /// With verification keys in `options`, every object's MAC is checked first (a forged, replayed, cut or foreign
    /// object stops the restore as ``ReplicationError/Kind/notAuthentic``). Every object is checked against its
    /// SHA-256 as it is downloaded, and every frame against the log's own salts and running checksum; the first
    /// object that fails stops the restore, and the error names it and the last restore point before it. The file
    /// is written under a temporary name beside `path` (mode 0600), flushed, opened and checked with the keys when
    /// there are any, and only then linked into place: an existing file is never overwritten unless `options`
    /// replace it (`replacesExisting: true`; then renamed over, atomically).
    ///
    /// What no check can find: someone who can delete objects from the store can remove its newest ones, and what
    /// is left is an older replica that verifies. ``RestoreReport/newestPoint`` says how recent the replica is.
    ///
    /// - Returns: What was written.
    /// - Throws: ``ReplicationError``: `destinationExists`; `notFound` (an empty replica, no such restore point);
    ///   `damaged` (an object does not match its checksum, a segment is missing, frames do not follow on, something
    ///   newer than the point cannot be read); `notAuthentic`; errors of the store. ``DatabaseError``: `wrongKey`
    ///   (no given key opens the result), `verificationFailed`, file-system errors. Nothing is left at `path` then.
    public func restore(
        to path: String, at target: RestoreTarget = .latest, options: RestoreOptions = RestoreOptions()
    ) async throws -> RestoreReport {
        try await restoreKeepingPosition(to: path, at: target, options: options).report
    }

    /// ``restore(to:at:options:)``, also saying where in the source's log the restored file stands (after the last
    /// frame applied; `nil` when no log was applied and the snapshot has none), and from which catalog and plan:
    /// a follower goes on from there.
    func restoreKeepingPosition(
        to path: String, at target: RestoreTarget, options: RestoreOptions
    ) async throws -> (report: RestoreReport, position: WALPosition?, plan: RestorePlan, catalog: ReplicaCatalog) {
        try await restoreKeepingPosition(to: path, options: options) { try $0.plan(for: target) }
    }

    /// ``restoreKeepingPosition(to:at:options:)`` of the plan `choose` makes from the catalog (a follower's
    /// ``ReplicaCatalog/planFollowingStart()``).
    func restoreKeepingPosition(
        to path: String, options: RestoreOptions, choosing choose: (ReplicaCatalog) throws -> RestorePlan
    ) async throws -> (report: RestoreReport, position: WALPosition?, plan: RestorePlan, catalog: ReplicaCatalog) {
        var status = stat()
        if !options.replacesExisting && lstat(path, &status) == 0 {
            throw ReplicationError(.destinationExists, "\(path) exists; nothing was written", remedy: .replaceOnPurpose)
        }
        let catalog = try await catalog(verifyingWith: options.verificationKeys)
        let plan = try choose(catalog)
        let replacement = try AtomicReplacement(
            destination: path, policy: options.replacesExisting ? .replaceExisting : .createNew, operation: "restore")
        do {
            let (byteCount, position) = try await write(
                plan, into: replacement.temporaryPath, progress: options.progress)
            var verification: (name: String, report: IntegrityReport)?
            try replacement.commit { temporaryPath in
                guard !options.verificationKeys.isEmpty else { return }
                verification = try RestoreVerification.verify(
                    temporaryPath, keys: options.verificationKeys, generation: plan.generation, point: plan.point)
            }
            var authenticatedWith: String?
            if case .verified(let name) = plan.generation.authenticity { authenticatedWith = name }
            let report = RestoreReport(
                point: plan.point, path: replacement.destination, byteCount: byteCount,
                snapshotIndex: plan.snapshot.index, segmentCount: plan.segments.count,
                verifiedWith: verification?.name, integrity: verification?.report, newestPoint: catalog.newestPoint,
                authenticatedWith: authenticatedWith)
            return (report, position, plan, catalog)
        } catch {
            replacement.abandon()
            throw error
        }
    }

    /// Downloads, checks and writes the plan's objects into the (empty) file at `path`.
    ///
    /// - Returns: The file's final size, and the position in the source's log after the last frame applied.
    private func write(
        _ plan: RestorePlan, into path: String, progress: (@Sendable (RestoreProgress) -> Void)?
    ) async throws -> (byteCount: Int64, position: WALPosition?) {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw fileSystemFailure("cannot open \(path)") }
        defer { close(descriptor) }
        let total = plan.snapshot.byteCount + plan.segments.reduce(0) { $0 + $1.byteCount }
        var completed: Int64 = 0
        progress?(RestoreProgress(completedByteCount: 0, totalByteCount: total))

        let snapshot = plan.snapshot
        var offset: Int64 = 0
        for (number, part) in snapshot.manifest.parts.enumerated() {
            let key = snapshot.partKey(number)
            let bytes = try await download(key, plan: plan, failingAt: snapshot.index)
            guard Int64(bytes.count) == part.byteCount, SHA256.hex(bytes) == part.sha256 else {
                throw damaged(key, plan: plan, failingAt: snapshot.index)
            }
            try bytes.withUnsafeBytes { try writeFully(descriptor, $0, at: offset, path: path) }
            offset += part.byteCount
            completed += part.byteCount
            progress?(RestoreProgress(completedByteCount: completed, totalByteCount: total))
        }
        guard offset == snapshot.byteCount else {
            throw damaged(snapshot.partKey(0), plan: plan, failingAt: snapshot.index)
        }

        var frames = FrameApplier(
            position: snapshot.isExact ? snapshot.manifest.logPosition : nil, pageSize: plan.generation.pageSize ?? 0)
        for segment in plan.segments {
            let bytes = try await downloadSegment(segment, of: plan.generation)
            // Each page is at its number's offset: the page's own size (the segment's log's) places it.
            try frames.apply(bytes, of: segment, in: plan.generation, operation: "restore") { page, bytes, _ in
                try writeFully(descriptor, bytes, at: Int64(page - 1) * Int64(bytes.count), path: path)
            }
            completed += segment.byteCount
            progress?(RestoreProgress(completedByteCount: completed, totalByteCount: total))
        }
        let size = frames.databasePageCount.map { Int64($0) * Int64(frames.pageSize) } ?? snapshot.byteCount
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw fileSystemFailure("cannot size \(path)") }
        guard fsync(descriptor) == 0 else { throw fileSystemFailure("cannot flush \(path)") }
        return (size, frames.position)
    }

    /// Downloads a segment and checks it against the SHA-256 its name carries.
    ///
    /// - Throws: ``ReplicationError`` (`damaged`: missing or not matching, naming the last good point); the
    ///   store's errors.
    func downloadSegment(
        _ segment: ReplicaSegment, of generation: ReplicaGeneration, operation: String = "restore"
    ) async throws -> [UInt8] {
        let lastGood = generation.lastGoodPoint(before: segment.index)
        let bytes: [UInt8]
        do {
            bytes = try await store.get(segment.key)
        } catch let error as ReplicationError where error.kind == .notFound {
            throw ReplicationError(
                .damaged,
                "\(segment.key) is missing from the store; \(operation) stopped"
                    + ReplicaGeneration.lastGoodText(lastGood),
                remedy: .nameRestorePoint(lastGood: lastGood))
        }
        guard SHA256.hex(bytes) == segment.sha256 else {
            throw ReplicationError(
                .damaged,
                "\(segment.key) does not match its SHA-256 (the object is damaged); \(operation) stopped"
                    + ReplicaGeneration.lastGoodText(lastGood),
                remedy: .nameRestorePoint(lastGood: lastGood))
        }
        return bytes
    }

    private func download(_ key: String, plan: RestorePlan, failingAt index: Int) async throws -> [UInt8] {
        do {
            return try await store.get(key)
        } catch let error as ReplicationError where error.kind == .notFound {
            let lastGood = plan.generation.lastGoodPoint(before: index)
            throw ReplicationError(
                .damaged, "\(key) is missing from the store; restore stopped" + ReplicaGeneration.lastGoodText(lastGood),
                remedy: .nameRestorePoint(lastGood: lastGood))
        }
    }

    private func damaged(_ key: String, plan: RestorePlan, failingAt index: Int) -> ReplicationError {
        let lastGood = plan.generation.lastGoodPoint(before: index)
        return ReplicationError(
            .damaged,
            "\(key) does not match its SHA-256 (the object is damaged); restore stopped"
                + ReplicaGeneration.lastGoodText(lastGood),
            remedy: .nameRestorePoint(lastGood: lastGood))
    }
}

/// Checks log frames as SQLite would (salts, running checksum) and that each segment follows on from the one
/// before, and hands each page to a writer: the file being restored, or a follower's log.
struct FrameApplier {
    struct Problem: Error {
        let reason: String
    }

    /// The log being applied and how far; `nil` before the first log.
    var position: WALPosition?
    var pageSize: Int
    /// The size the last commit applied gives; `nil` until one is applied.
    var databasePageCount: UInt32?

    init(position: WALPosition?, pageSize: Int) {
        self.position = position
        self.pageSize = position?.pageSize ?? pageSize
    }

    /// ``apply(_:startsLog:write:)`` for a segment of `generation`, its problems as ``ReplicationError``
    /// (`damaged`, naming the segment and the last good point).
    mutating func apply(
        _ bytes: [UInt8], of segment: ReplicaSegment, in generation: ReplicaGeneration, operation: String,
        write: (_ pageNumber: UInt32, _ page: UnsafeRawBufferPointer, _ commitPageCount: UInt32) throws -> Void
    ) throws {
        do {
            try apply(bytes, startsLog: segment.startsLog, write: write)
        } catch let problem as Problem {
            let lastGood = generation.lastGoodPoint(before: segment.index)
            throw ReplicationError(
                .damaged,
                "\(segment.key) does not follow on from the segment before it (\(problem.reason)); \(operation)"
                    + " stopped" + ReplicaGeneration.lastGoodText(lastGood),
                remedy: .nameRestorePoint(lastGood: lastGood))
        }
    }

    /// Checks every frame of `bytes` and hands its page to `write` (with the database's size in pages after the
    /// transaction for a commit frame, 0 for the others). The state moves only when the whole segment checks out;
    /// a problem part-way leaves pages written that the caller must discard (a temporary file, an append not
    /// committed).
    mutating func apply(
        _ bytes: [UInt8], startsLog: Bool,
        write: (_ pageNumber: UInt32, _ page: UnsafeRawBufferPointer, _ commitPageCount: UInt32) throws -> Void
    ) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            var running: WALPosition
            if startsLog {
                guard let header = WALFormat.Header(buffer) else { throw Problem(reason: "its log header is not valid") }
                if let position, !position.isRestarted(as: header), !position.isStart(of: header) {
                    throw Problem(reason: "its log is not the restart of the log before it")
                }
                running = WALPosition(start: header)
                offset = WALFormat.headerSize
            } else {
                guard let position else { throw Problem(reason: "it continues a log that was never started") }
                running = position
            }
            let frameSize = running.frameSize
            guard (buffer.count - offset) % frameSize == 0, buffer.count > offset else {
                throw Problem(reason: "its size is not a whole number of frames")
            }
            var lastWasCommit = false
            var pageCount = databasePageCount
            while offset < buffer.count {
                let frame = UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + frameSize)])
                guard let (header, checksum) = WALFormat.validate(frame: frame, at: running) else {
                    throw Problem(reason: "frame \(running.frame + 1) of its log fails its salt or checksum check")
                }
                try write(
                    header.pageNumber, UnsafeRawBufferPointer(rebasing: frame[WALFormat.frameHeaderSize...]),
                    header.databasePageCountAfterCommit)
                running.frame += 1
                running.checksum = checksum
                lastWasCommit = header.isCommit
                if header.isCommit {
                    running.databasePageCount = header.databasePageCountAfterCommit
                    pageCount = header.databasePageCountAfterCommit
                }
                offset += frameSize
            }
            guard lastWasCommit else { throw Problem(reason: "it does not end with a commit") }
            position = running
            pageSize = running.pageSize
            databasePageCount = pageCount
        }
    }
}
#endif
