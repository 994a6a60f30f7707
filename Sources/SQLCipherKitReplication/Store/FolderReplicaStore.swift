#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``ReplicaStore`` in a folder (a mounted volume, a network share): each object is a file under the folder, its key
/// the relative path.
///
/// An object appears whole or not at all: it is written to a temporary name in the same folder (mode 0600), flushed,
/// then renamed into place, and the folder is flushed. Folders are created (mode 0700) as objects are written; a
/// folder that does not exist holds no object (a restore from it says so). Conditional writes hold an exclusive
/// `flock` on a lock file beside the object while they compare and write, so they are exact between processes of
/// one machine (and of machines whose shared file system implements `flock`).
package struct FolderReplicaStore: ConditionalReplicaStore {
    /// The folder.
    package let root: String

    /// Uses `root` as the store.
    ///
    /// - Throws: ``DatabaseError`` (`invalidArgument`) when `root` is not an absolute path, or exists and is not a
    ///   folder.
    package init(root: String) throws {
        guard root.hasPrefix("/"), !root.utf8.contains(0) else {
            throw DatabaseError(.invalidArgument, "a folder store needs an absolute path, not \(root)")
        }
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        var status = stat()
        if stat(self.root, &status) == 0, (status.st_mode & S_IFMT) != S_IFDIR {
            throw DatabaseError(.invalidArgument, "\(self.root) is not a folder")
        }
    }

    /// `file://` and the folder.
    package var description: String { "file://" + root }

    package func put(_ key: String, bytes: [UInt8]) async throws {
        let path = try self.path(of: key)
        try Self.makeFolders(parent(of: path))
        try Self.writeAtomically(path) { descriptor in
            try bytes.withUnsafeBytes { try writeFully(descriptor, $0, at: nil, path: path) }
        }
    }

    package func put(
        _ key: String, file source: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        let path = try self.path(of: key)
        try Self.makeFolders(parent(of: path))
        guard let input = try ReadOnlyFile(path: source) else {
            throw ReplicationError(.sourceChanged, "\(source) does not exist")
        }
        try Self.writeAtomically(path) { output in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var done: Int64 = 0
            while done < length {
                let wanted = Int(min(Int64(buffer.count), length - done))
                let count = try buffer.withUnsafeMutableBytes { try input.read(into: $0, count: wanted, at: offset + done) }
                guard count == wanted else {
                    throw ReplicationError(
                        .sourceChanged,
                        "\(source) ended after \(offset + done + Int64(count)) bytes; \(offset + length) were expected")
                }
                try buffer.withUnsafeBytes {
                    try writeFully(output, UnsafeRawBufferPointer(rebasing: $0[..<count]), at: nil, path: path)
                }
                done += Int64(count)
                progress?(done)
            }
        }
    }

    package func get(_ key: String) async throws -> [UInt8] {
        let path = try self.path(of: key)
        guard let file = try ReadOnlyFile(path: path) else {
            throw ReplicationError(.notFound, "no object \(key) (\(path) does not exist)")
        }
        return try file.read(count: Int(try file.size()), at: 0)
    }

    package func list(prefix: String) async throws -> [ReplicaObject] {
        var objects: [ReplicaObject] = []
        var status = stat()
        // A folder that does not exist holds nothing; the catalog then says that nothing is stored there.
        guard stat(root, &status) == 0 else { return [] }
        let rootURL = URL(fileURLWithPath: root, isDirectory: true)
        guard let enumerator = FileManager.default.enumerator(
            at: rootURL, includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey], options: [])
        else { throw DatabaseError(.fileSystem, "cannot list \(root)") }
        let rootPath = rootURL.standardizedFileURL.path
        for case let url as URL in enumerator {
            let values = try? url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey])
            guard values?.isRegularFile == true else { continue }
            let full = url.standardizedFileURL.path
            guard full.hasPrefix(rootPath + "/") else { continue }
            let key = String(full.dropFirst(rootPath.count + 1))
            guard key.hasPrefix(prefix), !key.split(separator: "/").last!.hasPrefix(Self.temporaryPrefix) else {
                continue
            }
            objects.append(ReplicaObject(key: key, size: Int64(values?.fileSize ?? 0)))
        }
        return objects.sorted { $0.key < $1.key }
    }

    package func delete(_ keys: [String]) async throws {
        for key in keys {
            let path = try self.path(of: key)
            if unlink(path) != 0 && errno != ENOENT { throw fileSystemFailure("cannot remove \(path)") }
        }
    }

    /// The version of an object is the SHA-256 of its bytes.
    package func getVersioned(_ key: String) async throws -> (bytes: [UInt8], version: String?)? {
        let path = try self.path(of: key)
        guard let file = try ReadOnlyFile(path: path) else { return nil }
        let bytes = try file.read(count: Int(try file.size()), at: 0)
        return (bytes, SHA256.hex(bytes))
    }

    package func put(_ key: String, bytes: [UInt8], if condition: WriteCondition) async throws -> ConditionalWrite {
        let path = try self.path(of: key)
        try Self.makeFolders(parent(of: path))
        let lockPath = parent(of: path) + "/" + Self.temporaryPrefix + "lock-" + (path.split(separator: "/").last ?? "")
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { throw fileSystemFailure("cannot open the lock file \(lockPath)") }
        defer { _ = close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw fileSystemFailure("cannot lock \(lockPath)") }
        }
        let current = try ReadOnlyFile(path: path).map { try $0.read(count: Int(try $0.size()), at: 0) }
        switch (condition, current) {
        case (.absent, nil):
            break
        case (.version(let version), let current?) where SHA256.hex(current) == version:
            break
        default:
            return .conditionFailed
        }
        try Self.writeAtomically(path) { descriptor in
            try bytes.withUnsafeBytes { try writeFully(descriptor, $0, at: nil, path: path) }
        }
        return .written
    }

    // MARK: - Paths

    /// Temporary files of an object being written, and lock files, start with this (and are not listed).
    static let temporaryPrefix = ".tmp-"

    /// The file of a key: keys are relative paths without `.`/`..` parts, so no key reaches outside the folder.
    private func path(of key: String) throws -> String {
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        guard !key.isEmpty, !key.hasPrefix("/"), parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }),
              !key.utf8.contains(0)
        else { throw DatabaseError(.invalidArgument, "not a valid object key: \(key)") }
        return root + "/" + key
    }

    private func parent(of path: String) -> String {
        String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
    }

    /// Creates the missing folders of `path` (mode 0700), flushing the folder that holds each new one: an object
    /// stored in a new folder must not vanish with the folder's entry after a power cut.
    private static func makeFolders(_ path: String) throws {
        var status = stat()
        if stat(path, &status) == 0 {
            guard (status.st_mode & S_IFMT) == S_IFDIR else { throw DatabaseError(.fileSystem, "\(path) is not a folder") }
            return
        }
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !parent.isEmpty { try makeFolders(parent) }
        if mkdir(path, 0o700) != 0 {
            guard errno == EEXIST else { throw fileSystemFailure("cannot create the folder \(path)") }
            return
        }
        try flushFolder(parent.isEmpty ? "/" : parent)
    }

    private static func flushFolder(_ folder: String) throws {
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw fileSystemFailure("cannot open \(folder) to flush it") }
        defer { _ = close(descriptor) }
        guard fsync(descriptor) == 0 else { throw fileSystemFailure("cannot flush \(folder)") }
    }

    private static func writeAtomically(_ path: String, _ write: (CInt) throws -> Void) throws {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        let name = String(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...])
        let temporary = folder + "/" + temporaryPrefix + name + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw fileSystemFailure("cannot create \(temporary)") }
        var isRenamed = false
        defer { if !isRenamed { unlink(temporary) } }
        do {
            try write(descriptor)
            guard fsync(descriptor) == 0 else { throw fileSystemFailure("cannot flush \(temporary)") }
            _ = close(descriptor)
        } catch {
            _ = close(descriptor)
            throw error
        }
        guard rename(temporary, path) == 0 else { throw fileSystemFailure("cannot rename \(temporary) to \(path)") }
        isRenamed = true
        // The new name is durable only once the folder is flushed: an object reported stored must survive a power
        // cut (a replica manifest that vanishes makes its snapshot unrestorable).
        try flushFolder(folder)
    }
}
#endif
