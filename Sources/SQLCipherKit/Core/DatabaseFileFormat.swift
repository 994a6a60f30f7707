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
