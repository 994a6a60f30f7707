import CSQLCipher

/// A SQLite result code, primary or extended.
///
/// Extended codes carry their primary code in the low byte: `SQLITE_CONSTRAINT_UNIQUE` (2067) is a kind of
/// `SQLITE_CONSTRAINT` (19). Pattern matching against a primary code matches its extended codes too:
///
/// ```swift
/// do { try db.execute("INSERT INTO t(id) VALUES (1)") }
/// catch DatabaseError.SQLITE_CONSTRAINT { /* also SQLITE_CONSTRAINT_UNIQUE, …_PRIMARYKEY, … */ }
/// ```
///
/// See [Result and Error Codes](https://www.sqlite.org/rescode.html).
public struct ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code returned by SQLite.
    public let rawValue: CInt

    /// Creates a result code from SQLite's numeric value.
    @inlinable
    public init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// The primary code: the low byte of an extended code.
    public var primaryResultCode: ResultCode {
        ResultCode(rawValue: rawValue & 0xFF)
    }

    /// `true` when this is an extended code (it carries more than its primary code).
    public var isExtended: Bool {
        rawValue > 0xFF
    }

    /// SQLite's English text for the code, such as "constraint failed".
    public var description: String {
        "\(rawValue) (\(String(cString: sqlite3_errstr(rawValue))))"
    }

    /// Matches a primary code against any of its extended codes, and an extended code against itself.
    public static func ~= (pattern: ResultCode, code: ResultCode) -> Bool {
        if pattern.isExtended {
            return pattern == code
        }
        return pattern == code.primaryResultCode
    }

    /// Lets `catch DatabaseError.SQLITE_BUSY` match a ``DatabaseError`` with that code.
    public static func ~= (pattern: ResultCode, error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return pattern ~= error.extendedResultCode
    }
}

/// The one error type thrown by SQLCipherKit.
///
/// An error either comes from SQLite (``kind`` is ``Kind/sqlite``) or is a condition the library detected itself
/// (a wrong key, a value that does not convert, a closed connection, …). Both carry a SQLite result code, a message
/// a person can act on, and the SQL that failed when there was one. Bound argument values never appear in an error,
/// and neither does key material.
///
/// Match on the kind or on the result code without parsing text:
///
/// ```swift
/// do {
///     let db = try Connection(path: path, key: key)
/// } catch DatabaseError.wrongKey {
///     // ask for another key
/// } catch DatabaseError.SQLITE_CANTOPEN {
///     // missing folder, permissions
/// }
/// ```
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for conditions a caller may want to handle on their own.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// A stable identifier for the kind, such as `"wrongKey"`.
        public let name: String

        init(_ name: String) {
            self.name = name
        }

        /// The identifier.
        public var description: String { name }

        /// Lets `catch DatabaseError.wrongKey` match a ``DatabaseError`` of that kind.
        public static func ~= (pattern: Kind, error: any Error) -> Bool {
            (error as? DatabaseError)?.kind == pattern
        }
    }

    /// What kind of failure this is.
    public let kind: Kind

    /// The extended result code; ``resultCode`` gives its primary code.
    public let extendedResultCode: ResultCode

    /// The error message, from SQLite or from the library.
    public let message: String

    /// The SQL that failed, when the failure belongs to one statement. Never the values bound to it.
    public let sql: String?

    /// The primary result code.
    public var resultCode: ResultCode {
        extendedResultCode.primaryResultCode
    }

    /// Creates an error of `kind` with the kind's result code (``Kind/defaultResultCode``). The message and SQL must
    /// not contain key material or bound values.
    ///
    /// ```swift
    /// throw DatabaseError(.invalidArgument, "pagesPerStep must be at least 1")
    /// ```
    public init(_ kind: Kind, _ message: String, sql: String? = nil) {
        self.init(kind: kind, code: kind.defaultResultCode, message: message, sql: sql)
    }

    /// Creates an error with a result code of its own (for an error SQLite reported, or a kind whose usual code
    /// does not fit). The message and SQL must not contain key material or bound values.
    public init(kind: Kind, code: ResultCode, message: String, sql: String? = nil) {
        self.kind = kind
        self.extendedResultCode = code
        self.message = message
        self.sql = sql
    }

    /// A one-line description: kind, code, message and SQL.
    public var description: String {
        var text = "SQLite error \(extendedResultCode.rawValue)"
        if kind != .sqlite {
            text += " [\(kind.name)]"
        }
        text += ": \(message)"
        if let sql {
            text += " — while executing `\(sql)`"
        }
        return text
    }
}

// MARK: - Kinds

extension DatabaseError.Kind {
    /// SQLite reported the error; ``DatabaseError/extendedResultCode`` says which.
    public static let sqlite = Self("sqlite")
    /// The key (or the cipher settings) does not open the encrypted database.
    public static let wrongKey = Self("wrongKey")
    /// A key was given, but the file is a plaintext SQLite database.
    public static let notEncrypted = Self("notEncrypted")
    /// No key was given (``Encryption/none``), but the file is not a plaintext database: probably encrypted.
    public static let missingKey = Self("missingKey")
    /// The file is not a database: truncated, or garbage.
    public static let notADatabase = Self("notADatabase")
    /// The linked library is plain SQLite, not SQLCipher.
    public static let notSQLCipher = Self("notSQLCipher")
    /// The linked SQLCipher lacks a feature; the message names it, the version it needs and the one linked.
    public static let unsupportedByEngine = Self("unsupportedByEngine")
    /// A key is empty, malformed, or could not be read.
    public static let invalidKey = Self("invalidKey")
    /// A database value could not be converted to the requested Swift type.
    public static let valueConversion = Self("valueConversion")
    /// A parameter index or name does not exist in the statement, or the argument count is wrong.
    public static let invalidArgument = Self("invalidArgument")
    /// The connection (or the statement's connection) is closed.
    public static let connectionClosed = Self("connectionClosed")
    /// The SQL is not exactly one statement where one was required, or is empty.
    public static let invalidSQL = Self("invalidSQL")
    /// A transaction was used in a way its contract forbids (nested `transaction`, ended by its own body, …).
    public static let transactionMisuse = Self("transactionMisuse")
    /// A check the library ran after an operation failed (the file is not what it should be).
    public static let verificationFailed = Self("verificationFailed")
    /// The operation needs a state the database is not in (other connections open, inside a transaction, …).
    public static let invalidState = Self("invalidState")
    /// A file or folder the operation needs is missing, exists already, or cannot be written.
    public static let fileSystem = Self("fileSystem")
    /// A migration failed with an error that is not a ``DatabaseError``; the message names the migration.
    public static let migrationFailed = Self("migrationFailed")
    /// The key opens the database, but the file is damaged: truncated, a partial last page, or pages that do not
    /// decrypt or authenticate. The message names what is wrong (and the page when it is known).
    public static let damaged = Self("damaged")
    /// The disk (or the file system's quota) is full: `SQLITE_FULL` or `ENOSPC`. Nothing half-written was kept.
    public static let diskFull = Self("diskFull")
    /// Another connection or process holds a lock on the database, and it was not released within the busy timeout.
    public static let busy = Self("busy")
}

extension DatabaseError.Kind {
    /// The result code an error of this kind carries unless it is given another: the code SQLite itself uses for
    /// that condition (`SQLITE_MISUSE` for a misuse of the API, `SQLITE_NOTADB` for a key that does not open the
    /// file, `SQLITE_BUSY` for a lock, …).
    public var defaultResultCode: ResultCode {
        switch self {
        case .invalidArgument, .invalidState, .invalidKey, .invalidSQL, .transactionMisuse, .connectionClosed:
            DatabaseError.SQLITE_MISUSE
        case .valueConversion: DatabaseError.SQLITE_MISMATCH
        case .fileSystem: DatabaseError.SQLITE_CANTOPEN
        case .wrongKey, .notEncrypted, .missingKey, .notADatabase: DatabaseError.SQLITE_NOTADB
        case .damaged: DatabaseError.SQLITE_CORRUPT
        case .diskFull: DatabaseError.SQLITE_FULL
        case .busy: DatabaseError.SQLITE_BUSY
        case .migrationFailed: DatabaseError.SQLITE_ABORT
        default: DatabaseError.SQLITE_ERROR   // sqlite, notSQLCipher, unsupportedByEngine, verificationFailed
        }
    }
}

extension DatabaseError {
    /// Matches errors the engine reported (``Kind/sqlite``).
    public static let sqlite = Kind.sqlite
    /// Matches ``Kind/wrongKey``.
    public static let wrongKey = Kind.wrongKey
    /// Matches ``Kind/notEncrypted``.
    public static let notEncrypted = Kind.notEncrypted
    /// Matches ``Kind/missingKey``.
    public static let missingKey = Kind.missingKey
    /// Matches ``Kind/notADatabase``.
    public static let notADatabase = Kind.notADatabase
    /// Matches ``Kind/notSQLCipher``.
    public static let notSQLCipher = Kind.notSQLCipher
    /// Matches ``Kind/unsupportedByEngine``.
    public static let unsupportedByEngine = Kind.unsupportedByEngine
    /// Matches ``Kind/invalidKey``.
    public static let invalidKey = Kind.invalidKey
    /// Matches ``Kind/valueConversion``.
    public static let valueConversion = Kind.valueConversion
    /// Matches ``Kind/invalidArgument``.
    public static let invalidArgument = Kind.invalidArgument
    /// Matches ``Kind/connectionClosed``.
    public static let connectionClosed = Kind.connectionClosed
    /// Matches ``Kind/invalidSQL``.
    public static let invalidSQL = Kind.invalidSQL
    /// Matches ``Kind/transactionMisuse``.
    public static let transactionMisuse = Kind.transactionMisuse
    /// Matches ``Kind/verificationFailed``.
    public static let verificationFailed = Kind.verificationFailed
    /// Matches ``Kind/invalidState``.
    public static let invalidState = Kind.invalidState
    /// Matches ``Kind/fileSystem``.
    public static let fileSystem = Kind.fileSystem
    /// Matches ``Kind/migrationFailed``.
    public static let migrationFailed = Kind.migrationFailed
    /// Matches ``Kind/damaged``.
    public static let damaged = Kind.damaged
    /// Matches ``Kind/diskFull``.
    public static let diskFull = Kind.diskFull
    /// Matches ``Kind/busy``.
    public static let busy = Kind.busy
}

// MARK: - Result codes

extension DatabaseError {
    // Primary result codes, https://www.sqlite.org/rescode.html
    /// `SQLITE_OK`: success.
    public static let SQLITE_OK = ResultCode(rawValue: 0)
    /// `SQLITE_ERROR`: generic error.
    public static let SQLITE_ERROR = ResultCode(rawValue: 1)
    /// `SQLITE_INTERNAL`: internal logic error in SQLite.
    public static let SQLITE_INTERNAL = ResultCode(rawValue: 2)
    /// `SQLITE_PERM`: access permission denied.
    public static let SQLITE_PERM = ResultCode(rawValue: 3)
    /// `SQLITE_ABORT`: callback routine requested an abort.
    public static let SQLITE_ABORT = ResultCode(rawValue: 4)
    /// `SQLITE_BUSY`: the database file is locked.
    public static let SQLITE_BUSY = ResultCode(rawValue: 5)
    /// `SQLITE_LOCKED`: a table in the database is locked.
    public static let SQLITE_LOCKED = ResultCode(rawValue: 6)
    /// `SQLITE_NOMEM`: a malloc() failed.
    public static let SQLITE_NOMEM = ResultCode(rawValue: 7)
    /// `SQLITE_READONLY`: attempt to write a readonly database.
    public static let SQLITE_READONLY = ResultCode(rawValue: 8)
    /// `SQLITE_INTERRUPT`: operation terminated by sqlite3_interrupt().
    public static let SQLITE_INTERRUPT = ResultCode(rawValue: 9)
    /// `SQLITE_IOERR`: some kind of disk I/O error occurred.
    public static let SQLITE_IOERR = ResultCode(rawValue: 10)
    /// `SQLITE_CORRUPT`: the database disk image is malformed.
    public static let SQLITE_CORRUPT = ResultCode(rawValue: 11)
    /// `SQLITE_NOTFOUND`: unknown opcode or file control.
    public static let SQLITE_NOTFOUND = ResultCode(rawValue: 12)
    /// `SQLITE_FULL`: insertion failed because the database or disk is full.
    public static let SQLITE_FULL = ResultCode(rawValue: 13)
    /// `SQLITE_CANTOPEN`: unable to open the database file.
    public static let SQLITE_CANTOPEN = ResultCode(rawValue: 14)
    /// `SQLITE_PROTOCOL`: database lock protocol error.
    public static let SQLITE_PROTOCOL = ResultCode(rawValue: 15)
    /// `SQLITE_EMPTY`: internal use only.
    public static let SQLITE_EMPTY = ResultCode(rawValue: 16)
    /// `SQLITE_SCHEMA`: the database schema changed.
    public static let SQLITE_SCHEMA = ResultCode(rawValue: 17)
    /// `SQLITE_TOOBIG`: string or BLOB exceeds size limit.
    public static let SQLITE_TOOBIG = ResultCode(rawValue: 18)
    /// `SQLITE_CONSTRAINT`: abort due to constraint violation.
    public static let SQLITE_CONSTRAINT = ResultCode(rawValue: 19)
    /// `SQLITE_MISMATCH`: data type mismatch.
    public static let SQLITE_MISMATCH = ResultCode(rawValue: 20)
    /// `SQLITE_MISUSE`: library used incorrectly.
    public static let SQLITE_MISUSE = ResultCode(rawValue: 21)
    /// `SQLITE_NOLFS`: uses OS features not supported on host.
    public static let SQLITE_NOLFS = ResultCode(rawValue: 22)
    /// `SQLITE_AUTH`: authorization denied.
    public static let SQLITE_AUTH = ResultCode(rawValue: 23)
    /// `SQLITE_FORMAT`: not used.
    public static let SQLITE_FORMAT = ResultCode(rawValue: 24)
    /// `SQLITE_RANGE`: parameter index out of range.
    public static let SQLITE_RANGE = ResultCode(rawValue: 25)
    /// `SQLITE_NOTADB`: file is not a database (with SQLCipher: also a wrong key).
    public static let SQLITE_NOTADB = ResultCode(rawValue: 26)
    /// `SQLITE_NOTICE`: notification from sqlite3_log().
    public static let SQLITE_NOTICE = ResultCode(rawValue: 27)
    /// `SQLITE_WARNING`: warning from sqlite3_log().
    public static let SQLITE_WARNING = ResultCode(rawValue: 28)

    // Extended codes callers commonly match on.
    /// `SQLITE_CONSTRAINT_FOREIGNKEY`: a foreign key constraint failed.
    public static let SQLITE_CONSTRAINT_FOREIGNKEY = ResultCode(rawValue: 787)
    /// `SQLITE_CONSTRAINT_NOTNULL`: a NOT NULL constraint failed.
    public static let SQLITE_CONSTRAINT_NOTNULL = ResultCode(rawValue: 1299)
    /// `SQLITE_CONSTRAINT_PRIMARYKEY`: a PRIMARY KEY constraint failed.
    public static let SQLITE_CONSTRAINT_PRIMARYKEY = ResultCode(rawValue: 1555)
    /// `SQLITE_CONSTRAINT_UNIQUE`: a UNIQUE constraint failed.
    public static let SQLITE_CONSTRAINT_UNIQUE = ResultCode(rawValue: 2067)
    /// `SQLITE_READONLY_DBMOVED`: the database file was moved or deleted while open.
    public static let SQLITE_READONLY_DBMOVED = ResultCode(rawValue: 1032)
    /// `SQLITE_IOERR_SHORT_READ`: a read returned fewer bytes than asked.
    public static let SQLITE_IOERR_SHORT_READ = ResultCode(rawValue: 522)
}

// MARK: - Building errors

extension DatabaseError {
    /// An error from SQLite, read from the connection right away, before another call overwrites it.
    @usableFromInline
    static func sqlite(code: CInt, connection: OpaquePointer?, sql: String? = nil) -> DatabaseError {
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        // The connection's extended code belongs to this failure only when its primary code matches.
        let resolved = (extended & 0xFF) == (code & 0xFF) ? extended : code
        let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            ?? String(cString: sqlite3_errstr(code))
        // A full disk has a kind of its own wherever it happens, so callers and the CLI can say so.
        let kind: Kind = (resolved & 0xFF) == SQLITE_FULL.rawValue ? .diskFull : .sqlite
        return DatabaseError(kind: kind, code: ResultCode(rawValue: resolved), message: message, sql: sql)
    }

    @usableFromInline
    static func closed(sql: String? = nil) -> DatabaseError {
        DatabaseError(
            kind: .connectionClosed, code: SQLITE_MISUSE,
            message: "the connection is closed", sql: sql)
    }
}
