import Foundation
import SQLCipherKit
import Testing

/// `sqlcipherkit exec` prints a failed statement's error: before, `ATTACH 'x.db' AS o KEY 'secret'` printed the
/// statement with its key on stderr, and a mistyped `PRAGMA key 'secret'` (no `=`) a syntax error quoting it.
@Suite("exec keeps keys typed in SQL out of its output")
struct ExecKeyRedactionTests {
    static let secret = "CLI-hunter2-SECRET-6b1f"

    @Test("a failing statement that carries a key fails (status 1, or 3 for a plaintext file) and prints no byte of the key, as a real process",
          arguments: [
              "ATTACH 'plain.db' AS o KEY '{S}'",
              "ATTACH 'other.db' AS o KEY '{S}'",
              "attach 'other.db' as o key \"{S}\"",
              "ATTACH 'other.db' AS o KEY {S}",
              "PRAGMA key '{S}';",
              "PRAGMA rekey = '{S}'",
              "SELECT 1; PRAGMA main.key '{S}'",
              "ATTACH 'file:other.db?key={S}' AS o",
          ])
    func noKeyInOutput(statement: String) throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let plaintext = try Connection(path: scratch.path("plain.db"), encryption: .none)
        try plaintext.execute("CREATE TABLE p(x)")
        plaintext.close()
        let other = try Connection(path: scratch.path("other.db"), key: try EncryptionKey.generateRaw())
        try other.execute("CREATE TABLE o(x)")
        other.close()
        _ = try scratch.database("main.db", key: try EncryptionKey(contentsOf: keyPath))
        let sql = statement.replacingOccurrences(of: "{S}", with: Self.secret)
        for json in [false, true] {
            let result = try runSubprocess(
                ["exec", "main.db", "--key-file", keyPath] + (json ? ["--json"] : []) + [sql], in: scratch)
            // A plaintext file given a key is "not what the key expects" (status 3); the other failures are 1.
            #expect(result.status == (statement.contains("plain.db") ? 3 : 1), "\(result)")
            #expect(!result.standardError.isEmpty || json, "\(result)")
            for text in [Self.secret, Self.secret.lowercased()] {
                #expect(!result.standardOutput.contains(text), "\(result)")
                #expect(!result.standardError.contains(text), "\(result)")
            }
        }
    }

    @Test("ATTACH of a plaintext file without KEY says it is plaintext and how to attach it, in the CLI's words")
    func plaintextAttachment() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let plaintext = try Connection(path: scratch.path("plain.db"), encryption: .none)
        try plaintext.execute("CREATE TABLE p(x); INSERT INTO p VALUES ('plain row')")
        plaintext.close()
        _ = try scratch.database("main.db", key: try EncryptionKey(contentsOf: keyPath))
        let refused = try runSubprocess(["exec", "main.db", "--key-file", keyPath, "ATTACH 'plain.db' AS p"], in: scratch)
        #expect(refused.status == 3, "\(refused)")  // the file is not what the key expects
        #expect(refused.standardError.contains("plaintext"), "\(refused)")
        #expect(refused.standardError.contains("KEY ''"), "\(refused)")
        #expect(refused.standardError.contains("--allow-plaintext"), "\(refused)")
        #expect(!refused.standardError.contains("encrypted or is not a database"), "\(refused)")
        // What it says works.
        let attached = try runSubprocess(
            ["exec", "main.db", "--key-file", keyPath, "--allow-plaintext",
             "ATTACH 'plain.db' AS p KEY ''; SELECT x FROM p.p"], in: scratch)
        #expect(attached.status == 0, "\(attached)")
        #expect(attached.standardOutput.contains("plain row"), "\(attached)")
    }
}
