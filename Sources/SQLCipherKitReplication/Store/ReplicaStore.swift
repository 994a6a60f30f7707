#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// Where replicas are kept: an S3-compatible bucket, or a folder (a mounted volume).
///
/// Every byte a replicator gives a store is already encrypted by SQLCipher (database pages and WAL frames as they are
/// on disk), so a store, its operators and anyone who reads it see ciphertext only. A store never sees a key.
///
/// ``replicaStore(for:endpoint:credentials:)`` makes the library's two (a folder, an S3-compatible bucket) from a URL;
/// another kind of store conforms to this protocol. Each method must be safe to call from several tasks at once.
///
/// The replica's lease is written conditionally where the store can (compare-and-swap on the object's version);
/// a store of your own is treated as one that cannot, and a replicator checks its lease by reading it back.
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

    /// Every object whose key starts with `prefix`, sorted by key (every page of the listing).
    ///
    /// - Throws: ``ReplicationError``.
    func list(prefix: String) async throws -> [ReplicaObject]

    /// Removes the objects; a key that does not exist is not an error.
    ///
    /// - Throws: ``ReplicationError``.
    func delete(_ keys: [String]) async throws
}

/// A store that can write an object only if it is unchanged since it was read: the library's stores. The lease
/// is written this way where the store can (an object written in between makes the write fail instead of being
/// overwritten); any other ``ReplicaStore`` is written unconditionally and read back.
package protocol ConditionalReplicaStore: ReplicaStore {
    /// The bytes of the object `key` and a tag of this version of it for ``put(_:bytes:if:)``; `nil` when there
    /// is no such object.
    ///
    /// - Throws: ``ReplicationError``.
    func getVersioned(_ key: String) async throws -> (bytes: [UInt8], version: String?)?

    /// Stores `bytes` under `key` only if the object is still as it was read: absent, or of the version
    /// ``getVersioned(_:)`` gave.
    ///
    /// - Throws: ``ReplicationError``.
    func put(_ key: String, bytes: [UInt8], if condition: WriteCondition) async throws -> ConditionalWrite
}

/// What a conditional write requires of the object it replaces.
package enum WriteCondition: Sendable, Hashable {
    /// There is no such object.
    case absent
    /// The object is of this version (a tag ``ConditionalReplicaStore/getVersioned(_:)`` gave).
    case version(String)
}

/// The outcome of a conditional write.
package enum ConditionalWrite: Sendable, Hashable {
    /// The condition held and the object was written.
    case written
    /// The object changed since it was read (or exists): nothing was written.
    case conditionFailed
    /// The store cannot write conditionally (OpenStack Swift's S3 API answers `NotImplemented`, or a store that is
    /// not a ``ConditionalReplicaStore``): nothing was written, and the caller must check by reading back.
    case unsupported
}

extension ReplicaStore {
    /// The object `key` and its version tag where the store gives one (``ConditionalReplicaStore``); otherwise read
    /// with ``get(_:)``, without a tag. `nil` when there is no such object.
    ///
    /// - Throws: ``ReplicationError``.
    package func versionedObject(_ key: String) async throws -> (bytes: [UInt8], version: String?)? {
        if let conditional = self as? any ConditionalReplicaStore { return try await conditional.getVersioned(key) }
        do {
            return (try await get(key), nil)
        } catch let error as ReplicationError where error.kind == .notFound {
            return nil
        }
    }

    /// Writes `bytes` under `key` if `condition` holds, where the store can (``ConditionalReplicaStore``);
    /// ``ConditionalWrite/unsupported`` (nothing written) otherwise.
    ///
    /// - Throws: ``ReplicationError``.
    package func putIf(_ condition: WriteCondition, _ key: String, bytes: [UInt8]) async throws -> ConditionalWrite {
        guard let conditional = self as? any ConditionalReplicaStore else { return .unsupported }
        return try await conditional.put(key, bytes: bytes, if: condition)
    }
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

/// A local file operation failed: a ``DatabaseError`` of kind `fileSystem` with the system's reason.
func fileSystemFailure(_ message: String) -> DatabaseError {
    DatabaseError(.fileSystem, message + ": " + String(cString: strerror(errno)))
}
#endif
