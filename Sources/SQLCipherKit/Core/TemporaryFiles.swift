import CSQLCipherKitSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Temporary database files (the copies AtomicReplacement writes, the key check's scratch copy) and the file-system
// helpers every layer uses. Core, so that opening a connection and the maintenance layer share them.

/// What every temporary database file's name holds after the database's name: `<database>.sqlcipherkit-tmp-<pid>-<random>`.
let temporaryFileMarker = ".sqlcipherkit-tmp-"

/// What a temporary file's name covers: the file and the companions SQLite makes beside it.
let temporaryFileSuffixes = ["", "-journal", "-wal", "-shm"]

/// A new, empty, mode-0600 file named `<database>.sqlcipherkit-tmp-<pid>-<random>` beside a database, registered
/// so that the CLI's signal handlers and guardian remove it (and its `-journal`, `-wal`, `-shm`), and **claimed**: this
/// process holds an exclusive `flock` on it from the moment it exists until it is removed or renamed into place. A
/// later run removes a leftover only when it can take that lock itself, that is when no process holds it any more,
/// wherever that process runs: the pid in the name means nothing in another PID namespace (two containers sharing a
/// volume), so it is not what decides.
///
/// The claim is a descriptor of the file kept open. SQLite locks database files with POSIX `fcntl` locks, and closing
/// *any* descriptor of a file drops every POSIX lock the process holds on it: the claim is closed only by
/// ``remove()`` and ``forget()``, which callers reach after closing SQLite's connections to the file (the copy's
/// connection, the export's attachment, the verification).
final class RegisteredTemporaryFile {
    let path: String
    private let slot: CInt
    /// The open descriptor holding the `flock` (kept open too where the file system has no `flock`); -1 once released.
    private var claim: CInt

    init(beside databasePath: String, operation: String) throws {
        var attempt = 0
        while true {
            attempt += 1
            let path = databasePath + temporaryFileMarker + "\(getpid())-" + randomSuffix()
            // Registered before it exists: a signal between the two removes a file that is not there yet, harmlessly.
            let slot = CSQLCipherKitSupport_registerTemporaryFile(path)
            guard slot >= 0 else {
                throw DatabaseError(
                    .fileSystem, "\(operation) refused: too many temporary files at once, or a path too long; nothing"
                        + " was written")
            }
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard descriptor >= 0 else {
                let error = fileSystemError("cannot create the temporary file \(path)")
                CSQLCipherKitSupport_unregisterTemporaryFile(slot)
                throw error
            }
            switch Self.claim(descriptor, path: path, isReliable: claimsAreReliable(inFolder: parentFolder(of: path))) {
            case .claimed, .unsupported:
                self.path = path
                self.slot = slot
                self.claim = descriptor
                return
            case .lost where attempt < 8:
                // Another run found the file in the instant between its creation and the lock, took it for a
                // leftover and removes it: start again under another name.
                closeFileDescriptor(descriptor)
                CSQLCipherKitSupport_unregisterTemporaryFile(slot)
            case .lost:
                closeFileDescriptor(descriptor)
                CSQLCipherKitSupport_unregisterTemporaryFile(slot)
                throw DatabaseError(
                    .fileSystem, "\(operation) refused: the temporary file beside \(databasePath) was removed by"
                        + " another process as soon as it was made, 8 times; nothing was written")
            }
        }
    }

    deinit {
        if claim >= 0 { closeFileDescriptor(claim) }
    }

    private enum ClaimOutcome {
        case claimed
        /// The file system refuses `flock`, or a lock there cannot be trusted (``claimsAreReliable(inFolder:)``): the
        /// file stays unclaimed, and a later run cannot tell whether it is in use, so it leaves it alone.
        case unsupported
        /// Another process holds the lock or removed the file: it took the new file for a leftover.
        case lost
    }

    private static func claim(_ descriptor: CInt, path: String, isReliable: Bool) -> ClaimOutcome {
        guard isReliable else { return .unsupported }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            return errno == EWOULDBLOCK || errno == EINTR ? .lost : .unsupported
        }
        // The lock is on the file this descriptor opened; the name must still lead to it.
        return isSameFile(descriptor, path) ? .claimed : .lost
    }

    /// Removes the file and its companions, then releases the claim (held while they are removed, so no other run
    /// takes them for a leftover meanwhile). SQLite's connections to the file must be closed by then.
    func remove() {
        removeDatabaseFiles(atPath: path)
        release()
        CSQLCipherKitSupport_unregisterTemporaryFile(slot)
    }

    /// The file became something else (it was renamed into place): nothing to remove on a signal any more, and the
    /// claim is released. SQLite's connections to the file must be closed by then.
    func forget() {
        release()
        CSQLCipherKitSupport_unregisterTemporaryFile(slot)
    }

    private func release() {
        if claim >= 0 {
            closeFileDescriptor(claim)
            claim = -1
        }
    }

    // MARK: - Leftovers

    /// Removes the temporary files beside `destination` (`<name>.sqlcipherkit-tmp-<pid>-<random>` and their
    /// companions) that no process claims: a run killed with SIGKILL, a crash, a power loss. A file whose lock is
    /// held (by a run in this PID namespace or another, on this host) is left alone, and so is one whose lock cannot
    /// be asked for (a file system without `flock`). This process's own files are not even opened: closing the
    /// probe's descriptor would drop the POSIX locks SQLite holds on them here.
    static func removeUnclaimedLeftovers(beside destination: String) {
        let folder = parentFolder(of: destination)
        guard claimsAreReliable(inFolder: folder) else { return }
        let prefix = (destination.split(separator: "/").last.map(String.init) ?? destination) + temporaryFileMarker
        let ownPrefix = prefix + "\(getpid())-"
        var companionsByFile: [String: [String]] = [:]
        for name in directoryEntries(of: folder) ?? [] where name.hasPrefix(prefix) && !name.hasPrefix(ownPrefix) {
            guard let (file, suffix) = splitTemporaryName(name, prefix: prefix) else { continue }
            companionsByFile[file, default: []] += suffix.isEmpty ? [] : [folder + "/" + name]
        }
        for (file, companions) in companionsByFile {
            var status = stat()
            if lstat(folder + "/" + file, &status) == 0 {
                removeIfUnclaimed(folder + "/" + file, companions: companions)
            } else if errno == ENOENT {
                // Companions whose file is gone (asked now, not from the listing, which a run starting meanwhile
                // may have changed): their run removed the file, and a file is made before its companions, under
                // a name never used again; nothing uses them.
                for companion in companions { unlink(companion) }
            }
        }
    }

    /// `<prefix><pid>-<hex><suffix>` → (`<prefix><pid>-<hex>`, suffix), or `nil` for any other name.
    private static func splitTemporaryName(_ name: String, prefix: String) -> (String, String)? {
        let rest = name.dropFirst(prefix.count)
        guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0 else { return nil }
        let tail = rest[rest.index(after: dash)...]
        let randomPart = tail.prefix { $0.isHexDigit }
        let suffix = String(tail.dropFirst(randomPart.count))
        guard !randomPart.isEmpty, temporaryFileSuffixes.contains(suffix) else { return nil }
        return (String(name.dropLast(suffix.count)), suffix)
    }

    /// Takes the file's lock without waiting; only when that works (nobody holds it) are the file and its
    /// companions removed, under the lock, and the lock released.
    private static func removeIfUnclaimed(_ path: String, companions: [String]) {
        var named = stat()
        guard lstat(path, &named) == 0, (named.st_mode & S_IFMT) == S_IFREG else { return }
        // Opened for writing: an exclusive lock needs it where flock is emulated with byte-range locks (NFS). A file
        // this process may not open (another user's) cannot be asked, and stays.
        let descriptor = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else { return }
        defer { closeFileDescriptor(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG,
              flock(descriptor, LOCK_EX | LOCK_NB) == 0, isSameFile(descriptor, path)
        else { return }
        for companion in companions { unlink(companion) }
        unlink(path)
    }
}

/// Whether an `flock` claim can be trusted in a folder. On a local file system every process of the host sees it, in
/// whatever PID namespace. On a network or FUSE file system it cannot: a lock another host holds may not be seen
/// (NFS mounted with `local_lock`, FUSE file systems that leave locking to the local kernel), SQLite's own unlocking of
/// the file drops it (NFS and SMB emulate `flock` with a byte-range lock on the whole file, which SQLite's `fcntl`
/// locks of the same process replace), and on SMB it would make SQLite's own reads and writes fail (its locks are
/// mandatory). There no claim is taken and no leftover removed: only the signal handlers and the guardian remove
/// temporary files, by name.
func claimsAreReliable(inFolder folder: String) -> Bool {
    CSQLCipherKitSupport_isLocalFileSystem(folder) == 1
}

/// Whether a path names the file an open descriptor refers to (same device and inode, not through a symlink).
private func isSameFile(_ descriptor: CInt, _ path: String) -> Bool {
    var opened = stat()
    var named = stat()
    return fstat(descriptor, &opened) == 0 && lstat(path, &named) == 0 && opened.st_dev == named.st_dev
        && opened.st_ino == named.st_ino
}

/// The command line's clean-up of the temporary files registered by the one file-replacement path that are still in
/// progress: signal handlers and a forked guardian process. Package access: a library must not install signal
/// handlers or fork helpers behind its user's back. A library user gets the next-run clean-up instead (a leftover
/// whose claim no process holds is removed by the next write beside the same destination; Docs/Security.md).
package enum TemporaryFiles {
    /// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT that remove the temporary database files in
    /// progress, then let the signal end the process as it would have. For command-line tools; a service that
    /// handles these signals itself would call ``removeAll()`` from its own handler instead.
    package static func installSignalCleanup() throws {
        guard CSQLCipherKitSupport_installCleanupSignalHandlers() == 0 else {
            throw fileSystemError("cannot install the signal handlers")
        }
    }

    /// Sets what the handlers of ``installSignalCleanup()`` write to standard error when a signal ends the process,
    /// after removing the temporary files: what the interrupted step left as it was (the CLI says, for example,
    /// that the original file is untouched). `nil` removes it. The text is copied (at most 1,024 bytes); it must
    /// hold no key material.
    public static func setInterruptNote(_ text: String?) {
        guard let text else { return CSQLCipherKitSupport_setInterruptNote(nil) }
        CSQLCipherKitSupport_setInterruptNote(text)
    }

    /// Removes every temporary database file in progress (async-signal-safe: it only calls `unlink`).
    package static func removeAll() {
        CSQLCipherKitSupport_removeRegisteredTemporaryFiles()
    }

    /// Starts a guardian process that removes the temporary files still in progress when this process ends in a
    /// way no handler sees: SIGKILL, the out-of-memory killer, a crash. Without it such a file (plaintext, for a
    /// decrypted copy) stays until the next run that writes beside the same destination.
    ///
    /// The guardian is a child process in a session of its own (the terminal's Ctrl-C and a kill of the process
    /// group do not reach it) that holds no descriptor of this process but one socket, learns each temporary file
    /// as it is registered and forgotten, and, when the socket closes because this process ended, removes what is
    /// still registered and exits. Call it once, early, before any temporary file is made (the CLI does, at start);
    /// calling it again does nothing. Only a power loss, or a SIGKILL of the guardian itself, leaves a file for the
    /// next run to remove.
    ///
    /// - Returns: The guardian's process ID.
    @discardableResult
    package static func startGuardian() throws -> Int32 {
        let pid = CSQLCipherKitSupport_startGuardian()
        guard pid >= 0 else { throw fileSystemError("cannot start the guardian process") }
        return pid
    }
}

/// The rollback journal's magic: a journal whose header holds it may be hot (it is zeroed when a transaction ends
/// in PERSIST mode, and the file is deleted in DELETE mode).
func hasHotJournalHeader(atPath path: String) -> Bool {
    readFilePrefix(atPath: path, count: 8) == [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]
}
