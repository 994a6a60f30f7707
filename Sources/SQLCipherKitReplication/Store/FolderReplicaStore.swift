#if Replication  // trait Replication (Package.swift)
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``ReplicaStore`` in a folder (a mounted volume, a network share): each object is a file under the folder, its key
/// the relative path.
///
/// An object appears whole or not at all: it is written to a temporary name in the same folder (mode 0600), flushed,
/// then renamed into place, and the folder is flushed.
public struct FolderReplicaStore: ReplicaStore {
    /// The folder.
    public let root: String

    /// Uses `root` as the store (created, mode 0700, when missing).
    ///
    /// - Throws: ``ReplicationError`` (`fileSystem`) when it cannot be created or is not a folder.
    public init(root: String) throws {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        try Self.makeFolders(self.root)
    }

    /// `file://` and the folder.
    public var description: String { "file://" + root }

    public func put(_ key: String, bytes: [UInt8]) async throws {
        let path = try self.path(of: key)
        try Self.makeFolders(parent(of: path))
        try Self.writeAtomically(path) { descriptor in
            try bytes.withUnsafeBytes { try writeFully(descriptor, $0, at: nil, path: path) }
        }
    }

    public func put(
        _ key: String, file source: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        let path = try self.path(of: key)
        try Self.makeFolders(parent(of: path))
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw ReplicationError.fileSystem("cannot open \(source)") }
        defer { _ = close(input) }
        try Self.writeAtomically(path) { output in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var done: Int64 = 0
            while done < length {
                let wanted = Int(min(Int64(buffer.count), length - done))
                let count = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, wanted, off_t(offset + done)) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    throw ReplicationError(
                        .sourceChanged, "\(source) ended after \(offset + done) bytes; \(offset + length) were expected")
                }
                try buffer.withUnsafeBytes {
                    try writeFully(output, UnsafeRawBufferPointer(rebasing: $0[..<count]), at: nil, path: path)
                }
                done += Int64(count)
                progress?(done)
            }
        }
    }

    public func get(_ key: String) async throws -> [UInt8] {
        let path = try self.path(of: key)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.readError(key: key, path: path) }
        defer { _ = close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw ReplicationError.fileSystem("cannot read \(path)") }
            if count == 0 { return bytes }
            bytes += buffer[..<count]
        }
    }

    public func get(_ key: String, toFile destination: String, progress: (@Sendable (Int64) -> Void)?) async throws {
        let path = try self.path(of: key)
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw Self.readError(key: key, path: path) }
        defer { _ = close(input) }
        let output = try createDownloadFile(destination)
        var isComplete = false
        defer {
            _ = close(output)
            if !isComplete { unlink(destination) }
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var done: Int64 = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw ReplicationError.fileSystem("cannot read \(path)") }
            if count == 0 { break }
            try buffer.withUnsafeBytes {
                try writeFully(output, UnsafeRawBufferPointer(rebasing: $0[..<count]), at: nil, path: destination)
            }
            done += Int64(count)
            progress?(done)
        }
        isComplete = true
    }

    public func list(prefix: String) async throws -> [ReplicaObject] {
        var objects: [ReplicaObject] = []
        let rootURL = URL(fileURLWithPath: root, isDirectory: true)
        guard let enumerator = FileManager.default.enumerator(
            at: rootURL, includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey], options: [])
        else { throw ReplicationError.fileSystem("cannot list \(root)") }
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

    public func delete(_ keys: [String]) async throws {
        for key in keys {
            let path = try self.path(of: key)
            if unlink(path) != 0 && errno != ENOENT { throw ReplicationError.fileSystem("cannot remove \(path)") }
        }
    }

    // MARK: - Paths

    /// Temporary files of an object being written start with this (and are not listed).
    static let temporaryPrefix = ".tmp-"

    /// The file of a key: keys are relative paths without `.`/`..` parts, so no key reaches outside the folder.
    private func path(of key: String) throws -> String {
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        guard !key.isEmpty, !key.hasPrefix("/"), parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }),
              !key.utf8.contains(0)
        else { throw ReplicationError(.invalidArgument, "not a valid object key: \(key)") }
        return root + "/" + key
    }

    private func parent(of path: String) -> String {
        String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
    }

    private static func makeFolders(_ path: String) throws {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw ReplicationError(.fileSystem, "\(path) is not a folder") }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ReplicationError(.fileSystem, "cannot create the folder \(path): \(error.localizedDescription)")
        }
    }

    private static func writeAtomically(_ path: String, _ write: (CInt) throws -> Void) throws {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        let name = String(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...])
        let temporary = folder + "/" + temporaryPrefix + name + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw ReplicationError.fileSystem("cannot create \(temporary)") }
        var isRenamed = false
        defer { if !isRenamed { unlink(temporary) } }
        do {
            try write(descriptor)
            guard fsync(descriptor) == 0 else { throw ReplicationError.fileSystem("cannot flush \(temporary)") }
            _ = close(descriptor)
        } catch {
            _ = close(descriptor)
            throw error
        }
        guard rename(temporary, path) == 0 else { throw ReplicationError.fileSystem("cannot rename \(temporary) to \(path)") }
        isRenamed = true
        let folderDescriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folderDescriptor >= 0 {
            _ = fsync(folderDescriptor)
            _ = close(folderDescriptor)
        }
    }

    private static func readError(key: String, path: String) -> ReplicationError {
        errno == ENOENT
            ? ReplicationError(.notFound, "no object \(key) (\(path) does not exist)")
            : ReplicationError.fileSystem("cannot open \(path)")
    }
}
#endif
