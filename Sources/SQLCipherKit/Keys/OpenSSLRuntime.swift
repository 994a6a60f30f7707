import COpenSSL

/// The OpenSSL library (libcrypto) loaded into this process, asked at run time. Package access: the CLI shows it
/// (`sqlcipherkit --version`, `info`, `--json`).
///
/// ``SQLCipher/cryptoProviderVersion`` is what the engine reports, which for some builds is the version of the
/// headers it was compiled with; this is the library the process actually runs with (the one the key derivation and
/// the random key generator use). An engine that links OpenSSL statically (the SQLCipher 4 wheel) has its own copy,
/// which may differ.
package enum OpenSSLRuntime {
    /// `OpenSSL_version(OPENSSL_VERSION)`, such as `OpenSSL 3.0.17 1 Jul 2025`.
    package static var version: String {
        String(cString: OpenSSL_version(OPENSSL_VERSION))
    }

    /// `OpenSSL_version_num()`, such as `0x30000110` for 3.0.17.
    package static var versionNumber: UInt {
        UInt(OpenSSL_version_num())
    }
}
