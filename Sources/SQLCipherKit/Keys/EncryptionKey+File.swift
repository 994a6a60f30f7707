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
    /// The file is opened non-blocking and checked with `fstat` before a byte is read: a FIFO, a device or a
    /// folder fails at once instead of blocking. Symbolic links are followed (orchestrators mount secrets as links
    /// into a versioned folder); the checks apply to the file they lead to.
    ///
    /// - Throws: ``DatabaseError/invalidKey`` when the file is missing, not a regular file, owned by another user
    ///   than the current one or root, readable by others, larger than ``maximumKeyFileByteCount``, empty, or holds
    ///   malformed `x'…'` text. The message names the path and the problem, never the content (nor the path itself
    ///   when it looks like key material: a key typed where the path belongs).
    public init(contentsOf path: String, permissions: KeyFilePermissionPolicy = .requireOwnerOnly) throws {
        self = try Self.readKeyFile(atPath: path, permissions: permissions).key
    }

    /// A key file as it was when read: device, inode, size and modification time, from the descriptor the key was
    /// read through. Two reads with the same identity read the same, unchanged file. (Not the change time: renaming
    /// the file changes it.)
    package struct KeyFileIdentity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modification: [Int]

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            #if canImport(Glibc)
            modification = [Int(status.st_mtim.tv_sec), Int(status.st_mtim.tv_nsec)]
            #else
            modification = [Int(status.st_mtimespec.tv_sec), Int(status.st_mtimespec.tv_nsec)]
            #endif
        }

        /// The identity of the file at `path` now (symbolic links followed), or `nil` when there is none.
        package init?(path: String) {
            var status = stat()
            guard stat(path, &status) == 0 else { return nil }
            self.init(status)
        }
    }

    /// Reads a key file once, through one descriptor, and returns the key with the identity of the file it was read
    /// from (see ``init(contentsOf:permissions:)`` for the format and the checks). For callers that must later act
    /// on exactly the file they read (a live hand-over renames or removes it only while it is unchanged).
    package static func readKeyFile(
        atPath path: String, permissions: KeyFilePermissionPolicy = .requireOwnerOnly
    ) throws -> (key: EncryptionKey, identity: KeyFileIdentity) {
        let shownPath = KeyMaterialRedaction.shown(path, as: "key file path")
        let (descriptor, status) = try openSmallFile(
            atPath: path, describedAs: "key file \(shownPath)", limit: nil, failure: Self.invalid)
        defer { close(descriptor) }
        if permissions == .requireOwnerOnly {
            // Whoever owns the file can replace the key: only this user or root may.
            try SecretFile.requireOwnerOnly(
                status, describedAs: "key file \(shownPath)", displayPath: shownPath, failure: Self.invalid)
        }
        let size = Int(status.st_size)
        guard size <= Self.maximumKeyFileByteCount else {
            throw Self.invalid(
                "key file \(shownPath) is \(size) bytes; a key file holds at most \(Self.maximumKeyFileByteCount)")
        }
        // Read one byte more than the size so a file that grew meanwhile is noticed rather than cut.
        var readCount = 0
        let raw = try SecretBytes(count: size + 1) { buffer in
            readCount = try Self.readKeyBytes(descriptor, into: buffer, limit: buffer.count) { reason in
                Self.invalid("cannot read key file \(shownPath): \(reason)")
            }
        }
        guard readCount <= size else {
            throw Self.invalid("key file \(shownPath) changed while it was read")
        }
        let key = try raw.withUnsafeBytes { bytes in
            try EncryptionKey.parseKeyText(UnsafeRawBufferPointer(rebasing: bytes[0..<readCount]), source: "key file \(shownPath)")
        }
        return (key, KeyFileIdentity(status))
    }

    /// Opens a key or salt file for reading and checks it before a byte is read: the one way such files are opened.
    ///
    /// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever; `fstat` on the descriptor
    /// then refuses anything but a regular file (a FIFO, a device, a folder).
    ///
    /// - Parameters:
    ///   - what: The file as messages name it, such as "key file /run/secrets/db".
    ///   - limit: The largest size accepted here, or `nil` when the caller checks the size itself.
    /// - Returns: The open descriptor (the caller closes it) and the file's status.
    static func openSmallFile(
        atPath path: String, describedAs what: String, limit: Int?, failure: (String) -> DatabaseError
    ) throws -> (descriptor: CInt, status: stat) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            throw failure("cannot read \(what): \(String(cString: strerror(errno)))")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw failure("cannot read \(what): \(reason)")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw failure("\(what) is not a regular file (a FIFO, device or folder is refused)")
        }
        if let limit, status.st_size > limit {
            close(descriptor)
            throw failure("\(what) is \(status.st_size) bytes; it may hold at most \(limit)")
        }
        return (descriptor, status)
    }

    /// Reads from `descriptor` into `buffer` until end of file, `limit` bytes or, when `stopsAtNewline`, a newline
    /// (not counted), retrying an interrupted read; returns the number of bytes read. A line is read one byte at a
    /// time, so nothing after its newline is consumed. The one read loop of every key source (files, standard input,
    /// the prompt).
    static func readKeyBytes(
        _ descriptor: CInt, into buffer: UnsafeMutableRawBufferPointer, limit: Int, stopsAtNewline: Bool = false,
        failure: (String) -> DatabaseError
    ) throws -> Int {
        var readCount = 0
        while readCount < limit {
            let result = read(descriptor, buffer.baseAddress! + readCount, stopsAtNewline ? 1 : limit - readCount)
            if result < 0 {
                if errno == EINTR { continue }
                throw failure(String(cString: strerror(errno)))
            }
            if result == 0 || (stopsAtNewline && buffer[readCount] == UInt8(ascii: "\n")) { break }
            readCount += result
        }
        return readCount
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

    /// Whether `content` is `x'<64 or 96 hex>'` followed by spaces, tabs or line breaks only (a key file whose only
    /// fault is whitespace after the key).
    private static func isRawKeyWithWhitespace(_ content: UnsafeRawBufferPointer) -> Bool {
        var end = content.count
        while end > 0, [0x20, 0x09, 0x0A, 0x0D].contains(content[end - 1]) { end -= 1 }
        guard end < content.count, end >= 3, content[end - 1] == UInt8(ascii: "'") else { return false }
        let digits = content[2..<(end - 1)]
        return (digits.count == 2 * rawKeyByteCount || digits.count == 2 * (rawKeyByteCount + saltByteCount))
            && digits.allSatisfy { Hex.value($0) != nil }
    }

    /// What is wrong with key text that no one means as a passphrase, or `nil`: a UTF-8 byte-order mark (an editor's,
    /// invisible, and part of the key if read), a raw key in double or typographic quotes (`x"…"`, `x‘…’`), or a raw
    /// key with whitespace before it. Each would be read as a passphrase and fail as a wrong key, or worse become a
    /// new key nobody can type. Never shows the content.
    private static func misshapenKeyText(_ content: UnsafeRawBufferPointer) -> String? {
        if content.starts(with: [0xEF, 0xBB, 0xBF]) {
            return "starts with a UTF-8 byte-order mark (the bytes EF BB BF, which editors hide), which would count as"
                + " part of the key; save it as UTF-8 without a byte-order mark"
        }
        var end = content.count
        while end > 0, [0x20, 0x09, 0x0A, 0x0D].contains(content[end - 1]) { end -= 1 }
        let trimmed = UnsafeRawBufferPointer(rebasing: content[0..<end])
        let quotes: [(open: [UInt8], close: [[UInt8]], name: String)] = [
            ([0x22], [[0x22]], "x\"…\" in double quotes"),
            ([0xE2, 0x80, 0x98], [[0xE2, 0x80, 0x98], [0xE2, 0x80, 0x99]], "x‘…’ in typographic quotes"),
            ([0xE2, 0x80, 0x99], [[0xE2, 0x80, 0x98], [0xE2, 0x80, 0x99]], "x’…’ in typographic quotes"),
        ]
        if let first = trimmed.first, first | 0x20 == UInt8(ascii: "x") {
            let rest = trimmed.dropFirst()
            for quote in quotes where rest.starts(with: quote.open) {
                for close in quote.close where rest.count > quote.open.count + close.count && rest.suffix(close.count).elementsEqual(close) {
                    let digits = rest.dropFirst(quote.open.count).dropLast(close.count)
                    if digits.allSatisfy({ Hex.value($0) != nil }) {
                        return "holds \(quote.name); a raw key is written x'<64 hex>' (or x'<96 hex>' with its salt)"
                            + " with straight single quotes, and anything else is read as a passphrase"
                    }
                }
            }
        }
        var start = 0
        while start < end, [0x20, 0x09, 0x0A, 0x0D].contains(content[start]) { start += 1 }
        if start > 0, start < end, (try? parseRawText(UnsafeRawBufferPointer(rebasing: content[start..<end]))) != nil {
            return "holds a raw key with whitespace before it; a key file holds x'<hex>' from its first byte and at"
                + " most one newline after it: remove the rest"
        }
        return nil
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
        if let mistake = misshapenKeyText(content) {
            throw Self.invalid("\(source) \(mistake)")
        }
        if content.count >= 2, content[0] == UInt8(ascii: "x") || content[0] == UInt8(ascii: "X"),
           content[1] == UInt8(ascii: "'") {
            do {
                return try Self.parseRawText(content)
            } catch let error as DatabaseError {
                if Self.isRawKeyWithWhitespace(content) {
                    throw DatabaseError(
                        .invalidKey, "\(source) holds a raw key followed by whitespace",
                        remedy: .removeWhitespaceAfterRawKey)
                }
                throw Self.invalid("\(source): \(error.message)")
            }
        }
        return try EncryptionKey(passphraseBuffer: content.copyIntoSecret())
    }
}

extension EncryptionKey {
    /// Writes the key to a new key file that ``init(contentsOf:permissions:)`` reads back: the `x'…'` text of a raw
    /// key or the bytes of a passphrase, then a newline. The file is created with mode 0600 and flushed to disk, and
    /// then its folder, so the new name survives a power cut once this returns.
    ///
    /// - Throws: ``DatabaseError/invalidKey`` for a passphrase the file could not give back: one that ends with a
    ///   carriage return (the reader removes `\r\n`) or starts with `x'` (the reader takes it for raw-key text).
    ///   ``DatabaseError/fileSystem`` when the file exists (it is never overwritten) or cannot be written; nothing
    ///   is left behind on failure.
    public func write(toKeyFile path: String) throws {
        if kind == .passphrase {
            try material.withUnsafeBytes { bytes in
                if bytes.last == UInt8(ascii: "\r") {
                    throw Self.invalid(
                        "this passphrase ends with a carriage return, which a key file cannot keep; "
                            + "it would read back as another key")
                }
                if bytes.count >= 2, bytes[0] | 0x20 == UInt8(ascii: "x"), bytes[1] == UInt8(ascii: "'") {
                    throw Self.invalid(
                        "this passphrase starts with x', which a key file reads as raw-key text; "
                            + "it would read back as another key or not at all")
                }
            }
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST {
                throw DatabaseError(
                    .fileSystem,
                    "the key file \(path) exists already; it is never overwritten")
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
        // The file's bytes are on disk, but its name is an entry of the folder: until the folder is flushed, a power
        // cut can leave no key file at all after this returned (Docs/Durability.md).
        if failure == nil {
            do {
                try syncToDisk(atPath: parentFolder(of: path))
            } catch {
                failure = error as? DatabaseError ?? DatabaseError(.fileSystem, "\(error)")
            }
        }
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

/// Keeps key material out of messages when a key was typed where a name or a path belongs.
package enum KeyMaterialRedaction {
    /// Whether `value` looks like key material: SQLCipher's raw-key text (`x'…'`), or a run of 32 or more hex
    /// digits (a raw key or a hash of one).
    package static func looksLikeKey(_ value: String) -> Bool {
        if value.hasPrefix("x'") || value.hasPrefix("X'") { return true }
        var run = 0
        for byte in value.utf8 {
            let isHex = (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
            run = isHex ? run + 1 : 0
            if run >= 32 { return true }
        }
        return false
    }

    /// `value` when it is safe to show, otherwise a placeholder naming what it stands for.
    package static func shown(_ value: String, as what: String) -> String {
        looksLikeKey(value) ? "(the \(what) given is not shown: it looks like key material)" : value
    }

    /// An environment variable's name as messages show it: only a well-formed name (letters, digits, `_`, not
    /// starting with a digit) that does not look like key material; anything else is probably a key typed where the
    /// name belongs.
    package static func shownVariableName(_ name: String) -> String {
        isWellFormedVariableName(name) && !looksLikeKey(name)
            ? name : "(the name given is not shown: it is not a variable name and may be key material)"
    }

    private static func isWellFormedVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(48...57).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
        }
    }
}
