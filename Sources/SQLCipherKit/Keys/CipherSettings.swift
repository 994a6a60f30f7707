/// How a database is encrypted: a key and cipher settings, or nothing at all when explicitly asked for.
///
/// ```swift
/// let db = try Connection(path: "notes.db", encryption: .key(key))
/// let cache = try Connection(path: "cache.db", encryption: .none)   // plaintext, on purpose
/// ```
public struct Encryption: Sendable, CustomStringConvertible {
    /// The key, or `nil` for a plaintext database.
    public let key: EncryptionKey?

    /// The cipher settings applied right after the key.
    public let settings: CipherSettings

    /// No encryption: a plaintext SQLite database. Opening an encrypted file this way fails with
    /// ``DatabaseError/missingKey``.
    public static let none = Encryption(key: nil, settings: .engineDefault)

    /// Encryption with a key and cipher settings (the engine's defaults unless given).
    public static func key(_ key: EncryptionKey, settings: CipherSettings = .engineDefault) -> Encryption {
        Encryption(key: key, settings: settings)
    }

    /// Redacted: the key kind and the settings.
    public var description: String {
        guard let key else { return "Encryption.none" }
        return "Encryption(\(key), \(settings))"
    }
}

/// SQLCipher's cipher settings for one connection.
///
/// A `nil` field keeps the engine's default. Every setting is applied right after the key and read back; a setting
/// the engine ignores (SQLite ignores unknown PRAGMAs) or does not support throws, rather than silently producing a
/// database with other settings than asked for. The same settings must be used at every open of a database.
///
/// Settings are per connection: the process-wide `cipher_default_*` PRAGMAs are never used.
///
/// See [SQLCipher API](https://www.zetetic.net/sqlcipher/sqlcipher-api/).
public struct CipherSettings: Sendable, Hashable, CustomStringConvertible {
    /// A PBKDF2 variant (`cipher_kdf_algorithm`).
    public enum KDFAlgorithm: String, Sendable, Hashable, CaseIterable {
        case pbkdf2HMACSHA1 = "PBKDF2_HMAC_SHA1"
        case pbkdf2HMACSHA256 = "PBKDF2_HMAC_SHA256"
        case pbkdf2HMACSHA512 = "PBKDF2_HMAC_SHA512"
    }

    /// A page HMAC variant (`cipher_hmac_algorithm`).
    public enum HMACAlgorithm: String, Sendable, Hashable, CaseIterable {
        case hmacSHA1 = "HMAC_SHA1"
        case hmacSHA256 = "HMAC_SHA256"
        case hmacSHA512 = "HMAC_SHA512"
    }

    /// How the page number enters each page's HMAC (`cipher_hmac_pgno`): SQLCipher writes it little-endian; some
    /// SQLCipher 2.0 builds on big-endian machines wrote it big-endian.
    public enum HMACPageNumberEncoding: String, Sendable, Hashable, CaseIterable {
        /// Little-endian (`le`), SQLCipher's default on every machine.
        case littleEndian = "le"
        /// Big-endian (`be`), for SQLCipher 2.0 files written on big-endian machines.
        case bigEndian = "be"
        /// The machine's own byte order (`native`).
        case native
    }

    /// `cipher_compatibility`: start from the defaults of SQLCipher major version 1, 2, 3 or 4. Applied before the
    /// other fields, which then override it. SQLCipher 4 has the PRAGMA; on SQLCipher 3 versions 1 to 3 are applied
    /// as the explicit settings they stand for.
    public var compatibility: Int?

    /// `cipher_page_size`: a power of two from 512 to 65536.
    public var pageSize: Int?

    /// `kdf_iter`: PBKDF2 iterations for a passphrase (ignored for raw keys), at least 1.
    public var kdfIterations: Int?

    /// `cipher_use_hmac`: whether each page carries an HMAC (tamper detection). Turning it off is not recommended.
    public var usesHMAC: Bool?

    /// `cipher_kdf_algorithm` (SQLCipher 4; SQLCipher 3 has PBKDF2-HMAC-SHA1 only).
    public var kdfAlgorithm: KDFAlgorithm?

    /// `cipher_hmac_algorithm` (SQLCipher 4; SQLCipher 3 has HMAC-SHA1 only).
    public var hmacAlgorithm: HMACAlgorithm?

    /// `cipher_plaintext_header_size` (SQLCipher 4): bytes at the start of the file left unencrypted, a multiple
    /// of 16 (typically 32). The salt is then not stored in the file: supply it with ``salt`` or a raw key with salt
    /// at every open.
    public var plaintextHeaderSize: Int?

    /// `cipher_salt` (SQLCipher 4): the 16-byte database salt, for databases with a plaintext header. Not secret.
    public var salt: [UInt8]?

    /// `cipher_hmac_pgno`: how the page number enters the page HMAC (only SQLCipher 2.0 files from big-endian
    /// machines need ``HMACPageNumberEncoding/bigEndian``). Deprecated by SQLCipher 4.1 but still applied.
    public var hmacPageNumberEncoding: HMACPageNumberEncoding?

    /// `fast_kdf_iter`: PBKDF2 iterations that derive the HMAC key from the encryption key (default 2; the SQLCipher
    /// 2.0 beta used 4000). Deprecated by SQLCipher 4.1 but still applied.
    public var fastKDFIterations: Int?

    /// `cipher_hmac_salt_mask`: the byte XORed into the salt to derive the HMAC key (default `0x3a`; the SQLCipher
    /// 2.0 beta used `0x00`).
    ///
    /// - Warning: SQLCipher keeps this value for the whole process, not per connection: setting it changes every
    ///   connection that derives its key afterwards. A value other than ``SQLCipher/defaultHMACSaltMask`` is
    ///   therefore only accepted inside ``SQLCipher/withHMACSaltMask(_:_:)``, which holds it for one scope and
    ///   restores the default after it; opening with it anywhere else throws ``DatabaseError/invalidState``.
    public var hmacSaltMask: UInt8?

    /// Creates settings; `nil` keeps the engine's default.
    public init(
        compatibility: Int? = nil, pageSize: Int? = nil, kdfIterations: Int? = nil, usesHMAC: Bool? = nil,
        kdfAlgorithm: KDFAlgorithm? = nil, hmacAlgorithm: HMACAlgorithm? = nil, plaintextHeaderSize: Int? = nil,
        salt: [UInt8]? = nil, hmacPageNumberEncoding: HMACPageNumberEncoding? = nil, fastKDFIterations: Int? = nil,
        hmacSaltMask: UInt8? = nil
    ) {
        self.hmacPageNumberEncoding = hmacPageNumberEncoding
        self.fastKDFIterations = fastKDFIterations
        self.hmacSaltMask = hmacSaltMask
        self.compatibility = compatibility
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
        self.usesHMAC = usesHMAC
        self.kdfAlgorithm = kdfAlgorithm
        self.hmacAlgorithm = hmacAlgorithm
        self.plaintextHeaderSize = plaintextHeaderSize
        self.salt = salt
    }

    /// The linked engine's defaults (SQLCipher 3: 1024-byte pages, 64,000 PBKDF2-SHA1 iterations, HMAC-SHA1;
    /// SQLCipher 4: 4096, 256,000, SHA512).
    public static let engineDefault = CipherSettings()

    /// SQLCipher 3's defaults, explicitly: a file both SQLCipher 3 and 4 can open with these settings.
    public static let sqlcipher3 = CipherSettings(
        pageSize: 1024, kdfIterations: 64000, usesHMAC: true,
        kdfAlgorithm: .pbkdf2HMACSHA1, hmacAlgorithm: .hmacSHA1)

    /// SQLCipher 1.1's defaults, explicitly: 1024-byte pages, 4,000 PBKDF2-SHA1 iterations, no page HMAC.
    public static let sqlcipher1 = CipherSettings(
        pageSize: 1024, kdfIterations: 4000, usesHMAC: false,
        kdfAlgorithm: .pbkdf2HMACSHA1, hmacAlgorithm: .hmacSHA1)

    /// SQLCipher 2's defaults, explicitly: 1024-byte pages, 4,000 PBKDF2-SHA1 iterations, HMAC-SHA1.
    public static let sqlcipher2 = CipherSettings(
        pageSize: 1024, kdfIterations: 4000, usesHMAC: true,
        kdfAlgorithm: .pbkdf2HMACSHA1, hmacAlgorithm: .hmacSHA1)

    /// The explicit settings `cipher_compatibility` = `version` stands for (1 to 4), `nil` for another number.
    public static func defaults(ofMajorVersion version: Int) -> CipherSettings? {
        switch version {
        case 1: .sqlcipher1
        case 2: .sqlcipher2
        case 3: .sqlcipher3
        case 4: .sqlcipher4
        default: nil
        }
    }

    /// These settings with every field left `nil` taken from ``compatibility``'s defaults (no change without it).
    var resolvingCompatibility: CipherSettings {
        guard let compatibility, let implied = Self.defaults(ofMajorVersion: compatibility) else { return self }
        var resolved = self
        resolved.compatibility = nil
        resolved.pageSize = pageSize ?? implied.pageSize
        resolved.kdfIterations = kdfIterations ?? implied.kdfIterations
        resolved.usesHMAC = usesHMAC ?? implied.usesHMAC
        resolved.kdfAlgorithm = kdfAlgorithm ?? implied.kdfAlgorithm
        resolved.hmacAlgorithm = hmacAlgorithm ?? implied.hmacAlgorithm
        return resolved
    }

    /// SQLCipher 4's defaults, explicitly (needs SQLCipher 4).
    public static let sqlcipher4 = CipherSettings(
        pageSize: 4096, kdfIterations: 256_000, usesHMAC: true,
        kdfAlgorithm: .pbkdf2HMACSHA512, hmacAlgorithm: .hmacSHA512)

    /// A plaintext header of `size` bytes (SQLCipher 4), with a salt.
    public static func plaintextHeader(size: Int = 32, salt: [UInt8]? = nil) -> CipherSettings {
        CipherSettings(plaintextHeaderSize: size, salt: salt)
    }

    /// A ``salt`` from its text: 32 hex digits, either case; `nil` for anything else.
    static func salt(hexDigits text: String) -> [UInt8]? {
        guard text.utf8.count == 2 * EncryptionKey.saltByteCount else { return nil }
        return Hex.bytes(text)
    }

    /// `true` when no field is set.
    public var isEngineDefault: Bool { self == .engineDefault }

    /// The fields that are set.
    public var description: String {
        var parts: [String] = []
        if let compatibility { parts.append("compatibility: \(compatibility)") }
        if let pageSize { parts.append("pageSize: \(pageSize)") }
        if let kdfIterations { parts.append("kdfIterations: \(kdfIterations)") }
        if let usesHMAC { parts.append("usesHMAC: \(usesHMAC)") }
        if let kdfAlgorithm { parts.append("kdfAlgorithm: \(kdfAlgorithm.rawValue)") }
        if let hmacAlgorithm { parts.append("hmacAlgorithm: \(hmacAlgorithm.rawValue)") }
        if let plaintextHeaderSize { parts.append("plaintextHeaderSize: \(plaintextHeaderSize)") }
        if salt != nil { parts.append("salt: set") }
        if let hmacPageNumberEncoding { parts.append("hmacPageNumberEncoding: \(hmacPageNumberEncoding.rawValue)") }
        if let fastKDFIterations { parts.append("fastKDFIterations: \(fastKDFIterations)") }
        if let hmacSaltMask { parts.append("hmacSaltMask: 0x\(String(hmacSaltMask, radix: 16))") }
        return parts.isEmpty ? "CipherSettings(engine defaults)" : "CipherSettings(" + parts.joined(separator: ", ") + ")"
    }
}

// MARK: - Ranges

extension CipherSettings {
    /// A setting outside its range: which one, what it must be and what it is, so that the library names it in its
    /// own words (``Setting/name``) and the command line by its option.
    package struct RangeViolation: Equatable, Sendable {
        /// The settings that have a range.
        package enum Setting: Sendable, CaseIterable {
            case compatibility, pageSize, kdfIterations, plaintextHeaderSize, salt, fastKDFIterations

            /// The setting as the library's messages name it.
            package var name: String {
                switch self {
                case .compatibility: "compatibility"
                case .pageSize: "page size"
                case .kdfIterations: "KDF iterations"
                case .plaintextHeaderSize: "plaintext header size"
                case .salt: "a salt"
                case .fastKDFIterations: "fast KDF iterations"
                }
            }
        }

        /// The setting.
        package let setting: Setting
        /// What it must be, such as "a power of two from 512 to 65536".
        package let requirement: String
        /// What it is (for the salt, its length in bytes: a salt is not secret, but it is not shown either).
        package let value: String

        /// "`name` must be `requirement`, not `value`".
        package func message(naming name: String) -> String {
            "\(name) must be \(requirement), not \(value)"
        }
    }

    /// The first setting outside its range, or `nil`: the one check of the ranges, made by the library before it
    /// applies any setting and by the command line before it opens anything.
    ///
    /// The largest plaintext header depends on the page size: the one set, the one ``compatibility`` implies, or
    /// the linked engine's default.
    package var rangeViolation: RangeViolation? {
        func violation(_ setting: RangeViolation.Setting, _ requirement: String, _ value: Int) -> RangeViolation {
            RangeViolation(setting: setting, requirement: requirement, value: String(value))
        }
        if let compatibility, Self.defaults(ofMajorVersion: compatibility) == nil {
            return violation(.compatibility, "1, 2, 3 or 4", compatibility)
        }
        if let pageSize, pageSize < 512 || pageSize > 65536 || pageSize & (pageSize - 1) != 0 {
            return violation(.pageSize, "a power of two from 512 to 65536", pageSize)
        }
        if let kdfIterations, kdfIterations < 1 {
            return violation(.kdfIterations, "at least 1", kdfIterations)
        }
        if let size = plaintextHeaderSize {
            let pageSize = resolvingCompatibility.pageSize ?? (SQLCipher.supports(.version4Format) ? 4096 : 1024)
            // An invalid size fails later with a misleading SQLITE_NOMEM (Docs/EngineNotes.md#plaintext-header).
            if size < 0 || size % 16 != 0 || size >= pageSize - 96 {
                return violation(.plaintextHeaderSize, "a multiple of 16 from 0 to \(pageSize - 112)", size)
            }
        }
        if let salt, salt.count != EncryptionKey.saltByteCount {
            return violation(.salt, "\(EncryptionKey.saltByteCount) bytes", salt.count)
        }
        if let fastKDFIterations, fastKDFIterations < 1 {
            return violation(.fastKDFIterations, "at least 1", fastKDFIterations)
        }
        return nil
    }
}

// MARK: - Salt files

extension CipherSettings {
    /// The largest salt file accepted, in bytes.
    static let maximumSaltFileByteCount = 256

    /// Reads a ``salt`` from a file: 32 hex digits (16 bytes), or `x'<32 hex>'`, with white space around them
    /// allowed. The salt is not secret (a normal SQLCipher file stores it in its first 16 bytes), but the content is
    /// never shown. The file is opened like a key file (non-blocking, checked with `fstat` before a byte is read),
    /// without a key file's permission checks.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` when the file is missing, not a regular file, larger than 256
    ///   bytes, or does not hold 32 hex digits.
    package static func salt(contentsOfFile path: String) throws -> [UInt8] {
        let shownPath = KeyMaterialRedaction.shown(path, as: "salt file path")
        let failure = { (message: String) in DatabaseError(.invalidArgument, message) }
        let file = try EncryptionKey.openSmallFile(
            atPath: path, describedAs: "the salt file \(shownPath)", limit: maximumSaltFileByteCount, failure: failure)
        defer { closeFileDescriptor(file.descriptor) }
        var bytes = [UInt8](repeating: 0, count: maximumSaltFileByteCount + 1)
        let count = try bytes.withUnsafeMutableBytes { buffer in
            try EncryptionKey.readKeyBytes(file.descriptor, into: buffer, limit: buffer.count) { reason in
                failure("cannot read the salt file \(shownPath): \(reason)")
            }
        }
        guard count <= maximumSaltFileByteCount else {
            throw failure("the salt file \(shownPath) changed while it was read")
        }
        var text = Substring(String(decoding: bytes[0..<count], as: UTF8.self))
        text = text.drop(while: \.isWhitespace)
        while text.last?.isWhitespace == true { text = text.dropLast() }
        if (text.hasPrefix("x'") || text.hasPrefix("X'")) && text.hasSuffix("'") && text.count >= 3 {
            text = text.dropFirst(2).dropLast()
        }
        guard let salt = salt(hexDigits: String(text)) else {
            throw failure(
                "the salt file \(shownPath) must hold 32 hex digits (16 bytes), optionally as x'<32 hex>'")
        }
        return salt
    }
}
