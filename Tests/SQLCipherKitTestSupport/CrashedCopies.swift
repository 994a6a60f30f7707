import Foundation
import SQLCipherKit

/// Copies of a database as a crash leaves them, with their side files: made by copying the files while a
/// connection is in the middle of its work.
public enum CrashedCopy {
    /// Copies `source` (a WAL database) and its `-wal` to `destination` while `walRows` more rows of `table(body)` are
    /// committed in the WAL only.
    public static func withWAL(
        of source: String, key: EncryptionKey, table: String, walRows: Int = 50, to destination: String
    ) throws {
        let db = try Connection(path: source, key: key)
        defer { db.close() }
        try db.execute("PRAGMA wal_autocheckpoint = 0")
        try db.transaction {
            for index in 0..<walRows {
                try db.execute("INSERT INTO \(Connection.quoteIdentifier(table))(body) VALUES (?)", "in the wal \(index)")
            }
        }
        try FileManager.default.copyItem(atPath: source, toPath: destination)
        try FileManager.default.copyItem(atPath: source + "-wal", toPath: destination + "-wal")
    }

    /// Copies `source` (a rollback-journal database) and its hot `-journal` to `destination` in the middle of a large
    /// transaction on `table(id, body)`: every body changed and the rows after `keepingRows` deleted, with pages of it
    /// already in the main file (a small cache spills them before COMMIT). The source itself is rolled back.
    public static func withHotJournal(
        of source: String, key: EncryptionKey, table: String, keepingRows: Int, to destination: String
    ) throws {
        let db = try Connection(path: source, key: key)
        defer { db.close() }
        let name = Connection.quoteIdentifier(table)
        try db.execute("PRAGMA cache_size = 5")
        try db.execute("BEGIN IMMEDIATE")
        try db.execute("UPDATE \(name) SET body = 'unfinished ' || id")
        try db.execute("DELETE FROM \(name) WHERE id > ?", keepingRows)
        try FileManager.default.copyItem(atPath: source, toPath: destination)
        try FileManager.default.copyItem(atPath: source + "-journal", toPath: destination + "-journal")
        try db.execute("ROLLBACK")
    }

    /// Makes `destination` as a `rotate --method in-place` killed in the middle of its rekey leaves a file in
    /// DELETE mode: a hot `-journal` holding the old-key pages the rekey had journaled, and the file with exactly those
    /// pages rewritten under `newKey` (every other page still under `key`). Without its journal the file opens with
    /// neither key; rolled back, with `key` only.
    ///
    /// The journal is a real one, of a transaction on a copy that writes page 1 first (as a rekey does) and then
    /// half the rows of `table(id, body)`; the new-key pages come from a copy of `source` rekeyed to `newKey` (a rekey rewrites
    /// every page in place and keeps the salt).
    public static func withInterruptedRekey(
        of source: String, key: EncryptionKey, newKey: EncryptionKey, table: String, to destination: String
    ) throws {
        let original = try fileBytes(source)
        let journalSource = destination + ".journal-source"
        let rekeyed = destination + ".rekeyed"
        defer {
            for path in [journalSource, journalSource + "-journal", rekeyed] {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
        try FileManager.default.copyItem(atPath: source, toPath: journalSource)
        let journal = try {
            let db = try Connection(path: journalSource, key: key)
            defer { db.close() }
            try db.execute("PRAGMA cache_size = 5")
            try db.execute("BEGIN IMMEDIATE")
            try db.execute("PRAGMA user_version = 77")
            // Half the rows: the rekey was killed half way, so the other pages are still under the old key.
            let name = Connection.quoteIdentifier(table)
            try db.execute("UPDATE \(name) SET body = body || ' rewritten' WHERE id <= (SELECT max(id) / 2 FROM \(name))")
            let bytes = try fileBytes(journalSource + "-journal")
            try db.execute("ROLLBACK")
            return bytes
        }()

        try FileManager.default.copyItem(atPath: source, toPath: rekeyed)
        let db = try Connection(path: rekeyed, key: key)
        try db.rekey(to: newKey)
        db.close()
        let newKeyPages = try fileBytes(rekeyed)
        guard newKeyPages.count == original.count else { throw CrashedCopyError.unexpectedLayout }

        var interrupted = original
        let layout = try JournalLayout(journal)
        guard layout.pageNumbers.contains(1) else { throw CrashedCopyError.unexpectedLayout }
        for page in layout.pageNumbers where page >= 1 {
            let range = (page - 1) * layout.pageSize..<page * layout.pageSize
            guard range.upperBound <= interrupted.count else { continue }
            interrupted.replaceSubrange(range, with: newKeyPages[range])
        }
        try Data(interrupted).write(to: URL(fileURLWithPath: destination))
        try Data(journal).write(to: URL(fileURLWithPath: destination + "-journal"))
    }
}

/// The pages a rollback journal holds, read from its headers and records (https://www.sqlite.org/fileformat2.html,
/// "The Rollback Journal"): each header (one sector) gives a record count, a sector size and a page size; each
/// record is a page number, the page's old content and a checksum.
public struct JournalLayout {
    public let pageSize: Int
    public let pageNumbers: [Int]

    static let magic: [UInt8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]

    public init(_ journal: [UInt8]) throws {
        func word(_ offset: Int) -> Int {
            Int(journal[offset]) << 24 | Int(journal[offset + 1]) << 16 | Int(journal[offset + 2]) << 8
                | Int(journal[offset + 3])
        }
        guard journal.count >= 28, Array(journal[0..<8]) == Self.magic else { throw CrashedCopyError.unexpectedLayout }
        let sectorSize = word(20)
        pageSize = word(24)
        guard sectorSize >= 512, pageSize >= 512 else { throw CrashedCopyError.unexpectedLayout }
        let recordSize = 4 + pageSize + 4
        var pages: [Int] = []
        var headerOffset = 0
        while headerOffset + 28 <= journal.count, Array(journal[headerOffset..<headerOffset + 8]) == Self.magic {
            let declared = word(headerOffset + 8)
            // 0 and 0xffffffff: the records run to the end of the file (the header was not updated before the crash).
            let isOpenEnded = declared == 0 || declared == 0xffff_ffff
            var offset = headerOffset + sectorSize
            var count = 0
            while offset + recordSize <= journal.count && (isOpenEnded || count < declared) {
                pages.append(word(offset))
                offset += recordSize
                count += 1
            }
            guard !isOpenEnded else { break }
            headerOffset = (offset + sectorSize - 1) / sectorSize * sectorSize
        }
        pageNumbers = pages
    }
}

public enum CrashedCopyError: Error {
    case unexpectedLayout
}
