#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("Reading the write-ahead log without a key")
struct WALReaderTests {
    /// A connection on a new encrypted database in WAL mode, with table `t(x TEXT)` and no automatic checkpoint.
    static func logWriter(in folder: TemporaryDirectory) throws -> Connection {
        let writer = try Connection(path: folder.path("notes.db"), key: try EncryptionKey.generateRaw())
        _ = try writer.scalar("PRAGMA journal_mode = WAL", as: String.self)
        try writer.execute("PRAGMA wal_autocheckpoint = 0")
        try writer.execute("CREATE TABLE t(x TEXT)")
        return writer
    }

    @Test("restore applies a segment that starts the log it stands at the start of, and refuses one of another log")
    func segmentStartingTheLogOfThePosition() throws {
        try withTemporaryDirectory { folder in
            let writer = try Self.logWriter(in: folder)
            try writer.execute("INSERT INTO t VALUES ('y')")
            let segment = try fileBytes(folder.path("notes.db-wal"))
            let header = try #require(segment.withUnsafeBytes { WALFormat.Header($0) })
            writer.close()
            // An exact snapshot taken at the start of this log, before its header was shipped, records this
            // position; the segment that ships the log from its header follows it.
            let target = folder.path("restored.db")
            let descriptor = open(target, O_RDWR | O_CREAT, 0o600)
            defer { close(descriptor) }
            let write: (UInt32, UnsafeRawBufferPointer, UInt32) throws -> Void = { page, bytes, _ in
                try writeFully(descriptor, bytes, at: Int64(page - 1) * Int64(bytes.count), path: target)
            }
            var applier = FrameApplier(position: WALPosition(start: header), pageSize: header.pageSize)
            try applier.apply(segment, startsLog: true, write: write)
            #expect(applier.position?.frame ?? 0 > 0)
            // The start of another log (other salts) is not followed by this segment.
            var other = WALPosition(start: header)
            other.salt1 &+= 7
            var refusing = FrameApplier(position: other, pageSize: header.pageSize)
            #expect(throws: FrameApplier.Problem.self) { try refusing.apply(segment, startsLog: true, write: write) }
        }
    }

    @Test("the committed frames SQLite wrote check out (salts, running checksums) and end at the last commit")
    func committedFrames() throws {
        try withTemporaryDirectory { folder in
            let writer = try Self.logWriter(in: folder)
            for _ in 1...3 { try writer.execute("INSERT INTO t VALUES (?)", String(repeating: "y", count: 3000)) }
            let file = try #require(try ReadOnlyFile(path: folder.path("notes.db-wal")))
            let header = try #require(try WALFormat.header(of: file))
            #expect(header.pageSize == (try ReplicatedDatabase.pageSize(of: writer)))
            let start = WALPosition(start: header)
            let run = try #require(try WALShipping.committedRun(
                in: file, after: start, includesHeader: true, maximumBytes: .max, readTwice: true))
            #expect(run.offset == 0)
            #expect(run.length == Int64(try file.size()))
            #expect(run.sha256 == SHA256.hex(try fileBytes(folder.path("notes.db-wal"))))
            #expect(try WALShipping.lastCommit(in: file, after: start) == run.end)
            #expect(run.end.databasePageCount == UInt32(try writer.scalar("PRAGMA page_count", as: Int.self) ?? 0))

            // A flipped byte in the last frame ends the log before it, as SQLite's recovery would.
            var bytes = try fileBytes(folder.path("notes.db-wal"))
            bytes[bytes.count - 10] ^= 0x40
            try Data(bytes).write(to: URL(fileURLWithPath: folder.path("copy-wal")))
            let damaged = try #require(try ReadOnlyFile(path: folder.path("copy-wal")))
            let shorter = try WALShipping.lastCommit(in: damaged, after: start)
            #expect((shorter?.frame ?? 0) < run.end.frame)
            writer.close()
        }
    }

    @Test("a log restarted after the replicator's complete checkpoint continues the generation; any other change ends it")
    func continuityRules() throws {
        var header = [UInt8](repeating: 0, count: 32)
        func make(checkpoint: UInt32, salt1: UInt32, salt2: UInt32) -> WALFormat.Header {
            func put(_ value: UInt32, _ offset: Int) {
                for index in 0..<4 { header[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
            }
            put(WALFormat.magicLittleEndian, 0)
            put(WALFormat.formatVersion, 4)
            put(4096, 8)
            put(checkpoint, 12)
            put(salt1, 16)
            put(salt2, 20)
            let checksum = header.withUnsafeBytes {
                WALFormat.Checksum.zero.continued(over: UnsafeRawBufferPointer(rebasing: $0[0..<24]), bigEndian: false)
            }
            put(checksum.first, 24)
            put(checksum.second, 28)
            return header.withUnsafeBytes { WALFormat.Header($0)! }
        }
        let first = make(checkpoint: 7, salt1: 100, salt2: 555)
        var shipped = WALPosition(start: first)
        shipped.frame = 12
        let restarted = make(checkpoint: 8, salt1: 101, salt2: 999)
        let twice = make(checkpoint: 9, salt1: 102, salt2: 123)
        #expect(LogContinuation.decide(header: first, shipped: shipped, expectsRestart: false, needsHeader: false)
            == .from(shipped, includesHeader: false))
        #expect(LogContinuation.decide(header: restarted, shipped: shipped, expectsRestart: true, needsHeader: false)
            == .from(WALPosition(start: restarted), includesHeader: true))
        guard case .broken = LogContinuation.decide(
            header: restarted, shipped: shipped, expectsRestart: false, needsHeader: false)
        else { Issue.record("a restart the replicator did not prepare must end the generation"); return }
        guard case .broken = LogContinuation.decide(
            header: twice, shipped: shipped, expectsRestart: true, needsHeader: false)
        else { Issue.record("two restarts must end the generation"); return }
        guard case .broken = LogContinuation.decide(header: nil, shipped: shipped, expectsRestart: false, needsHeader: false)
        else { Issue.record("an emptied log must end the generation"); return }
        #expect(LogContinuation.decide(header: nil, shipped: shipped, expectsRestart: true, needsHeader: false) == .nothingYet)
    }
}
#endif
