import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("rotate on a file a running service holds")
struct RotateHeldFileHintTests {
    @Test("the refusal explains how to rotate a live service's key instead", .enabled(
        if: FileManager.default.fileExists(atPath: "/proc/self/fd"),
        "finding the processes that hold a file reads /proc, which only Linux has"))
    func explainsLiveRotation() throws {
        let scratch = try Scratch()
        let (oldKeyFile, oldKey) = try scratch.rawKeyFile("old.key")
        let (newKeyFile, _) = try scratch.rawKeyFile("new.key")
        let path = try scratch.database("held.db", key: oldKey)
        // It holds the file until the test ends it, and says when it has it open.
        let holder = try FileHolder(path: path)
        defer { holder.stop() }
        let result = runInProcess(["rotate", path, "--key-file", oldKeyFile, "--new-key-file", newKeyFile])
        #expect(result.status != 0)
        let output = result.standardOutput + result.standardError
        #expect(output.contains("open in other processes"), "\(result)")
        #expect(output.contains(".next") && output.contains("Docs/Services.md"), "\(result)")
        #expect(result.isFreeOfKeyMaterial)
    }
}
