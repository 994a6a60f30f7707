#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// Which state of the database a restore writes.
public enum RestoreTarget: Sendable, Hashable {
    /// The last restore point of the newest generation.
    case latest
    /// The last restore point whose time is at or before the date: no commit made after it is included (commits
    /// made shortly before it may be missing: the replica knows the time its log segments were read, not each
    /// commit's).
    case time(Date)
    /// The last restore point of the generation named.
    case generation(String)
    /// One restore point: a generation and an index in it (as `sqlcipherkit snapshots` lists them).
    case point(generation: String, index: Int)
}

/// A key to authenticate a replica with and to open a restored database with, and what to call it in reports
/// (never the key itself).
public struct VerificationKey: Sendable {
    /// How reports name it (`--key-file notes.key`, `the old key`).
    package var name: String
    /// The key.
    package var key: EncryptionKey
    /// The cipher settings it opens the database with. For a database with a plaintext header the replica's salt
    /// is used when these carry none.
    package var settings: CipherSettings

    /// Creates a key to verify with.
    ///
    /// - Parameters:
    ///   - name: How reports and errors name it (`notes.key`, `the old key`); never the key itself.
    ///   - key: The key.
    ///   - settings: The cipher settings it opens the database with. For a database with a plaintext header the
    ///     replica's salt is used when these carry none.
    public init(name: String, key: EncryptionKey, settings: CipherSettings = .engineDefault) {
        self.name = name
        self.key = key
        self.settings = settings
    }
}

/// How a restore writes and checks the new file.
public struct RestoreOptions: Sendable {
    /// Replace the destination when it exists (through the library's atomic replacement: the old file stays whole
    /// until the new one is complete, flushed and verified). Off by default: an existing file is never touched.
    package var replacesExisting: Bool
    /// Keys to authenticate the replica's objects with, and to open the restored file with before it is put in
    /// place: the first that opens it must pass `quick_check` (and `cipher_integrity_check` on SQLCipher 4.2+).
    /// Empty: no key is needed, none is used, and the restore checks integrity only.
    package var verificationKeys: [VerificationKey]
    /// Called as bytes are downloaded and checked (from the restoring task, so it must not block): a progress bar's
    /// figures. `nil` by default.
    package var progress: (@Sendable (RestoreProgress) -> Void)?

    /// Creates options.
    ///
    /// - Parameters:
    ///   - replacesExisting: Replace the destination when it exists (through the library's atomic replacement:
    ///     the old file stays whole until the new one is complete, flushed and verified); off: an existing file
    ///     is an error and is never touched.
    ///   - verificationKeys: Keys to authenticate the replica's objects with, and to open the restored file with
    ///     before it is put in place: the first that opens it must pass `quick_check` (and
    ///     `cipher_integrity_check` on SQLCipher 4.2+). None: no key is needed, none is used, and the restore
    ///     checks integrity only.
    public init(replacesExisting: Bool = false, verificationKeys: [VerificationKey] = []) {
        self.replacesExisting = replacesExisting
        self.verificationKeys = verificationKeys
    }

    /// Creates options that report progress.
    package init(
        replacesExisting: Bool, verificationKeys: [VerificationKey], progress: @escaping @Sendable (RestoreProgress) -> Void
    ) {
        self.init(replacesExisting: replacesExisting, verificationKeys: verificationKeys)
        self.progress = progress
    }
}

/// How far a restore is, as ``RestoreOptions/progress`` reports it.
package struct RestoreProgress: Sendable, Hashable {
    /// Bytes of snapshot parts and log segments downloaded and checked so far.
    package let completedByteCount: Int64
    /// Their total.
    package let totalByteCount: Int64
}

/// What a restore wrote.
public struct RestoreReport: Sendable {
    /// The restore point written.
    public let point: RestorePoint
    /// The file written (symlinks resolved).
    package let path: String
    /// Its size.
    public let byteCount: Int64
    /// The snapshot it started from.
    package let snapshotIndex: Int
    /// The log segments applied on top of it.
    package let segmentCount: Int
    /// The name of the key that opened it, when keys were given.
    package let verifiedWith: String?
    /// Its checks with that key.
    package let integrity: IntegrityReport?
    /// The newest point the replica holds (what ``RestoreTarget/latest`` restores), with its time: how recent the
    /// replica is, and how far behind it a restore of an older point is. Someone who can delete the newest objects
    /// from the store can make an older replica look like this one; only a record kept outside the store (the
    /// point a monitor saw last) can tell.
    public let newestPoint: RestorePoint?
    /// The name of the key every restored object was authenticated with; `nil` when no key was given (integrity
    /// checked only).
    package let authenticatedWith: String?
}
#endif
