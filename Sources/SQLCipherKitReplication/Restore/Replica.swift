#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A replica in a store: list it, restore from it, prune it. None of this needs the database key: a restore writes
/// the stored (encrypted) bytes back; a key is used only to verify the result when one is given.
///
/// ```swift
/// let replica = Replica(store: try FolderReplicaStore(root: "/mnt/replica/notes"))
/// let report = try await replica.restore(to: "/srv/notes-restored.db", at: .time(cutoff))
/// print("restored \(report.point), \(report.byteCount) bytes")
/// ```
public struct Replica: Sendable {
    /// Where the replica is.
    public let store: any ReplicaStore

    /// A replica in `store`.
    public init(store: any ReplicaStore) {
        self.store = store
    }

    /// Its generations, snapshots and restore points.
    ///
    /// - Throws: ``ReplicationError`` from the store.
    public func catalog() async throws -> ReplicaCatalog {
        try await ReplicaCatalog.load(from: store)
    }

    /// Writes the database as it was at `target` into a new file at `path`, byte for byte as the source file was
    /// at that point (checkpointed): the snapshot's bytes, then every log frame up to the restore point applied,
    /// cut to the size its last commit gives.
    ///
    /// Every object is checked against its SHA-256 as it is downloaded, and every frame against the log's own salts
    /// and running checksum; the first object that fails stops the restore, and the error names it and the last
    /// restore point before it. The file is written under a temporary name beside `path` (mode 0600), flushed,
    /// verified with `options.verificationKeys` when there are any, and only then linked into place: an existing
    /// file is never overwritten unless `options.replacesExisting` (then renamed over, atomically).
    ///
    /// - Returns: What was written.
    /// - Throws: ``ReplicationError``: `destinationExists`; `notFound` (no such restore point); `damaged` (an object
    ///   does not match its checksum, a segment is missing, frames do not follow on); `wrongKey` (no given key opens
    ///   the result); `verificationFailed`; errors of the store. Nothing is left at `path` then.
    public func restore(
        to path: String, at target: RestoreTarget = .latest, options: RestoreOptions = RestoreOptions()
    ) async throws -> RestoreReport {
        var status = stat()
        if !options.replacesExisting && lstat(path, &status) == 0 {
            throw ReplicationError(
                .destinationExists, "\(path) exists; nothing was written (an existing file is replaced only when asked to)")
        }
        let plan = try RestorePlan(catalog: try await catalog(), target: target)
        let replacement: AtomicReplacement
        do {
            replacement = try AtomicReplacement(
                destination: path, policy: options.replacesExisting ? .replaceExisting : .createNew,
                operation: "restore")
        } catch let error as DatabaseError {
            throw ReplicationError(error.kind == .fileSystem ? .fileSystem : .invalidArgument, error.message)
        }
        do {
            let byteCount = try await write(plan, into: replacement.temporaryPath, progress: options.progress)
            var verification: (name: String, report: IntegrityReport)?
            try replacement.commit { temporaryPath in
                guard !options.verificationKeys.isEmpty else { return }
                verification = try RestoreVerification.verify(
                    temporaryPath, keys: options.verificationKeys, generation: plan.generation, point: plan.point)
            }
            return RestoreReport(
                point: plan.point, path: replacement.destination, byteCount: byteCount,
                snapshotIndex: plan.snapshot.index, segmentCount: plan.segments.count,
                verifiedWith: verification?.name, integrity: verification?.report)
        } catch {
            replacement.abandon()
            if let error = error as? DatabaseError {
                throw ReplicationError(.fileSystem, error.message)
            }
            throw error
        }
    }

    /// Downloads, checks and writes the plan's objects into the (empty) file at `path`.
    ///
    /// - Returns: The file's final size.
    private func write(
        _ plan: RestorePlan, into path: String, progress: (@Sendable (RestoreProgress) -> Void)?
    ) async throws -> Int64 {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw ReplicationError.fileSystem("cannot open \(path)") }
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
            descriptor: descriptor, path: path, position: snapshot.isExact ? snapshot.manifest.logPosition : nil,
            pageSize: plan.generation.pageSize ?? 0)
        for segment in plan.segments {
            let bytes = try await download(segment.key, plan: plan, failingAt: segment.index)
            guard SHA256.hex(bytes) == segment.sha256 else {
                throw damaged(segment.key, plan: plan, failingAt: segment.index)
            }
            do {
                try frames.apply(bytes, startsLog: segment.startsLog)
            } catch let problem as FrameApplier.Problem {
                throw ReplicationError(
                    .damaged,
                    "\(segment.key) does not follow on from the segment before it (\(problem.reason)); restore"
                        + " stopped" + RestorePlan.lastGoodHint(plan.generation, before: segment.index))
            }
            completed += segment.byteCount
            progress?(RestoreProgress(completedByteCount: completed, totalByteCount: total))
        }
        let size = frames.databasePageCount.map { Int64($0) * Int64(frames.pageSize) } ?? snapshot.byteCount
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw ReplicationError.fileSystem("cannot size \(path)") }
        guard fsync(descriptor) == 0 else { throw ReplicationError.fileSystem("cannot flush \(path)") }
        return size
    }

    private func download(_ key: String, plan: RestorePlan, failingAt index: Int) async throws -> [UInt8] {
        do {
            return try await store.get(key)
        } catch let error as ReplicationError where error.kind == .notFound {
            throw ReplicationError(
                .damaged,
                "\(key) is missing from the store; restore stopped" + RestorePlan.lastGoodHint(plan.generation, before: index))
        }
    }

    private func damaged(_ key: String, plan: RestorePlan, failingAt index: Int) -> ReplicationError {
        ReplicationError(
            .damaged,
            "\(key) does not match its SHA-256 (the object is damaged); restore stopped"
                + RestorePlan.lastGoodHint(plan.generation, before: index))
    }
}

/// Applies log frames to the file being restored, checking them as SQLite would (salts, running checksum), and
/// that each segment follows on from the one before.
struct FrameApplier {
    struct Problem: Error {
        let reason: String
    }

    let descriptor: CInt
    let path: String
    /// The log being applied and how far; `nil` before the first log.
    var position: WALPosition?
    var pageSize: Int
    /// The size the last commit applied gives; `nil` until one is applied.
    var databasePageCount: UInt32?

    init(descriptor: CInt, path: String, position: WALPosition?, pageSize: Int) {
        self.descriptor = descriptor
        self.path = path
        self.position = position
        self.pageSize = position?.pageSize ?? pageSize
    }

    mutating func apply(_ bytes: [UInt8], startsLog: Bool) throws {
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
            while offset < buffer.count {
                let frame = UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + frameSize)])
                guard let (header, checksum) = WALFormat.validate(frame: frame, at: running) else {
                    throw Problem(reason: "frame \(running.frame + 1) of its log fails its salt or checksum check")
                }
                let page = UnsafeRawBufferPointer(rebasing: frame[WALFormat.frameHeaderSize...])
                let pageOffset = Int64(header.pageNumber - 1) * Int64(running.pageSize)
                try writeFully(descriptor, page, at: pageOffset, path: path)
                running.frame += 1
                running.checksum = checksum
                lastWasCommit = header.isCommit
                if header.isCommit {
                    running.databasePageCount = header.databasePageCountAfterCommit
                    databasePageCount = header.databasePageCountAfterCommit
                }
                offset += frameSize
            }
            guard lastWasCommit else { throw Problem(reason: "it does not end with a commit") }
            position = running
            pageSize = running.pageSize
        }
    }
}
#endif
