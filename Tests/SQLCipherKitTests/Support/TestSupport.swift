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


/// The ways SQL reaches the engine; a guard must hold on each.
enum SQLPath: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case execute, executeScript, statement, cachedStatement

    var testDescription: String { rawValue }

    /// Whether it can bind arguments.
    var takesArguments: Bool { self == .statement || self == .cachedStatement }

    /// Runs `sql` this way (`arguments` only where ``takesArguments``).
    func run(_ sql: String, arguments: StatementArguments = [], on db: Connection) throws {
        switch self {
        case .execute: try db.execute(sql)
        case .executeScript: try db.executeScript(sql) { _, _ in }
        case .statement: try db.prepare(sql).run(arguments: arguments)
        case .cachedStatement: try db.execute(sql, arguments: arguments)
        }
    }
}

/// An encrypted `main.db` with 3 rows, open, and what a guard test compares once a statement was refused: the
/// folder's listing (names and modes) and the file's bytes.
struct GuardScene {
    let db: Connection
    let listing: [String: Int]
    let mainBytes: [UInt8]

    init(in dir: TemporaryDirectory, isURI: Bool = false) throws {
        try EncryptionTests.makeDatabase(dir.path("main.db"), rows: 3)
        listing = try folderListing(dir.url.path)
        mainBytes = try snapshot(dir.path("main.db"))
        db = try Connection(path: dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(isURI: isURI))
    }
}
