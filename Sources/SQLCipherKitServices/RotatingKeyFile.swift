import Foundation
import SQLCipherKit
import Synchronization

/// The key files of a live service: `keyFile` holds the key the database opens with; an operator who wants a new
/// key writes it to `pendingKeyFile` (`<keyFile>.next`).
///
/// Key providers made here read whichever file holds the key for their generation, under one lock that the final
/// rename also takes, so a connection never reads a file that is being replaced:
/// - the provider of a rotation reads `pendingKeyFile` until the rotation is finished, then `keyFile` (which the
///   rename made the same key);
/// - the provider of a finished generation reads `keyFile`.
final class RotatingKeyFile: Sendable {
    let keyFile: String
    let pendingKeyFile: String
    private let lock = Mutex(())

    /// One key's lifetime: pending (read from the pending file) until ``retire(_:)`` renames it into place.
    final class Generation: Sendable {
        let isPending: Atomic<Bool>
        init(isPending: Bool) { self.isPending = Atomic(isPending) }
    }

    init(keyFile: String, pendingSuffix: String) {
        self.keyFile = keyFile
        self.pendingKeyFile = keyFile + pendingSuffix
    }

    /// A provider for `generation`'s key.
    func provider(for generation: Generation) -> KeyProvider {
        KeyProvider.custom("key file \(keyFile) (rotated live)") { [self] in
            try lock.withLock { _ in
                let path = generation.isPending.load(ordering: .acquiring) ? pendingKeyFile : keyFile
                return try EncryptionKey(contentsOf: path)
            }
        }
    }

    var hasPendingKey: Bool { FileManager.default.fileExists(atPath: pendingKeyFile) }

    func currentKey() throws -> EncryptionKey { try lock.withLock { _ in try EncryptionKey(contentsOf: keyFile) } }

    func pendingKey() throws -> EncryptionKey {
        try lock.withLock { _ in try EncryptionKey(contentsOf: pendingKeyFile) }
    }

    /// Makes the pending key the current one: renames the pending file over the key file (one atomic step, then
    /// the folder is synced) and points `generation`'s provider at the key file.
    func retire(_ generation: Generation) throws {
        try lock.withLock { _ in
            guard rename(pendingKeyFile, keyFile) == 0 else {
                throw DatabaseError(
                    kind: .fileSystem, code: DatabaseError.SQLITE_IOERR,
                    message: "could not rename \(pendingKeyFile) over \(keyFile): \(String(cString: strerror(errno)))")
            }
            generation.isPending.store(false, ordering: .releasing)
            syncFolder(of: keyFile)
        }
    }

    /// Moves a pending key that could not be used aside (`<pending>.rejected`), so it is not tried again and the
    /// operator sees it was refused.
    func reject() {
        lock.withLock { _ in _ = rename(pendingKeyFile, pendingKeyFile + ".rejected") }
    }

    private func syncFolder(of path: String) {
        let folder = (path as NSString).deletingLastPathComponent
        let descriptor = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
