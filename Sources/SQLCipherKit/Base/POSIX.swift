#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `close(2)`, reachable from types that have a `close()` method of their own.
func closeFileDescriptor(_ descriptor: CInt) {
    #if canImport(Glibc)
    _ = Glibc.close(descriptor)
    #elseif canImport(Darwin)
    _ = Darwin.close(descriptor)
    #endif
}

/// The size of a regular file, or `nil` when there is none.
func regularFileSize(atPath path: String) -> Int? {
    guard !path.isEmpty else { return nil }
    var status = stat()
    guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
    return Int(status.st_size)
}

/// The first bytes of a file (fewer when it is shorter), or `[]` when it cannot be read.
func readFilePrefix(atPath path: String, count: Int) -> [UInt8] {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return [] }
    defer { closeFileDescriptor(descriptor) }
    var bytes = [UInt8](repeating: 0, count: count)
    let readCount = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, count) }
    return readCount > 0 ? Array(bytes.prefix(readCount)) : []
}

/// Flushes a file (or folder) to stable storage.
package func syncToDisk(atPath path: String) throws {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw fileSystemError("cannot open \(path) to flush it") }
    defer { closeFileDescriptor(descriptor) }
    guard fsync(descriptor) == 0 else { throw fileSystemError("cannot flush \(path) to disk") }
}

/// The folder that holds a path (`.` for a bare file name).
package func parentFolder(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// Renames atomically and flushes the folder, so the new name survives a crash.
package func atomicRename(from source: String, to destination: String) throws {
    guard rename(source, destination) == 0 else {
        throw fileSystemError("cannot rename \(source) to \(destination)")
    }
    try syncToDisk(atPath: parentFolder(of: destination))
}

/// Removes a file and SQLite's companions (`-journal`, `-wal`, `-shm`); missing files are fine.
package func removeDatabaseFiles(atPath path: String) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        unlink(path + suffix)
    }
}

/// Whether a folder exists and this process may create files in it.
func isWritableFolder(_ path: String) -> Bool {
    var status = stat()
    return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR && access(path, W_OK) == 0
}

/// A random hex suffix for temporary names.
func randomSuffix() -> String {
    String(UInt64.random(in: 0...UInt64.max), radix: 16)
}

func fileSystemError(_ message: String) -> DatabaseError {
    let reason = String(cString: strerror(errno))
    return DatabaseError(.fileSystem, "\(message): \(reason)")
}

/// The bytes an unprivileged process may still write on the file system holding `path` (its folder when the file
/// does not exist), or `nil` when it cannot be told.
func availableBytes(onFileSystemOf path: String) -> Int? {
    var status = statvfs()
    let target = regularFileSize(atPath: path) == nil ? parentFolder(of: path) : path
    guard statvfs(target, &status) == 0 else { return nil }
    return Int(status.f_bavail) * Int(status.f_frsize)
}

/// The canonical path of an existing file or folder (symlinks resolved), or `nil`.
func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

/// The names in a folder (without `.` and `..`); `nil` when it cannot be read. The one directory listing of the
/// library (temporary files, rotation of a folder, other processes in `/proc`).
func directoryEntries(of folder: String) -> [String]? {
    guard let directory = opendir(folder) else { return nil }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
