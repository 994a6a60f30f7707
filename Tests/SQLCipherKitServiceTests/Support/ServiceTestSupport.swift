#if SQLKit || Services  // traits SQLKit and Services (Package.swift): what their tests share
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitSQLKit
@_exported import SQLCipherKitTestSupport

/// Test keys; the sentinel lets tests search files and output for leaked key text.
enum TestKeys {
    static let sentinel = "SENTINEL-KEY-5e21b7"
    static var raw: EncryptionKey {
        try! EncryptionKey(sqlcipherRawKeyText: "x'" + String(repeating: "5e21b7a4", count: 8) + "'")
    }
    static var otherRaw: EncryptionKey {
        try! EncryptionKey(sqlcipherRawKeyText: "x'" + String(repeating: "c0ffee42", count: 8) + "'")
    }
    static var passphrase: EncryptionKey { try! EncryptionKey(passphrase: "\(sentinel)-passphrase") }
}

#if SQLKit
/// The engine this run must be on (SQLCIPHERKIT_EXPECTED_ENGINE, set by .ci/test and .ci/sqlcipher4).
extension Engine {
    static var capabilities: SQLCipherDialect.Capabilities { .linked }
}
#endif

/// Logging for the ecosystem suites: their progress lines at `notice` are noise in CI (LOG_LEVEL overrides).
let isLoggingConfigured: Bool = {
    let level = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
    return true
}()
#endif
