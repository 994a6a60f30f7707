import CSQLCipher
import Logging

/// How a connection opens its database.
public struct OpenOptions: Sendable {
    /// Read and write access.
    public enum Mode: Sendable {
        /// Read and write; create the file when it does not exist (the default).
        case readWriteCreate
        /// Read and write; the file must exist.
        case readWrite
        /// Read only; the file must exist.
        case readOnly

        var flags: CInt {
            switch self {
            case .readWriteCreate: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
            case .readWrite: SQLITE_OPEN_READWRITE
            case .readOnly: SQLITE_OPEN_READONLY
            }
        }
    }

    /// The access mode.
    public var mode: Mode

    /// Interpret the path as a `file:` URI (see [URI filenames](https://www.sqlite.org/uri.html)).
    public var isURI: Bool

    /// How long to wait for another connection's lock before `SQLITE_BUSY`; `nil` fails at once.
    public var busyTimeout: Duration?

    /// How many compiled statements ``Connection/cachedStatement(_:)`` keeps.
    public var statementCacheCapacity: Int

    /// Runs right after the connection opened (keyed, verified), before it is returned: the place to register SQL
    /// functions, collations, hooks or tracing, and to set PRAGMAs. A ``DatabasePool`` or ``DatabaseQueue`` runs it
    /// for every connection it opens, so functions are available on all of them. What it registers through the
    /// connection's API is registered again when the connection reopens after a rekey. A thrown error fails the
    /// open.
    public var prepareConnection: (@Sendable (Connection) throws -> Void)?

    /// Set on the library's own scratch connections, whose key check needs no read-only probe first.
    var skipsKeyProbe = false

    /// Whether a key that does not open the file with the engine's default settings makes the open look for the
    /// other SQLCipher format (``OtherFormatProbe``) to name it in the error. Off for the library's own "does this
    /// key open it" probes, which expect failures and whose errors nobody reads.
    var namesOtherFormat = true

    /// The VFS to open with (`nil`: the default); a ``ReadOnlyOverlay``'s for a read-only check.
    var vfsName: String?

    /// Set on a rotation's connection to the file it replaces: `locking_mode = EXCLUSIVE` before the first read, so
    /// the first read takes (or fails to take) an exclusive lock on the file and keeps it until the connection
    /// closes, and a WAL database's index lives in this connection's memory: no `-shm` is mapped, so nothing of it
    /// is shared with whoever opens the file that replaces this one under the same name.
    var holdsExclusiveLock = false

    /// Where the connection reports opens, failed opens, rekeys, backups and exports (swift-log). Messages carry
    /// paths, kinds and error messages; never a key, never bound values. `nil` (the default) logs nothing.
    public var logger: Logger?

    /// Lets SQL on an encrypted connection attach a database without a key (`ATTACH 'x.db' AS x`, `KEY ''`), which
    /// SQLite writes in **plaintext**. `false` (the default): such an ATTACH fails with `SQLITE_AUTH`, the
    /// attachment is detached at once and a file it created is removed, before the next statement can write into
    /// it.
    ///
    /// ``Connection/attach(_:as:encryption:)`` with ``Encryption/none`` and
    /// ``Connection/exportDecryptedPlaintextCopy(to:)`` ask for plaintext explicitly and do not need this option.
    /// A connection opened with ``Encryption/none`` attaches plaintext files whatever the option says.
    ///
    /// - Warning: With `true`, anything SQL writes into such an attachment (`sqlcipher_export` included) is readable
    ///   by anyone who can read the file.
    public var allowsPlaintextAttachments: Bool

    /// Turns on foreign-key enforcement (`PRAGMA foreign_keys = ON`, read back) on the connection, and so on every
    /// connection of a pool or queue opened with these options. SQLite leaves it off unless each connection asks.
    /// `false` by default; Fluent's driver needs it (``DatabasePool``s given to it must have it).
    ///
    /// See [Foreign key support](https://www.sqlite.org/foreignkeys.html#fk_enable).
    public var enforcesForeignKeys: Bool

    /// Creates options.
    public init(
        mode: Mode = .readWriteCreate, isURI: Bool = false, busyTimeout: Duration? = .seconds(5),
        statementCacheCapacity: Int = 64, logger: Logger? = nil, allowsPlaintextAttachments: Bool = false,
        enforcesForeignKeys: Bool = false, prepareConnection: (@Sendable (Connection) throws -> Void)? = nil
    ) {
        self.enforcesForeignKeys = enforcesForeignKeys
        self.allowsPlaintextAttachments = allowsPlaintextAttachments
        self.prepareConnection = prepareConnection
        self.mode = mode
        self.isURI = isURI
        self.busyTimeout = busyTimeout
        self.statementCacheCapacity = statementCacheCapacity
        self.logger = logger
    }
}
