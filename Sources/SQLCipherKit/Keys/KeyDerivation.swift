import COpenSSL
import Synchronization

/// SQLCipher's passphrase key derivation, done once with OpenSSL so every further connection can open with the
/// derived raw key: a raw key equal to PBKDF2(passphrase, salt, iterations) opens a passphrase-keyed database
/// (SQLCipher derives exactly that from the passphrase).
package enum KeyDerivation {
    /// How many derivations this process ran (tests check that a pool runs exactly one).
    package static var derivationCount: Int { counter.load(ordering: .relaxed) }

    private static let counter = Atomic<Int>(0)

    /// The KDF parameters SQLCipher applies for these settings on the linked engine.
    struct Parameters: Equatable {
        let algorithm: CipherSettings.KDFAlgorithm
        let iterations: Int

        init(settings: CipherSettings) {
            let settings = settings.resolvingCompatibility
            let isVersion4Default = SQLCipher.supports(.version4Format)
            algorithm = settings.kdfAlgorithm ?? (isVersion4Default ? .pbkdf2HMACSHA512 : .pbkdf2HMACSHA1)
            iterations = settings.kdfIterations ?? (isVersion4Default ? 256_000 : 64_000)
        }
    }

    /// PBKDF2(passphrase, salt, iterations) as a raw key carrying the salt.
    static func derive(passphrase key: EncryptionKey, salt: [UInt8], parameters: Parameters) throws -> EncryptionKey {
        guard key.kind == .passphrase else {
            throw EncryptionKey.invalid("only a passphrase is derived; a raw key is used as it is")
        }
        guard salt.count == EncryptionKey.saltByteCount else {
            throw EncryptionKey.invalid("a salt must be \(EncryptionKey.saltByteCount) bytes, not \(salt.count)")
        }
        let digest: OpaquePointer? = switch parameters.algorithm {
        case .pbkdf2HMACSHA1: EVP_sha1()
        case .pbkdf2HMACSHA256: EVP_sha256()
        case .pbkdf2HMACSHA512: EVP_sha512()
        }
        counter.add(1, ordering: .relaxed)
        let derived = try SecretBytes(count: EncryptionKey.rawKeyByteCount) { out in
            let status = key.material.withUnsafeBytes { passphrase in
                PKCS5_PBKDF2_HMAC(
                    passphrase.baseAddress?.assumingMemoryBound(to: CChar.self), CInt(passphrase.count),
                    salt, CInt(salt.count), CInt(parameters.iterations), digest,
                    CInt(out.count), out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            guard status == 1 else {
                throw EncryptionKey.invalid("OpenSSL could not derive the key (PKCS5_PBKDF2_HMAC failed)")
            }
        }
        return try derived.withUnsafeBytes { try EncryptionKey(rawKey: $0, salt: salt) }
    }
}
