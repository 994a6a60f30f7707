import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The files `exec --file`, `.read`, `.import` and `.output` read and write.
enum FileAccess {
    /// The whole content of a file (`exec --file`, `.read`, `.import`). A folder is refused.
    static func read(_ path: String, purpose: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            throw CommandFailure("cannot read \(purpose) \(path): \(String(cString: strerror(errno)))",
                                 kind: errno == ENOENT ? "missingFile" : "fileSystem")
        }
        defer { closeDescriptor(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) != S_IFDIR else {
            throw CommandFailure("cannot read \(purpose) \(path): it is a folder", kind: "fileSystem")
        }
        return try readToEnd(descriptor, source: path)
    }

    /// Everything left on a descriptor (standard input for `exec -`).
    static func readToEnd(_ descriptor: CInt, source: String) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = block.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw CommandFailure("cannot read \(source): \(String(cString: strerror(errno)))", kind: "fileSystem")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: block[0..<count])
        }
    }

    /// Opens `path` for the shell's `.output`: created with mode 0600; never through a symbolic link (O_NOFOLLOW);
    /// an existing file only when it is a regular file of this user's that other users cannot read (the output is
    /// plaintext; a file someone else made in a shared folder stays theirs to read), and never one of `protected`
    /// (the database, its -wal, -shm and -journal, the key file: truncating one would destroy the data or the key).
    /// Truncated only once all of that is checked.
    static func openForOutput(_ path: String, protecting protected: [String]) throws -> CInt {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard descriptor >= 0 else {
            let reason = errno == ELOOP ? "it is a symbolic link" : String(cString: strerror(errno))
            throw CommandFailure("cannot write to \(path): \(reason)", kind: "fileSystem")
        }
        var status = stat()
        var refusal: String?
        if fstat(descriptor, &status) != 0 {
            refusal = String(cString: strerror(errno))
        } else if (status.st_mode & S_IFMT) != S_IFREG {
            refusal = "it is not a regular file"
        } else if status.st_uid != geteuid() {
            refusal = "it belongs to another user"
        } else if status.st_mode & 0o077 != 0 {
            refusal = "other users can read it (mode \(String(status.st_mode & 0o777, radix: 8))); results are written"
                + " in plaintext: remove it or chmod 600 it first"
        } else if let file = protected.first(where: { isSameFile(status, $0) }) {
            refusal = "it is \(file), which the shell uses"
        } else if ftruncate(descriptor, 0) != 0 {
            refusal = String(cString: strerror(errno))
        }
        if let refusal {
            closeDescriptor(descriptor)
            throw CommandFailure("cannot write to \(path): \(refusal)", kind: "fileSystem")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        return descriptor
    }

    /// The files `.output` must never truncate: the database, its side files, the key file.
    static func filesInUse(database: String, keyFile: String?) -> [String] {
        ["", "-wal", "-shm", "-journal"].map { database + $0 } + (keyFile.map { [$0] } ?? [])
    }

    /// Whether `status` is the file at `path` (same device and inode).
    private static func isSameFile(_ status: stat, _ path: String) -> Bool {
        var other = stat()
        return stat(path, &other) == 0 && other.st_dev == status.st_dev && other.st_ino == status.st_ino
    }
}

/// `close(2)`, reachable from types that have a `close` method of their own.
func closeDescriptor(_ descriptor: CInt) {
    #if canImport(Glibc)
    _ = Glibc.close(descriptor)
    #else
    _ = Darwin.close(descriptor)
    #endif
}
