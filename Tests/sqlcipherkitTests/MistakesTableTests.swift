import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// The mistakes of an operator's first hour, on every subcommand, each run as a real process with `--json` and
/// without it (and in-process where it reads no standard input or environment): the exit status is the JSON's
/// `exitStatus`, `ok` is `exitStatus == 0`, the kind is one Docs/CLI.md lists for that status, the message names the
/// cause in the CLI's words (no API name of the library), and no key byte is shown. Docs/CLI.md ("Mistakes and what
/// they say") is this table; `SQLCIPHERKIT_MISTAKES_TABLE=FILE` writes it in Markdown.
@Suite("sqlcipherkit: every mistake's exit status, JSON and cause agree")
struct MistakesTableTests {
    struct Mistake: Sendable {
        /// The mistake, in words.
        let what: String
        let arguments: [String]
        let status: Int32
        /// The `error.kind` (`nil` for success).
        let kind: String?
        /// Words the message must hold: the cause, and the option or command to use.
        let cause: [String]
        var environment: [String: String] = [:]
        var standardInput: [UInt8]?
        /// The engine it applies to (a SQLCipher 3 file on SQLCipher 4, migrate on SQLCipher 3), or `nil`.
        var engine: Int?

        var runsInProcess: Bool { environment.isEmpty && standardInput == nil }
    }

    /// The files the mistakes are made with, in one scratch folder (paths relative to it: the subprocess runs there).
    final class Fixture {
        let scratch: Scratch

        init() throws {
            scratch = try Scratch()
            let (_, key) = try scratch.rawKeyFile("k.key")
            try scratch.rawKeyFile("other.key")
            try scratch.rawKeyFile("new.key")
            try scratch.rawKeyFile("salted.key", withSalt: true)
            let (_, passphrase) = try scratch.sentinelKeyFile("pass.key")
            _ = try scratch.database("notes.db", key: key, rowCount: 200)
            _ = try scratch.database("pass.db", key: passphrase, rowCount: 5)
            _ = try plaintextDatabase(scratch, "plain.db")
            try FileManager.default.createDirectory(atPath: scratch.path("data"), withIntermediateDirectories: false)
            try scratch.writeFile("loose.key", "x'" + String(repeating: "ab", count: 32) + "'\n", mode: 0o644)
            try scratch.writeFile("empty.key", "", mode: 0o600)
            try scratch.writeFile("weak.key", "hunter2\n", mode: 0o600)
            try scratch.writeFile("exists.db", "not empty", mode: 0o600)
            let rawText = try String(contentsOfFile: scratch.path("k.key"), encoding: .utf8)
                .trimmingCharacters(in: .newlines)
            try scratch.writeFile("trailing.key", rawText + "  \n", mode: 0o600)
            try scratch.writeFile("bare.key", String(rawText.dropFirst(2).dropLast()) + "\n", mode: 0o600)
            try scratch.writeFile("double.key", "x\"" + rawText.dropFirst(2).dropLast() + "\"\n", mode: 0o600)
            try scratch.writeFile("spaced.key", Sentinel.text + " \n", mode: 0o600)
            try scratch.writeFile("leading.key", " " + Sentinel.text + "\n", mode: 0o600)
            _ = FileManager.default.createFile(
                atPath: scratch.path("bom.key"), contents: Data([0xEF, 0xBB, 0xBF] + Array((Sentinel.text + "\n").utf8)),
                attributes: [.posixPermissions: 0o600])
            try scratch.writeFile("hex.salt", "00112233445566778899aabbccddeeff\n", mode: 0o600)
            // A damaged copy: a byte of page 3 flipped (every page of an encrypted file is authenticated).
            var damaged = try fileBytes(scratch.path("notes.db"))
            let pageSize = Engine.isVersion4 ? 4096 : 1024
            damaged[2 * pageSize + 100] ^= 0xFF
            try Data(damaged).write(to: URL(fileURLWithPath: scratch.path("damaged.db")))
            chmod(scratch.path("damaged.db"), 0o600)
            // A truncated one: not a whole number of pages.
            try Data(try fileBytes(scratch.path("notes.db")).prefix(1000)).write(
                to: URL(fileURLWithPath: scratch.path("truncated.db")))
            if Engine.isVersion4 {
                _ = try scratch.database("v3.db", key: key, settings: .sqlcipher3, rowCount: 5)
                try scratch.writeFile("testkey.key", "testkey\n", mode: 0o600)
                _ = try scratch.database(
                    "testkey.db", key: try EncryptionKey(passphrase: "testkey"), settings: .sqlcipher3, rowCount: 5)
            }
            try FileManager.default.createSymbolicLink(
                atPath: scratch.path("link.db"), withDestinationPath: scratch.path("notes.db"))
        }
    }

    static func mistakes() -> [Mistake] {
        let key = ["--key-file", "k.key"]
        var list: [Mistake] = [
            // The command line.
            Mistake(what: "a misspelt subcommand", arguments: ["veryfy", "notes.db"] + key, status: 2, kind: "usage",
                    cause: ["unknown subcommand", "did you mean 'verify'"]),
            Mistake(what: "the database before the subcommand", arguments: ["notes.db", "verify"] + key, status: 2,
                    kind: "usage", cause: ["the subcommand comes first"]),
            Mistake(what: "a misspelt option", arguments: ["verify", "notes.db", "--kye-file", "k.key"], status: 2,
                    kind: "usage", cause: ["--kye-file"]),
            Mistake(what: "--json before the subcommand (works)", arguments: ["--json", "verify", "notes.db"] + key,
                    status: 0, kind: nil, cause: []),
            // Keys.
            Mistake(what: "a wrong key", arguments: ["verify", "notes.db", "--key-file", "other.key"], status: 3,
                    kind: "wrongKey", cause: ["the key does not open the database"]),
            Mistake(what: "no key, standard input not a terminal", arguments: ["verify", "notes.db"], status: 2,
                    kind: "usage", cause: ["the database key is missing", "--key-file"]),
            Mistake(what: "a key file others can read", arguments: ["verify", "notes.db", "--key-file", "loose.key"],
                    status: 1, kind: "invalidKey", cause: ["can be read by group or others", "chmod 600"]),
            Mistake(what: "a key file that does not exist", arguments: ["verify", "notes.db", "--key-file", "nokey"],
                    status: 1, kind: "invalidKey", cause: ["cannot read key file nokey", "No such file"]),
            Mistake(what: "an empty key file", arguments: ["verify", "notes.db", "--key-file", "empty.key"],
                    status: 1, kind: "invalidKey", cause: ["is empty"]),
            Mistake(what: "a key given twice", arguments: ["verify", "notes.db", "--key-file", "k.key", "--key-env",
                    "CLI_MISTAKE_KEY"], status: 2, kind: "usage", cause: ["give the database key once"],
                    environment: ["CLI_MISTAKE_KEY": "some passphrase"]),
            Mistake(what: "--key-env naming an unset variable", arguments: ["verify", "notes.db", "--key-env",
                    "CLI_MISTAKE_UNSET"], status: 2, kind: "usage", cause: ["CLI_MISTAKE_UNSET", "is not set"],
                    environment: ["CLI_MISTAKE_OTHER": "x"]),
            Mistake(what: "--key-env naming an empty variable", arguments: ["verify", "notes.db", "--key-env",
                    "CLI_MISTAKE_EMPTY"], status: 2, kind: "usage", cause: ["CLI_MISTAKE_EMPTY", "is empty"],
                    environment: ["CLI_MISTAKE_EMPTY": ""]),
            Mistake(what: "--key-env given the key itself instead of a name", arguments: ["verify", "notes.db",
                    "--key-env", "x'" + String(repeating: "cd", count: 32) + "'"], status: 2, kind: "usage",
                    cause: ["the name given is not shown"]),
            Mistake(what: "--key-file given the key itself instead of a path", arguments: ["verify", "notes.db",
                    "--key-file", "x'" + String(repeating: "cd", count: 32) + "'"], status: 1, kind: "invalidKey",
                    cause: ["not shown: it looks like key material"]),
            Mistake(what: "a raw key followed by spaces", arguments: ["verify", "notes.db", "--key-file",
                    "trailing.key"], status: 1, kind: "invalidKey", cause: ["a raw key followed by whitespace"]),
            Mistake(what: "a raw key without x'…'", arguments: ["verify", "notes.db", "--key-file", "bare.key"],
                    status: 3, kind: "wrongKey", cause: ["without x'…' around them"]),
            Mistake(what: "a raw key in double quotes", arguments: ["verify", "notes.db", "--key-file", "double.key"],
                    status: 1, kind: "invalidKey", cause: ["x\"…\" in double quotes", "straight single quotes"]),
            Mistake(what: "a passphrase with a trailing space", arguments: ["verify", "pass.db", "--key-file",
                    "spaced.key"], status: 3, kind: "wrongKey", cause: ["ends with a space or a tab"]),
            Mistake(what: "a passphrase with a leading space", arguments: ["verify", "pass.db", "--key-file",
                    "leading.key"], status: 3, kind: "wrongKey", cause: ["starts with a space, a tab or a line break"]),
            Mistake(what: "a key file with a UTF-8 byte-order mark", arguments: ["verify", "pass.db", "--key-file",
                    "bom.key"], status: 1, kind: "invalidKey", cause: ["UTF-8 byte-order mark"]),
            Mistake(what: "--key-env holding a key file's path", arguments: ["verify", "notes.db", "--key-env",
                    "CLI_MISTAKE_PATH"], status: 3, kind: "wrongKey", cause: ["path of an existing file", "--key-file"],
                    environment: ["CLI_MISTAKE_PATH": "./k.key"]),
            Mistake(what: "a key for a plaintext database", arguments: ["verify", "plain.db"] + key, status: 3,
                    kind: "notEncrypted", cause: ["plaintext", "sqlcipherkit encrypt"]),
            // Files.
            Mistake(what: "a database that does not exist", arguments: ["verify", "missing.db"] + key, status: 1,
                    kind: "missingFile", cause: ["missing.db", "does not exist"]),
            Mistake(what: "a folder as the database", arguments: ["verify", "data"] + key, status: 1,
                    kind: "fileSystem", cause: ["is a folder, not a database file"]),
            Mistake(what: "a damaged page", arguments: ["verify", "damaged.db"] + key, status: 4, kind: "damaged",
                    cause: ["did not verify", "damaged page"]),
            Mistake(what: "a truncated file", arguments: ["verify", "truncated.db"] + key, status: 3,
                    kind: "notADatabase", cause: ["not a whole number of pages"]),
            // Cipher options.
            Mistake(what: "--cipher-compatibility 5", arguments: ["verify", "notes.db", "--cipher-compatibility", "5"]
                    + key, status: 2, kind: "usage", cause: ["--cipher-compatibility"]),
            Mistake(what: "--page-size not a power of two", arguments: ["verify", "notes.db", "--page-size", "1000"]
                    + key, status: 2, kind: "usage", cause: ["--page-size", "power of two"]),
            Mistake(what: "--hmac-salt-mask not a byte", arguments: ["verify", "notes.db", "--hmac-salt-mask", "zz"]
                    + key, status: 2, kind: "usage", cause: ["--hmac-salt-mask must be one byte"]),
            // info.
            Mistake(what: "info on a missing file", arguments: ["info", "missing.db"], status: 1, kind: "missingFile",
                    cause: ["missing.db does not exist"]),
            Mistake(what: "info on a folder", arguments: ["info", "data"], status: 1, kind: "fileSystem",
                    cause: ["not a regular file"]),
            Mistake(what: "info with a wrong key", arguments: ["info", "notes.db", "--key-file", "other.key"],
                    status: 3, kind: "wrongKey", cause: ["wrong key"]),
            // keygen.
            Mistake(what: "keygen without --out", arguments: ["keygen"], status: 2, kind: "usage", cause: ["--out"]),
            Mistake(what: "keygen onto an existing file", arguments: ["keygen", "--out", "k.key"], status: 1,
                    kind: "destinationExists", cause: ["k.key", "exists"]),
            Mistake(what: "keygen --with-salt and --salt-from", arguments: ["keygen", "--out", "n.key", "--with-salt",
                    "--salt-from", "salted.key"], status: 2, kind: "usage", cause: ["give one of them"]),
            Mistake(what: "keygen --salt-from a key without salt", arguments: ["keygen", "--out", "n.key",
                    "--salt-from", "k.key"], status: 2, kind: "usage", cause: ["has no salt"]),
            // rotate.
            Mistake(what: "rotate to the same key", arguments: ["rotate", "notes.db", "--new-key-file", "k.key"] + key,
                    status: 2, kind: "usage", cause: ["the new key is the same as the current key"]),
            Mistake(what: "rotate to a short passphrase", arguments: ["rotate", "notes.db", "--new-key-file",
                    "weak.key"] + key, status: 2, kind: "usage", cause: ["passphrase of 7 bytes",
                    "--allow-weak-passphrase"]),
            Mistake(what: "rotate without a new key", arguments: ["rotate", "notes.db"] + key, status: 2,
                    kind: "usage", cause: ["the new key is missing", "--new-key-file"]),
            Mistake(what: "rotate with a wrong current key", arguments: ["rotate", "notes.db", "--key-file",
                    "other.key", "--new-key-file", "new.key"], status: 3, kind: "wrongKey",
                    cause: ["not rotated", "the key does not open the database"]),
            Mistake(what: "rotate naming a database twice", arguments: ["rotate", "notes.db", "notes.db",
                    "--new-key-file", "new.key"] + key, status: 2, kind: "usage", cause: ["named twice"]),
            Mistake(what: "rotate naming one file by two paths", arguments: ["rotate", "notes.db", "link.db",
                    "--new-key-file", "new.key"] + key, status: 1, kind: "failure",
                    cause: ["are the same file", "name each database once"]),
            Mistake(what: "rotate with no database", arguments: ["rotate", "--new-key-file", "new.key"] + key,
                    status: 2, kind: "usage", cause: ["give at least one database"]),
            Mistake(what: "rotate with a negative --lock-timeout", arguments: ["rotate", "notes.db", "--new-key-file",
                    "new.key", "--lock-timeout", "-1"] + key, status: 2, kind: "usage",
                    cause: ["--lock-timeout must be a number of seconds from 0 to 86400"]),
            Mistake(what: "a negative --page-size", arguments: ["verify", "notes.db", "--page-size", "-4096"] + key,
                    status: 2, kind: "usage", cause: ["--page-size must be"]),
            Mistake(what: "rotate --method sideways", arguments: ["rotate", "notes.db", "--new-key-file", "new.key",
                    "--method", "sideways"] + key, status: 2, kind: "usage", cause: ["--method"]),
            Mistake(what: "rotate two keys from standard input", arguments: ["rotate", "notes.db", "--key-stdin",
                    "--new-key-stdin"], status: 2, kind: "usage", cause: ["only one key can come from standard input"],
                    standardInput: []),
            Mistake(what: "rotate --new-key-env holding a key file's path", arguments: ["rotate", "notes.db",
                    "--new-key-env", "CLI_MISTAKE_PATH"] + key, status: 2, kind: "usage",
                    cause: ["path of an existing file", "--new-key-file"], environment: ["CLI_MISTAKE_PATH": "./new.key"]),
            Mistake(what: "rotate a missing database", arguments: ["rotate", "missing.db", "--new-key-file",
                    "new.key"] + key, status: 1, kind: "failure", cause: ["missing.db does not exist"]),
            // encrypt, decrypt, backup.
            Mistake(what: "encrypt given --key-file", arguments: ["encrypt", "plain.db", "e.db", "--key-file",
                    "k.key"], status: 2, kind: "usage", cause: ["did you mean --new-key-file"]),
            Mistake(what: "encrypt an encrypted database", arguments: ["encrypt", "notes.db", "e.db",
                    "--new-key-file", "new.key"], status: 3, kind: "missingKey", cause: ["encrypted"]),
            Mistake(what: "encrypt a missing database", arguments: ["encrypt", "missing.db", "e.db", "--new-key-file",
                    "new.key"], status: 1, kind: "missingFile", cause: ["missing.db"]),
            Mistake(what: "encrypt onto an existing file", arguments: ["encrypt", "plain.db", "exists.db",
                    "--new-key-file", "new.key"], status: 1, kind: "destinationExists", cause: ["exists.db", "exists"]),
            Mistake(what: "encrypt to a short passphrase", arguments: ["encrypt", "plain.db", "e.db", "--new-key-file",
                    "weak.key"], status: 2, kind: "usage", cause: ["passphrase of 7 bytes", "--allow-weak-passphrase"]),
            Mistake(what: "decrypt without --allow-plaintext", arguments: ["decrypt", "notes.db", "d.db"] + key,
                    status: 2, kind: "usage", cause: ["--allow-plaintext"]),
            Mistake(what: "decrypt with a wrong key", arguments: ["decrypt", "notes.db", "d.db", "--key-file",
                    "other.key", "--allow-plaintext"], status: 3, kind: "wrongKey", cause: ["does not open"]),
            Mistake(what: "decrypt onto an existing file", arguments: ["decrypt", "notes.db", "exists.db",
                    "--allow-plaintext"] + key, status: 1, kind: "destinationExists", cause: ["exists.db"]),
            Mistake(what: "backup onto an existing file", arguments: ["backup", "notes.db", "exists.db"] + key,
                    status: 1, kind: "destinationExists", cause: ["exists.db", "--replace"]),
            Mistake(what: "backup onto itself", arguments: ["backup", "notes.db", "notes.db"] + key, status: 2,
                    kind: "usage", cause: ["the destination must be another file"]),
            Mistake(what: "backup with a wrong key", arguments: ["backup", "notes.db", "b.db", "--key-file",
                    "other.key"], status: 3, kind: "wrongKey", cause: ["does not open"]),
            Mistake(what: "backup --dest-key-env holding a key file's path", arguments: ["backup", "notes.db", "b.db",
                    "--dest-key-env", "CLI_MISTAKE_PATH"] + key, status: 2, kind: "usage",
                    cause: ["--dest-key-file"], environment: ["CLI_MISTAKE_PATH": "./new.key"]),
            // migrate.
            Mistake(what: "migrate on SQLCipher 3", arguments: ["migrate", "notes.db"] + key, status: 1,
                    kind: "unsupportedByEngine", cause: ["4.0.0"], engine: 3),
            Mistake(what: "migrate with a wrong key", arguments: ["migrate", "v3.db", "--key-file", "other.key"],
                    status: 3, kind: "wrongKey", cause: ["wrong key"], engine: 4),
            Mistake(what: "migrate a SQLCipher 3 database keyed with a 7-byte passphrase (works)", arguments: [
                    "migrate", "testkey.db", "--key-file", "testkey.key"], status: 0, kind: nil, cause: [], engine: 4),
            Mistake(what: "migrate a file already in the 4 format (nothing to do)", arguments: ["migrate", "notes.db"]
                    + key, status: 0, kind: nil, cause: [], engine: 4),
            Mistake(what: "a SQLCipher 3 file opened on SQLCipher 4", arguments: ["verify", "v3.db"] + key, status: 3,
                    kind: "wrongKey", cause: ["--cipher-compatibility 3", "sqlcipherkit migrate"], engine: 4),
            // exec.
            Mistake(what: "exec: an SQL error", arguments: ["exec", "notes.db", "SELECT nosuch FROM item"] + key,
                    status: 1, kind: "sqlite", cause: ["no such column: nosuch"]),
            Mistake(what: "exec: an SQL error after statements that ran", arguments: ["exec", "notes.db",
                    "DELETE FROM item WHERE id = 1; SELEC 1"] + key, status: 1, kind: "sqlite",
                    cause: ["syntax error", "statement 2 failed; statement 1 ran and stays committed"]),
            Mistake(what: "exec: PRAGMA key in SQL", arguments: ["exec", "notes.db", "PRAGMA key = 'x'"] + key,
                    status: 1, kind: "sqlite", cause: ["PRAGMA key is refused", "--key-file", "sqlcipherkit rotate"]),
            Mistake(what: "exec: ATTACH without a key", arguments: ["exec", "notes.db",
                    "ATTACH 'att.db' AS a KEY ''"] + key, status: 1, kind: "sqlite", cause: ["--allow-plaintext"]),
            Mistake(what: "exec: VACUUM INTO", arguments: ["exec", "notes.db", "VACUUM INTO 'copy.db'"] + key,
                    status: 1, kind: "sqlite", cause: ["sqlcipherkit backup"], engine: 4),
            Mistake(what: "exec: VACUUM INTO on SQLite 3.15 (no such statement)", arguments: ["exec", "notes.db",
                    "VACUUM INTO 'copy.db'"] + key, status: 1, kind: "sqlite", cause: ["syntax error"], engine: 3),
            Mistake(what: "exec: a missing database without --create", arguments: ["exec", "missing.db", "SELECT 1"]
                    + key, status: 1, kind: "missingFile", cause: ["--create"]),
            Mistake(what: "exec: a plaintext database without --plaintext", arguments: ["exec", "plain.db",
                    "SELECT 1"], status: 2, kind: "usage", cause: ["--plaintext"]),
            Mistake(what: "exec: --plaintext with a key", arguments: ["exec", "plain.db", "--plaintext", "SELECT 1"]
                    + key, status: 2, kind: "usage", cause: ["give no key"]),
            Mistake(what: "exec: empty SQL", arguments: ["exec", "notes.db", " "] + key, status: 2, kind: "usage",
                    cause: ["the SQL is empty"]),
            Mistake(what: "exec: SQL and --file", arguments: ["exec", "notes.db", "SELECT 1", "--file", "x.sql"]
                    + key, status: 2, kind: "usage", cause: ["give the SQL once"]),
            Mistake(what: "exec: --file that does not exist", arguments: ["exec", "notes.db", "--file", "x.sql"] + key,
                    status: 1, kind: "missingFile", cause: ["x.sql"]),
            Mistake(what: "exec: SQL and key both on standard input", arguments: ["exec", "notes.db", "--key-stdin",
                    "-"], status: 2, kind: "usage", cause: ["--key-file or --key-env"], standardInput: []),
            Mistake(what: "exec: --json with --mode", arguments: ["exec", "notes.db", "--json", "--mode", "csv",
                    "SELECT 1"] + key, status: 2, kind: "usage", cause: ["--json prints one JSON object", "--mode"]),
            Mistake(what: "exec: an unknown --mode", arguments: ["exec", "notes.db", "--mode", "xml", "SELECT 1"]
                    + key, status: 2, kind: "usage", cause: ["--mode"]),
            Mistake(what: "exec: a transaction left open", arguments: ["exec", "notes.db",
                    "BEGIN; DELETE FROM item"] + key, status: 1, kind: "invalidState",
                    cause: ["left a transaction open", "COMMIT"]),
            Mistake(what: "exec: an infinite real (works)", arguments: ["exec", "notes.db", "SELECT 1e999"] + key,
                    status: 0, kind: nil, cause: []),
            // shell.
            Mistake(what: "shell --key-stdin", arguments: ["shell", "notes.db", "--key-stdin"], status: 2,
                    kind: "usage", cause: ["--key-file or --key-env"], standardInput: []),
            Mistake(what: "shell: an SQL error in a script", arguments: ["shell", "notes.db"] + key, status: 1,
                    kind: "sqlite", cause: ["no such table: nosuch"], standardInput: Array("SELECT * FROM nosuch;\n".utf8)),
            Mistake(what: "shell without a key, statements on standard input", arguments: ["shell", "notes.db"],
                    status: 2, kind: "usage", cause: ["the key is missing", "--key-file"], standardInput: Array("SELECT 1;\n".utf8)),
        ]
        list.removeAll { $0.engine.map { $0 != (Engine.isVersion4 ? 4 : 3) } ?? false }
        return list
    }

    /// The library's API names (camelCase members and multi-word type names), read from its sources: none may reach
    /// an operator. JSON kinds are the CLI's own words (documented), so they are not counted.
    static let libraryNames: Set<String> = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        var names: Set<String> = []
        let enumerator = FileManager.default.enumerator(atPath: root.path)
        while let file = enumerator?.nextObject() as? String {
            guard file.hasPrefix("SQLCipherKit"), file.hasSuffix(".swift"),
                  let text = try? String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            else { continue }
            let declaration = #/(?:public|package|open)\s+(?:(?:static|final|mutating|nonisolated)\s+)*(?:func|var|let|case|struct|enum|class|protocol|actor|typealias)\s+([A-Za-z_][A-Za-z0-9_]*)/#
            for match in text.matches(of: declaration) { names.insert(String(match.1)) }
        }
        let kinds = DocumentedJSONSchema.kindsByStatus.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        return names.filter { $0.contains(#/[a-z][A-Z]/#) || $0.wholeMatch(of: #/[A-Z][a-z]+[A-Z][A-Za-z]*/#) != nil }
            .subtracting(kinds)
    }()

    /// The library names a text holds, as whole words (a document's name, `Docs/KeyRotation.md`, is not one).
    static func libraryNames(in text: String) -> [String] {
        let words = text.replacing(#/Docs\/[A-Za-z]+\.md/#, with: "")
            .split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init)
        return Set(words).intersection(libraryNames).sorted()
    }

    func check(_ mistake: Mistake, _ fixture: Fixture) throws -> (json: CommandResult, text: CommandResult) {
        let scratch = fixture.scratch
        let arguments = mistake.arguments.contains("--json") ? mistake.arguments : mistake.arguments + ["--json"]
        let json = try runSubprocess(
            arguments, environment: mistake.environment, standardInput: mistake.standardInput, in: scratch)
        // A mistake about --json itself keeps it in the text run too.
        let textArguments = mistake.what.contains("--json") ? mistake.arguments : mistake.arguments.filter { $0 != "--json" }
        let text = try runSubprocess(
            textArguments, environment: mistake.environment,
            standardInput: mistake.standardInput, in: scratch)
        let label = "\(mistake.what): \(mistake.arguments.joined(separator: " "))"
        #expect(json.status == mistake.status, "\(label)\n\(json)")
        #expect(text.status == mistake.status, "text and --json agree: \(label)\n\(text)")
        let envelope = jsonEnvelope(json)
        #expect(envelope != nil, "not one JSON object: \(label)\n\(json)")
        #expect(envelope?["exitStatus"] as? Int == Int(json.status), "\(label)\n\(json)")
        #expect(envelope?["ok"] as? Bool == (json.status == 0), "\(label)\n\(json)")
        let error = envelope?["error"] as? [String: Any]
        if let kind = mistake.kind {
            #expect(error?["kind"] as? String == kind, "\(label)\n\(json)")
            #expect(DocumentedJSONSchema.kindsByStatus[Int(json.status)]?.contains(kind) == true, "\(label)")
        } else {
            #expect(envelope?["error"] is NSNull, "\(label)\n\(json)")
        }
        for word in mistake.cause {
            #expect(text.standardError.contains(word), "the cause (\(word)): \(label)\n\(text)")
            #expect(json.standardError.contains(word), "the cause (\(word)) with --json: \(label)\n\(json)")
        }
        // Messages, not the JSON object's keys (the CLI's documented vocabulary).
        let shown = text.standardError + (textArguments.contains("--json") ? "" : text.standardOutput)
            + ((error?["message"] as? String) ?? "")
        #expect(Self.libraryNames(in: shown).isEmpty, "library API names \(Self.libraryNames(in: shown)): \(label)")
        #expect(json.isFreeOfKeyMaterial && text.isFreeOfKeyMaterial, "\(label)")
        #expect(!shown.contains(String(repeating: "cd", count: 8)), "a key typed as an argument shown: \(label)")
        return (json, text)
    }

    @Test("each mistake's exit status equals its JSON's exitStatus, and its message names the cause")
    func everyMistake() throws {
        let fixture = try Fixture()
        var table: [String] = []
        for mistake in Self.mistakes() {
            let (json, text) = try check(mistake, fixture)
            let message = text.standardError.split(separator: "\n").last { $0.hasPrefix("error: ") }
                .map { String($0.dropFirst(7)) } ?? "—"
            let kind = (jsonEnvelope(json)?["error"] as? [String: Any])?["kind"] as? String ?? "—"
            table.append("| \(mistake.what) | \(json.status) | `\(kind)` | \(message.replacingOccurrences(of: "|", with: "\\|")) |")
        }
        if let path = ProcessInfo.processInfo.environment["SQLCIPHERKIT_MISTAKES_TABLE"] {
            let header = "| Mistake | Exit | `error.kind` | Message (standard error) |\n|---|---|---|---|\n"
            try (header + table.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        }
        // Docs/CLI.md's table lists each mistake run here (it is this table, written by SQLCIPHERKIT_MISTAKES_TABLE).
        let documented = DocumentedJSONSchema.document.split(separator: "\n").filter { $0.hasPrefix("| ") }
            .map { String($0.dropFirst(2).prefix { $0 != "|" }).trimmingCharacters(in: .whitespaces) }
        for mistake in Self.mistakes() {
            #expect(documented.contains(mistake.what), "Docs/CLI.md's mistakes table has no row \(mistake.what)")
        }
        // The library's names are read: the check above cannot pass by finding none.
        #expect(Self.libraryNames.contains("allowsWeakPassphrase") && Self.libraryNames.contains("RotationRequest"))
    }

    /// The text of the string literals of a Swift source, interpolations left out, comments skipped.
    static func stringLiterals(in source: String) -> [String] {
        var literals: [String] = []
        let characters = Array(source)
        var index = 0
        func at(_ offset: Int) -> Character? { index + offset < characters.count ? characters[index + offset] : nil }
        while index < characters.count {
            if characters[index] == "/", at(1) == "/" {
                while index < characters.count, characters[index] != "\n" { index += 1 }
                continue
            }
            // A raw string (#"…"#): no escapes, and it ends at a quote followed by as many #.
            var hashes = 0
            while at(hashes) == "#" { hashes += 1 }
            guard at(hashes) == "\"" else {
                index += max(hashes, 1)
                continue
            }
            index += hashes
            // A multi-line literal's opening quotes end their line (#""""# is the raw string of two quotes).
            let isBlock = at(1) == "\"" && at(2) == "\"" && at(3) == "\n"
            index += isBlock ? 3 : 1
            let closing = Array(isBlock ? "\"\"\"" : "\"") + Array(repeating: Character("#"), count: hashes)
            var text = ""
            while index < characters.count {
                if hashes > 0 {
                    if characters[index...].starts(with: closing) {
                        index += closing.count
                        break
                    }
                    text.append(characters[index])
                    index += 1
                    continue
                }
                if characters[index] == "\\", at(1) == "(" {
                    // Skip the interpolation, parentheses balanced (a string inside it is not this literal's text).
                    var depth = 0
                    index += 1
                    repeat {
                        if characters[index] == "(" { depth += 1 }
                        if characters[index] == ")" { depth -= 1 }
                        index += 1
                    } while depth > 0 && index < characters.count
                    text += " "
                    continue
                }
                if characters[index] == "\\" {
                    text.append(at(1) ?? " ")
                    index += 2
                    continue
                }
                if isBlock ? (characters[index] == "\"" && at(1) == "\"" && at(2) == "\"") : characters[index] == "\"" {
                    index += isBlock ? 3 : 1
                    break
                }
                if !isBlock && characters[index] == "\n" { break }
                text.append(characters[index])
                index += 1
            }
            literals.append(text)
        }
        return literals
    }

    /// Where the CLI names the library on purpose, and why.
    static let namedOnPurpose: [String: Set<String>] = [
        // The demo shows the library calls behind each step ("Each step is a library call").
        "DemoCommand.swift": ["KeyRotation", "Connection", "EncryptionKey", "DatabaseVerification"],
        // The hint for a database a running service holds: the service is built on the library's DatabaseService,
        // whose key hand-over is the way to rotate it.
        "RotateCommand.swift": ["DatabaseService"],
    ]

    @Test("no text the CLI can print names the library's API: its own strings, and every remedy in its words")
    func noLibraryNamesInCLIText() throws {
        for remedy in MessagesTests.remedies {
            #expect(Self.libraryNames(in: remedy.cliWording).isEmpty, "\(remedy) → \(remedy.cliWording)")
        }
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/sqlcipherkit")
        var scanned = 0
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        while let file = enumerator?.nextObject() as? String {
            guard file.hasSuffix(".swift") else { continue }
            let source = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            let allowed = Self.namedOnPurpose[URL(fileURLWithPath: file).lastPathComponent] ?? []
            for literal in Self.stringLiterals(in: source) {
                scanned += 1
                let names = Set(Self.libraryNames(in: literal)).subtracting(allowed)
                #expect(names.isEmpty, "\(file): \(names.sorted()) in \(literal.debugDescription)")
            }
        }
        #expect(scanned > 500, "the CLI's strings were read")
        // The scanner sees through interpolation and finds a name written in the text.
        #expect(Self.stringLiterals(in: #"let a = "x \(f("RotationRequest")) y"; let b = "set RotationRequest.x""#)
            .map { Self.libraryNames(in: $0) } == [[], ["RotationRequest"]])
    }

    @Test("in-process runs agree with the real process: the same status and the same JSON error kind")
    func inProcessAgrees() throws {
        let fixture = try Fixture()
        let previous = FileManager.default.currentDirectoryPath
        for mistake in Self.mistakes() where mistake.runsInProcess {
            // Relative paths: the in-process run resolves them against the scratch folder like the subprocess.
            let arguments = mistake.arguments.map { argument -> String in
                FileManager.default.fileExists(atPath: fixture.scratch.path(argument)) || argument.hasSuffix(".db")
                    || argument.hasSuffix(".key") || argument.hasSuffix(".sql") || argument == "nokey"
                    ? fixture.scratch.path(argument) : argument
            }
            let run = runInProcess(arguments.contains("--json") ? arguments : arguments + ["--json"])
            #expect(run.status == mistake.status, "\(mistake.what)\n\(run)")
            let envelope = jsonEnvelope(run)
            #expect(envelope?["exitStatus"] as? Int == Int(run.status), "\(mistake.what)\n\(run)")
            #expect(envelope?["ok"] as? Bool == (run.status == 0), "\(mistake.what)")
            #expect((envelope?["error"] as? [String: Any])?["kind"] as? String == mistake.kind, "\(mistake.what)\n\(run)")
        }
        #expect(FileManager.default.currentDirectoryPath == previous)
    }
}
