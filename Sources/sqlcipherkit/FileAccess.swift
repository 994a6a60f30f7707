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

    /// Opens `path` for the shell's `.output` and `.once`: created with mode 0600; never through a symbolic link
    /// (O_NOFOLLOW); an existing file only when it is a regular file of this user's that other users cannot read (the
    /// output is plaintext; a file someone else made in a shared folder stays theirs to read), and never one of
    /// `protected` (the database, its -wal, -shm and -journal, the key file: truncating one would destroy the data or
    /// the key). Truncated only once all of that is checked. A refusal leaves nothing behind: a protected name is
    /// refused before anything is created (a -journal that does not exist yet would otherwise be made, empty), and a
    /// file this call created is removed if it is then refused.
    static func openForOutput(_ path: String, protecting protected: [String]) throws -> CInt {
        if let target = canonicalPath(path),
           let file = protected.first(where: { protectedPaths($0).contains(target) }) {
            throw CommandFailure("cannot write to \(path): it is \(file), which the shell uses", kind: "fileSystem")
        }
        let flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK
        var created = true
        var descriptor = open(path, flags | O_CREAT | O_EXCL, 0o600)
        if descriptor < 0 && errno == EEXIST {
            created = false
            descriptor = open(path, flags)
        }
        guard descriptor >= 0 else {
            let reason = errno == ELOOP || errno == EEXIST ? "it is a symbolic link" : String(cString: strerror(errno))
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
        } else if !created && ftruncate(descriptor, 0) != 0 {
            refusal = String(cString: strerror(errno))
        }
        if let refusal {
            // Removed only while the name is still the file made here.
            var current = stat()
            if created && lstat(path, &current) == 0 && current.st_dev == status.st_dev && current.st_ino == status.st_ino {
                unlink(path)
            }
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

    /// `path` with its folder resolved (symbolic links, `.`, `..`) and its last name as it is, whether or not the file
    /// exists; `nil` when the folder does not exist.
    static func canonicalPath(_ path: String) -> String? {
        let trimmed = path.hasSuffix("/") ? String(path.dropLast()) : path
        let slash = trimmed.lastIndex(of: "/")
        let folder = slash.map { $0 == trimmed.startIndex ? "/" : String(trimmed[..<$0]) } ?? "."
        let name = slash.map { String(trimmed[trimmed.index(after: $0)...]) } ?? trimmed
        guard !name.isEmpty, let resolved = realpath(folder, nil) else { return nil }
        defer { free(resolved) }
        let folderPath = String(cString: resolved)
        return (folderPath == "/" ? "" : folderPath) + "/" + name
    }

    /// The paths by which `file` may be reached: as named, and (when it is a symbolic link, as a database may be)
    /// where it leads, since SQLite makes a database's side files beside the file the link leads to.
    private static func protectedPaths(_ file: String) -> Set<String> {
        var paths: Set<String> = []
        if let named = canonicalPath(file) { paths.insert(named) }
        for suffix in ["-wal", "-shm", "-journal"] where file.hasSuffix(suffix) {
            if let resolved = realpath(String(file.dropLast(suffix.count)), nil) {
                paths.insert(String(cString: resolved) + suffix)
                free(resolved)
            }
        }
        if let resolved = realpath(file, nil) {
            paths.insert(String(cString: resolved))
            free(resolved)
        }
        return paths
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
