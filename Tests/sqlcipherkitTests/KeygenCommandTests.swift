import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit keygen")
struct KeygenCommandTests {
    @Test("writes x'<64 hex>' (or x'<96 hex>' with --with-salt) with mode 0600")
    func writesKey() throws {
        let scratch = try Scratch()
        let result = runInProcess(["keygen", "--out", scratch.path("a.key")])
        #expect(result.status == 0, "\(result)")
        let text = String(decoding: try fileBytes(scratch.path("a.key")), as: UTF8.self)
        #expect(text.hasPrefix("x'") && text.hasSuffix("'\n") && text.count == 68)
        #expect(try fileMode(scratch.path("a.key")) == 0o600)
        #expect(!result.standardOutput.contains(String(text.dropFirst(2).prefix(16))))
        let salted = try runSubprocess(["keygen", "--out", "b.key", "--with-salt"], in: scratch)
        #expect(salted.status == 0, "\(salted)")
        let key = try EncryptionKey(contentsOf: scratch.path("b.key"))
        #expect(key.kind == .rawWithSalt)
    }

    @Test("refuses to overwrite an existing file")
    func refusesOverwrite() throws {
        let scratch = try Scratch()
        let (path, _) = try scratch.rawKeyFile("a.key")
        let before = try fileBytes(path)
        let result = try runSubprocess(["keygen", "--out", "a.key"], in: scratch)
        #expect(result.status == 1, "\(result)")
        #expect(result.standardError.contains("exists"))
        #expect(try fileBytes(path) == before)
        #expect(parsingStatus(["keygen"]) == .usage)
    }
}
