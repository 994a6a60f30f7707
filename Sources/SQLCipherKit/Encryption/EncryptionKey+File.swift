#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EncryptionKey {
    /// What to do with a key file that group or others may read.
    public enum KeyFilePermissionPolicy: Sendable {
        /// Refuse it (the default): a key readable by other accounts is a leaked key.
        case requireOwnerOnly
        /// Accept it (for files on systems that do not use POSIX modes, or secrets mounted read-only by an
        /// orchestrator with a group the service belongs to).
        case allowGroupAndOthers
    }

    /// The largest key file accepted, in bytes.
    public static let maximumKeyFileByteCount = 4096

    /// Loads a key file.
    ///
    /// The file holds either SQLCipher's raw-key text `x'<64 hex>'` / `x'<96 hex>'` (a raw key, or a raw key with
    /// salt) or anything else, which is a passphrase. One trailing newline (`\n` or `\r\n`) is removed, so
    /// `echo secret > file` works; any other byte counts.
    ///
    /// The bytes are read straight into a buffer that is wiped when the key is released.
    ///
    /// - Parameters:
    ///   - path: The key file.
    ///   - permissions: By default a file that group or others can read (mode not `0600`/`0400`) is refused.
    /// - Throws: ``DatabaseError/invalidKey`` when the file is missing, not a regular file, readable by others,
    ///   larger than ``maximumKeyFileByteCount``, empty, or holds malformed `x'…'` text. The message names the path
    ///   and the problem, never the content.
    public init(contentsOf path: String, permissions: KeyFilePermissionPolicy = .requireOwnerOnly) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw Self.invalid("cannot read key file \(path): \(reason)")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw Self.invalid("cannot read key file \(path): \(String(cString: strerror(errno)))")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw Self.invalid("key file \(path) is not a regular file")
        }
        let mode = status.st_mode & 0o777
        if permissions == .requireOwnerOnly && mode & 0o077 != 0 {
            throw Self.invalid(
                "key file \(path) can be read by group or others (mode \(String(mode, radix: 8))); "
                    + "run `chmod 600 \(path)`")
        }
        let size = Int(status.st_size)
        guard size <= Self.maximumKeyFileByteCount else {
            throw Self.invalid(
                "key file \(path) is \(size) bytes; a key file holds at most \(Self.maximumKeyFileByteCount)")
        }
        // Read one byte more than the size so a file that grew meanwhile is noticed rather than cut.
        var readCount = 0
        let raw = try SecretBytes(count: size + 1) { buffer in
            while readCount < buffer.count {
                let result = read(descriptor, buffer.baseAddress! + readCount, buffer.count - readCount)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw Self.invalid("cannot read key file \(path): \(String(cString: strerror(errno)))")
                }
                if result == 0 { break }
                readCount += result
            }
        }
        guard readCount <= size else {
            throw Self.invalid("key file \(path) changed while it was read")
        }
        self = try raw.withUnsafeBytes { bytes in
            try EncryptionKey.parseKeyText(UnsafeRawBufferPointer(rebasing: bytes[0..<readCount]), source: "key file \(path)")
        }
    }

    /// Parses key material in the key-file format: `x'<64 hex>'` / `x'<96 hex>'` is a raw key, anything else a
    /// passphrase; one trailing newline (`\n` or `\r\n`) is removed. For keys from an environment variable, standard
    /// input or a secret manager.
    ///
    /// - Parameter bytes: The content. Wipe your copy afterwards; the key keeps its own wiped buffer.
    /// - Throws: ``DatabaseError/invalidKey`` for empty content or malformed `x'…'` text (never showing the content).
    public init(keyText bytes: some Sequence<UInt8>) throws {
        var array = Array(bytes)
        defer { array.withUnsafeMutableBytes { SecretBytes.wipe($0) } }
        self = try array.withUnsafeBytes { try EncryptionKey.parseKeyText($0, source: "key") }
    }

    static func parseKeyText(_ bytes: UnsafeRawBufferPointer, source: String) throws -> EncryptionKey {
        var content = bytes
        if content.last == UInt8(ascii: "\n") {
            content = UnsafeRawBufferPointer(rebasing: content.dropLast())
            if content.last == UInt8(ascii: "\r") {
                content = UnsafeRawBufferPointer(rebasing: content.dropLast())
            }
        }
        guard !content.isEmpty else {
            throw Self.invalid("\(source) is empty")
        }
        if content.count >= 2, content[0] == UInt8(ascii: "x") || content[0] == UInt8(ascii: "X"),
           content[1] == UInt8(ascii: "'") {
            do {
                return try Self.parseRawText(content)
            } catch let error as DatabaseError {
                throw Self.invalid("\(source): \(error.message)")
            }
        }
        return try EncryptionKey(passphraseBuffer: content.copyIntoSecret())
    }
}

extension EncryptionKey {
    /// Writes the key to a new key file that ``init(contentsOf:permissions:)`` reads back: the `x'…'` text of a raw
    /// key or the bytes of a passphrase, then a newline. The file is created with mode 0600 and flushed to disk.
    ///
    /// - Throws: ``DatabaseError/fileSystem`` when the file exists (it is never overwritten) or cannot be written;
    ///   nothing is left behind on failure.
    public func write(toKeyFile path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST {
                throw DatabaseError(
                    kind: .fileSystem, code: DatabaseError.SQLITE_CANTOPEN,
                    message: "the key file \(path) exists already; it is never overwritten")
            }
            throw fileSystemError("cannot create the key file \(path)")
        }
        var failure: DatabaseError?
        material.withUnsafeBytes { bytes in
            let newline: [UInt8] = [UInt8(ascii: "\n")]
            guard writeAll(descriptor, bytes), newline.withUnsafeBytes({ writeAll(descriptor, $0) }),
                  fsync(descriptor) == 0
            else {
                failure = fileSystemError("cannot write the key file \(path)")
                return
            }
        }
        closeFileDescriptor(descriptor)
        if let failure {
            unlink(path)
            throw failure
        }
    }
}

private func writeAll(_ descriptor: CInt, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            return false
        }
        offset += written
    }
    return true
}
