/// SQLite's write-ahead log as it is on disk (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header,
/// then frames of a 24-byte header and one page each. The one reader of the format: `verify`'s
/// ``WriteAheadLogReport`` and replication's shipping both read the log through it.
///
/// SQLCipher encrypts the page of every frame; the frame headers (page number, commit size, salts, checksums) stay
/// plaintext, and the checksums cover the encrypted page. So everything here reads and checks ciphertext: no key.
package enum WALFormat {
    package static let headerSize = 32
    package static let frameHeaderSize = 24
    /// The magic number; its lowest bit says whether the checksums read the words big-endian.
    package static let magicLittleEndian: UInt32 = 0x377f_0682
    package static let magicBigEndian: UInt32 = 0x377f_0683
    package static let formatVersion: UInt32 = 3_007_000

    /// The running checksum pair: each frame's checksum continues the one before it, starting from the header's.
    package struct Checksum: Hashable, Sendable, Codable {
        package var first: UInt32
        package var second: UInt32

        package init(first: UInt32, second: UInt32) {
            self.first = first
            self.second = second
        }

        package static let zero = Checksum(first: 0, second: 0)

        /// Continues SQLite's checksum over `bytes` (a multiple of 8 bytes long): 32-bit words in the byte order the
        /// log's magic names, summed in pairs.
        package func continued(over bytes: UnsafeRawBufferPointer, bigEndian: Bool) -> Checksum {
            var (first, second) = (self.first, self.second)
            var index = 0
            while index + 8 <= bytes.count {
                let word0 = bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self)
                let word1 = bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self)
                first &+= (bigEndian ? UInt32(bigEndian: word0) : UInt32(littleEndian: word0)) &+ second
                second &+= (bigEndian ? UInt32(bigEndian: word1) : UInt32(littleEndian: word1)) &+ first
                index += 8
            }
            return Checksum(first: first, second: second)
        }
    }

    /// The header: page size, checkpoint sequence, the salts every valid frame repeats, and its own checksum.
    package struct Header: Hashable, Sendable {
        package let isBigEndianChecksum: Bool
        package let pageSize: Int
        package let checkpointSequence: UInt32
        package let salt1: UInt32
        package let salt2: UInt32
        /// The checksum of the header's first 24 bytes, where the frames' running checksum starts.
        package let checksum: Checksum

        /// Parses and checks a header; `nil` when the bytes are not a valid WAL header (no WAL yet, a torn write, a
        /// foreign file). ``inspect(_:)`` says why.
        package init?(_ bytes: UnsafeRawBufferPointer) {
            guard case .valid(let header) = Self.inspect(bytes) else { return nil }
            self = header
        }

        private init(
            isBigEndianChecksum: Bool, pageSize: Int, checkpointSequence: UInt32, salt1: UInt32, salt2: UInt32,
            checksum: Checksum
        ) {
            self.isBigEndianChecksum = isBigEndianChecksum
            self.pageSize = pageSize
            self.checkpointSequence = checkpointSequence
            self.salt1 = salt1
            self.salt2 = salt2
            self.checksum = checksum
        }

        /// What the first 32 bytes of a log are.
        package enum Inspection {
            /// Shorter than a header.
            case tooShort
            case valid(Header)
            /// Not a header SQLite reads; the page size when it is a valid one, and the salts it names.
            case invalid(WriteAheadLogReport.HeaderProblem, pageSize: Int?, salt1: UInt32, salt2: UInt32,
                         isBigEndianChecksum: Bool, storedChecksum: Checksum)
        }

        package static func inspect(_ bytes: UnsafeRawBufferPointer) -> Inspection {
            guard bytes.count >= WALFormat.headerSize else { return .tooShort }
            let magic = readBigEndian(bytes, 0)
            let bigEndian = magic & 1 == 1
            let rawPageSize = Int(readBigEndian(bytes, 8))
            // 65536 is stored as 1 in the database header, but as itself here.
            let pageSize = rawPageSize >= 512 && rawPageSize <= 65536 && rawPageSize & (rawPageSize - 1) == 0
                ? rawPageSize : nil
            let salt1 = readBigEndian(bytes, 16)
            let salt2 = readBigEndian(bytes, 20)
            let stored = Checksum(first: readBigEndian(bytes, 24), second: readBigEndian(bytes, 28))
            let problem: WriteAheadLogReport.HeaderProblem? =
                if magic & ~1 != WALFormat.magicLittleEndian { .badMagic }
                else if pageSize == nil { .badPageSize }
                else if readBigEndian(bytes, 4) != WALFormat.formatVersion { .unknownVersion }
                else if Checksum.zero.continued(over: UnsafeRawBufferPointer(rebasing: bytes[0..<24]), bigEndian: bigEndian)
                    != stored { .badChecksum }
                else { nil }
            guard let pageSize, problem == nil else {
                return .invalid(
                    problem ?? .badPageSize, pageSize: pageSize, salt1: salt1, salt2: salt2,
                    isBigEndianChecksum: bigEndian, storedChecksum: stored)
            }
            return .valid(Header(
                isBigEndianChecksum: bigEndian, pageSize: pageSize, checkpointSequence: readBigEndian(bytes, 12),
                salt1: salt1, salt2: salt2, checksum: stored))
        }

        package var frameSize: Int { WALFormat.frameHeaderSize + pageSize }
    }

    /// A frame's header.
    package struct FrameHeader: Sendable {
        package let pageNumber: UInt32
        /// The database size in pages after the transaction, for its last frame (the commit frame); 0 otherwise.
        package let databasePageCountAfterCommit: UInt32
        package let salt1: UInt32
        package let salt2: UInt32
        package let checksum: Checksum

        package init(_ bytes: UnsafeRawBufferPointer) {
            pageNumber = readBigEndian(bytes, 0)
            databasePageCountAfterCommit = readBigEndian(bytes, 4)
            salt1 = readBigEndian(bytes, 8)
            salt2 = readBigEndian(bytes, 12)
            checksum = Checksum(first: readBigEndian(bytes, 16), second: readBigEndian(bytes, 20))
        }

        package var isCommit: Bool { databasePageCountAfterCommit != 0 }
    }

    /// The log's header, or `nil` when the file is shorter than a header or its header does not check out (not
    /// written yet, or torn).
    package static func header(of file: ReadOnlyFile) throws -> Header? {
        let bytes = try file.read(count: headerSize, at: 0)
        return bytes.withUnsafeBytes { Header($0) }
    }

    /// Checks one frame against a position's log and running checksum, as SQLite does when it reads the log: the
    /// header's salts, a page number, and the running checksum over the frame header's first 8 bytes and the page.
    ///
    /// - Returns: The frame's header and the running checksum after it; `nil` when SQLite would stop here.
    package static func validate(frame: UnsafeRawBufferPointer, at position: WALPosition) -> (FrameHeader, Checksum)? {
        let frameSize = frameHeaderSize + position.pageSize
        guard frame.count >= frameSize else { return nil }
        let frameHeader = FrameHeader(frame)
        guard frameHeader.pageNumber != 0, frameHeader.salt1 == position.salt1, frameHeader.salt2 == position.salt2
        else { return nil }
        let checksum = position.checksum
            .continued(over: UnsafeRawBufferPointer(rebasing: frame[0..<8]), bigEndian: position.isBigEndianChecksum)
            .continued(
                over: UnsafeRawBufferPointer(rebasing: frame[frameHeaderSize..<frameSize]),
                bigEndian: position.isBigEndianChecksum)
        guard checksum == frameHeader.checksum else { return nil }
        return (frameHeader, checksum)
    }

    /// Calls `body` with each whole frame slot of the log file from frame `first` on (numbered from 1), in order,
    /// read a megabyte at a time, until the end of the file or until `body` returns `false`.
    package static func forEachFrame(
        in file: ReadOnlyFile, pageSize: Int, from first: Int64,
        _ body: (_ number: Int64, _ frame: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        let frameSize = frameHeaderSize + pageSize
        let framesPerRead = max(1, (1 << 20) / frameSize)
        var buffer = [UInt8](repeating: 0, count: framesPerRead * frameSize)
        var number = first
        while true {
            let offset = Int64(headerSize) + (number - 1) * Int64(frameSize)
            let read = try buffer.withUnsafeMutableBytes { try file.read(into: $0, count: $0.count, at: offset) }
            let frameCount = read / frameSize
            if frameCount == 0 { return }
            let goesOn = try buffer.withUnsafeBytes { bytes -> Bool in
                for index in 0..<frameCount {
                    let frame = UnsafeRawBufferPointer(rebasing: bytes[(index * frameSize)..<((index + 1) * frameSize)])
                    guard try body(number + Int64(index), frame) else { return false }
                }
                return true
            }
            if !goesOn || frameCount < framesPerRead { return }
            number += Int64(frameCount)
        }
    }

    /// Every valid frame after `position`, in order, until the first frame SQLite would stop at or the first commit
    /// at or past `maximumBytes`; calls `onCommit` at each commit frame with the position after it (and the hasher,
    /// which has seen every frame up to it), and stops when it returns `false`.
    ///
    /// - Returns: The position after the last commit frame accepted, `nil` when there was none.
    package static func walkCommits(
        in file: ReadOnlyFile, from position: WALPosition, maximumBytes: Int64 = .max, hasher: SHA256? = nil,
        onCommit: (WALPosition) -> Bool = { _ in true }
    ) throws -> WALPosition? {
        var running = position
        var lastCommit: WALPosition?
        let limit = maximumBytes >= Int64.max - position.endOffset ? Int64.max : position.endOffset + max(maximumBytes, 1)
        try forEachFrame(in: file, pageSize: position.pageSize, from: Int64(position.frame) + 1) { _, frame in
            guard let (header, checksum) = validate(frame: frame, at: running) else { return false }
            hasher?.update(frame)
            running.frame += 1
            running.checksum = checksum
            guard header.isCommit else { return true }
            running.databasePageCount = header.databasePageCountAfterCommit
            guard onCommit(running) else { return false }
            lastCommit = running
            return running.endOffset < limit
        }
        return lastCommit
    }
}

/// A point in a write-ahead log: which log (its header) and how far into it (the last frame counted, and the running
/// checksum after it), with the database size the last commit gave. Nothing in it is secret: salts and checksums are
/// plaintext in the log's frame headers.
package struct WALPosition: Hashable, Sendable, Codable {
    package var salt1: UInt32
    package var salt2: UInt32
    package var checkpointSequence: UInt32
    package var pageSize: Int
    package var isBigEndianChecksum: Bool
    /// The last frame counted; 0 before the first frame.
    package var frame: UInt32
    /// The running checksum after ``frame`` (the header's checksum when `frame` is 0).
    package var checksum: WALFormat.Checksum
    /// The database size in pages after the commit at ``frame``; 0 when `frame` is 0.
    package var databasePageCount: UInt32

    /// The start of a log: before its first frame.
    package init(start header: WALFormat.Header) {
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
    package func isIn(_ header: WALFormat.Header) -> Bool {
        header.salt1 == salt1 && header.salt2 == salt2 && header.checkpointSequence == checkpointSequence
            && header.pageSize == pageSize
    }

    /// Whether both positions are in the same log.
    package func isSameLog(as other: WALPosition) -> Bool {
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
    package func isRestarted(as header: WALFormat.Header) -> Bool {
        header.salt1 == salt1 &+ 1 && header.pageSize == pageSize
    }

    /// Whether this position is the start of the log `header` begins (before its first frame): a segment that
    /// starts that log continues from here. An exact snapshot taken while the replicator stood at the start of a new
    /// log whose header it had not shipped yet records such a position.
    package func isStart(of header: WALFormat.Header) -> Bool {
        frame == 0 && isIn(header) && checksum == header.checksum
    }

    package var frameSize: Int { WALFormat.frameHeaderSize + pageSize }

    /// The byte offset just after ``frame`` in the log file.
    package var endOffset: Int64 {
        Int64(WALFormat.headerSize) + Int64(frame) * Int64(frameSize)
    }
}

@inline(__always)
package func readBigEndian(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
    UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
        | UInt32(bytes[offset + 3])
}
