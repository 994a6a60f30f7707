#if LiveRotation  // trait LiveRotation (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key files of a live service, and the steps that hand a new key over to it. Each step is one atomic file
/// operation, so a crash between any two leaves files from which the next start finds the key that opens the
/// database (Docs/Services.md, "Rotating the key of a live service"):
///
/// | File | Holds |
/// |---|---|
/// | `keyFile` | the key the database opens with (outside a hand-over) |
/// | `pendingKeyFile` (`<keyFile>.next`) | a new key an operator handed over; read once per hand-over, by descriptor |
/// | `rotatingKeyFile` (`<keyFile>.rotating`) | the exact key being rotated in, written from the bytes that were read, before the rekey |
/// | `<pendingKeyFile>.rejected` | a pending key that was refused (the log says why) |
/// | `inUseKeyFile` (`<keyFile>.in-use`, else `.in-use.2` … `.in-use.9`) | the key the pool uses, written back when the key file stopped opening the database |
///
/// Files change only while the caller holds the hand-over turn (``takeTurn(waiting:)``): an `flock` on the key
/// file's folder, so two replicas of a service on one database, or two services whose keys share a folder, never
/// hand over at once.
final class KeyHandOver: Sendable {
    let keyFile: String
    let pendingKeyFile: String
    let rotatingKeyFile: String
    var rejectedKeyFile: String { pendingKeyFile + ".rejected" }
    var inUseKeyFile: String { keyFile + ".in-use" }
    /// The names a copy of the key in use may take, in order: a name taken by anything else is never reused.
    var inUseKeyFileNames: [String] { [inUseKeyFile] + (2...9).map { inUseKeyFile + ".\($0)" } }
    let folder: String

    init(keyFile: String, pendingSuffix: String) {
        self.keyFile = keyFile
        pendingKeyFile = keyFile + pendingSuffix
        rotatingKeyFile = keyFile + ".rotating"
        let slash = keyFile.lastIndex(of: "/")
        folder = slash.map { $0 == keyFile.startIndex ? "/" : String(keyFile[..<$0]) } ?? "."
    }

    /// A pending key as it was read: the key, and the identity of the file it came from.
    struct Pending {
        let key: EncryptionKey
        let identity: EncryptionKey.KeyFileIdentity
    }

    /// Why a pending key file cannot be used.
    struct Unusable: Error {
        let error: DatabaseError
        let identity: EncryptionKey.KeyFileIdentity?
    }

    // MARK: - The turn

    /// The hand-over turn: an exclusive `flock` on the key folder, released when the turn is released (or the
    /// process ends).
    final class Turn {
        private var descriptor: CInt

        fileprivate init(descriptor: CInt) { self.descriptor = descriptor }

        func release() {
            guard descriptor >= 0 else { return }
            _ = close(descriptor)
            descriptor = -1
        }

        deinit { release() }
    }

    /// Takes the turn, waiting at most `timeout` (`.zero`: not at all). `nil` when another holder kept it.
    ///
    /// - Throws: ``DatabaseError/fileSystem`` when the folder cannot be opened.
    func takeTurn(waiting timeout: Duration = .zero) throws -> Turn? {
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw DatabaseError(
                .fileSystem, "cannot open the key folder \(folder) to take the hand-over turn: \(errnoText())")
        }
        let deadline = ContinuousClock.now + timeout
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let error = DatabaseError(.fileSystem, "cannot lock the key folder \(folder): \(errnoText())")
                _ = close(descriptor)
                throw error
            }
            guard ContinuousClock.now < deadline else {
                _ = close(descriptor)
                return nil
            }
            usleep(10_000)
        }
        return Turn(descriptor: descriptor)
    }

    // MARK: - Reading

    /// The key in ``keyFile``.
    func currentKey() throws -> EncryptionKey {
        try EncryptionKey(contentsOf: keyFile)
    }

    /// The key being rotated in, or `nil` when no hand-over is recorded.
    func rotatingKey() throws -> EncryptionKey? {
        guard FileManager.default.fileExists(atPath: rotatingKeyFile) else { return nil }
        return try EncryptionKey(contentsOf: rotatingKeyFile)
    }

    var hasPendingKey: Bool { FileManager.default.fileExists(atPath: pendingKeyFile) }

    /// Reads the pending key file once, through one descriptor. `nil` when there is none.
    ///
    /// - Throws: ``Unusable`` when it exists but cannot be used as a key.
    func readPending() throws(Unusable) -> Pending? {
        guard hasPendingKey else { return nil }
        do {
            let (key, identity) = try EncryptionKey.readKeyFile(atPath: pendingKeyFile)
            return Pending(key: key, identity: identity)
        } catch let error as DatabaseError {
            // Gone between the look and the read (the operator took it back): nothing is pending.
            guard let identity = EncryptionKey.KeyFileIdentity(path: pendingKeyFile) else { return nil }
            throw Unusable(error: error, identity: identity)
        } catch {
            throw Unusable(error: DatabaseError(.invalidKey, "\(error)"), identity: nil)
        }
    }

    // MARK: - Writing (with the turn held)

    /// Records `key` as the key being rotated in: written under a temporary name (mode 0600, flushed), renamed to
    /// ``rotatingKeyFile``, folder flushed. From the bytes held in memory, not from the pending file again.
    func recordRotating(_ key: EncryptionKey) throws {
        let temporary = rotatingKeyFile + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try key.write(toKeyFile: temporary)
        guard rename(temporary, rotatingKeyFile) == 0 else {
            let error = DatabaseError(
                .fileSystem, "cannot rename \(temporary) to \(rotatingKeyFile): \(errnoText())")
            unlink(temporary)
            throw error
        }
        syncFolder()
    }

    /// Makes the key being rotated in the current one: renames ``rotatingKeyFile`` over ``keyFile`` (one atomic
    /// step), then flushes the folder.
    func retireRotating() throws {
        guard rename(rotatingKeyFile, keyFile) == 0 else {
            throw DatabaseError(
                .fileSystem, "cannot rename \(rotatingKeyFile) over \(keyFile): \(errnoText())")
        }
        syncFolder()
    }

    /// Writes `key` into ``keyFile`` through ``rotatingKeyFile`` (record, then retire).
    func replaceKeyFile(with key: EncryptionKey) throws {
        try recordRotating(key)
        try retireRotating()
    }

    func removeRotating() {
        unlink(rotatingKeyFile)
        syncFolder()
    }

    /// Removes the pending key file if it is still the file `identity` describes (a newer hand-over written
    /// meanwhile is left for the next round). Returns whether it was removed.
    @discardableResult
    func removePending(ifStill identity: EncryptionKey.KeyFileIdentity) -> Bool {
        take(identity) { taken in unlink(taken) == 0 }
    }

    /// Renames the pending key file to ``rejectedKeyFile`` if it is still the file `identity` describes.
    @discardableResult
    func rejectPending(ifStill identity: EncryptionKey.KeyFileIdentity) -> Bool {
        take(identity) { taken in rename(taken, rejectedKeyFile) == 0 }
    }

    /// Moves the pending file out of the way under a unique name, then checks that what was taken is the file
    /// `identity` describes: if so `finish` disposes of it; if another file was renamed over the pending name in
    /// between, it is put back (or kept beside it when yet another arrived).
    private func take(_ identity: EncryptionKey.KeyFileIdentity, finish: (String) -> Bool) -> Bool {
        guard EncryptionKey.KeyFileIdentity(path: pendingKeyFile) == identity else { return false }
        let taken = pendingKeyFile + ".taken-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard rename(pendingKeyFile, taken) == 0 else { return false }
        defer { syncFolder() }
        if EncryptionKey.KeyFileIdentity(path: taken) == identity {
            return finish(taken)
        }
        if link(taken, pendingKeyFile) == 0 {
            unlink(taken)
        } else {
            _ = rename(taken, pendingKeyFile + ".superseded-\(time(nil))")
        }
        return false
    }

    // MARK: - The key in use, written back

    /// Where a copy of the key in use was found or written, and the names skipped because something else was there.
    struct InUseCopy {
        let path: String
        let identity: EncryptionKey.KeyFileIdentity?
        let wasAlreadyThere: Bool
        let skipped: [String]
    }

    /// Makes sure a file beside the key file holds `key`: the first of ``inUseKeyFileNames`` that is a regular file
    /// holding `key` already, or else the first free one, written under a temporary name (`O_EXCL`, mode 0600,
    /// flushed, folder flushed), then linked to its name (`link` never replaces what is there, and never follows
    /// a link) and the folder flushed again. A name taken by anything else (another key, a link, a folder, a FIFO,
    /// a file that cannot be read) is left untouched and the next is tried.
    ///
    /// - Throws: ``DatabaseError/fileSystem`` naming the file and the system's reason when it cannot be written (a
    ///   read-only folder, a full disk), or when every name is taken; nothing is left behind. Never key material.
    func writeInUseCopy(of key: EncryptionKey) throws -> InUseCopy {
        var skipped: [String] = []
        for name in inUseKeyFileNames {
            var status = stat()
            if lstat(name, &status) == 0 {
                if (status.st_mode & S_IFMT) == S_IFREG, let (found, identity) = try? EncryptionKey.readKeyFile(atPath: name),
                   found.isSameKey(as: key) {
                    return InUseCopy(path: name, identity: identity, wasAlreadyThere: true, skipped: skipped)
                }
                skipped.append(name)
                continue
            }
            guard errno == ENOENT else {
                throw DatabaseError(.fileSystem, "cannot look at \(name): \(errnoText())")
            }
            guard try writeLinked(key, as: name) else {
                skipped.append(name)  // created meanwhile by someone else
                continue
            }
            return InUseCopy(
                path: name, identity: EncryptionKey.KeyFileIdentity(path: name), wasAlreadyThere: false,
                skipped: skipped)
        }
        throw DatabaseError(
            .fileSystem,
            "\(inUseKeyFile) and \(inUseKeyFile).2 to .9 are all taken by other files, none of which holds the key in"
                + " use; none was overwritten")
    }

    /// Writes `key` to a temporary file and links it to `name`. `false` when `name` exists (nothing written).
    private func writeLinked(_ key: EncryptionKey, as name: String) throws -> Bool {
        let temporary = inUseKeyFile + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            try key.write(toKeyFile: temporary)
        } catch let error as DatabaseError {
            // Said of the copy's name: the temporary one changes at every attempt, and is gone.
            throw DatabaseError(error.kind, error.message.replacingOccurrences(of: temporary, with: name))
        }
        if link(temporary, name) != 0 {
            let failure = errno
            unlink(temporary)
            if failure == EEXIST { return false }
            // A file system without hard links: the same bytes created under the name itself, still never
            // replacing anything (O_EXCL). A crash in the middle leaves at worst a short file under that name,
            // which the next attempt skips as "not the key in use".
            guard failure == EPERM || failure == ENOTSUP || failure == EMLINK else {
                throw DatabaseError(.fileSystem, "cannot link \(temporary) to \(name): \(String(cString: strerror(failure)))")
            }
            try key.write(toKeyFile: name)
            return true
        }
        unlink(temporary)
        try syncFolderOrThrow()
        return true
    }

    /// Removes a copy written by ``writeInUseCopy(of:)`` if it is still that file. Returns whether it was removed.
    @discardableResult
    func removeInUseCopy(at path: String, ifStill identity: EncryptionKey.KeyFileIdentity?) -> Bool {
        guard let identity, EncryptionKey.KeyFileIdentity(path: path) == identity, unlink(path) == 0 else { return false }
        syncFolder()
        return true
    }

    /// The copies of a key in use that exist now (regular files only).
    var existingInUseCopies: [String] {
        inUseKeyFileNames.filter { name in
            var status = stat()
            return lstat(name, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
        }
    }

    private func syncFolderOrThrow() throws {
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw DatabaseError(.fileSystem, "cannot open the key folder \(folder) to flush it: \(errnoText())")
        }
        defer { _ = close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw DatabaseError(.fileSystem, "cannot flush the key folder \(folder) to disk: \(errnoText())")
        }
    }

    private func syncFolder() {
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        _ = close(descriptor)
    }
}

func errnoText() -> String { String(cString: strerror(errno)) }
#endif
