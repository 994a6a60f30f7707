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
/// and neither does key material: SQL that may hold a key (a key PRAGMA, the KEY clause of ATTACH, a key URI
/// parameter, in any spelling) is redacted in ``sql`` and ``reason`` when the error is made.
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
public struct DatabaseError: Error, CustomStringConvertible, Sendable, DatabaseErrorKinds {
    /// What went wrong, for conditions a caller may want to handle on their own.
    ///
    /// Each kind is declared once (in ``DatabaseErrorKinds``), with the result code an error of that kind carries
    /// unless it is given another (the code SQLite itself uses for the condition). `DatabaseError.wrongKey`,
    /// `DatabaseError.Kind.wrongKey` and `.wrongKey` where a kind is expected are the same value.
    public struct Kind: Hashable, Sendable, CustomStringConvertible, DatabaseErrorKinds {
        /// A stable identifier for the kind, such as `"wrongKey"`.
        public let name: String

        /// The result code an error of this kind carries unless it is given another: the code SQLite itself uses
        /// for that condition (`SQLITE_MISUSE` for a misuse of the API, `SQLITE_NOTADB` for a key that does not
        /// open the file, `SQLITE_BUSY` for a lock, …).
        public let defaultResultCode: ResultCode

        init(_ name: String, _ defaultResultCode: ResultCode) {
            self.name = name
            self.defaultResultCode = defaultResultCode
        }

        /// The identifier.
        public var description: String { name }

        /// Kinds are equal when their names are.
        public static func == (lhs: Kind, rhs: Kind) -> Bool { lhs.name == rhs.name }

        /// Hashes the name.
        public func hash(into hasher: inout Hasher) { hasher.combine(name) }

        /// Lets `catch DatabaseError.wrongKey` match a ``DatabaseError`` of that kind.
        public static func ~= (pattern: Kind, error: any Error) -> Bool {
            (error as? DatabaseError)?.kind == pattern
        }
    }

    /// What kind of failure this is.
    public let kind: Kind

    /// The extended result code; ``resultCode`` gives its primary code.
    public let extendedResultCode: ResultCode

    /// What went wrong, from SQLite or from the library, without the advice ``remedy`` holds.
    public let reason: String

    /// What the caller can do about it, when there is something to say; ``message`` words it in the library's API.
    public let remedy: Remedy?

    /// The error message: ``reason``, then ``remedy`` in the library's words.
    public var message: String {
        guard let remedy else { return reason }
        return "\(reason); \(remedy.libraryWording)"
    }

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
    public init(_ kind: Kind, _ reason: String, remedy: Remedy? = nil, sql: String? = nil) {
        self.init(kind: kind, code: kind.defaultResultCode, message: reason, remedy: remedy, sql: sql)
    }

    /// Creates an error with a result code of its own (for an error SQLite reported, or a kind whose usual code
    /// does not fit). The message and SQL must not contain key material or bound values.
    ///
    /// Key material is redacted here, the one place every error's text passes: SQL that mentions `key` (the KEY clause
    /// of ATTACH, a key PRAGMA, a key URI parameter, in any spelling) loses its literals, and the reason loses what
    /// quotes them (SQLite's `near "…": syntax error`); see Docs/Security.md.
    public init(kind: Kind, code: ResultCode, message reason: String, remedy: Remedy? = nil, sql: String? = nil) {
        let redacted = KeyRedaction.redacted(sql: sql, reason: reason)
        self.kind = kind
        self.extendedResultCode = code
        self.reason = redacted.reason
        self.remedy = remedy
        self.sql = redacted.sql
    }

    /// This error with another reason (the kind, code, remedy and SQL kept), for a caller that adds context.
    func withReason(_ reason: String) -> DatabaseError {
        DatabaseError(kind: kind, code: extendedResultCode, message: reason, remedy: remedy, sql: sql)
    }

    /// A one-line description: kind, code, message and SQL. An error SQLite reported starts with its code
    /// (`SQLite error 5: database is locked`); one the library found itself starts with its kind and message, the
    /// code last (`invalidKey: key file k can be read by group or others (mode 644); … (code 21)`): a crash report of
    /// `try` at the top level, the first thing a new user reads, should not blame SQLite for a key file's mode.
    public var description: String {
        let statement = sql.map { " — while executing `\($0)`" } ?? ""
        guard kind != .sqlite else {
            return "SQLite error \(extendedResultCode.rawValue): \(message)" + statement
        }
        return "\(kind.name): \(message)" + statement + " (code \(extendedResultCode.rawValue))"
    }
}

// MARK: - Kinds

/// The kinds of ``DatabaseError``, each declared once. Both ``DatabaseError`` (for `catch DatabaseError.wrongKey`)
/// and ``DatabaseError/Kind`` (for `error.kind == .wrongKey`) have them.
public protocol DatabaseErrorKinds {}

extension DatabaseErrorKinds {
    /// SQLite reported the error; ``DatabaseError/extendedResultCode`` says which.
    public static var sqlite: DatabaseError.Kind { DatabaseError.Kind("sqlite", DatabaseError.SQLITE_ERROR) }
    /// The key (or the cipher settings) does not open the encrypted database.
    public static var wrongKey: DatabaseError.Kind { DatabaseError.Kind("wrongKey", DatabaseError.SQLITE_NOTADB) }
    /// A key was given, but the file is a plaintext SQLite database.
    public static var notEncrypted: DatabaseError.Kind {
        DatabaseError.Kind("notEncrypted", DatabaseError.SQLITE_NOTADB)
    }
    /// No key was given (``Encryption/none``), but the file is not a plaintext database: probably encrypted.
    public static var missingKey: DatabaseError.Kind { DatabaseError.Kind("missingKey", DatabaseError.SQLITE_NOTADB) }
    /// The file is not a database: truncated, or garbage.
    public static var notADatabase: DatabaseError.Kind {
        DatabaseError.Kind("notADatabase", DatabaseError.SQLITE_NOTADB)
    }
    /// The linked library is plain SQLite, not SQLCipher.
    public static var notSQLCipher: DatabaseError.Kind {
        DatabaseError.Kind("notSQLCipher", DatabaseError.SQLITE_ERROR)
    }
    /// The linked SQLCipher lacks a feature; the message names it, the version it needs and the one linked.
    public static var unsupportedByEngine: DatabaseError.Kind {
        DatabaseError.Kind("unsupportedByEngine", DatabaseError.SQLITE_ERROR)
    }
    /// A key is empty, malformed, or could not be read.
    public static var invalidKey: DatabaseError.Kind { DatabaseError.Kind("invalidKey", DatabaseError.SQLITE_MISUSE) }
    /// A database value could not be converted to the requested Swift type.
    public static var valueConversion: DatabaseError.Kind {
        DatabaseError.Kind("valueConversion", DatabaseError.SQLITE_MISMATCH)
    }
    /// A parameter index or name does not exist in the statement, or the argument count is wrong.
    public static var invalidArgument: DatabaseError.Kind {
        DatabaseError.Kind("invalidArgument", DatabaseError.SQLITE_MISUSE)
    }
    /// The connection (or the statement's connection) is closed.
    public static var connectionClosed: DatabaseError.Kind {
        DatabaseError.Kind("connectionClosed", DatabaseError.SQLITE_MISUSE)
    }
    /// The SQL is not exactly one statement where one was required, or is empty.
    public static var invalidSQL: DatabaseError.Kind { DatabaseError.Kind("invalidSQL", DatabaseError.SQLITE_MISUSE) }
    /// A transaction was used in a way its contract forbids (nested `transaction`, ended by its own body, …).
    public static var transactionMisuse: DatabaseError.Kind {
        DatabaseError.Kind("transactionMisuse", DatabaseError.SQLITE_MISUSE)
    }
    /// A check the library ran after an operation failed (the file is not what it should be).
    public static var verificationFailed: DatabaseError.Kind {
        DatabaseError.Kind("verificationFailed", DatabaseError.SQLITE_ERROR)
    }
    /// The connection was closed, reopened (a rekey) or used where the library forbids it: from inside one of its own
    /// callbacks (an SQL function, a collation, the authorizer, a trace, progress or busy handler, a commit, rollback
    /// or update hook) or closures (the body of ``Connection/transaction(_:_:)`` or ``Connection/savepoint(_:_:)``,
    /// a ``DatabaseWriter``'s closure) while the library runs it. Nothing was closed: the connection stays usable.
    /// The call that ran the callback or closure throws it; the message names the callback and what was refused.
    public static var callbackMisuse: DatabaseError.Kind {
        DatabaseError.Kind("callbackMisuse", DatabaseError.SQLITE_MISUSE)
    }
    /// A ``Row`` read in place was read after its statement moved on: stepped to the next row, reset, ended, or its
    /// connection closed. Copy a row to keep it (``Row/copy()``, ``Connection/query(_:_:)``).
    public static var rowMisuse: DatabaseError.Kind { DatabaseError.Kind("rowMisuse", DatabaseError.SQLITE_MISUSE) }
    /// The operation needs a state the database is not in (other connections open, inside a transaction, …).
    public static var invalidState: DatabaseError.Kind {
        DatabaseError.Kind("invalidState", DatabaseError.SQLITE_MISUSE)
    }
    /// A file or folder the operation needs is missing, exists already, or cannot be written.
    public static var fileSystem: DatabaseError.Kind { DatabaseError.Kind("fileSystem", DatabaseError.SQLITE_CANTOPEN) }
    /// A migration failed with an error that is not a ``DatabaseError``; the message names the migration.
    public static var migrationFailed: DatabaseError.Kind {
        DatabaseError.Kind("migrationFailed", DatabaseError.SQLITE_ABORT)
    }
    /// The key opens the database, but the file is damaged: truncated, a partial last page, or pages that do not
    /// decrypt or authenticate. The message names what is wrong (and the page when it is known).
    public static var damaged: DatabaseError.Kind { DatabaseError.Kind("damaged", DatabaseError.SQLITE_CORRUPT) }
    /// The disk (or the file system's quota) is full: `SQLITE_FULL` or `ENOSPC`. Nothing half-written was kept.
    public static var diskFull: DatabaseError.Kind { DatabaseError.Kind("diskFull", DatabaseError.SQLITE_FULL) }
    /// Another connection or process holds a lock on the database, and it was not released within the busy timeout.
    public static var busy: DatabaseError.Kind { DatabaseError.Kind("busy", DatabaseError.SQLITE_BUSY) }
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
    static func fromSQLite(code: CInt, connection: OpaquePointer?, sql: String? = nil) -> DatabaseError {
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
        DatabaseError(.connectionClosed, "the connection is closed", sql: sql)
    }
}

// MARK: - Remedies

extension DatabaseError {
    /// What the caller can do about an error, as a value: ``DatabaseError/message`` words it in the library's API
    /// (``libraryWording``), and a tool built on the library can word it in its own terms (the `sqlcipherkit` CLI
    /// names its options and subcommands) without parsing the message.
    ///
    /// ```swift
    /// do { try Connection(path: path, key: key) }
    /// catch let error as DatabaseError where error.remedy == .openWithCompatibility(3) {
    ///     // a SQLCipher 3 file on SQLCipher 4: open it with CipherSettings(compatibility: 3), or migrate it
    /// }
    /// ```
    public enum Remedy: Hashable, Sendable {
        /// The file is a plaintext database: open it without a key, or encrypt it into a new file.
        case openWithoutKeyOrEncrypt
        /// The file is encrypted: open it with its key.
        case openWithKey
        /// The file is a database with a plaintext header: open it with its key, its header size and its salt.
        case openWithPlaintextHeaderSettings
        /// A database with a plaintext header does not store its salt: give it with the settings or the key.
        case giveSalt
        /// The database is plaintext: make an encrypted copy of it instead.
        case encryptIntoNewFile
        /// A plaintext copy of an encrypted database is made only by the decrypting export.
        case decryptIntoNewFile
        /// A backup destination needs the source's cipher settings; an export can change them.
        case matchSourceCipherSettings
        /// `VACUUM INTO` is not available: copy with a backup or an export.
        case copyWithBackup
        /// `VACUUM INTO` in SQL is refused: make the copy through the library (private, same key, verified).
        case copyWithVacuumInto
        /// Keys never travel in SQL: open with a key; change it with a rekey or a rotation.
        case keyThroughAPI
        /// Cipher settings are given when opening, and changed only by re-encrypting.
        case cipherSettingsWhenOpening
        /// The page size of an encrypted database is a cipher setting, given when the database is created.
        case pageSizeWhenCreating
        /// `cipher_migrate` is an action: migrate with an export.
        case migrateWithExport
        /// A file attached without a key would be plaintext: give a key, or allow plaintext attachments.
        case attachWithKey
        /// The file attached is a plaintext database: attach it with an empty key (`KEY ''`) with plaintext
        /// attachments allowed, or encrypt it into a new file first.
        case attachPlaintextWithEmptyKey
        /// Other processes hold the database file: stop them first (they would go on with the old file).
        case stopOtherProcesses
        /// The file opens with the default settings of this earlier SQLCipher major version.
        case openWithCompatibility(Int)
        /// The file looks like SQLCipher 4's format and the linked engine is older (the reason says which): open it
        /// with SQLCipher 4.
        case openWithSQLCipher4
        /// The key file's raw key is followed by whitespace (trailing spaces, a blank line): remove it.
        case removeWhitespaceAfterRawKey
        /// The key is 64 or 96 hex digits without `x'…'`, so it was read as a passphrase: write it as `x'<hex>'`.
        case writeRawKeyWithQuotes
        /// The passphrase ends with a space or a tab, which is part of the passphrase: remove it if it was a mistake.
        case checkTrailingSpaceInPassphrase
        /// The passphrase starts with a space, a tab or a line break, which is part of the passphrase: remove it if it
        /// was a mistake.
        case checkLeadingSpaceInPassphrase
        /// The environment variable holds the path of an existing file, read as the key itself: read the key file.
        case readKeyFileInsteadOfPath
        /// A new passphrase below the rotation floor (or with a line break inside) was refused: opt in to accept it.
        case allowWeakPassphrase

        /// The advice in the library's API words, as ``DatabaseError/message`` ends.
        public var libraryWording: String {
            switch self {
            case .openWithoutKeyOrEncrypt:
                "open it with Encryption.none, or encrypt it into a new file with an export"
            case .openWithKey:
                "open it with its key"
            case .openWithPlaintextHeaderSettings:
                "open it with its key, CipherSettings.plaintextHeaderSize and its salt"
            case .giveSalt:
                "give it with CipherSettings.salt or a raw key with salt (x'<96 hex>')"
            case .encryptIntoNewFile:
                "export it into an encrypted copy with exportEncrypted(to:key:settings:)"
            case .decryptIntoNewFile:
                "a plaintext copy is made only by exportDecryptedPlaintextCopy(to:)"
            case .matchSourceCipherSettings:
                "give the destination the source's cipher settings, or use exportEncrypted(to:key:settings:) to"
                    + " change them"
            case .copyWithBackup:
                "use backup(toPath:) or exportEncrypted(to:key:settings:)"
            case .copyWithVacuumInto:
                "use Connection.vacuum(into:) (private, same key and settings, verified)"
            case .keyThroughAPI:
                "open with a key (Connection(path:key:)), change it with Connection.rekey(to:) or KeyRotation"
            case .cipherSettingsWhenOpening:
                "give them as CipherSettings when opening; to change them, re-encrypt with"
                    + " exportEncrypted(to:key:settings:) or KeyRotation"
            case .pageSizeWhenCreating:
                "give CipherSettings(pageSize:) when the database is created"
            case .migrateWithExport:
                "to migrate, use exportEncrypted(to:key:settings:)"
            case .attachWithKey:
                "give a key (ATTACH … KEY ?, Connection.attach(_:as:encryption:)), or allow plaintext attachments"
                    + " explicitly (OpenOptions.allowsPlaintextAttachments)"
            case .attachPlaintextWithEmptyKey:
                "attach it as plaintext with Connection.attach(_:as:encryption: .none), or in SQL with KEY '' once"
                    + " plaintext attachments are allowed (OpenOptions.allowsPlaintextAttachments); or export it into"
                    + " an encrypted copy first"
            case .stopOtherProcesses:
                "stop them first: they would keep using the old file"
            case .openWithCompatibility(let version):
                "this file opens with CipherSettings(compatibility: \(version)) (SQLCipher \(version)'s format)"
            case .openWithSQLCipher4:
                "open it with a program linked to SQLCipher 4"
            case .removeWhitespaceAfterRawKey:
                "the raw key is followed by spaces or blank lines: a key file holds x'<hex>' and at most one"
                    + " newline; remove the rest"
            case .writeRawKeyWithQuotes:
                "the key is all hex digits without x'…' around them, so it was read as a passphrase; a raw key is"
                    + " written x'<64 hex>' (or x'<96 hex>' with its salt)"
            case .checkTrailingSpaceInPassphrase:
                "the passphrase ends with a space or a tab, which counts as part of it; if it was not meant to be"
                    + " there, remove it"
            case .checkLeadingSpaceInPassphrase:
                "the passphrase starts with a space, a tab or a line break, which counts as part of it; if it was not"
                    + " meant to be there, remove it"
            case .readKeyFileInsteadOfPath:
                "the environment variable holds the path of an existing file, but its value is the key itself; to read"
                    + " a key file, use EncryptionKey(contentsOf:) or KeyProvider.file"
            case .allowWeakPassphrase:
                "to accept it anyway, set RotationRequest.allowsWeakPassphrase"
            }
        }
    }
}

// MARK: - Errors with a code of their own

extension DatabaseError {
    /// ``Kind/invalidArgument`` with `SQLITE_RANGE`: a column or parameter that is not there.
    @usableFromInline
    static func outOfRange(_ reason: String, sql: String? = nil) -> DatabaseError {
        DatabaseError(kind: .invalidArgument, code: SQLITE_RANGE, message: reason, sql: sql)
    }

    /// ``Kind/invalidState`` with `SQLITE_BUSY`: a file that others use (or left a journal beside).
    static func inUse(_ reason: String, remedy: Remedy? = nil) -> DatabaseError {
        DatabaseError(kind: .invalidState, code: SQLITE_BUSY, message: reason, remedy: remedy)
    }

    /// ``Kind/verificationFailed`` with `SQLITE_CORRUPT`: a check found the file is not what it should be.
    static func checkFailed(_ reason: String) -> DatabaseError {
        DatabaseError(kind: .verificationFailed, code: SQLITE_CORRUPT, message: reason)
    }

    /// ``Kind/sqlite`` with `SQLITE_AUTH`, as SQLite's own authorizer refusals: a statement the SQL guard refused.
    static func notAuthorized(_ reason: String, remedy: Remedy? = nil, sql: String? = nil) -> DatabaseError {
        DatabaseError(kind: .sqlite, code: SQLITE_AUTH, message: reason, remedy: remedy, sql: sql)
    }
}
