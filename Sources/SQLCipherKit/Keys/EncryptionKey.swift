import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key of an encrypted database: a passphrase, a raw 256-bit key, or a raw key with its 16-byte salt.
///
/// - A **passphrase** goes through SQLCipher's key derivation (PBKDF2, tens of milliseconds per connection).
/// - A **raw key** (32 random bytes) is used as the AES key directly: no derivation, and the fastest open.
/// - A **raw key with salt** also fixes the database salt; a database with a plaintext header needs it, because
///   its salt is not stored in the file.
///
/// ```swift
/// let key = try EncryptionKey(contentsOf: "/run/secrets/notes.key")  // x'…' raw key or a passphrase
/// let fresh = try EncryptionKey.generateRaw()                        // 32 random bytes from OpenSSL
/// ```
///
/// Key bytes live in a buffer that is wiped with `OPENSSL_cleanse` when the last copy of the key is released. The
/// key reaches SQLCipher only through `sqlite3_key` / `sqlite3_rekey` (never in SQL text). Its description is
/// redacted, and no error message ever contains it. An empty key is refused: SQLCipher would silently create a
/// plaintext database.
///
/// See [SQLCipher API: key](https://www.zetetic.net/sqlcipher/sqlcipher-api/#key).
public struct EncryptionKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The form of a key.
    public enum Kind: Sendable, Hashable {
        /// A passphrase, derived into the AES key by SQLCipher's KDF.
        case passphrase
        /// A raw 32-byte AES key.
        case raw
        /// A raw 32-byte AES key and a 16-byte salt.
        case rawWithSalt
    }

    /// The form of this key.
    public let kind: Kind

    /// The bytes handed to `sqlite3_key`: the passphrase, or the `x'<hex>'` text of a raw key.
    let material: SecretBytes

    /// The salt of a ``Kind/rawWithSalt`` key. A salt is not secret (SQLCipher stores it in the file's first bytes).
    public let salt: [UInt8]?

    /// For a passphrase that looks like a typing mistake (64 or 96 hex digits without `x'…'`, a space, tab or line
    /// break at either end, an environment variable holding a file's path), what a wrong-key error should say about
    /// it; never the key's bytes.
    var mistakeHint: DatabaseError.Remedy?

    /// The number of raw key bytes.
    public static let rawKeyByteCount = 32
    /// The number of salt bytes.
    public static let saltByteCount = 16

    private init(kind: Kind, material: SecretBytes, salt: [UInt8]?) {
        self.kind = kind
        self.material = material
        self.salt = salt
    }

    // MARK: - Passphrases

    /// A passphrase key from UTF-8 text.
    ///
    /// - Warning: Swift strings cannot be wiped; the copy SQLCipherKit keeps is. Prefer
    ///   ``init(contentsOf:permissions:)`` or ``init(passphraseBytes:)`` with a buffer you wipe.
    /// - Throws: ``DatabaseError/invalidKey`` for an empty passphrase.
    public init(passphrase: String) throws {
        var passphrase = passphrase
        try self.init(passphraseBuffer: passphrase.withUTF8 { UnsafeRawBufferPointer($0).copyIntoSecret() })
    }

    /// A passphrase key from bytes (any bytes, including NUL).
    ///
    /// - Throws: ``DatabaseError/invalidKey`` when `bytes` is empty.
    public init(passphraseBytes bytes: some Sequence<UInt8>) throws {
        var array = Array(bytes)
        defer { array.withUnsafeMutableBytes { SecretBytes.wipe($0) } }
        try self.init(passphraseBuffer: array.withUnsafeBytes { $0.copyIntoSecret() })
    }

    init(passphraseBuffer: SecretBytes) throws {
        guard passphraseBuffer.count > 0 else {
            throw DatabaseError(
                .invalidKey,
                "the key is empty; SQLCipher would create a plaintext database with it")
        }
        self.init(kind: .passphrase, material: passphraseBuffer, salt: nil)
        mistakeHint = passphraseBuffer.withUnsafeBytes { Self.mistakeHint(forPassphrase: $0) }
    }

    /// What a passphrase looks like by mistake, from its shape only.
    private static func mistakeHint(forPassphrase bytes: UnsafeRawBufferPointer) -> DatabaseError.Remedy? {
        let isHex = bytes.allSatisfy { Hex.value($0) != nil }
        if isHex && (bytes.count == 2 * rawKeyByteCount || bytes.count == 2 * (rawKeyByteCount + saltByteCount)) {
            return .writeRawKeyWithQuotes
        }
        if let last = bytes.last, [0x20, 0x09, 0x0A, 0x0D].contains(last) {
            return .checkTrailingSpaceInPassphrase
        }
        if let first = bytes.first, [0x20, 0x09, 0x0A, 0x0D].contains(first) {
            return .checkLeadingSpaceInPassphrase
        }
        return nil
    }

    // MARK: - Raw keys

    /// A raw 32-byte key, optionally with a 16-byte salt.
    ///
    /// - Throws: ``DatabaseError/invalidKey`` when the key is not 32 bytes or the salt not 16.
    public init(rawKey: some Sequence<UInt8>, salt: (some Sequence<UInt8>)? = [UInt8]?.none) throws {
        var key = Array(rawKey)
        defer { key.withUnsafeMutableBytes { SecretBytes.wipe($0) } }
        let salt = salt.map { Array($0) }
        guard key.count == Self.rawKeyByteCount else {
            throw Self.invalid("a raw key must be \(Self.rawKeyByteCount) bytes, not \(key.count)")
        }
        if let salt, salt.count != Self.saltByteCount {
            throw Self.invalid("a salt must be \(Self.saltByteCount) bytes, not \(salt.count)")
        }
        let material = key.withUnsafeBytes { keyBytes in
            Self.rawText(key: keyBytes, salt: salt)
        }
        self.init(kind: salt == nil ? .raw : .rawWithSalt, material: material, salt: salt)
    }

    /// Parses SQLCipher's raw-key text: `x'<64 hex>'` (key) or `x'<96 hex>'` (key and salt), hex in either case.
    ///
    /// Unlike SQLCipher, which treats malformed hex as a passphrase, this throws: a typo must not silently become
    /// a different key.
    ///
    /// - Throws: ``DatabaseError/invalidKey`` naming what is wrong (never the key itself).
    public init(sqlcipherRawKeyText text: String) throws {
        var text = text
        let secret = try text.withUTF8 { try Self.parseRawText(UnsafeRawBufferPointer($0)) }
        self = secret
    }

    /// Generates a random raw key (32 bytes from OpenSSL's CSPRNG), optionally with a random salt.
    ///
    /// - Throws: ``DatabaseError/invalidKey`` when OpenSSL cannot produce random bytes.
    public static func generateRaw(withSalt: Bool = false) throws -> EncryptionKey {
        let byteCount = Self.rawKeyByteCount + (withSalt ? Self.saltByteCount : 0)
        let random = try SecretBytes(count: byteCount) { buffer in
            guard RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), CInt(byteCount)) == 1 else {
                throw Self.invalid("OpenSSL could not generate random bytes")
            }
        }
        return random.withUnsafeBytes { bytes in
            let key = UnsafeRawBufferPointer(rebasing: bytes[0..<Self.rawKeyByteCount])
            let salt = withSalt ? Array(bytes[Self.rawKeyByteCount...]) : nil
            return EncryptionKey(
                kind: withSalt ? .rawWithSalt : .raw, material: Self.rawText(key: key, salt: salt), salt: salt)
        }
    }

    /// The same raw key with a salt attached (for databases with a plaintext header).
    ///
    /// - Throws: ``DatabaseError/invalidKey`` for a passphrase key or a salt that is not 16 bytes.
    public func withSalt(_ salt: [UInt8]) throws -> EncryptionKey {
        guard kind != .passphrase else { throw Self.invalid("only a raw key can carry a salt") }
        guard salt.count == Self.saltByteCount else {
            throw Self.invalid("a salt must be \(Self.saltByteCount) bytes, not \(salt.count)")
        }
        let material = material.withUnsafeBytes { text in
            // text is x'<64 hex>' or x'<96 hex>': take the key's hex digits again.
            let hexKey = UnsafeRawBufferPointer(rebasing: text[2..<(2 + 2 * Self.rawKeyByteCount)])
            return Self.rawText(hexKey: hexKey, salt: salt)
        }
        return EncryptionKey(kind: .rawWithSalt, material: material, salt: salt)
    }

    /// The SQLCipher text form of a raw key (`x'…'`), for writing a key file. A passphrase has no such form.
    ///
    /// - Warning: This is the key. Write it only to a file with mode 0600, and wipe the buffer it was written to.
    package func withRawKeyText<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard kind != .passphrase else { throw Self.invalid("a passphrase has no raw-key text form") }
        return try material.withUnsafeBytes(body)
    }

    // MARK: - Description

    /// Redacted: names the kind only.
    public var description: String {
        switch kind {
        case .passphrase: "EncryptionKey(passphrase, redacted)"
        case .raw: "EncryptionKey(raw, redacted)"
        case .rawWithSalt: "EncryptionKey(raw with salt, redacted)"
        }
    }

    /// Redacted, like ``description``.
    public var debugDescription: String { description }

    /// Whether two keys are the same, compared in constant time.
    public func isSameKey(as other: EncryptionKey) -> Bool {
        kind == other.kind && material.isEqual(to: other.material)
    }

    // MARK: - Internals

    static func invalid(_ message: String) -> DatabaseError {
        DatabaseError(.invalidKey, message)
    }

    /// Builds `x'<hex key><hex salt>'` in a secret buffer.
    private static func rawText(key: UnsafeRawBufferPointer, salt: [UInt8]?) -> SecretBytes {
        let hexCount = 2 * (key.count + (salt?.count ?? 0))
        return SecretBytes(count: hexCount + 3) { out in
            out[0] = UInt8(ascii: "x")
            out[1] = UInt8(ascii: "'")
            var position = 2
            Hex.write(key, into: out, at: &position)
            Hex.write(salt ?? [], into: out, at: &position)
            out[position] = UInt8(ascii: "'")
        }
    }

    /// Builds `x'<hex key><hex salt>'` from a key already in hex.
    private static func rawText(hexKey: UnsafeRawBufferPointer, salt: [UInt8]) -> SecretBytes {
        SecretBytes(count: hexKey.count + 2 * salt.count + 3) { out in
            out[0] = UInt8(ascii: "x")
            out[1] = UInt8(ascii: "'")
            var position = 2
            for byte in hexKey {
                out[position] = byte
                position += 1
            }
            Hex.write(salt, into: out, at: &position)
            out[position] = UInt8(ascii: "'")
        }
    }

    /// Parses `x'<64 or 96 hex>'`; the text never appears in an error.
    static func parseRawText(_ text: UnsafeRawBufferPointer) throws -> EncryptionKey {
        guard text.count >= 3, text[0] == UInt8(ascii: "x") || text[0] == UInt8(ascii: "X"),
              text[1] == UInt8(ascii: "'"), text[text.count - 1] == UInt8(ascii: "'")
        else {
            throw invalid("a raw key must be written x'<64 hex digits>' or x'<96 hex digits>'")
        }
        let hex = UnsafeRawBufferPointer(rebasing: text[2..<(text.count - 1)])
        guard hex.allSatisfy({ Hex.value($0) != nil }) else {
            throw invalid("a raw key must contain only hex digits between x' and '")
        }
        guard hex.count == 2 * rawKeyByteCount || hex.count == 2 * (rawKeyByteCount + saltByteCount) else {
            throw invalid(
                "a raw key must have 64 hex digits (key) or 96 (key and salt), not \(hex.count)")
        }
        var salt: [UInt8]?
        if hex.count > 2 * rawKeyByteCount {
            salt = stride(from: 2 * rawKeyByteCount, to: hex.count, by: 2).map {
                Hex.value(hex[$0])! << 4 | Hex.value(hex[$0 + 1])!
            }
        }
        // Normalise to lower case so equal keys have equal material.
        let material = SecretBytes(count: text.count) { out in
            out[0] = UInt8(ascii: "x")
            out[1] = UInt8(ascii: "'")
            for (offset, byte) in hex.enumerated() {
                out[offset + 2] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F") ? byte + 32 : byte
            }
            out[text.count - 1] = UInt8(ascii: "'")
        }
        return EncryptionKey(kind: salt == nil ? .raw : .rawWithSalt, material: material, salt: salt)
    }
}

extension UnsafeRawBufferPointer {
    func copyIntoSecret() -> SecretBytes {
        SecretBytes(count: count) { out in
            if count > 0 { out.copyMemory(from: self) }
        }
    }
}
