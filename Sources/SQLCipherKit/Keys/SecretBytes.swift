import COpenSSL

/// Secret bytes in a buffer of their own that is wiped with `OPENSSL_cleanse` when the last reference goes away.
///
/// Swift arrays and strings may be copied by the runtime and are never wiped, so key material lives here from the
/// moment it is read until it is handed to SQLCipher.
final class SecretBytes: @unchecked Sendable {
    // Sendable: the buffer is written once in init and only read afterwards (and wiped in deinit, when no other
    // reference can exist).
    private let buffer: UnsafeMutableRawBufferPointer

    /// Allocates `count` bytes and lets `fill` write them.
    init(count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        buffer = .allocate(byteCount: max(count, 1), alignment: 16)
        let used = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
        do {
            try fill(used)
        } catch {
            Self.wipe(buffer)
            buffer.deallocate()
            throw error
        }
        self.count = count
    }

    /// The number of secret bytes.
    let count: Int

    deinit {
        Self.wipe(buffer)
        buffer.deallocate()
    }

    /// Calls `body` with the bytes. Do not let them escape the closure.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }

    static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        OPENSSL_cleanse(base, buffer.count)
    }

    /// Constant-time comparison.
    func isEqual(to other: SecretBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { a in
            other.withUnsafeBytes { b in
                count == 0 || CRYPTO_memcmp(a.baseAddress, b.baseAddress, count) == 0
            }
        }
    }
}
