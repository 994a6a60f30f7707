#if Replication  // trait Replication (Package.swift)
import COpenSSL
import SQLCipherKit

/// SHA-256 over bytes fed in pieces (OpenSSL's libcrypto, already linked for SQLCipher): the checksum every replica
/// object carries, so a restore finds a damaged or swapped object and names it.
///
/// A class because the digest context is a C allocation freed once; a hasher is used by one task at a time.
final class SHA256 {
    /// 32 bytes.
    static let byteCount = 32

    private let context: OpaquePointer

    init() {
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

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "SHA-256 update failed")
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// A hasher that has seen what this one has seen (to keep the digest of a prefix while going on).
    func copy() -> SHA256 {
        SHA256(copying: self)
    }

    /// The digest of everything fed so far, as 64 lower-case hex digits (the hasher is finished after this).
    func finishHex() -> String {
        Hex.string(finish())
    }

    /// The 32 bytes of the digest of everything fed so far (the hasher is finished after this).
    func finish() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        precondition(EVP_DigestFinal_ex(context, &digest, &length) == 1, "SHA-256 final failed")
        return Array(digest.prefix(Int(length)))
    }

    /// The digest of `bytes` in hex.
    static func hex(_ bytes: [UInt8]) -> String {
        let hasher = SHA256()
        hasher.update(bytes)
        return hasher.finishHex()
    }
}
#endif
