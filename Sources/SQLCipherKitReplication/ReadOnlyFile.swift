#if Replication  // trait Replication (Package.swift)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file opened for reading with `pread`: the database file and its write-ahead log, which other connections keep
/// writing while the replicator reads them (what may change and what may not is the replicator's business).
final class ReadOnlyFile {
    let path: String
    private let descriptor: CInt

    /// Opens `path`; `nil` when it does not exist.
    ///
    /// - Throws: ``ReplicationError`` (`fileSystem`) for any other failure.
    init?(path: String) throws {
        self.path = path
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw ReplicationError.fileSystem("cannot open \(path)")
        }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// The file's current size.
    func size() throws -> Int64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw ReplicationError.fileSystem("cannot read the size of \(path)") }
        return Int64(status.st_size)
    }

    /// Reads up to `count` bytes at `offset` into `buffer` (fewer only at the end of the file).
    ///
    /// - Returns: The number of bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, count: Int, at offset: Int64) throws -> Int {
        var done = 0
        while done < count {
            let result = pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset + Int64(done)))
            if result < 0 {
                if errno == EINTR { continue }
                throw ReplicationError.fileSystem("cannot read \(path)")
            }
            if result == 0 { break }
            done += result
        }
        return done
    }

    /// Reads up to `count` bytes at `offset`.
    func read(count: Int, at offset: Int64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = try bytes.withUnsafeMutableBytes { try self.read(into: $0, count: count, at: offset) }
        bytes.removeLast(count - read)
        return bytes
    }
}

extension ReplicationError {
    /// A local file operation failed: the message, then the system's reason.
    static func fileSystem(_ message: String) -> ReplicationError {
        ReplicationError(.fileSystem, message + ": " + String(cString: strerror(errno)))
    }
}

/// Writes all of `bytes` to `descriptor`: at `offset` (`pwrite`), or at the current position when `offset` is
/// `nil`, retrying short writes and interruptions.
///
/// - Throws: ``ReplicationError`` (`fileSystem`), saying so when the disk is full.
func writeFully(_ descriptor: CInt, _ bytes: UnsafeRawBufferPointer, at offset: Int64?, path: String) throws {
    var done = 0
    while done < bytes.count {
        let pointer = bytes.baseAddress! + done
        let written = offset.map { pwrite(descriptor, pointer, bytes.count - done, off_t($0 + Int64(done))) }
            ?? write(descriptor, pointer, bytes.count - done)
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else {
            throw ReplicationError.fileSystem(
                errno == ENOSPC ? "the disk is full while writing \(path)" : "cannot write \(path)")
        }
        done += written
    }
}
#endif
