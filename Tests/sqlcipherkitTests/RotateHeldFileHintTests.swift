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
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sh")
        holder.arguments = ["-c", "exec 3<\"$0\"; exec sleep 30", path]
        try holder.run()
        defer { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() }
        for _ in 0..<200 {
            let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(holder.processIdentifier)/fd")
            if fds?.contains("3") == true { break }
            usleep(20_000)
        }
        let result = runInProcess(["rotate", path, "--key-file", oldKeyFile, "--new-key-file", newKeyFile])
        #expect(result.status != 0)
        let output = result.standardOutput + result.standardError
        #expect(output.contains("open in other processes"), "\(result)")
        #expect(output.contains(".next") && output.contains("Docs/Services.md"), "\(result)")
        #expect(result.isFreeOfKeyMaterial)
    }
}
