import CSQLCipherKitSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one way SQLCipherKit writes a new database file: export, backup, `VACUUM INTO`, rotation, and the CLI's
/// `encrypt`, `decrypt` and `migrate` all go through it, so the rules below are checked in one place.
///
/// 1. The destination is resolved to the real file: a symlink is followed on purpose (``destination`` is the file
///    written, ``requestedDestination`` what the caller named), never replaced by a regular file. A dangling
///    symlink, a folder, a FIFO or a device is refused.
/// 2. Identity is by device and inode: a source and a destination that are one file under two names are refused.
/// 3. The temporary file lives in the destination's folder (so the final `rename` is atomic), is created with
///    `O_EXCL` and mode 0600, and is named `<name>.sqlcipherkit-tmp-<pid>-<random>`. It is registered before it
///    exists, so a handler for SIGINT/SIGTERM (installed by the CLI) removes it, and claimed with an `flock` held
///    until it is removed or renamed (``RegisteredTemporaryFile``). Leftovers of an earlier run that was killed are
///    removed by the next one, and only when no process holds their lock: a concurrent run's files are never
///    touched, whatever PID namespace it runs in.
/// 4. ``commit(verify:)`` verifies the copy (the caller's check, which opens it without creating it), gives it the
///    replaced file's owner, group and mode, flushes it, renames it into place and flushes the folder. When the
///    destination must not exist, the rename cannot replace a file that appeared meanwhile. Anything that fails on
///    the way removes the temporary file; the destination is then as it was.
///
/// The owner and group of a replaced file are kept; when this process could not give them to the new file (not
/// root, file of another user), the replacement is refused before anything is written.
package final class AtomicReplacement {
    /// Whether the destination may exist.
    package enum Policy {
        /// The destination must not exist (or be an empty file).
        case createNew
        /// The destination is replaced when it exists.
        case replaceExisting
    }

    /// The path the caller named.
    package let requestedDestination: String
    /// The real file that is written (symlinks resolved).
    package let destination: String
    /// The temporary file to write the copy into.
    package let temporaryPath: String

    private let replacesExistingFile: Bool
    private let preservedMetadata: FileMetadata?
    private let temporaryFile: RegisteredTemporaryFile
    private var isFinished = false

    /// Resolves and checks the destination, removes unclaimed leftovers, and creates the (empty, 0600, claimed)
    /// temporary file.
    ///
    /// - Parameters:
    ///   - destination: The file to create or replace.
    ///   - source: The database being copied, when there is one: refused when it is the destination itself.
    ///   - policy: Whether an existing destination is replaced.
    ///   - operation: What is being written, for messages (`export`, `backup`, …).
    package init(destination: String, source: String? = nil, policy: Policy, operation: String) throws {
        let resolved = try Self.resolve(destination, operation: operation)
        requestedDestination = destination
        self.destination = resolved.path

        if let existing = resolved.metadata, existing.size > 0, policy == .createNew {
            throw Self.refusal(
                operation, "the destination \(Self.describe(destination, resolved: resolved.path)) exists and is not"
                    + " empty; nothing was written")
        }
        if let source, let sourceID = OpenFiles.fileID(path: source), let existing = resolved.metadata,
           sourceID == existing.id {
            throw Self.refusal(
                operation, "\(source) and \(destination) are the same file; nothing was written")
        }
        let folder = parentFolder(of: resolved.path)
        guard isWritableFolder(folder) else {
            throw Self.refusal(
                operation, "the destination folder \(folder) does not exist or is not writable; nothing was written")
        }
        if let existing = resolved.metadata {
            try Self.checkCanPreserve(existing, of: resolved.path, operation: operation)
        }
        replacesExistingFile = resolved.metadata != nil
        preservedMetadata = resolved.metadata

        RegisteredTemporaryFile.removeUnclaimedLeftovers(beside: resolved.path)

        temporaryFile = try RegisteredTemporaryFile(beside: resolved.path, operation: operation)
        temporaryPath = temporaryFile.path
    }

    deinit {
        if !isFinished { abandon() }
    }

    /// Verifies the temporary file, gives it the replaced file's owner, group and mode, flushes it and renames it
    /// over the destination. On any failure the temporary file is removed and the error rethrown.
    ///
    /// - Parameters:
    ///   - verify: Opens the copy (without creating it) and throws when it is not what it should be.
    ///   - beforeRename: The last check before the rename, after the copy is flushed (a throw abandons the copy).
    package func commit(verify: (String) throws -> Void, beforeRename: () throws -> Void = {}) throws {
        precondition(!isFinished, "an atomic replacement commits once")
        do {
            try verify(temporaryPath)
            // A verification that opened the copy in WAL mode leaves no -wal behind once closed; one that remains
            // would hold pages the renamed file needs.
            if (regularFileSize(atPath: temporaryPath + "-wal") ?? 0) > 0 {
                throw fileSystemError("the copy still has a write-ahead log after verification")
            }
            unlink(temporaryPath + "-wal")
            unlink(temporaryPath + "-shm")
            try applyPreservedMetadata()
            try syncToDisk(atPath: temporaryPath)
            try refuseLiveSideFiles()
            try beforeRename()
            if replacesExistingFile {
                guard rename(temporaryPath, destination) == 0 else {
                    throw fileSystemError("cannot rename \(temporaryPath) to \(destination)")
                }
            } else {
                try linkWithoutReplacing()
            }
            try syncToDisk(atPath: parentFolder(of: destination))
        } catch {
            abandon()
            throw error
        }
        isFinished = true
        // The claim is released only now, with the copy in place: until the rename no other run may take the file for
        // a leftover. No SQLite connection of this process has it open any more (the verification closed its own),
        // so closing the claim's descriptor drops none of SQLite's locks.
        temporaryFile.forget()
        // The replaced file's empty log and shared-memory index must not be taken for the new file's.
        if regularFileSize(atPath: destination + "-wal") == 0 {
            unlink(destination + "-wal")
            unlink(destination + "-shm")
        }
    }

    /// Removes the temporary file and its companions.
    package func abandon() {
        guard !isFinished else { return }
        isFinished = true
        temporaryFile.remove()
    }

    // MARK: - Steps

    private func applyPreservedMetadata() throws {
        guard let metadata = preservedMetadata else { return }
        var status = stat()
        guard stat(temporaryPath, &status) == 0 else { throw fileSystemError("cannot read \(temporaryPath)") }
        if status.st_uid != metadata.owner || status.st_gid != metadata.group {
            guard chown(temporaryPath, metadata.owner, metadata.group) == 0 else {
                throw fileSystemError("cannot give the copy the owner and group of \(destination)")
            }
        }
        guard chmod(temporaryPath, metadata.mode & 0o7777) == 0 else {
            throw fileSystemError("cannot give the copy the mode of \(destination)")
        }
    }

    /// A non-empty `-wal` or a journal with a header beside the destination would be replayed into the new file.
    private func refuseLiveSideFiles() throws {
        if (regularFileSize(atPath: destination + "-wal") ?? 0) > 0 {
            throw DatabaseError.inUse("\(destination) has a write-ahead log with content (it is in use, or was not closed"
                    + " cleanly); it was not replaced")
        }
        if hasHotJournalHeader(atPath: destination + "-journal") {
            throw DatabaseError.inUse("\(destination) has a rollback journal (it is being written, or a crash left it); it was"
                    + " not replaced")
        }
    }

    /// `link` fails when the destination exists, where `rename` would replace it.
    private func linkWithoutReplacing() throws {
        if link(temporaryPath, destination) == 0 {
            unlink(temporaryPath)
            return
        }
        let linkError = errno
        if linkError == EEXIST {
            // An empty file may be replaced (the caller may have created it), a file with content may not.
            if regularFileSize(atPath: destination) == 0, rename(temporaryPath, destination) == 0 { return }
            throw DatabaseError(
                .fileSystem,
                "\(destination) appeared while the copy was written; it was left as it is, and the copy"
                    + " was removed")
        }
        // File systems without hard links: check, then rename.
        var status = stat()
        guard lstat(destination, &status) != 0 else {
            throw DatabaseError(
                .fileSystem,
                "\(destination) appeared while the copy was written; the copy was removed")
        }
        guard rename(temporaryPath, destination) == 0 else {
            throw fileSystemError("cannot rename \(temporaryPath) to \(destination)")
        }
    }

    // MARK: - Resolution

    struct FileMetadata {
        let id: OpenFiles.FileID
        let owner: uid_t
        let group: gid_t
        let mode: mode_t
        let size: Int
    }

    private struct Resolved {
        let path: String
        let metadata: FileMetadata?
    }

    private static func resolve(_ path: String, operation: String) throws -> Resolved {
        guard !path.isEmpty, path != ":memory:" else {
            throw refusal(operation, "the destination must be a file path")
        }
        var linkStatus = stat()
        if lstat(path, &linkStatus) == 0 {
            guard let real = realPath(path) else {
                throw refusal(operation, "\(path) is a symbolic link to a file that does not exist; nothing was written")
            }
            var status = stat()
            guard stat(real, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
                throw refusal(operation, "\(path) is not a regular file; nothing was written")
            }
            return Resolved(path: real, metadata: FileMetadata(
                id: OpenFiles.FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)),
                owner: status.st_uid, group: status.st_gid, mode: status.st_mode, size: Int(status.st_size)))
        }
        let name = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? ""
        guard !name.isEmpty, name != ".", name != "..", !path.hasSuffix("/") else {
            throw refusal(operation, "\(path) does not name a file; nothing was written")
        }
        let folder = parentFolder(of: path)
        guard let realFolder = realPath(folder) else {
            throw refusal(operation, "the destination folder \(folder) does not exist; nothing was written")
        }
        return Resolved(path: (realFolder == "/" ? "" : realFolder) + "/" + name, metadata: nil)
    }

    private static func checkCanPreserve(_ metadata: FileMetadata, of path: String, operation: String) throws {
        let userID = geteuid()
        guard userID != 0 else { return }
        if metadata.owner != userID {
            throw refusal(
                operation, "\(path) belongs to user \(metadata.owner), and this process (user \(userID)) cannot give"
                    + " the new file that owner; run it as that user (or as root). Nothing was written")
        }
        if metadata.group != getegid() && !isMemberOfGroup(metadata.group) {
            throw refusal(
                operation, "\(path) belongs to group \(metadata.group), which this process cannot give the new file;"
                    + " nothing was written")
        }
    }

    private static func isMemberOfGroup(_ group: gid_t) -> Bool {
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        return filled > 0 && groups.prefix(Int(filled)).contains(group)
    }

    private static func describe(_ requested: String, resolved: String) -> String {
        realPath(requested) == requested ? requested : "\(requested) (\(resolved))"
    }

    static func refusal(_ operation: String, _ message: String) -> DatabaseError {
        DatabaseError(.fileSystem, "\(operation) refused: \(message)")
    }
}
