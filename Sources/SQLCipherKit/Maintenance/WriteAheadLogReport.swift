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

    /// Reads and checks a write-ahead log. Nothing is written.
    ///
    /// - Parameter path: The `-wal` file.
    /// - Returns: The report; ``isIntact`` says whether SQLite reads every commit in it.
    /// - Throws: ``DatabaseError/fileSystem`` when the file cannot be opened or read.
    public static func check(path: String) throws -> WriteAheadLogReport {
        guard let file = try ReadOnlyFile(path: path) else {
            throw DatabaseError(.fileSystem, "cannot open \(path) to check it: it does not exist")
        }
        let byteCount = Int(try file.size())
        let headerBytes = try file.read(count: WALFormat.headerSize, at: 0)
        // What SQLite reads: the valid prefix from the header's checksum on. After the first frame SQLite stops at,
        // frames with the header's salts were written to this log and are lost; another salt is where the log ends.
        var salts: (UInt32, UInt32)
        var start: WALPosition?
        let headerProblem: HeaderProblem?
        let pageSize: Int
        switch headerBytes.withUnsafeBytes({ WALFormat.Header.inspect($0) }) {
        case .tooShort:
            return WriteAheadLogReport(
                byteCount: byteCount, headerProblem: nil, pageSize: nil, frameCount: 0, validFrameCount: 0,
                commitCount: 0, firstDamagedFrame: nil, lostCommitCount: 0, lastLostFrame: nil)
        case .valid(let header):
            salts = (header.salt1, header.salt2)
            start = WALPosition(start: header)
            headerProblem = nil
            pageSize = header.pageSize
        case .invalid(let problem, let validPageSize?, let salt1, let salt2, _, _):
            salts = (salt1, salt2)
            headerProblem = problem
            pageSize = validPageSize
        case .invalid(let problem, nil, _, _, _, _):
            return WriteAheadLogReport(
                byteCount: byteCount, headerProblem: problem, pageSize: nil, frameCount: 0, validFrameCount: 0,
                commitCount: 0, firstDamagedFrame: nil, lostCommitCount: 0, lastLostFrame: nil)
        }
        let frameCount = (byteCount - WALFormat.headerSize) / (WALFormat.frameHeaderSize + pageSize)
        var running = start
        var validFrameCount = 0
        var commitCount = 0
        var firstDamagedFrame: Int?
        var lostCommitCount = 0
        var lastLostFrame: Int?
        try WALFormat.forEachFrame(in: file, pageSize: pageSize, from: 1) { number, frame in
            guard number <= frameCount else { return false }
            if let position = running {
                if let (header, checksum) = WALFormat.validate(frame: frame, at: position) {
                    running?.frame += 1
                    running?.checksum = checksum
                    if header.isCommit {
                        validFrameCount = Int(number)
                        commitCount += 1
                    }
                    return true
                }
                running = nil
                let header = WALFormat.FrameHeader(frame)
                if (header.salt1, header.salt2) == salts { firstDamagedFrame = Int(number) }
            }
            let header = WALFormat.FrameHeader(frame)
            guard (header.salt1, header.salt2) == salts else { return false }
            if header.isCommit {
                lostCommitCount += 1
                lastLostFrame = Int(number)
            }
            return true
        }
        return WriteAheadLogReport(
            byteCount: byteCount, headerProblem: headerProblem, pageSize: pageSize, frameCount: frameCount,
            validFrameCount: validFrameCount, commitCount: commitCount, firstDamagedFrame: firstDamagedFrame,
            lostCommitCount: lostCommitCount, lastLostFrame: lastLostFrame)
    }

    /// The size of a log's header.
    static var headerSize: Int { WALFormat.headerSize }
}
