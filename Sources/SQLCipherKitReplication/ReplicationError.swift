#if Replication  // trait Replication (Package.swift)
import SQLCipherKit

/// The error of a replica and its store: a kind to match, a message a person can act on (never a key or a
/// credential), and what to do about it.
///
/// Conditions of the database or of local files (a key that does not open the database, a file that cannot be
/// written, an argument out of range) are thrown as the library's ``DatabaseError``, as everywhere else in
/// SQLCipherKit: one type per condition, so a caller matches `DatabaseError.wrongKey` whatever module threw it.
///
/// ```swift
/// do {
///     try await Replica(store: store).restore(to: "notes.db", verifyingWith: [verification])
/// } catch ReplicationError.Kind.damaged {
///     // an object does not check out: the message names it and the last good restore point
/// } catch DatabaseError.wrongKey {
///     // the key does not open the restored database
/// }
/// ```
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// A stable identifier, such as `"notFound"` (what ``description`` gives).
        package let name: String

        init(_ name: String) { self.name = name }

        /// A stable identifier, such as `"notFound"`.
        public var description: String { name }

        /// Lets `catch ReplicationError.Kind.damaged` match an error of that kind.
        public static func ~= (kind: Kind, error: any Error) -> Bool {
            (error as? ReplicationError)?.kind == kind
        }
    }

    /// What went wrong.
    public let kind: Kind
    /// What happened, with the object, store or point it concerns.
    public let reason: String
    /// What to do about it, when there is something to say; ``message`` words it in the library's terms (the
    /// command-line tool in its own).
    package let remedy: Remedy?

    /// The reason, then the remedy in the library's words (what ``description`` gives after the kind).
    package var message: String {
        guard let remedy else { return reason }
        return reason + "; " + remedy.libraryWording
    }

    /// Creates an error.
    package init(_ kind: Kind, _ reason: String, remedy: Remedy? = nil) {
        self.kind = kind
        self.reason = reason
        self.remedy = remedy
    }

    /// The kind, what happened, and what to do about it when there is something to say (`damaged: … ; to restore
    /// an older state on purpose, name a point: …`).
    public var description: String { "\(kind): \(message)" }

    /// What a person can do about an error, worded by the library (``libraryWording``) and by the command-line
    /// tool in its own words.
    package enum Remedy: Hashable, Sendable {
        /// Check the access key ID and secret (and session token) the store refused.
        case checkCredentials
        /// Create the bucket, or correct the replica URL or the endpoint.
        case createBucketOrCorrectURL
        /// Set this machine's clock right.
        case setClock
        /// Check the replica URL: nothing is stored under it.
        case checkReplicaURL
        /// Name a restore point (a generation, or a generation and index) to restore something older than what
        /// stopped the restore: the last good point, when there is one.
        case nameRestorePoint(lastGood: RestorePoint?)
        /// Give the key the generation was written with: the key it had then, for a generation before a rotation.
        case verifyWithKeyOfGeneration(String)
        /// Another replicator holds the replica: stop it, or wait until its lease expires.
        case stopOtherReplicator
        /// This replicator was replaced by another (a promoted follower): the replica goes on there.
        case replicaMovedOn
        /// Replace an existing destination only on purpose.
        case replaceOnPurpose

        /// The advice in the library's terms.
        package var libraryWording: String {
            switch self {
            case .checkCredentials:
                "check the access key ID and secret (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; AWS_SESSION_TOKEN for"
                    + " temporary credentials)"
            case .createBucketOrCorrectURL:
                "create the bucket, or correct the s3:// URL or the store's endpoint"
            case .setClock:
                "set this machine's clock right (NTP)"
            case .checkReplicaURL:
                "check the replica's URL: nothing is stored under it"
            case .nameRestorePoint(let lastGood?):
                "to restore an older state on purpose, name a point: RestoreTarget.point(generation: \""
                    + "\(lastGood.generation)\", index: \(lastGood.index)) is the last good one"
            case .nameRestorePoint(nil):
                "to restore an older state on purpose, name a generation or a point (RestoreTarget.generation,"
                    + " .point)"
            case .verifyWithKeyOfGeneration(let generation):
                "verify with the key the database had when generation \(generation) was written"
            case .stopOtherReplicator:
                "stop the other replicator, or wait until its lease expires (a replicator that died leaves it)"
            case .replicaMovedOn:
                "the replica goes on from the new holder's generation; this replicator must not write to it"
            case .replaceOnPurpose:
                "replace it only on purpose (RestoreOptions.replacesExisting)"
            }
        }
    }
}

extension ReplicationError.Kind {
    /// No such object, replica or restore point.
    public static let notFound = Self("notFound")
    /// The store refused the credentials, or the operation to them.
    public static let accessDenied = Self("accessDenied")
    /// The bucket does not exist.
    public static let noSuchBucket = Self("noSuchBucket")
    /// The store says this machine's clock is too far from its own to accept a signature.
    public static let clockSkew = Self("clockSkew")
    /// The store could not be reached (connection refused, timeout, name resolution, a dropped transfer).
    public static let unreachable = Self("unreachable")
    /// The store answered with an error not covered by another kind.
    public static let storeError = Self("storeError")
    /// An object does not match its checksum, is missing, or does not follow on from the one before it; or a
    /// newer part of the replica than the one restored cannot be read: restore stops and names it.
    public static let damaged = Self("damaged")
    /// An object's MAC does not verify with the key given: it was not written by a replicator holding the
    /// database's key (a forged or altered object, or one from another replica).
    public static let notAuthentic = Self("notAuthentic")
    /// A file that was being read changed or was shorter than expected (while shipping: ``Replicator/run()`` retries
    /// it, so it shows only in ``ReplicationStatus/lastError``).
    package static let sourceChanged = Self("sourceChanged")
    /// The destination of a restore or a download exists.
    public static let destinationExists = Self("destinationExists")
    /// Another replicator holds the replica's lease: two writers would fork it.
    public static let leaseHeld = Self("leaseHeld")
    /// This replicator's lease was taken over (by a promoted follower): it stops writing to the replica.
    public static let fenced = Self("fenced")
}

#endif
