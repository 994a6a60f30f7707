/// A point in a write-ahead log: which log (its header) and how far into it (the last frame counted, and the running
/// checksum after it), with the database size the last commit gave. Nothing in it is secret: salts and checksums are
/// plaintext in the log's frame headers.
#if Replication  // trait Replication (Package.swift)
struct WALPosition: Hashable, Sendable, Codable {
    var salt1: UInt32
    var salt2: UInt32
    var checkpointSequence: UInt32
    var pageSize: Int
    var isBigEndianChecksum: Bool
    /// The last frame counted; 0 before the first frame.
    var frame: UInt32
    /// The running checksum after ``frame`` (the header's checksum when `frame` is 0).
    var checksum: WALFormat.Checksum
    /// The database size in pages after the commit at ``frame``; 0 when `frame` is 0.
    var databasePageCount: UInt32

    /// The start of a log: before its first frame.
    init(start header: WALFormat.Header) {
        salt1 = header.salt1
        salt2 = header.salt2
        checkpointSequence = header.checkpointSequence
        pageSize = header.pageSize
        isBigEndianChecksum = header.isBigEndianChecksum
        frame = 0
        checksum = header.checksum
        databasePageCount = 0
    }

    /// Whether `header` starts the log this position is in.
    func isIn(_ header: WALFormat.Header) -> Bool {
        header.salt1 == salt1 && header.salt2 == salt2 && header.checkpointSequence == checkpointSequence
            && header.pageSize == pageSize
    }

    /// Whether both positions are in the same log.
    func isSameLog(as other: WALPosition) -> Bool {
        other.salt1 == salt1 && other.salt2 == salt2 && other.checkpointSequence == checkpointSequence
            && other.pageSize == pageSize
    }

    /// Whether `header` is the log SQLite starts after a complete checkpoint of this one: salt-1 plus one, the
    /// same page size.
    ///
    /// The checkpoint sequence is not compared. SQLite writes into a new log's header the count kept by the
    /// connection that restarts the log, and a connection learns the count from the file only when it is the one
    /// that recovered the log. So another connection (the writer of a process started after a crash, a second pool)
    /// restarts a log with sequence 1 whatever the log before had. Salt-1 comes from the header all connections
    /// share, and every restart adds exactly one to it.
    func isRestarted(as header: WALFormat.Header) -> Bool {
        header.salt1 == salt1 &+ 1 && header.pageSize == pageSize
    }

    /// Whether this position is the start of the log `header` begins (before its first frame): a segment that
    /// starts that log continues from here. An exact snapshot taken while the replicator stood at the start of a new
    /// log whose header it had not shipped yet records such a position.
    func isStart(of header: WALFormat.Header) -> Bool {
        frame == 0 && isIn(header) && checksum == header.checksum
    }

    /// The header fields needed to check frames against (its checksum is not kept: `checksum` is where checking goes
    /// on from).
    var frameCheck: (salt1: UInt32, salt2: UInt32, pageSize: Int, isBigEndian: Bool) {
        (salt1, salt2, pageSize, isBigEndianChecksum)
    }

    var frameSize: Int { WALFormat.frameHeaderSize + pageSize }

    /// The byte offset just after ``frame`` in the log file.
    var endOffset: Int64 {
        Int64(WALFormat.headerSize) + Int64(frame) * Int64(frameSize)
    }
}

extension WALFormat {
    /// Checks one frame against a position's log and running checksum (see ``validate(frame:header:after:)``).
    static func validate(frame: UnsafeRawBufferPointer, at position: WALPosition) -> (FrameHeader, Checksum)? {
        let check = position.frameCheck
        let frameSize = frameHeaderSize + check.pageSize
        guard frame.count >= frameSize else { return nil }
        let frameHeader = FrameHeader(frame)
        guard frameHeader.pageNumber != 0, frameHeader.salt1 == check.salt1, frameHeader.salt2 == check.salt2
        else { return nil }
        let checksum = position.checksum
            .continued(over: UnsafeRawBufferPointer(rebasing: frame[0..<8]), bigEndian: check.isBigEndian)
            .continued(
                over: UnsafeRawBufferPointer(rebasing: frame[frameHeaderSize..<frameSize]), bigEndian: check.isBigEndian)
        guard checksum == frameHeader.checksum else { return nil }
        return (frameHeader, checksum)
    }
}
#endif
