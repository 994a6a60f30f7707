#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The database file a copy rotation replaces, held open by descriptor from before the rename: after the rename it
/// is how a process that still has the old file is found (by device and inode), and how that file is made unusable.
struct ReplacedFile {
    let id: OpenFiles.FileID
    private let descriptor: CInt

    /// Opens the file at `path` for reading and writing.
    init(path: String) throws {
        descriptor = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw fileSystemError("cannot open \(path)") }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let error = fileSystemError("cannot read \(path)")
            closeFileDescriptor(descriptor)
            throw error
        }
        id = OpenFiles.FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// Overwrites the first 64 KiB (page 1 whatever the page size, salt included) with zeros, when the file has no
    /// name left (a hard link elsewhere would still be a database someone can open). Returns whether it did.
    func makeUnusable() -> Bool {
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_nlink == 0 else { return false }
        // Never shorter than it was: a zero-length database makes SQLite remove the `-wal` by name as it opens.
        let count = min(Int(status.st_size), 65536)
        let zeros = [UInt8](repeating: 0, count: count)
        let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, count, 0) }
        guard written == count else { return false }
        _ = fsync(descriptor)
        return true
    }

    /// Closes the descriptor. After the connection that locks the file: closing any descriptor of a file drops
    /// this process's POSIX locks on it.
    func close() {
        closeFileDescriptor(descriptor)
    }
}
