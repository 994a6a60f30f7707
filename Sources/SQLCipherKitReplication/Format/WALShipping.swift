#if Replication  // trait Replication (Package.swift)
import SQLCipherKit

/// What shipping needs of a write-ahead log beyond reading it (``WALFormat``): runs of whole transactions as raw bytes
/// with their SHA-256, read twice where SQLite may still rewrite them, and the proof that a restarted log goes on
/// from what was shipped. No key and no SQLite: frames are checked as SQLite checks them (salts, running checksums).
enum WALShipping {
    /// A run of whole transactions in the log file: the bytes from `offset` (the log's header included when the run
    /// starts the log), the position after its last commit frame, and the SHA-256 of those bytes.
    struct CommittedRun: Sendable {
        let start: WALPosition
        let end: WALPosition
        let offset: Int64
        let length: Int64
        let sha256: String

        var frameCount: Int { Int(end.frame - start.frame) }
    }

    /// The committed frames after `position`, up to about `maximumBytes` (at least one transaction, however large).
    ///
    /// The writer may be appending while this reads. SQLite rewrites the frames of a transaction that is not yet
    /// committed in place (a page written twice) and then recomputes their checksums, so a commit frame can look
    /// valid for a moment over pages that are about to change. With `readTwice` the frames are read a second time
    /// and only the transactions whose checksums agree in both reads are returned: such a commit frame was written
    /// after every in-place rewrite of its transaction.
    ///
    /// - Parameters:
    ///   - position: Where to start; must be in the file's current log (the caller checked its header).
    ///   - includesHeader: Whether the run starts with the log's 32-byte header (`position` is at frame 0).
    /// - Returns: `nil` when no whole transaction follows `position`.
    static func committedRun(
        in file: ReadOnlyFile, after position: WALPosition, includesHeader: Bool, maximumBytes: Int64,
        readTwice: Bool
    ) throws -> CommittedRun? {
        var commits: [UInt32: WALFormat.Checksum]?
        if readTwice {
            var seen: [UInt32: WALFormat.Checksum] = [:]
            guard try WALFormat.walkCommits(in: file, from: position, maximumBytes: maximumBytes, onCommit: { end in
                seen[end.frame] = end.checksum
                return true
            }) != nil else { return nil }
            commits = seen
        }
        let hasher = SHA256()
        if includesHeader {
            let header = try file.read(count: WALFormat.headerSize, at: 0)
            guard header.count == WALFormat.headerSize,
                  header.withUnsafeBytes({ WALFormat.Header($0) }).map(position.isIn) == true
            else { return nil }
            hasher.update(header)
        }
        var agreed: (end: WALPosition, digest: SHA256)?
        _ = try WALFormat.walkCommits(in: file, from: position, maximumBytes: maximumBytes, hasher: hasher) { end in
            if let commits, commits[end.frame] != end.checksum { return false }
            agreed = (end, hasher.copy())
            return true
        }
        guard let agreed else { return nil }
        let offset = includesHeader ? 0 : position.endOffset
        return CommittedRun(
            start: position, end: agreed.end, offset: offset, length: agreed.end.endOffset - offset,
            sha256: agreed.digest.finishHex())
    }

    /// The position after the log's last commit frame following `position` (no hashing); `nil` when there is none.
    static func lastCommit(in file: ReadOnlyFile, after position: WALPosition) throws -> WALPosition? {
        try WALFormat.walkCommits(in: file, from: position)
    }

    /// The position after the commit frame whose running checksum is `checksum`; `nil` when no commit frame after
    /// `position` has it.
    static func commit(
        in file: ReadOnlyFile, after position: WALPosition, withChecksum checksum: WALFormat.Checksum
    ) throws -> WALPosition? {
        var found: WALPosition?
        _ = try WALFormat.walkCommits(in: file, from: position) { end in
            if end.checksum == checksum { found = end }
            return found == nil
        }
        return found
    }

    /// Whether the log in `file` (its header `header`) is the one SQLite began when it restarted the log whose last
    /// frame is the commit frame carrying `end` (that log's salts and the running checksum after the frame), with
    /// nothing written to that log after it.
    ///
    /// SQLite restarts a log only once every frame of it is in the main file; the restart adds one to salt-1 and
    /// writes the new log over the old one from the first slot. The new log goes on from `end` when:
    /// 1. its salt-1 is the old log's plus one (one restart, not two);
    /// 2. the old log's frame carrying `end` is still in the file, past the new log's frames;
    /// 3. the slot after that frame holds a whole frame that does not continue the old log (a frame of an older log).
    ///
    /// Without 3 the old log may have gone on past `end`, and those frames reached the main file without being read
    /// here. When 2 or 3 cannot be checked (the new log has reached that far, the old log was the longest this file
    /// held, or the file was truncated, as a TRUNCATE checkpoint does) the answer is `false`: nothing proves it.
    static func isRestart(
        in file: ReadOnlyFile, header: WALFormat.Header,
        of end: (salt1: UInt32, salt2: UInt32, checksum: WALFormat.Checksum)
    ) throws -> Bool {
        var oldLog = WALPosition(start: header)
        oldLog.salt1 = end.salt1
        oldLog.salt2 = end.salt2
        oldLog.checksum = end.checksum
        guard oldLog.isRestarted(as: header) else { return false }
        let frameSize = header.frameSize
        let slotCount = max(0, (try file.size() - Int64(WALFormat.headerSize)) / Int64(frameSize))
        var found: Int64?
        try WALFormat.forEachFrame(in: file, pageSize: header.pageSize, from: 1) { number, frame in
            let frameHeader = WALFormat.FrameHeader(frame)
            if frameHeader.salt1 == end.salt1, frameHeader.salt2 == end.salt2, frameHeader.checksum == end.checksum {
                found = number - 1
                return false
            }
            return true
        }
        guard let found, found + 1 < slotCount else { return false }
        let next = try file.read(count: frameSize, at: Int64(WALFormat.headerSize) + (found + 1) * Int64(frameSize))
        return next.count == frameSize && next.withUnsafeBytes { WALFormat.validate(frame: $0, at: oldLog) } == nil
    }
}
#endif
