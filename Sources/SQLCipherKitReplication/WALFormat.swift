#if Replication  // trait Replication (Package.swift)
import SQLCipherKit

/// SQLite's write-ahead log as it is on disk (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header,
/// then frames of a 24-byte header and one page each.
///
/// SQLCipher encrypts the page of every frame; the frame headers (page number, commit size, salts, checksums) stay
/// plaintext, and the checksums cover the encrypted page. So everything here reads and checks ciphertext: no key.
enum WALFormat {
    static let headerSize = 32
    static let frameHeaderSize = 24
    /// The magic number; its lowest bit says whether the checksums read the words big-endian.
    static let magicLittleEndian: UInt32 = 0x377f_0682
    static let magicBigEndian: UInt32 = 0x377f_0683
    static let formatVersion: UInt32 = 3_007_000

    /// The running checksum pair: each frame's checksum continues the one before it, starting from the header's.
    struct Checksum: Hashable, Sendable, Codable {
        var first: UInt32
        var second: UInt32

        static let zero = Checksum(first: 0, second: 0)

        /// Continues the checksum over `bytes` (a multiple of 8 bytes long), read as 32-bit words in the byte order
        /// the WAL header names (the core's one implementation of SQLite's checksum).
        func continued(over bytes: UnsafeRawBufferPointer, bigEndian: Bool) -> Checksum {
            let (s1, s2) = WriteAheadLogReport.checksum(bytes, bigEndian: bigEndian, from: (first, second))
            return Checksum(first: s1, second: s2)
        }
    }

    /// The header: page size, checkpoint sequence, the salts every valid frame repeats, and its own checksum.
    struct Header: Hashable, Sendable {
        let isBigEndianChecksum: Bool
        let pageSize: Int
        let checkpointSequence: UInt32
        let salt1: UInt32
        let salt2: UInt32
        /// The checksum of the header's first 24 bytes, where the frames' running checksum starts.
        let checksum: Checksum

        /// Parses and checks a header; `nil` when the bytes are not a valid WAL header (no WAL yet, a torn write, a
        /// foreign file).
        init?(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count >= WALFormat.headerSize else { return nil }
            let magic = readBigEndian(bytes, 0)
            guard magic == WALFormat.magicLittleEndian || magic == WALFormat.magicBigEndian,
                  readBigEndian(bytes, 4) == WALFormat.formatVersion
            else { return nil }
            let bigEndian = magic == WALFormat.magicBigEndian
            let pageSize = Int(readBigEndian(bytes, 8))
            // 65536 is stored as 1 in the database header, but as itself here.
            guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else { return nil }
            let computed = Checksum.zero.continued(
                over: UnsafeRawBufferPointer(rebasing: bytes[0..<24]), bigEndian: bigEndian)
            let stored = Checksum(first: readBigEndian(bytes, 24), second: readBigEndian(bytes, 28))
            guard computed == stored else { return nil }
            isBigEndianChecksum = bigEndian
            self.pageSize = pageSize
            checkpointSequence = readBigEndian(bytes, 12)
            salt1 = readBigEndian(bytes, 16)
            salt2 = readBigEndian(bytes, 20)
            checksum = stored
        }

        var frameSize: Int { WALFormat.frameHeaderSize + pageSize }
    }

    /// A frame's header.
    struct FrameHeader: Sendable {
        let pageNumber: UInt32
        /// The database size in pages after the transaction, for its last frame (the commit frame); 0 otherwise.
        let databasePageCountAfterCommit: UInt32
        let salt1: UInt32
        let salt2: UInt32
        let checksum: Checksum

        init(_ bytes: UnsafeRawBufferPointer) {
            pageNumber = readBigEndian(bytes, 0)
            databasePageCountAfterCommit = readBigEndian(bytes, 4)
            salt1 = readBigEndian(bytes, 8)
            salt2 = readBigEndian(bytes, 12)
            checksum = Checksum(first: readBigEndian(bytes, 16), second: readBigEndian(bytes, 20))
        }

        var isCommit: Bool { databasePageCountAfterCommit != 0 }
    }
}

@inline(__always)
func readBigEndian(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
    UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
        | UInt32(bytes[offset + 3])
}
#endif
