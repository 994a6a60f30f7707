import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Key files and variables that hold the right key in the wrong shape, each named for what it is instead of "the key
/// does not open the database" (which in an incident reads as a lost key), and never showing a key byte.
@Suite("sqlcipherkit names a key in the wrong shape")
struct KeyShapeMistakesTests {
    /// A database keyed with the sentinel passphrase, and the text of a raw key file for another one.
    struct Fixture {
        let scratch: Scratch
        let database: String
        let rawDatabase: String
        let rawKeyText: String

        init() throws {
            scratch = try Scratch()
            let (_, key) = try scratch.sentinelKeyFile("k")
            database = try scratch.database("notes.db", key: key)
            let (rawPath, rawKey) = try scratch.rawKeyFile("raw.key")
            rawDatabase = try scratch.database("raw.db", key: rawKey)
            rawKeyText = try String(contentsOfFile: rawPath, encoding: .utf8).trimmingCharacters(in: .newlines)
        }

        /// Writes `bytes` as a key file (mode 0600) and returns its path.
        func keyFile(_ name: String, _ bytes: [UInt8]) throws -> String {
            _ = FileManager.default.createFile(
                atPath: scratch.path(name), contents: Data(bytes), attributes: [.posixPermissions: 0o600])
            return scratch.path(name)
        }

        /// No byte run of the key (the sentinel, or 16 hex digits of the raw key) in either stream.
        func expectNoKey(_ result: CommandResult, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(result.isFreeOfKeyMaterial, "\(result)", sourceLocation: sourceLocation)
            let hex = String(rawKeyText.dropFirst(2).prefix(16))
            #expect(!result.standardError.contains(hex) && !result.standardOutput.contains(hex), "\(result)",
                    sourceLocation: sourceLocation)
        }
    }

    static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    @Test("a key file that starts with a UTF-8 byte-order mark is refused as such (exit 1), passphrase or raw key")
    func byteOrderMark() throws {
        let f = try Fixture()
        let passphrase = try f.keyFile("bom-pass", Self.byteOrderMark + Array((Sentinel.text + "\r\n").utf8))
        let raw = try f.keyFile("bom-raw", Self.byteOrderMark + Array((f.rawKeyText + "\n").utf8))
        for (database, keyFile) in [(f.database, passphrase), (f.rawDatabase, raw)] {
            let result = runInProcess(["verify", database, "--key-file", keyFile, "--json"])
            #expect(result.status == 1, "\(result)")
            #expect(result.standardError.contains("starts with a UTF-8 byte-order mark"), "\(result)")
            #expect((jsonEnvelope(result)?["error"] as? [String: Any])?["kind"] as? String == "invalidKey")
            f.expectNoKey(result)
        }
        let subprocess = try runSubprocess(["exec", "notes.db", "--key-file", passphrase, "SELECT 1"], in: f.scratch)
        #expect(subprocess.status == 1, "\(subprocess)")
        #expect(subprocess.standardError.contains("without a byte-order mark"), "\(subprocess)")
        f.expectNoKey(subprocess)
        // The same bytes from an environment variable: the same rule (the key-file format).
        let environment = try runSubprocess(
            ["verify", "notes.db", "--key-env", "BOM_KEY"],
            environment: ["BOM_KEY": String(decoding: Self.byteOrderMark, as: UTF8.self) + Sentinel.text], in: f.scratch)
        #expect(environment.status == 1, "\(environment)")
        #expect(environment.standardError.contains("environment variable BOM_KEY starts with a UTF-8 byte-order mark"))
    }

    @Test("a passphrase with a leading space that does not open the file says so (exit 3); a raw key after it, exit 1")
    func leadingWhitespace() throws {
        let f = try Fixture()
        let spaced = try f.keyFile("spaced", Array((" " + Sentinel.text + "\n").utf8))
        let result = try runSubprocess(["verify", "notes.db", "--key-file", spaced], in: f.scratch)
        #expect(result.status == 3, "\(result)")
        #expect(result.standardError.contains("starts with a space, a tab or a line break"), "\(result)")
        f.expectNoKey(result)
        let blankFirstLine = try f.keyFile("blank", Array(("\n" + Sentinel.text + "\n").utf8))
        #expect(runInProcess(["verify", f.database, "--key-file", blankFirstLine]).standardError
            .contains("starts with a space, a tab or a line break"))
        for (name, prefix) in [("space-raw", " "), ("tab-raw", "\t"), ("line-raw", "\n")] {
            let file = try f.keyFile(name, Array((prefix + f.rawKeyText + "\n").utf8))
            let raw = runInProcess(["exec", f.rawDatabase, "--key-file", file, "SELECT 1"])
            #expect(raw.status == 1, "\(name): \(raw)")
            #expect(raw.standardError.contains("holds a raw key with whitespace before it"), "\(raw)")
            f.expectNoKey(raw)
        }
    }

    @Test("x\"…\" and x‘…’ are refused with the quotes a raw key takes (exit 1)")
    func wrongQuotes() throws {
        let f = try Fixture()
        let hex = f.rawKeyText.dropFirst(2).dropLast()
        let cases: [(String, String, String)] = [
            ("double", "x\"\(hex)\"\n", "x\"…\" in double quotes"),
            ("double-upper", "X\"\(hex)\"  \n", "x\"…\" in double quotes"),
            ("curly", "x\u{2018}\(hex)\u{2019}\n", "x‘…’ in typographic quotes"),
            ("curly-closing", "x\u{2019}\(hex)\u{2019}", "x’…’ in typographic quotes"),
        ]
        for (name, content, said) in cases {
            let file = try f.keyFile(name, Array(content.utf8))
            let result = runInProcess(["verify", f.rawDatabase, "--key-file", file])
            #expect(result.status == 1, "\(name): \(result)")
            #expect(result.standardError.contains(said), "\(name): \(result)")
            #expect(result.standardError.contains("with straight single quotes"), "\(result)")
            f.expectNoKey(result)
        }
        // A passphrase that merely starts with x" is still a passphrase.
        #expect(try EncryptionKey(keyText: "x\"not hex at all\"").kind == .passphrase)
    }

    @Test("--key-env given a key file's path says to use --key-file (exit 3); for a new key it is refused first (exit 2)")
    func pathInEnvironment() throws {
        let f = try Fixture()
        let keyPath = f.scratch.path("k")
        let result = try runSubprocess(
            ["verify", "notes.db", "--key-env", "NOTES_KEY_FILE"], environment: ["NOTES_KEY_FILE": keyPath],
            in: f.scratch)
        #expect(result.status == 3, "\(result)")
        #expect(result.standardError.contains("holds the path of an existing file"), "\(result)")
        #expect(result.standardError.contains("give the file with --key-file"), "\(result)")
        f.expectNoKey(result)
        let before = try fileBytes(f.database)
        let rotate = try runSubprocess(
            ["rotate", "notes.db", "--key-file", keyPath, "--new-key-env", "NEW_KEY_FILE", "--json"],
            environment: ["NEW_KEY_FILE": f.scratch.path("raw.key")], in: f.scratch)
        #expect(rotate.status == 2, "\(rotate)")
        #expect(rotate.standardError.contains("give the file with --new-key-file"), "\(rotate)")
        #expect(try fileBytes(f.database) == before)
        let encrypt = try runSubprocess(
            ["encrypt", try plaintextDatabase(f.scratch, "plain.db"), "enc.db", "--new-key-env", "NEW_KEY_FILE"],
            environment: ["NEW_KEY_FILE": f.scratch.path("raw.key")], in: f.scratch)
        #expect(encrypt.status == 2, "\(encrypt)")
        #expect(!FileManager.default.fileExists(atPath: f.scratch.path("enc.db")))
        // The library: a wrong key from such a variable carries the remedy; a rotation refuses it as a new key.
        setenv("SQLCIPHERKIT_TEST_KEY_PATH", keyPath, 1)
        defer { unsetenv("SQLCIPHERKIT_TEST_KEY_PATH") }
        let fromPath = try EncryptionKey(environmentVariable: "SQLCIPHERKIT_TEST_KEY_PATH")
        #expect(fromPath.weakRotationKeyReason?.contains("path of an existing file") == true)
        do {
            _ = try Connection(path: f.database, key: fromPath)
            Issue.record("the path opened the database")
        } catch let error as DatabaseError {
            #expect(error.kind == .wrongKey)
            #expect(error.remedy == .readKeyFileInsteadOfPath)
        }
    }

    @Test("the shapes that were already told apart keep their wording and status")
    func earlierShapesUnchanged() throws {
        let f = try Fixture()
        let trailing = try f.keyFile("trailing", Array((f.rawKeyText + "  \n").utf8))
        let bare = try f.keyFile("bare", Array((f.rawKeyText.dropFirst(2).dropLast() + "\n").utf8))
        let trailingResult = runInProcess(["verify", f.rawDatabase, "--key-file", trailing])
        #expect(trailingResult.status == 1 && trailingResult.standardError.contains("a raw key followed by whitespace"))
        let bareResult = runInProcess(["verify", f.rawDatabase, "--key-file", bare])
        #expect(bareResult.status == 3 && bareResult.standardError.contains("without x'…' around them"))
        // And the right key still opens: none of these checks refuses a well-formed key.
        #expect(runInProcess(["verify", f.rawDatabase, "--key-file", f.scratch.path("raw.key")]).status == 0)
        #expect(runInProcess(["verify", f.database, "--key-file", f.scratch.path("k")]).status == 0)
    }
}
