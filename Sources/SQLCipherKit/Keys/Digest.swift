import COpenSSL

/// SHA-256 over bytes fed in pieces, with OpenSSL's libcrypto (already linked for SQLCipher): the checksum of replica
/// objects and of write-ahead-log runs.
///
/// A class because the digest context is a C allocation freed once; a hasher is used by one task at a time.
package final class SHA256 {
    /// 32 bytes.
    package static let byteCount = 32

    private let context: OpaquePointer

    package init() {
        // Allocation fails only when memory is exhausted; nothing sensible can go on then.
        context = EVP_MD_CTX_new()!
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "SHA-256 is not available in libcrypto")
    }

    private init(copying other: SHA256) {
        context = EVP_MD_CTX_new()!
        precondition(EVP_MD_CTX_copy_ex(context, other.context) == 1, "a SHA-256 context could not be copied")
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "SHA-256 update failed")
    }

    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// A hasher that has seen what this one has seen (to keep the digest of a prefix while going on).
    package func copy() -> SHA256 {
        SHA256(copying: self)
    }

    /// The digest of everything fed so far, as 64 lower-case hex digits (the hasher is finished after this).
    package func finishHex() -> String {
        Hex.string(finish())
    }

    /// The 32 bytes of the digest of everything fed so far (the hasher is finished after this).
    package func finish() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        precondition(EVP_DigestFinal_ex(context, &digest, &length) == 1, "SHA-256 final failed")
        return Array(digest.prefix(Int(length)))
    }

    /// The digest of `bytes`.
    package static func digest(_ bytes: [UInt8]) -> [UInt8] {
        let hasher = SHA256()
        hasher.update(bytes)
        return hasher.finish()
    }

    /// The digest of `bytes` in hex.
    package static func hex(_ bytes: [UInt8]) -> String {
        Hex.string(digest(bytes))
    }
}

/// HMAC-SHA256 (RFC 2104) with a key that is not secret to this process's memory hygiene (a SigV4 signing key is
/// derived from a credential the caller holds anyway). Key material of a database goes through
/// ``AuthenticationKey`` instead, which keeps its key in wiped memory.
package enum HMACSHA256 {
    package static func authenticate(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { key in message.withUnsafeBytes { authenticate($0, key: key) } }
    }

    static func authenticate(_ message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length: UInt32 = 0
        // HMAC() accepts a null data pointer only with a length of 0; an empty buffer may have no base address.
        let empty: UInt8 = 0
        let result = withUnsafePointer(to: empty) { emptyPointer in
            HMAC(
                EVP_sha256(), key.baseAddress ?? UnsafeRawPointer(emptyPointer), CInt(key.count),
                (message.baseAddress ?? UnsafeRawPointer(emptyPointer)).assumingMemoryBound(to: UInt8.self),
                message.count, &output, &length)
        }
        precondition(result != nil && length == UInt32(SHA256.byteCount), "HMAC-SHA256 failed in libcrypto")
        return output
    }
}

/// A 32-byte key for HMAC-SHA256 derived from a database key, for a purpose other than SQLCipher's own page cipher
/// (authenticating a replica's objects). It lives in wiped memory and is never shown; only the MACs it computes
/// leave it.
///
/// Derivation: HMAC-SHA256 keyed with the database's 32-byte raw key (for a passphrase, the raw key SQLCipher
/// derives from it with the file's salt and KDF settings, so guessing a passphrase against a MAC costs what guessing
/// it against the database costs), over the purpose's label. Two purposes never share a key.
package final class AuthenticationKey: Sendable, CustomStringConvertible {
    private let secret: SecretBytes

    private init(secret: SecretBytes) {
        self.secret = secret
    }

    /// The key for `purpose` from `key` (raw, or a passphrase derived with `salt` and `settings`'s KDF).
    ///
    /// - Throws: ``DatabaseError`` (`invalidKey`) when a passphrase is given without a 16-byte salt.
    package static func derive(
        from key: EncryptionKey, settings: CipherSettings, salt: [UInt8]?, purpose: String
    ) throws -> AuthenticationKey {
        let raw: EncryptionKey
        switch key.kind {
        case .passphrase:
            guard let salt else {
                throw EncryptionKey.invalid("a passphrase needs the database's salt to derive an authentication key")
            }
            raw = try KeyDerivation.derive(
                passphrase: key, salt: salt, parameters: KeyDerivation.Parameters(settings: settings))
        case .raw, .rawWithSalt:
            raw = key
        }
        let label = Array("SQLCipherKit \(purpose)".utf8)
        let derived = try raw.withRawKeyBytes { rawKey in
            SecretBytes(count: SHA256.byteCount) { out in
                let mac = label.withUnsafeBytes { HMACSHA256.authenticate($0, key: rawKey) }
                out.copyBytes(from: mac)
            }
        }
        return AuthenticationKey(secret: derived)
    }

    /// HMAC-SHA256 of `message` under this key.
    package func authenticate(_ message: [UInt8]) -> [UInt8] {
        secret.withUnsafeBytes { key in message.withUnsafeBytes { HMACSHA256.authenticate($0, key: key) } }
    }

    /// Redacted.
    package var description: String { "AuthenticationKey(redacted)" }
}

extension EncryptionKey {
    /// The 32 bytes of a raw key, decoded into wiped memory for the duration of `body`.
    ///
    /// - Throws: ``DatabaseError/invalidKey`` for a passphrase.
    func withRawKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard kind != .passphrase else { throw Self.invalid("a passphrase has no raw key bytes") }
        let bytes = material.withUnsafeBytes { text in
            // text is x'<64 hex>' or x'<96 hex>' (lower case): the key is the first 64 digits.
            SecretBytes(count: Self.rawKeyByteCount) { out in
                for index in 0..<Self.rawKeyByteCount {
                    out[index] = Hex.value(text[2 + 2 * index])! << 4 | Hex.value(text[3 + 2 * index])!
                }
            }
        }
        return try bytes.withUnsafeBytes(body)
    }
}
