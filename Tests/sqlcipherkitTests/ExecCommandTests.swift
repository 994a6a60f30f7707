import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit exec")
struct ExecCommandTests {
    @Test("runs several statements and prints rows tab-separated, NULL as \\N and blobs as \\x<hex>")
    func printsRows() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = scratch.path("new.db")
        let result = runInProcess([
            "exec", db, "--key-file", keyPath, "--create",
            "CREATE TABLE t(a, b, c); INSERT INTO t VALUES (1, NULL, x'00ff'), (2.5, 'text', ''); SELECT * FROM t;"
                + " SELECT count(*) FROM t",
        ])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput == "1\t\\N\t\\x00ff\n2.5\ttext\t\n2\n")
        #expect(opens(db, with: key))
        #expect(try fileMode(db) == 0o600)
        let header = runInProcess(["exec", db, "--key-file", keyPath, "--header", "SELECT a AS first FROM t LIMIT 1"])
        #expect(header.standardOutput == "first\n1\n")
    }

    @Test("SQL errors exit 1 naming the statement; a wrong key exits 3; PRAGMA key is refused")
    func errors() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let db = try scratch.database("notes.db", key: key)
        let bad = try runSubprocess(["exec", "notes.db", "--key-file", keyPath, "SELECT nosuch FROM item"], in: scratch)
        #expect(bad.status == 1, "\(bad)")
        #expect(bad.standardError.contains("nosuch"))
        let partial = runInProcess(["exec", db, "--key-file", keyPath, "DELETE FROM item WHERE id = 1; SELEC 1"])
        #expect(partial.status == 1)
        #expect(try rowCount(db, key: key) == 19)
        #expect(runInProcess(["exec", db, "--key-file", otherPath, "SELECT 1"]).status == 3)
        let rekey = runInProcess(["exec", db, "--key-file", keyPath, "PRAGMA rekey = 'x'"])
        #expect(rekey.status == 1, "\(rekey)")
        #expect(opens(db, with: key))
        #expect(parsingStatus(["exec", db, "--key-file", keyPath, "  "]) == .usage)
    }
}
