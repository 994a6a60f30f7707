import CSQLCipher

/// What a file looks like from its bytes: the one file-format detector of the library (the open path classifies an
/// unreadable file with it; ``DatabaseFileInspection/format`` reports it).
public enum DatabaseFileFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// There is no file at the path.
    case missing
    /// Something other than a regular file (a folder, a device).
    case notARegularFile = "not-a-regular-file"
    /// A file of 0 bytes: SQLite treats it as a new, empty database.
    case empty
    /// A plaintext SQLite database (`SQLite format 3\0` header, readable without a key).
    case plaintext
    /// A SQLite header that does not open without a key: an SQLCipher 4 database with a plaintext header (or a
    /// damaged plaintext one).
    case plaintextHeader = "plaintext-header"
    /// No SQLite header: an SQLCipher database (or a file that is not a database at all; only the key tells).
    case encrypted

    /// A short phrase for people.
    public var description: String {
        switch self {
        case .missing: "missing (no such file)"
        case .notARegularFile: "not a regular file"
        case .empty: "empty (0 bytes; a new database)"
        case .plaintext: "plaintext SQLite database (NOT encrypted)"
        case .plaintextHeader: "SQLite header, unreadable without a key: SQLCipher with a plaintext header"
        case .encrypted: "no SQLite header: encrypted (or not a database)"
        }
    }

    /// What a file is, from its bytes and, for a file with the SQLite magic, whether its schema reads without a key.
    static func detect(atPath path: String) -> DatabaseFileFormat {
        guard OpenFiles.fileID(path: path) != nil else { return .missing }  // stat(2) failed
        guard let size = regularFileSize(atPath: path) else { return .notARegularFile }
        if size == 0 { return .empty }
        guard hasPlaintextSQLiteHeader(atPath: path) else { return .encrypted }
        return Connection.opensAsPlaintext(path) ? .plaintext : .plaintextHeader
    }
}

/// The first 16 bytes of every plaintext SQLite database.
let sqliteHeaderMagic: [UInt8] = Array("SQLite format 3".utf8) + [0]

/// Whether a file starts with the plaintext SQLite magic (a plaintext database, or one with a plaintext header).
func hasPlaintextSQLiteHeader(atPath path: String) -> Bool {
    readFilePrefix(atPath: path, count: sqliteHeaderMagic.count) == sqliteHeaderMagic
}

extension Encryption {
    /// Whether a file written with this encryption must not start with the plaintext SQLite magic: it has a key
    /// and no plaintext header. The copies the library writes (export, backup, VACUUM INTO) are checked against it.
    var requiresEncryptedHeader: Bool {
        key != nil && (settings.plaintextHeaderSize ?? 0) == 0
    }
}

extension Connection {
    /// Whether a file reads as a plaintext database (its schema, not just its first 16 bytes), on a read-only handle
    /// that writes nothing (waiting up to 2 s for another process's lock).
    static func opensAsPlaintext(_ path: String) -> Bool {
        var connection: OpaquePointer?
        defer { sqlite3_close(connection) }
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return false }
        sqlite3_busy_timeout(connection, 2000)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(connection, "SELECT count(*) FROM sqlite_master", -1, &statement, nil) == SQLITE_OK
        else { return false }
        return sqlite3_step(statement) == SQLITE_ROW
    }
}
