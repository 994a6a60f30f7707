import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("Key hygiene: no key byte in any output")
struct KeyHygieneTests {
    @Test("every subcommand, successful or failing, keeps the sentinel key out of stdout and stderr")
    func sentinelNeverPrinted() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.sentinelKeyFile("k")
        let (newPath, _) = try scratch.sentinelKeyFile("new", suffix: "-new")
        let (wrongPath, _) = try scratch.sentinelKeyFile("wrong", suffix: "-wrong")
        let db = try scratch.database("notes.db", key: key)
        try scratch.writeFile("loose.key", Sentinel.text + "\n", mode: 0o640)
        try scratch.writeFile("bad-raw.key", "x'\(Sentinel.text)'\n", mode: 0o600)
        let commandLines: [[String]] = [
            ["info", db, "--key-file", keyPath, "--json"],
            ["info", db, "--key-file", wrongPath],
            ["verify", db, "--key-file", keyPath, "--json"],
            ["verify", db, "--key-file", wrongPath],
            ["verify", db, "--key-file", scratch.path("loose.key")],
            ["verify", db, "--key-file", scratch.path("bad-raw.key")],
            ["exec", db, "--key-file", keyPath, "SELECT count(*) FROM item"],
            ["exec", db, "--key-file", keyPath, "SELECT nosuch"],
            ["backup", db, scratch.path("b.db"), "--key-file", keyPath, "--dest-key-file", newPath],
            ["decrypt", db, scratch.path("p.db"), "--key-file", wrongPath, "--allow-plaintext"],
            ["rotate", db, "--key-file", wrongPath, "--new-key-file", newPath, "--json"],
            ["rotate", db, "--key-file", keyPath, "--new-key-file", newPath, "--json"],
            ["rotate", db, "--key-file", newPath, "--new-key-file", keyPath, "--method", "in-place"],
            ["migrate", db, "--key-file", keyPath],
        ]
        for arguments in commandLines {
            let result = try runSubprocess(arguments, in: scratch)
            #expect(result.isFreeOfKeyMaterial, "\(arguments): \(result)")
        }
        let fromEnvironment = try runSubprocess(
            ["verify", db, "--key-env", "K"], environment: ["K": Sentinel.text + "-wrong"], in: scratch)
        #expect(fromEnvironment.status == 3)
        #expect(fromEnvironment.isFreeOfKeyMaterial)
        let fromStandardInput = try runSubprocess(
            ["verify", db, "--key-stdin"], standardInput: Array("x'\(Sentinel.text)'".utf8), in: scratch)
        #expect(fromStandardInput.status == 1)
        #expect(fromStandardInput.isFreeOfKeyMaterial)
    }
}
