import Foundation
import SQLCipherKit
@_exported import SQLCipherKitTestSupport
import Testing

/// Test keys. The passphrase holds a sentinel that key-hygiene tests search for in every message.
enum TestKeys {
    static let sentinel = "SENTINEL-KEY-7f3a9c"
    static var passphrase: EncryptionKey { try! EncryptionKey(passphrase: "\(sentinel)-passphrase") }
    static var otherPassphrase: EncryptionKey { try! EncryptionKey(passphrase: "\(sentinel)-other") }
    static var raw: EncryptionKey {
        try! EncryptionKey(sqlcipherRawKeyText: "x'" + String(repeating: "7f3a9c01", count: 8) + "'")
    }
}

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

