import Foundation
import SQLCipherKit
import Testing

/// Error texts built from SQL carry no key material. Before: a failed `ATTACH 'x.db' AS o KEY 'secret'` put the
/// statement, key included, in the error's SQL and description (and a trace put it in the log); a mistyped
/// `PRAGMA key 'secret'` (no `=`) failed as a syntax error whose message quoted the secret.
@Suite("Key material in error texts")
struct KeyRedactionTests {
    /// The key text each statement carries; it must appear in no text the library builds.
    static let secret = "hunter2SECRETk3y"
    /// The same secret as hex, for blob literals and raw keys.
    static let secretHex = Array(secret.utf8).map { String(format: "%02x", $0) }.joined()
    /// A 64-hex-digit raw key text (not the main database's key).
    static let rawKeyHex = String(repeating: "c0ffee42", count: 8)

    /// Every texts that must not appear: the secret in any case, its hex, the raw key's hex.
    static let forbidden = [secret, secret.lowercased(), secret.uppercased(), secretHex, secretHex.uppercased(),
                            rawKeyHex]

    /// Failing statements that carry `{S}` (the secret), `{H}` (its hex), `{R}` (a raw key's hex); `{P}` is a
    /// plaintext database, `{E}` one encrypted with another key, `{N}` a file that does not exist.
    static let spellings: [String] = {
        var spellings = [
            "PRAGMA key = '{S}'",
            "PRAGMA key='{S}'",
            "pragma KEY = \"{S}\"",
            "PRAGMA key('{S}')",
            "PRAGMA key '{S}'",
            "PRAGMA key {S}",
            "PRAGMA key = {S}",
            "PRAGMA main.key = '{S}'",
            "PRAGMA main . key '{S}'",
            "PRAGMA \"key\" = '{S}'",
            "PRAGMA/**/key/**/=/**/'{S}'",
            "PRAGMA key = '{S}",
            "PRAGMA key = x'{H}'",
            "PRAGMA key = \"x'{R}'\"",
            "PRAGMA key -- comment\n '{S}'",
            "SELECT 1; PRAGMA key '{S}'",
            "ATTACH '{P}' AS o KEY '{S}'",
            "attach database '{P}' as o key \"{S}\"",
            "ATTACH '{P}' AS o KEY x'{H}'",
            "ATTACH '{P}' AS o KEY/* a comment */'{S}'",
            "ATTACH '{P}' AS o KEY -- comment\n'{S}'",
            "ATTACH '{P}' AS o KEY {S}",
            "ATTACH '{P}' AS o KeY '{S}'",
            "ATTACH '{P}' AS o KEY '{S}",
            "ATTACH '{E}' AS o KEY '{S}'",
            "ATTACH '{E}' AS o KEY \"x'{R}'\"",
            "ATTACH '{E}' AS o KEY '{S}' || ''",
            "ATTACH '{E}' AS o KEY {S}",
            "ATTACH '{E}' AS o KEY [{S}]",
            "ATTACH 'file:{P}?key={S}' AS o",
            "ATTACH 'file:{P}?hexkey={H}' AS o",
            "ATTACH 'file:{P}?textkey={S}' AS o",
            "ATTACH 'file:{N}?mode=rwc&key={S}' AS o",
            "VACUUM INTO 'file:{N}?key={S}'",
        ]
        for pragma in ["rekey", "hexkey", "hexrekey", "textkey", "textrekey"] {
            let value = pragma.hasPrefix("hex") ? "'{H}'" : "'{S}'"
            spellings += ["PRAGMA \(pragma) = \(value)", "PRAGMA \(pragma) \(value)", "PRAGMA main.\(pragma)(\(value))"]
        }
        return spellings
    }()

    /// The ways a statement reaches the engine.
    enum Path: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case execute, prepare, executeScript
        var testDescription: String { rawValue }

        func run(_ sql: String, on db: Connection) throws {
            switch self {
            case .execute: try db.execute(sql)
            case .prepare: try db.prepare(sql).run()
            case .executeScript: try db.executeScript(sql) { _, _ in }
            }
        }
    }

    /// Fails when any text of `error`, or the log so far, holds the secret.
    private static func expectNoSecret(
        in error: DatabaseError, log: LogLines, _ sql: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let texts: [(String, String)] = [
            ("description", error.description),
            ("localizedDescription", error.localizedDescription),
            ("String(reflecting:)", String(reflecting: error)),
            ("sql", error.sql ?? ""),
            ("reason", error.reason),
            ("message", error.message),
            ("log", log.text),
        ]
        for (name, text) in texts {
            for secret in forbidden {
                #expect(!text.contains(secret), "\(name) holds the key for `\(sql)`: \(text)",
                        sourceLocation: sourceLocation)
            }
        }
    }

    @Test("no failing statement that carries a key shows it, in any spelling, through any path, on this engine",
          arguments: Path.allCases)
    func noKeyInErrors(path: Path) throws {
        try withTemporaryDirectory { dir in
            let plaintext = try Connection(path: dir.path("plain.db"), encryption: .none)
            try plaintext.execute("CREATE TABLE p(x)")
            plaintext.close()
            let encrypted = try Connection(path: dir.path("other.db"), key: TestKeys.passphrase)
            try encrypted.execute("CREATE TABLE e(x)")
            encrypted.close()
            let log = LogLines()
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(logger: log.logger()))
            // A trace logs every statement that ran: a failed ATTACH runs.
            try db.trace(to: log.logger())
            for spelling in Self.spellings {
                let sql = spelling.replacingOccurrences(of: "{S}", with: Self.secret)
                    .replacingOccurrences(of: "{H}", with: Self.secretHex)
                    .replacingOccurrences(of: "{R}", with: Self.rawKeyHex)
                    .replacingOccurrences(of: "{P}", with: dir.path("plain.db"))
                    .replacingOccurrences(of: "{E}", with: dir.path("other.db"))
                    .replacingOccurrences(of: "{N}", with: dir.path("new.db"))
                do {
                    try path.run(sql, on: db)
                    Issue.record("`\(sql)` did not fail")
                } catch let error as DatabaseError {
                    Self.expectNoSecret(in: error, log: log, sql)
                }
                #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"], "\(sql)")
            }
            // The log is not empty: the trace did see the statements that ran.
            #expect(log.text.contains("ATTACH"))
        }
    }

    @Test("statements without key material keep their text in errors")
    func ordinaryErrorsKeepTheirText() throws {
        let db = try Connection.inMemory()
        let error = expectError(.sqlite) { try db.execute("SELECT * FROM missing_table WHERE name = 'visible'") }
        #expect(error?.sql == "SELECT * FROM missing_table WHERE name = 'visible'")
        #expect(error?.reason == "no such table: missing_table")
        let syntax = expectError(.sqlite) { try db.execute("SELEC 'visible'") }
        #expect(syntax?.reason.contains("near \"SELEC\"") == true)
    }

    @Test("errors made by hand are redacted as those SQLite reports")
    func errorsMadeByHand() {
        let error = DatabaseError(
            .invalidArgument, "near \"'\(Self.secret)'\": syntax error; opened file:x.db?mode=ro&hexkey=\(Self.secretHex)",
            sql: "PRAGMA rekey '\(Self.secret)'")
        for secret in Self.forbidden {
            #expect(!error.description.contains(secret), "\(error)")
        }
        #expect(error.sql == "PRAGMA rekey <redacted>")
        #expect(error.reason.contains("near \"<redacted>\": syntax error"))
        #expect(error.reason.contains("hexkey=<redacted>"))
    }
}
