import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit verify")
struct VerifyCommandTests {
    @Test("verifies an intact database; --json parses")
    func intact() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 500)
        let result = runInProcess(["verify", db, "--key-file", keyPath])
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.contains("verified"))
        let json = try runSubprocess(["verify", db, "--key-file", keyPath, "--json"], in: scratch)
        #expect(json.status == 0, "\(json)")
        let envelope = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any]
        let report = envelope?["result"] as? [String: Any]
        #expect(report?["verified"] as? Bool == true)
        #expect(report?["cipherIntegrityCheckRan"] as? Bool == SQLCipher.supports(.cipherIntegrityCheck))
    }

    @Test("a wrong key exits 3; a tampered page exits 4")
    func wrongKeyAndTampering() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let db = try scratch.database("notes.db", key: key, rowCount: 500)
        #expect(runInProcess(["verify", db, "--key-file", otherPath]).status == 3)
        // Flip bytes in the middle of the last page (a data page, not page 1).
        var bytes = try fileBytes(db)
        let offset = bytes.count - 300
        for index in offset..<(offset + 8) { bytes[index] ^= 0xA5 }
        try Data(bytes).write(to: URL(fileURLWithPath: db))
        let result = try runSubprocess(["verify", db, "--key-file", keyPath], in: scratch)
        #expect(result.status == 4, "\(result)")
        #expect(result.standardOutput.contains("NOT verified"))
    }

    @Test("a missing database is an error, not a new file")
    func missing() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        let result = runInProcess(["verify", scratch.path("nope.db"), "--key-file", keyPath])
        #expect(result.status == 1, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("nope.db")))
    }
}
