import COpenSSL

/// After a key did not open a file with the engine's default settings: whether the file is in the other SQLCipher
/// major version's format, so that the error names that instead of a lost key (the most common upgrade mistake).
///
/// - On SQLCipher 4, a SQLCipher 3 file opens only with SQLCipher 3's settings: the probe opens it with them
///   (read-only, nothing written).
/// - On SQLCipher 3, a SQLCipher 4 file cannot be opened at all (PBKDF2-HMAC-SHA512, HMAC-SHA512). The probe checks
///   page 1's HMAC as SQLCipher 4 computes it (Docs/EngineNotes.md#format-probe): the 16-byte salt at the start, a
///   4096-byte page whose last 80 reserved bytes are the IV (16) and HMAC-SHA512 (64) over the encrypted bytes after
///   the salt, the IV and the page number (4 bytes, little-endian); the HMAC key is PBKDF2-HMAC-SHA512 of the
///   encryption key over the salt XOR 0x3a, 2 iterations; the encryption key is the raw key, or PBKDF2-HMAC-SHA512
///   of the passphrase over the salt, 256,000 iterations. A match means the key is right and the format is 4's.
///
/// Only the shape of the answer leaves this type; no key byte does.
enum OtherFormatProbe {
    /// The remedy naming the other format, or `nil` when the file is not in it (or the probe cannot tell).
    static func remedy(path: String, encryption: Encryption) -> DatabaseError.Remedy? {
        guard let key = encryption.key, encryption.settings.isEngineDefault else { return nil }
        if SQLCipher.supports(.version4Format) {
            return opensWithVersion3Settings(path: path, key: key) ? .openWithCompatibility(3) : nil
        }
        return isVersion4File(path: path, key: key) ? .openWithSQLCipher4 : nil
    }

    private static func opensWithVersion3Settings(path: String, key: EncryptionKey) -> Bool {
        let check = ReadOnlyCheck(path: path)
        check.namesOtherFormat = false
        do {
            try check.run(encryption: .key(key, settings: .sqlcipher3), busyTimeout: .milliseconds(200)) {
                _ = try $0.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
            }
            return true
        } catch {
            return false
        }
    }

    static let version4PageSize = 4096
    private static let version4ReservedBytes = 80
    private static let hmacByteCount = 64

    /// Whether page 1 carries a valid SQLCipher 4 HMAC under `key` (default settings).
    static func isVersion4File(path: String, key: EncryptionKey) -> Bool {
        guard let size = regularFileSize(atPath: path), size >= version4PageSize, size % version4PageSize == 0 else {
            return false
        }
        let page = readFilePrefix(atPath: path, count: version4PageSize)
        guard page.count == version4PageSize else { return false }
        let fileSalt = Array(page[0..<EncryptionKey.saltByteCount])
        let salt = key.salt ?? fileSalt
        guard let encryptionKey = try? derivedKey(key, salt: salt) else { return false }
        let hmacSalt = salt.map { $0 ^ 0x3a }
        guard let hmacKey = try? pbkdf2SHA512(encryptionKey, salt: hmacSalt, iterations: 2) else { return false }
        // HMAC over the bytes after the salt up to the HMAC (ciphertext and IV), then page number 1, little-endian.
        let hmacStart = version4PageSize - hmacByteCount
        var input = Array(page[EncryptionKey.saltByteCount..<hmacStart])
        input += [1, 0, 0, 0]
        var output = [UInt8](repeating: 0, count: hmacByteCount)
        var outputCount: CUnsignedInt = 0
        let computed = hmacKey.withUnsafeBytes { keyBytes in
            HMAC(
                EVP_sha512(), keyBytes.baseAddress, CInt(keyBytes.count), input, input.count, &output, &outputCount)
        }
        guard computed != nil, outputCount == CUnsignedInt(hmacByteCount) else { return false }
        return output == Array(page[hmacStart..<version4PageSize])
    }

    /// The AES key SQLCipher 4 uses for `key`: a raw key as it is, a passphrase through PBKDF2-HMAC-SHA512.
    private static func derivedKey(_ key: EncryptionKey, salt: [UInt8]) throws -> SecretBytes {
        if key.kind == .passphrase {
            return try key.material.withUnsafeBytes { try pbkdf2SHA512($0, salt: salt, iterations: 256_000) }
        }
        // material is x'<64 hex>' or x'<96 hex>': the key is the first 64 digits.
        return try key.material.withUnsafeBytes { text in
            try SecretBytes(count: EncryptionKey.rawKeyByteCount) { out in
                for index in 0..<EncryptionKey.rawKeyByteCount {
                    guard let high = Hex.value(text[2 + 2 * index]), let low = Hex.value(text[3 + 2 * index]) else {
                        throw EncryptionKey.invalid("not a raw key")
                    }
                    out[index] = high << 4 | low
                }
            }
        }
    }

    private static func pbkdf2SHA512(_ secret: SecretBytes, salt: [UInt8], iterations: Int) throws -> SecretBytes {
        try secret.withUnsafeBytes { try pbkdf2SHA512($0, salt: salt, iterations: iterations) }
    }

    private static func pbkdf2SHA512(
        _ secret: UnsafeRawBufferPointer, salt: [UInt8], iterations: Int
    ) throws -> SecretBytes {
        try SecretBytes(count: EncryptionKey.rawKeyByteCount) { out in
            let status = PKCS5_PBKDF2_HMAC(
                secret.baseAddress?.assumingMemoryBound(to: CChar.self), CInt(secret.count), salt, CInt(salt.count),
                CInt(iterations), EVP_sha512(), CInt(out.count), out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            guard status == 1 else { throw EncryptionKey.invalid("OpenSSL could not derive a key") }
        }
    }
}
