#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a write-ahead log (`-wal`) holds, checked frame by frame as SQLite checks it when it recovers the log, and
/// what SQLite would silently drop.
///
/// ```swift
/// let wal = try WriteAheadLogReport.check(path: "notes.db-wal")
/// if !wal.isIntact { print("frame \(wal.firstDamagedFrame ?? 0): \(wal.lostCommitCount) commits lost") }
/// ```
///
/// SQLite reads a WAL from its first frame and stops at the first frame whose salts differ from the header's (an
/// older generation of the log, never an error) or whose checksum does not match: that frame, and every frame after
/// it, count as never written. A frame changed on disk (one flipped byte is enough) therefore drops its own commit and
/// every later one without an error. This report finds such a frame and counts the commits after it that carry the
/// header's salts: commits that were written and that SQLite will not read.
///
/// The frame headers and checksums are not encrypted (SQLCipher encrypts the pages inside the frames), so the check
/// needs no key. See [the WAL format](https://www.sqlite.org/fileformat2.html#walformat).
public struct WriteAheadLogReport: Sendable, Hashable {
    /// Why SQLite ignores the whole log (or, for ``unknownVersion``, refuses to open the database).
    public enum HeaderProblem: String, Sendable, Hashable {
        /// The first four bytes are neither 0x377f0682 nor 0x377f0683.
        case badMagic
        /// The page size is not a power of two from 512 to 65536.
        case badPageSize
        /// The format version is not 3007000.
        case unknownVersion
        /// The header's checksum does not match its first 24 bytes.
        case badChecksum
    }

    /// The size of the file.
    public let byteCount: Int
    /// Set when the 32-byte header is not valid; `nil` when it is, or when the file is too short to hold one.
    public let headerProblem: HeaderProblem?
    /// The page size the header gives, when it is a valid one.
    public let pageSize: Int?
    /// The whole frames in the file (a partial frame at the end is not counted).
    public let frameCount: Int
    /// The frames SQLite reads: up to the last commit before the first frame it stops at.
    public let validFrameCount: Int
    /// The commits among ``validFrameCount`` frames.
    public let commitCount: Int
    /// The first frame (numbered from 1) with the header's salts whose checksum does not match (or whose page number
    /// is 0); `nil` when there is none.
    public let firstDamagedFrame: Int?
    /// The commits SQLite drops: commit frames with the header's salts from ``firstDamagedFrame`` on (or, with a
    /// ``headerProblem``, all of them).
    public let lostCommitCount: Int
    /// The last frame of the last dropped commit; `nil` when none is dropped.
    public let lastLostFrame: Int?

    /// `true` when SQLite reads every commit the file holds: no commit is dropped, and a header SQLite ignores has no
    /// frames behind it that could not be counted.
    public var isIntact: Bool {
        lostCommitCount == 0 && !(headerProblem != nil && pageSize == nil && byteCount > Self.headerSize)
    }

    /// The frames SQLite drops from the first one it stops at to the end of the last dropped commit.
    public var lostFrameCount: Int {
        lastLostFrame.map { $0 - validFrameCount } ?? 0
    }

    static let headerSize = 32
    static let frameHeaderSize = 24
    static let version = 3_007_000

    /// Reads and checks a write-ahead log. Nothing is written.
    ///
    /// - Parameter path: The `-wal` file.
    /// - Returns: The report; ``isIntact`` says whether SQLite reads every commit in it.
    /// - Throws: ``DatabaseError/fileSystem`` when the file cannot be opened or read.
    public static func check(path: String) throws -> WriteAheadLogReport {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw fileSystemError("cannot open \(path) to check it") }
        defer { closeFileDescriptor(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw fileSystemError("cannot read the size of \(path)") }
        let reader = FileReader(descriptor: descriptor, path: path)
        return try check(byteCount: Int(status.st_size), reader: reader)
    }

    private static func check(byteCount: Int, reader: FileReader) throws -> WriteAheadLogReport {
        guard byteCount >= headerSize else {
            return WriteAheadLogReport(
                byteCount: byteCount, headerProblem: nil, pageSize: nil, frameCount: 0, validFrameCount: 0,
                commitCount: 0, firstDamagedFrame: nil, lostCommitCount: 0, lastLostFrame: nil)
        }
        let header = try reader.read(count: headerSize, at: 0)
        let magic = bigEndianWord(header, at: 0)
        let isBigEndianChecksum = magic & 1 == 1
        let rawPageSize = Int(bigEndianWord(header, at: 8))
        let pageSize = rawPageSize >= 512 && rawPageSize <= 65536 && rawPageSize & (rawPageSize - 1) == 0
            ? rawPageSize : nil
        let salts = (bigEndianWord(header, at: 16), bigEndianWord(header, at: 20))
        let storedChecksum = (bigEndianWord(header, at: 24), bigEndianWord(header, at: 28))
        let headerProblem: HeaderProblem? =
            if magic & ~1 != 0x377f_0682 { .badMagic }
            else if pageSize == nil { .badPageSize }
            else if Int(bigEndianWord(header, at: 4)) != version { .unknownVersion }
            else if checksum(header[0..<24], bigEndian: isBigEndianChecksum, from: (0, 0)) != storedChecksum {
                .badChecksum
            } else { nil }

        guard let pageSize else {
            return WriteAheadLogReport(
                byteCount: byteCount, headerProblem: headerProblem, pageSize: nil, frameCount: 0, validFrameCount: 0,
                commitCount: 0, firstDamagedFrame: nil, lostCommitCount: 0, lastLostFrame: nil)
        }
        let frameSize = frameHeaderSize + pageSize
        let frameCount = (byteCount - headerSize) / frameSize
        var running = storedChecksum
        var isInValidPrefix = headerProblem == nil
        var validFrameCount = 0
        var commitCount = 0
        var firstDamagedFrame: Int?
        var lostCommitCount = 0
        var lastLostFrame: Int?
        var frame = 1
        while frame <= frameCount {
            let offset = headerSize + (frame - 1) * frameSize
            let frameHeader = try reader.read(count: frameHeaderSize, at: offset)
            let pageNumber = bigEndianWord(frameHeader, at: 0)
            let isCommit = bigEndianWord(frameHeader, at: 4) != 0
            let hasHeaderSalts = (bigEndianWord(frameHeader, at: 8), bigEndianWord(frameHeader, at: 12)) == salts
            if isInValidPrefix {
                let page = try reader.read(count: pageSize, at: offset + frameHeaderSize)
                let computed = checksum(
                    page[...], bigEndian: isBigEndianChecksum,
                    from: checksum(frameHeader[0..<8], bigEndian: isBigEndianChecksum, from: running))
                let stored = (bigEndianWord(frameHeader, at: 16), bigEndianWord(frameHeader, at: 20))
                if hasHeaderSalts && pageNumber != 0 && computed == stored {
                    running = computed
                    if isCommit {
                        validFrameCount = frame
                        commitCount += 1
                    }
                    frame += 1
                    continue
                }
                isInValidPrefix = false
                if hasHeaderSalts { firstDamagedFrame = frame }
            }
            // Past the point where SQLite stops: frames of this generation (the header's salts) were written after
            // it; another salt is where this generation ends.
            guard hasHeaderSalts else { break }
            if isCommit {
                lostCommitCount += 1
                lastLostFrame = frame
            }
            frame += 1
        }
        return WriteAheadLogReport(
            byteCount: byteCount, headerProblem: headerProblem, pageSize: pageSize, frameCount: frameCount,
            validFrameCount: validFrameCount, commitCount: commitCount, firstDamagedFrame: firstDamagedFrame,
            lostCommitCount: lostCommitCount, lastLostFrame: lastLostFrame)
    }

    /// SQLite's WAL checksum: 32-bit words in the byte order the magic names, summed in pairs (bytes.count is a
    /// multiple of 8).
    static func checksum(
        _ bytes: ArraySlice<UInt8>, bigEndian: Bool, from initial: (UInt32, UInt32)
    ) -> (UInt32, UInt32) {
        bytes.withUnsafeBytes { checksum($0, bigEndian: bigEndian, from: initial) }
    }

    /// The same over bytes in place (the replicator checks every frame it ships with it).
    package static func checksum(
        _ buffer: UnsafeRawBufferPointer, bigEndian: Bool, from initial: (UInt32, UInt32)
    ) -> (UInt32, UInt32) {
        var (first, second) = initial
        var index = 0
        while index + 8 <= buffer.count {
            let word0 = buffer.loadUnaligned(fromByteOffset: index, as: UInt32.self)
            let word1 = buffer.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self)
            first &+= (bigEndian ? UInt32(bigEndian: word0) : UInt32(littleEndian: word0)) &+ second
            second &+= (bigEndian ? UInt32(bigEndian: word1) : UInt32(littleEndian: word1)) &+ first
            index += 8
        }
        return (first, second)
    }

    static func bigEndianWord(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    /// Reads whole ranges of a file by descriptor.
    private struct FileReader {
        let descriptor: CInt
        let path: String

        func read(count: Int, at offset: Int) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let readCount = bytes.withUnsafeMutableBytes { buffer in
                    pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset + done))
                }
                if readCount < 0 && errno == EINTR { continue }
                guard readCount > 0 else {
                    throw readCount == 0
                        ? DatabaseError(.fileSystem, "\(path) ended at byte \(offset + done) while it was read")
                        : fileSystemError("cannot read \(path) at byte \(offset + done)")
                }
                done += readCount
            }
            return bytes
        }
    }
}
