import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Docs/CLI.md's exit-status table is the contract scripts rely on: it must say what the code does.
@Suite("sqlcipherkit exit statuses as documented")
struct ExitStatusDocumentationTests {
    /// Docs/CLI.md, found from this source file's location.
    static let documentPath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Docs/CLI.md").path

    /// The rows of the "Exit status" table: status → the `error.kind` values listed for it.
    static func documentedTable() throws -> [Int32: [String]] {
        let text = try String(contentsOfFile: documentPath, encoding: .utf8)
        guard let start = text.range(of: "## Exit status") else { return [:] }
        let section = text[start.upperBound...]
        var table: [Int32: [String]] = [:]
        for line in section.split(separator: "\n") {
            if line.hasPrefix("## ") { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count >= 4, let status = Int32(cells[1]) else { continue }
            // The backticked words of the last column.
            let kinds = cells[3].split(separator: "`", omittingEmptySubsequences: false)
                .enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            table[status] = kinds
        }
        return table
    }

    /// The library's kinds a command can throw, by name.
    static let libraryKinds: [DatabaseError.Kind] = [
        .sqlite, .wrongKey, .notEncrypted, .missingKey, .notADatabase, .notSQLCipher, .unsupportedByEngine, .invalidKey,
        .invalidArgument, .invalidSQL, .verificationFailed, .invalidState, .fileSystem, .damaged, .diskFull, .busy,
    ]

    @Test("the table lists exactly the statuses the code has")
    func statuses() throws {
        let table = try Self.documentedTable()
        #expect(Set(table.keys) == Set(CLIExitStatus.allCases.map(\.rawValue)), "\(table)")
    }

    @Test("each library error kind listed in the table exits with that row's status, and each is listed once")
    func libraryKindsMatch() throws {
        let table = try Self.documentedTable()
        var seen: [String: Int32] = [:]
        for (status, kinds) in table {
            for kind in kinds {
                #expect(seen[kind] == nil, "\(kind) is listed twice")
                seen[kind] = status
            }
        }
        for kind in Self.libraryKinds {
            let documented = seen[kind.name]
            #expect(documented != nil, "\(kind.name) is not in Docs/CLI.md's exit status table")
            let error = DatabaseError(kind: kind, code: DatabaseError.SQLITE_ERROR, message: "test")
            #expect(CLIExitStatus.status(for: error).rawValue == documented, "\(kind.name)")
        }
        // The kinds the CLI reports itself, with the status of their row.
        let cliKinds: [(CommandFailure, String)] = [
            (CommandFailure("x", kind: "missingFile"), "missingFile"),
            (CommandFailure("x", kind: "destinationExists"), "destinationExists"),
            (CommandFailure("x", status: .usage), "usage"),
            (CommandFailure("x", status: .verificationFailed), "verificationFailed"),
            (CommandFailure("x"), "failure"),
        ]
        for (failure, name) in cliKinds {
            #expect(failure.kind == name)
            #expect(seen[name] == failure.status.rawValue, "\(name)")
        }
    }

    @Test("the scenarios behind the table: destination exists 1, unknown option 2, wrong key 3, tampered page 4")
    func scenarios() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let db = try scratch.database("notes.db", key: key, rowCount: 200)
        let copy = try scratch.database("copy.db", key: key)
        #expect(runInProcess(["backup", db, copy, "--key-file", keyPath]).status == 1)
        #expect(runInProcess(["verify", db, "--kye-file", keyPath]).status == 2)
        #expect(runInProcess(["verify", db, "--key-file", otherPath]).status == 3)
        var bytes = try fileBytes(db)
        for index in (bytes.count - 300)..<(bytes.count - 292) { bytes[index] ^= 0xA5 }
        try Data(bytes).write(to: URL(fileURLWithPath: db))
        #expect(runInProcess(["verify", db, "--key-file", keyPath]).status == 4)
    }
}
