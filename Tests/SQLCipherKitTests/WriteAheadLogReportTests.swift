import Foundation
import SQLCipherKit
import Testing

/// A write-ahead log written byte by byte as https://www.sqlite.org/fileformat2.html#walformat describes it: a 32-byte
/// header, then frames of a 24-byte header and a page, each checksummed over the ones before it.
struct WALFile {
    struct Frame {
        var pageNumber: UInt32
        /// The database size in pages after the commit; 0 for a frame that is not the last of its transaction.
        var commitSize: UInt32 = 0
        var fill: UInt8 = 0xAB
        /// Other salts than the header's (a frame of an earlier generation of the log).
        var salts: (UInt32, UInt32)?
    }

    var isBigEndianChecksum = false
    var pageSize = 1024
    var salts: (UInt32, UInt32) = (0x1234_5678, 0x0BAD_F00D)
    var frames: [Frame] = []

    func bytes() -> [UInt8] {
        var header = Self.word(isBigEndianChecksum ? 0x377f_0683 : 0x377f_0682) + Self.word(3_007_000)
            + Self.word(UInt32(pageSize)) + Self.word(7) + Self.word(salts.0) + Self.word(salts.1)
        var running = checksum(header, from: (0, 0))
        header += Self.word(running.0) + Self.word(running.1)
        var file = header
        for frame in frames {
            let frameSalts = frame.salts ?? salts
            let start = Self.word(frame.pageNumber) + Self.word(frame.commitSize)
            let page = [UInt8](repeating: frame.fill, count: pageSize)
            let sum = checksum(page, from: checksum(start, from: running))
            if frame.salts == nil { running = sum }
            file += start + Self.word(frameSalts.0) + Self.word(frameSalts.1) + Self.word(sum.0) + Self.word(sum.1) + page
        }
        return file
    }

    /// Pairs of 32-bit words in the checksum's byte order: s0 += x0 + s1, s1 += x1 + s0.
    func checksum(_ bytes: [UInt8], from initial: (UInt32, UInt32)) -> (UInt32, UInt32) {
        var (s0, s1) = initial
        for start in stride(from: 0, to: bytes.count, by: 8) {
            let x0 = Self.read(bytes, start, bigEndian: isBigEndianChecksum)
            let x1 = Self.read(bytes, start + 4, bigEndian: isBigEndianChecksum)
            s0 = s0 &+ x0 &+ s1
            s1 = s1 &+ x1 &+ s0
        }
        return (s0, s1)
    }

    static func word(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    static func read(_ bytes: [UInt8], _ offset: Int, bigEndian: Bool) -> UInt32 {
        let word = bytes[offset..<offset + 4].map(UInt32.init)
        return bigEndian
            ? word[0] << 24 | word[1] << 16 | word[2] << 8 | word[3]
            : word[3] << 24 | word[2] << 16 | word[1] << 8 | word[0]
    }

    /// Three transactions: pages 1-2 (commit at frame 2), page 3 (frame 3), pages 4-5 (frame 5).
    static var threeCommits: WALFile {
        WALFile(frames: [
            Frame(pageNumber: 1), Frame(pageNumber: 2, commitSize: 5), Frame(pageNumber: 3, commitSize: 5),
            Frame(pageNumber: 4), Frame(pageNumber: 5, commitSize: 5),
        ])
    }

    /// The offset of a byte inside frame `frame`'s page (frames numbered from 1).
    func pageByteOffset(frame: Int, byte: Int = 100) -> Int {
        32 + (frame - 1) * (24 + pageSize) + 24 + byte
    }
}

@Suite("A write-ahead log checked frame by frame")
struct WriteAheadLogReportTests {
    static func report(_ bytes: [UInt8]) throws -> WriteAheadLogReport {
        try withTemporaryDirectory { dir in
            let path = dir.path("app.db-wal")
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let before = try fileBytes(path)
            let report = try WriteAheadLogReport.check(path: path)
            #expect(try fileBytes(path) == before, "the check changed the file")
            return report
        }
    }

    @Test("an intact log: every commit is read and nothing is lost (both checksum byte orders)", arguments: [false, true])
    func intact(isBigEndianChecksum: Bool) throws {
        var wal = WALFile.threeCommits
        wal.isBigEndianChecksum = isBigEndianChecksum
        let report = try Self.report(wal.bytes())
        #expect(report.headerProblem == nil)
        #expect(report.pageSize == 1024)
        #expect(report.frameCount == 5)
        #expect(report.validFrameCount == 5)
        #expect(report.commitCount == 3)
        #expect(report.firstDamagedFrame == nil)
        #expect(report.lostCommitCount == 0)
        #expect(report.isIntact)
    }

    @Test("one flipped byte in a committed frame drops its commit and every later one")
    func flippedByte() throws {
        let wal = WALFile.threeCommits
        var bytes = wal.bytes()
        bytes[wal.pageByteOffset(frame: 3)] ^= 0x01
        let report = try Self.report(bytes)
        #expect(report.firstDamagedFrame == 3)
        #expect(report.validFrameCount == 2)
        #expect(report.commitCount == 1)
        #expect(report.lostCommitCount == 2)
        #expect(report.lastLostFrame == 5)
        #expect(report.lostFrameCount == 3)
        #expect(!report.isIntact)

        // In the first frame of a transaction: that transaction is lost too.
        var first = wal.bytes()
        first[wal.pageByteOffset(frame: 1)] ^= 0x80
        let fromStart = try Self.report(first)
        #expect(fromStart.firstDamagedFrame == 1)
        #expect(fromStart.commitCount == 0)
        #expect(fromStart.lostCommitCount == 3)
        #expect(fromStart.lostFrameCount == 5)
    }

    @Test("a checksum byte order that does not match the magic fails at the first frame")
    func wrongByteOrder() throws {
        var bytes = WALFile.threeCommits.bytes()
        bytes[3] = 0x83   // big-endian magic over little-endian checksums: the header's own checksum fails
        let report = try Self.report(bytes)
        #expect(report.headerProblem == .badChecksum)
        #expect(report.lostCommitCount == 3)
        #expect(!report.isIntact)
    }

    @Test("frames of an earlier generation after the last frame are not lost commits")
    func earlierGeneration() throws {
        var wal = WALFile.threeCommits
        wal.frames += [
            .init(pageNumber: 6, commitSize: 6, salts: (0x1234_5677, 0x0000_0001)),
            .init(pageNumber: 7, commitSize: 7, salts: (0x1234_5677, 0x0000_0001)),
        ]
        let report = try Self.report(wal.bytes())
        #expect(report.frameCount == 7)
        #expect(report.validFrameCount == 5)
        #expect(report.firstDamagedFrame == nil)
        #expect(report.lostCommitCount == 0)
        #expect(report.isIntact)
    }

    @Test("an unfinished transaction at the end, even with a torn frame, loses no commit")
    func unfinishedTransaction() throws {
        var wal = WALFile.threeCommits
        wal.frames += [.init(pageNumber: 6), .init(pageNumber: 7)]
        var bytes = wal.bytes()
        bytes[wal.pageByteOffset(frame: 7)] ^= 0x10
        // A partial frame after the whole ones is not a frame.
        bytes += [UInt8](repeating: 0x55, count: 100)
        let report = try Self.report(bytes)
        #expect(report.frameCount == 7)
        #expect(report.validFrameCount == 5)
        #expect(report.commitCount == 3)
        #expect(report.firstDamagedFrame == 7)
        #expect(report.lostCommitCount == 0)
        #expect(report.isIntact)
    }

    @Test("a header SQLite ignores: every commit behind it is lost; an unreadable page size is damage too")
    func damagedHeader() throws {
        var bytes = WALFile.threeCommits.bytes()
        bytes[15] ^= 0x01   // the checkpoint sequence: only the header's checksum tells
        let badChecksum = try Self.report(bytes)
        #expect(badChecksum.headerProblem == .badChecksum)
        #expect(badChecksum.validFrameCount == 0)
        #expect(badChecksum.lostCommitCount == 3)
        #expect(!badChecksum.isIntact)

        var pageSize = WALFile.threeCommits.bytes()
        pageSize[10] = 0x05   // 1024 becomes 1280
        let badPageSize = try Self.report(pageSize)
        #expect(badPageSize.headerProblem == .badPageSize)
        #expect(!badPageSize.isIntact)

        var magic = WALFile.threeCommits.bytes()
        magic[0] = 0
        #expect(try Self.report(magic).headerProblem == .badMagic)
    }

    @Test("an empty log and a header alone hold nothing to lose")
    func empty() throws {
        #expect(try Self.report([]).isIntact)
        let header = try Self.report(Array(WALFile().bytes()))
        #expect(header.frameCount == 0)
        #expect(header.headerProblem == nil)
        #expect(header.isIntact)
    }

    @Test("a real SQLCipher WAL with one flipped byte: the commits the report counts as lost are the ones SQLite drops")
    func realWAL() throws {
        try withTemporaryDirectory { dir in
            let live = dir.path("live.db")
            try EncryptionTests.makeDatabase(live, journalMode: "WAL", rows: 50)
            let db = try Connection(path: live, key: TestKeys.raw)
            try db.execute("PRAGMA wal_autocheckpoint = 0")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for index in 0..<8 {
                try db.execute("INSERT INTO t(body) VALUES (?)", "commit \(index)")
            }
            let copy = dir.path("copy.db")
            try FileManager.default.copyItem(atPath: live, toPath: copy)
            try FileManager.default.copyItem(atPath: live + "-wal", toPath: copy + "-wal")
            db.close()

            let intact = try WriteAheadLogReport.check(path: copy + "-wal")
            #expect(intact.isIntact)
            #expect(intact.commitCount == 8)

            // A byte of the page in the frame that ends the fourth commit.
            var wal = try fileBytes(copy + "-wal")
            let layout = WALFrames(wal)
            let damagedFrame = try #require(layout.frameEnding(commit: 4))
            wal[layout.frames[damagedFrame - 1].pageOffset + layout.pageSize / 2] ^= 0x01
            try Data(wal).write(to: URL(fileURLWithPath: copy + "-wal"))

            let report = try WriteAheadLogReport.check(path: copy + "-wal")
            #expect(report.firstDamagedFrame == damagedFrame)
            #expect(report.commitCount == 3)
            #expect(report.lostCommitCount == 5)
            #expect(!report.isIntact)
            // SQLite, opening it for real, sees the three commits before the damaged frame and none after.
            let reopened = try Connection(path: copy, key: TestKeys.raw)
            #expect(try reopened.scalar("SELECT count(*) FROM t", as: Int.self) == 53)
            reopened.close()
        }
    }
}
