#if Replication  // trait Replication (Package.swift)
import Foundation

/// Where replicas are kept: an S3-compatible bucket, or a folder (a mounted volume).
///
/// Every byte a replicator gives a store is already encrypted by SQLCipher (database pages and WAL frames as they are
/// on disk), so a store, its operators and anyone who reads it see ciphertext only. A store never sees a key.
///
/// Implementations: ``FolderReplicaStore`` and `S3ReplicaStore`. Each method is safe to call from several tasks at
/// once.
public protocol ReplicaStore: Sendable {
    /// Where the store keeps its objects, for messages and logs (a URL; never a credential).
    var description: String { get }

    /// Stores `bytes` under `key`, replacing an object of that name.
    ///
    /// - Throws: ``ReplicationError``.
    func put(_ key: String, bytes: [UInt8]) async throws

    /// Stores `length` bytes of the file at `path`, starting at `offset`, under `key`, streamed: memory stays bounded
    /// whatever the length (a multipart upload above the part size on S3).
    ///
    /// - Parameter progress: Called with the number of bytes stored so far, from any task.
    /// - Throws: ``ReplicationError``; `ReplicationError.Kind.sourceChanged` when the file is shorter than
    ///   `offset + length`.
    func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws

    /// The bytes of the object `key`.
    ///
    /// - Throws: ``ReplicationError`` (`notFound` when there is no such object).
    func get(_ key: String) async throws -> [UInt8]

    /// Writes the object `key` into a new file at `path` (mode 0600; the file must not exist), streamed.
    ///
    /// - Parameter progress: Called with the number of bytes written so far.
    /// - Throws: ``ReplicationError`` (`notFound`, `destinationExists`, …). A partial file is removed.
    func get(_ key: String, toFile path: String, progress: (@Sendable (Int64) -> Void)?) async throws

    /// Every object whose key starts with `prefix`, sorted by key (every page of the listing).
    ///
    /// - Throws: ``ReplicationError``.
    func list(prefix: String) async throws -> [ReplicaObject]

    /// Removes the objects; a key that does not exist is not an error.
    ///
    /// - Throws: ``ReplicationError``.
    func delete(_ keys: [String]) async throws
}

/// One object of a ``ReplicaStore``.
public struct ReplicaObject: Sendable, Hashable {
    /// The object's key (its path under the store's root).
    public let key: String
    /// Its size in bytes.
    public let size: Int64

    /// Creates a description of an object.
    public init(key: String, size: Int64) {
        self.key = key
        self.size = size
    }
}

/// The error of replication, stores and restore: a kind to match, and a message a person can act on (never a key or
/// a credential).
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// A stable identifier, such as `"notFound"`.
        public let name: String

        /// Creates a kind (the library's own kinds are the static members).
        public init(_ name: String) { self.name = name }

        /// The name.
        public var description: String { name }

        /// No object (or no replica) under that key.
        public static let notFound = Kind("notFound")
        /// The store refused the credentials (wrong access key or secret, expired session token).
        public static let accessDenied = Kind("accessDenied")
        /// The bucket does not exist.
        public static let noSuchBucket = Kind("noSuchBucket")
        /// The store says this machine's clock is too far from its own to accept a signature.
        public static let clockSkew = Kind("clockSkew")
        /// The store could not be reached (connection refused, timeout, name resolution).
        public static let unreachable = Kind("unreachable")
        /// The store answered with an error not covered by another kind.
        public static let storeError = Kind("storeError")
        /// Lets `catch ReplicationError.Kind.notFound` match an error of that kind.
        public static func ~= (kind: Kind, error: any Error) -> Bool {
            (error as? ReplicationError)?.kind == kind
        }

        /// An object's content does not match its checksum, or a replica is missing a piece: restore stops.
        public static let damaged = Kind("damaged")
        /// A file that was being read changed or was shorter than expected.
        public static let sourceChanged = Kind("sourceChanged")
        /// The destination of a restore or download exists.
        public static let destinationExists = Kind("destinationExists")
        /// A local file operation failed.
        public static let fileSystem = Kind("fileSystem")
        /// A URL, option or argument is not valid.
        public static let invalidArgument = Kind("invalidArgument")
        /// No key given to verify a restored database opens it.
        public static let wrongKey = Kind("wrongKey")
        /// A restored database opened with its key but did not pass its checks (quick_check, page HMACs).
        public static let verificationFailed = Kind("verificationFailed")
    }

    /// What went wrong.
    public let kind: Kind
    /// What happened and, where there is one, what to do.
    public let message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// `kind: message`.
    public var description: String { "\(kind): \(message)" }
}
/// Creates the file a download writes into: mode 0600, never over an existing file or through a symbolic link. The
/// caller closes it, and removes it unless the download completed.
func createDownloadFile(_ destination: String) throws -> Int32 {
    let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard output >= 0 else {
        if errno == EEXIST { throw ReplicationError(.destinationExists, "\(destination) exists; nothing was written") }
        throw ReplicationError.fileSystem("cannot create \(destination)")
    }
    return output
}
#endif
