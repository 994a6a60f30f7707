import Foundation
import SQLCipherKit
import Testing

/// A fresh temporary directory for one test, always removed afterwards.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("SQLCipherKitTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Runs `body` with a temporary directory that is removed afterwards, whatever happens.
@discardableResult
func withTemporaryDirectory<T>(_ body: (TemporaryDirectory) throws -> T) throws -> T {
    let directory = try TemporaryDirectory()
    return try body(directory)
}

/// Test keys. The passphrase holds a sentinel that key-hygiene tests search for in every message.
enum TestKeys {
    static let sentinel = "SENTINEL-KEY-7f3a9c"
    static var passphrase: EncryptionKey { try! EncryptionKey(passphrase: "\(sentinel)-passphrase") }
    static var otherPassphrase: EncryptionKey { try! EncryptionKey(passphrase: "\(sentinel)-other") }
    static var raw: EncryptionKey {
        try! EncryptionKey(sqlcipherRawKeyText: "x'" + String(repeating: "7f3a9c01", count: 8) + "'")
    }
}

/// The engine major version this run must be on, when the test scripts say so (SQLCIPHERKIT_EXPECTED_ENGINE).
enum Engine {
    static var major: Int { SQLCipher.parsedVersion?.major ?? 0 }
    static var isVersion4: Bool { major >= 4 }
    static let expectedMajor: Int? = ProcessInfo.processInfo.environment["SQLCIPHERKIT_EXPECTED_ENGINE"]
        .flatMap { Int($0) }
}

/// Reads a whole file's bytes.
func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Whether `haystack` contains `needle` as a byte sequence.
func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let needle = Array(needle.utf8)
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
        if Array(haystack[start..<(start + needle.count)]) == needle { return true }
    }
    return false
}

/// The SHA-like fingerprint of a file, for "unchanged" checks: its whole contents.
func snapshot(_ path: String) throws -> [UInt8] {
    try fileBytes(path)
}

/// Opens a plaintext scratch database.
func openPlain(_ path: String) throws -> Connection {
    try Connection(path: path, encryption: .none)
}

/// Expects `body` to throw a ``DatabaseError`` of `kind`; returns it for further checks.
@discardableResult
func expectError<R>(
    _ kind: DatabaseError.Kind, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> DatabaseError? {
    let error = #expect(throws: DatabaseError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.kind == kind, "got \(error.map { "\($0)" } ?? "no error")", sourceLocation: sourceLocation)
    return error
}

/// Expects `body` to throw a ``DatabaseError`` whose code matches `code` (primary codes match extended ones).
@discardableResult
func expectError<R>(
    code: ResultCode, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> DatabaseError? {
    let error = #expect(throws: DatabaseError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(
        error.map { code ~= $0.extendedResultCode } == true, "got \(error.map { "\($0)" } ?? "no error")",
        sourceLocation: sourceLocation)
    return error
}

extension TestKeys {
    /// The `x'…'` text of ``raw``, for raw C handles in tests.
    static let rawText = "x'" + String(repeating: "7f3a9c01", count: 8) + "'"
}

/// The pid of a process that has exited (a child started and waited for), for "left by a killed run" files.
func deadProcessID() throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    try process.run()
    process.waitUntilExit()
    return process.processIdentifier
}
