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
}
