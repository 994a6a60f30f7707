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

/// A new, empty, mode-0600 file named `<database>.sqlcipherkit-tmp-<pid>-<random>` beside a database, registered
/// so that the CLI's signal handlers remove it (and its `-journal`, `-wal`, `-shm`), and recognisable by the next
/// run when this process is killed outright.
struct RegisteredTemporaryFile {
    let path: String
    private let slot: CInt

    init(beside databasePath: String, operation: String) throws {
        path = databasePath + temporaryFileMarker + "\(getpid())-" + randomSuffix()
        // Registered before it exists: a signal between the two removes a file that is not there yet, harmlessly.
        slot = CSQLCipherKitSupport_registerTemporaryFile(path)
        guard slot >= 0 else {
            throw DatabaseError(
                .fileSystem, "\(operation) refused: too many temporary files at once, or a path too long; nothing was"
                    + " written")
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            let error = fileSystemError("cannot create the temporary file \(path)")
            CSQLCipherKitSupport_unregisterTemporaryFile(slot)
            throw error
        }
        closeFileDescriptor(descriptor)
    }

    /// Removes the file and its companions.
    func remove() {
        removeDatabaseFiles(atPath: path)
        CSQLCipherKitSupport_unregisterTemporaryFile(slot)
    }

    /// The file became something else (it was renamed into place): nothing to remove on a signal any more.
    func forget() {
        CSQLCipherKitSupport_unregisterTemporaryFile(slot)
    }
}

/// Removes the temporary files registered by the one file-replacement path that are still in progress (for a signal
/// handler of your own, or a shutdown path). The CLI installs handlers that do this on SIGINT, SIGTERM, SIGHUP and
/// SIGQUIT.
public enum TemporaryFiles {
    /// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT that remove the temporary database files in
    /// progress, then let the signal end the process as it would have. For command-line tools; a service that
    /// handles these signals itself calls ``removeAll()`` from its own handler or shutdown path instead.
    public static func installSignalCleanup() throws {
        guard CSQLCipherKitSupport_installCleanupSignalHandlers() == 0 else {
            throw fileSystemError("cannot install the signal handlers")
        }
    }

    /// Removes every temporary database file in progress (async-signal-safe: it only calls `unlink`).
    public static func removeAll() {
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
    public static func startGuardian() throws -> Int32 {
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
