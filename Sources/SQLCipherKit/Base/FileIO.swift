#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file opened for reading with `pread`, without SQLite: a write-ahead log (checked by `verify`, shipped by
/// replication) and the other files the library reads by position while other connections may be writing them.
///
/// The one positional-read loop of the library: short reads and interruptions are retried here only.
package final class ReadOnlyFile {
    package let path: String
    private let descriptor: CInt

    /// Opens `path`; `nil` when it does not exist.
    ///
    /// - Throws: ``DatabaseError`` (`fileSystem`) for any other failure.
    package init?(path: String) throws {
        self.path = path
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw fileSystemError("cannot open \(path)")
        }
        self.descriptor = descriptor
    }

    deinit {
        closeFileDescriptor(descriptor)
    }

    /// The file's current size.
    package func size() throws -> Int64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw fileSystemError("cannot read the size of \(path)") }
        return Int64(status.st_size)
    }

    /// Reads up to `count` bytes at `offset` into `buffer` (fewer only at the end of the file).
    ///
    /// - Returns: The number of bytes read.
    package func read(into buffer: UnsafeMutableRawBufferPointer, count: Int, at offset: Int64) throws -> Int {
        try readFully(descriptor, into: buffer, count: count, at: offset, path: path)
    }

    /// Reads up to `count` bytes at `offset` (fewer only at the end of the file).
    package func read(count: Int, at offset: Int64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = try bytes.withUnsafeMutableBytes { try self.read(into: $0, count: count, at: offset) }
        bytes.removeLast(count - read)
        return bytes
    }
}

/// Reads up to `count` bytes of `descriptor` at `offset` into `buffer`, retrying short reads and interruptions;
/// fewer bytes only at the end of the file.
///
/// - Returns: The number of bytes read.
/// - Throws: ``DatabaseError`` (`fileSystem`).
package func readFully(
    _ descriptor: CInt, into buffer: UnsafeMutableRawBufferPointer, count: Int, at offset: Int64, path: String
) throws -> Int {
    precondition(count <= buffer.count, "the buffer holds fewer bytes than asked for")
    var done = 0
    while done < count {
        let result = pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset + Int64(done)))
        if result < 0 {
            if errno == EINTR { continue }
            throw fileSystemError("cannot read \(path) at byte \(offset + Int64(done))")
        }
        if result == 0 { break }
        done += result
    }
    return done
}

/// Writes all of `bytes` to `descriptor`: at `offset` (`pwrite`), or at the current position when `offset` is
/// `nil`, retrying short writes and interruptions.
///
/// - Throws: ``DatabaseError`` (`fileSystem`), saying so when the disk is full.
package func writeFully(_ descriptor: CInt, _ bytes: UnsafeRawBufferPointer, at offset: Int64?, path: String) throws {
    var done = 0
    while done < bytes.count {
        let pointer = bytes.baseAddress! + done
        let written = offset.map { pwrite(descriptor, pointer, bytes.count - done, off_t($0 + Int64(done))) }
            ?? write(descriptor, pointer, bytes.count - done)
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else {
            throw fileSystemError(errno == ENOSPC ? "the disk is full while writing \(path)" : "cannot write \(path)")
        }
        done += written
    }
}

/// Writes `bytes` as the whole content of `path`, all or nothing: under a temporary name beside it (created with
/// `permissions`, never following a symlink), flushed, renamed over `path`, and the folder flushed, so that a crash
/// leaves the old content or the new, and success means the new content is on stable storage.
///
/// - Throws: ``DatabaseError`` (`fileSystem`); the temporary file is removed.
package func writeFileAtomically(atPath path: String, _ bytes: [UInt8], permissions: mode_t = 0o600) throws {
    let temporary = path + ".tmp-" + randomSuffix()
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, permissions)
    guard descriptor >= 0 else { throw fileSystemError("cannot create \(temporary)") }
    do {
        try bytes.withUnsafeBytes { try writeFully(descriptor, $0, at: 0, path: temporary) }
        guard fsync(descriptor) == 0 else { throw fileSystemError("cannot flush \(temporary)") }
        closeFileDescriptor(descriptor)
        try atomicRename(from: temporary, to: path)
    } catch {
        closeFileDescriptor(descriptor)
        unlink(temporary)
        throw error
    }
}
