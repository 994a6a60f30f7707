#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The database files this process has open through SQLCipherKit, counted per file (device and inode, so two
/// paths to one file count as one file). Rekey refuses to run while another connection has the file open.
package enum OpenFiles {
    /// A file's identity: two paths with the same one are one file, and a file renamed over a path is another.
    package struct FileID: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    private static let counts = Locked<[FileID: Int]>([:])

    /// The identity of the file at `path` (symbolic links followed); `nil` when there is none.
    package static func fileID(path: String) -> FileID? {
        guard !path.isEmpty else { return nil }
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    static func register(path: String) -> FileID? {
        guard let id = fileID(path: path) else { return nil }
        counts.withLock { $0[id, default: 0] += 1 }
        return id
    }

    static func unregister(_ id: FileID) {
        counts.withLock { counts in
            let remaining = (counts[id] ?? 1) - 1
            counts[id] = remaining > 0 ? remaining : nil
        }
    }

    /// How many SQLCipherKit connections in this process have the file open.
    static func openCount(path: String) -> Int {
        guard let id = fileID(path: path) else { return 0 }
        return counts.withLock { $0[id] ?? 0 }
    }
}

/// Creates files with mode 0600 before SQLite opens them (SQLite would use 0644, and gives the database's mode to its
/// `-wal`, `-shm` and `-journal` files).
enum FileCreation {
    /// - Returns: `true` when the file was created now (so a failed open can remove it again).
    @discardableResult
    static func createPrivateFileIfMissing(atPath path: String) -> Bool {
        guard !path.isEmpty, path != ":memory:" else { return false }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        // EEXIST (the usual case) or a missing folder: SQLite then reports the failure itself if it matters.
        guard descriptor >= 0 else { return false }
        closeFileDescriptor(descriptor)
        return true
    }

    /// Removes a file created by ``createPrivateFileIfMissing(atPath:)`` if it is still empty.
    static func removeIfEmpty(atPath path: String) {
        if regularFileSize(atPath: path) == 0 {
            unlink(path)
        }
    }
}
