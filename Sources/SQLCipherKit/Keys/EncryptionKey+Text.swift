#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EncryptionKey {
    /// A key from key-file text held in memory, such as an environment variable's value: SQLCipher's raw-key text
    /// `x'<64 hex>'` / `x'<96 hex>'`, or anything else, which is a passphrase. One trailing newline (`\n` or `\r\n`)
    /// is removed, as for ``init(contentsOf:permissions:)``.
    ///
    /// The bytes are copied straight into a buffer that is wiped when the key is released; the caller wipes (or
    /// does not own) `bytes`.
    ///
    /// - Parameters:
    ///   - bytes: The text.
    ///   - source: Where the text came from, for error messages (for example `environment variable NOTES_KEY`).
    /// - Throws: ``DatabaseError/invalidKey`` when the text is empty or holds malformed `x'…'` text. The message
    ///   names `source` and the problem, never the content.
    public init(keyText bytes: UnsafeRawBufferPointer, source: String) throws {
        self = try Self.parseKeyText(bytes, source: "the key from \(source)")
    }

    /// A key from key-file text in a `String`, such as a secret manager's answer: SQLCipher's raw-key text
    /// `x'<64 hex>'` / `x'<96 hex>'`, or anything else, which is a passphrase (its UTF-8 bytes). One trailing newline
    /// (`\n` or `\r\n`) is removed, exactly as for ``init(contentsOf:permissions:)``.
    ///
    /// ```swift
    /// let key = try EncryptionKey(keyText: try vault.secret("notes-db"))
    /// ```
    ///
    /// The UTF-8 bytes are copied straight into the key's own buffer, which is wiped when the key is released; no
    /// other copy is kept.
    ///
    /// - Warning: Swift strings cannot be wiped: `text`, and every copy your code made of it, stays in memory until
    ///   the allocator reuses it. Prefer ``init(contentsOf:permissions:)``, ``init(readingFileDescriptor:source:)``
    ///   or ``init(keyText:source:)`` with a buffer you wipe yourself when the secret source allows it.
    /// - Parameter text: The key text.
    /// - Throws: ``DatabaseError/invalidKey`` when the text is empty or holds malformed `x'…'` text. The message
    ///   never shows the text.
    public init(keyText text: String) throws {
        var text = text
        self = try text.withUTF8 { try Self.parseKeyText(UnsafeRawBufferPointer($0), source: "the key text") }
    }

    /// A key from an environment variable holding key-file text (see ``init(keyText:source:)``), read in place from
    /// the environment block: no Swift `String` holds the value.
    ///
    /// ```swift
    /// let key = try EncryptionKey(environmentVariable: "NOTES_DB_KEY")
    /// ```
    ///
    /// - Warning: Environment variables are visible to the process's user in `/proc/PID/environ` and are inherited
    ///   by child processes; prefer a key file.
    /// - Parameter name: The variable's name.
    /// - Throws: ``DatabaseError/invalidKey`` when the variable is not set, is empty, or holds malformed `x'…'`
    ///   text. The message names the variable, never its value, and not the name either when it is not a variable
    ///   name or looks like key material (a key typed where the name belongs).
    public init(environmentVariable name: String) throws {
        let shownName = KeyMaterialRedaction.shownVariableName(name)
        guard let value = getenv(name) else {
            throw Self.invalid("the environment variable \(shownName) is not set")
        }
        try self.init(
            keyText: UnsafeRawBufferPointer(start: value, count: strlen(value)),
            source: "environment variable \(shownName)")
        // `--key-env` given the variable that holds a key file's path: the path became the passphrase.
        if kind == .passphrase, Self.namesExistingFile(value) { mistakeHint = .readKeyFileInsteadOfPath }
    }

    /// Whether `value` is the path of an existing regular file (it holds a `/`): a variable meant for a key file's
    /// path, given where the key itself belongs. Looks at the file system only, never shows the value.
    package static func namesExistingFile(_ value: UnsafePointer<CChar>) -> Bool {
        guard strchr(value, Int32(UInt8(ascii: "/"))) != nil else { return false }
        var status = stat()
        return stat(value, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    /// Reads a key from a file descriptor until end of file (standard input, a pipe), in the key-file format of
    /// ``init(keyText:source:)``.
    ///
    /// The bytes go straight into buffers that are wiped; no Swift `String` or `Array` holds them. At most
    /// ``maximumKeyFileByteCount`` bytes are accepted.
    ///
    /// - Parameters:
    ///   - descriptor: An open file descriptor; it is read, not closed.
    ///   - source: Where the bytes come from, for error messages (for example `standard input`).
    /// - Throws: ``DatabaseError/invalidKey`` when reading fails, the input is too long or empty, or holds
    ///   malformed `x'…'` text.
    public init(readingFileDescriptor descriptor: CInt, source: String) throws {
        try self.init(readingFileDescriptor: descriptor, source: source, stopsAtNewline: false)
    }

    /// Reads one line from a file descriptor (a terminal), in the key-file format of ``init(keyText:source:)``: the
    /// bytes up to the first newline, which is not part of the key. A line longer than
    /// ``maximumKeyFileByteCount`` is cut there. For the command-line tool's prompt.
    package init(readingLineFrom descriptor: CInt, source: String) throws {
        try self.init(readingFileDescriptor: descriptor, source: source, stopsAtNewline: true)
    }

    private init(readingFileDescriptor descriptor: CInt, source: String, stopsAtNewline: Bool) throws {
        var readCount = 0
        // One byte more than allowed, so over-long input is noticed rather than cut. A line is read one byte at a
        // time, so nothing after its newline is consumed.
        let buffer = try SecretBytes(count: Self.maximumKeyFileByteCount + 1) { buffer in
            let limit = stopsAtNewline ? Self.maximumKeyFileByteCount : buffer.count
            readCount = try Self.readKeyBytes(
                descriptor, into: buffer, limit: limit, stopsAtNewline: stopsAtNewline
            ) { reason in
                Self.invalid("cannot read the key from \(source): \(reason)")
            }
        }
        guard readCount <= Self.maximumKeyFileByteCount else {
            throw Self.invalid(
                "the key from \(source) is longer than \(Self.maximumKeyFileByteCount) bytes; that is not a key")
        }
        self = try buffer.withUnsafeBytes { bytes in
            try EncryptionKey(keyText: UnsafeRawBufferPointer(rebasing: bytes[0..<readCount]), source: source)
        }
    }
}
