import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitSQLKit

/// A fresh temporary directory for one test, removed when released.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("SQLCipherKitIntegrationTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func remove() { try? FileManager.default.removeItem(at: url) }

    deinit { remove() }
}

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

/// The engine this run must be on (SQLCIPHERKIT_EXPECTED_ENGINE, set by .ci/test and .ci/sqlcipher4).
enum Engine {
    static var major: Int { SQLCipher.parsedVersion?.major ?? 0 }
    static let expectedMajor: Int? = ProcessInfo.processInfo.environment["SQLCIPHERKIT_EXPECTED_ENGINE"]
        .flatMap { Int($0) }
    static var capabilities: SQLCipherDialect.Capabilities { .linked }
}

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

/// Reads a whole file's bytes.
func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Whether `haystack` contains `needle` as a byte sequence.
func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let needle = Array(needle.utf8)
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { start in
        haystack[start] == needle[0] && Array(haystack[start..<(start + needle.count)]) == needle
    }
}
