import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Core dumps off before any key is read; key files that cannot block; key-like names never echoed.
@Suite("sqlcipherkit process and key-source hardening")
struct ProcessHardeningTests {
    @Test("the binary runs with a core-file limit of 0 and (Linux) not dumpable")
    func coreDumpsOff() throws {
        let scratch = try Scratch()
        let result = try runSubprocess(["debug-process-state"], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.contains("core-limit: 0 0"), "\(result)")
        #if os(Linux)
        #expect(result.standardOutput.contains("dumpable: 0"), "\(result)")
        #endif
    }

    #if os(Linux)
    @Test("a process waiting for its key on standard input already has core dumps off (/proc/<pid>/limits)")
    func limitsWhileWaitingForKey() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binaryPath)
        process.arguments = ["verify", db, "--key-stdin"]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
        // The process blocks reading the key, which never comes until the pipe is closed. Wait (at most 60 s, to
        // turn a hang into a failure) until its limits show the core size it set first thing in main.
        let deadline = ContinuousClock.now + .seconds(60)
        var coreLine = ""
        while ContinuousClock.now < deadline {
            let limits = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)) ?? ""
            coreLine = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }.map(String.init) ?? ""
            let fields = coreLine.split(separator: " ")
            if fields.count >= 6, fields[4] == "0", fields[5] == "0" { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(process.isRunning, "it must still be waiting for the key")
        let fields = coreLine.split(separator: " ")
        #expect(fields.count >= 6 && fields[4] == "0" && fields[5] == "0", "\(coreLine)")
    }
    #endif

    @Test("a FIFO as --key-file fails at once with a clear error instead of blocking")
    func fifoKeyFile() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let fifo = scratch.path("key.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        // Bounded only to turn a hang into a failure.
        let result = try runSubprocessBounded(["verify", db, "--key-file", fifo], in: scratch)
        #expect(result != nil, "verify blocked on the FIFO")
        #expect(result?.status == 1, "\(String(describing: result))")
        #expect(result?.standardError.contains("not a regular file") == true, "\(String(describing: result))")
        // The library refuses it the same way.
        #expect(throws: DatabaseError.self) { try EncryptionKey(contentsOf: fifo) }
    }

    // Giving the key file to another user takes chown, which only root may do (CI runs as root).
    @Test("a key file owned by another user is refused", .enabled(if: geteuid() == 0,
        "not root: only root can give a file to another user (chown)"))
    func foreignOwner() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("k")
        #expect(chown(keyPath, 65534, 65534) == 0)
        let error = #expect(throws: DatabaseError.self) { try EncryptionKey(contentsOf: keyPath) }
        #expect(error?.message.contains("belongs to user id 65534") == true)
        #expect((try? EncryptionKey(contentsOf: keyPath, permissions: .allowGroupAndOthers)) != nil)
    }

    @Test("a key typed where an environment variable's name or a key file's path belongs is never echoed")
    func keyLikeNamesNotEchoed() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key)
        let hexSentinel = String(repeating: "5e171e1d", count: 8)
        let rawKeyText = "x'\(hexSentinel)'"
        let passphrase = "correct horse \(Sentinel.text)"
        let cases: [[String]] = [
            ["verify", db, "--key-env", rawKeyText],
            ["verify", db, "--key-file", rawKeyText],
            ["verify", db, "--key-env", passphrase],
            ["verify", db, "--key-env", hexSentinel],
            ["verify", db, "--key-file", hexSentinel],
            ["rotate", db, "--key-env", rawKeyText, "--new-key-file", rawKeyText],
            ["backup", db, scratch.path("b.db"), "--key-file", rawKeyText, "--dest-key-env", passphrase],
        ]
        for arguments in cases {
            for run in [runInProcess(arguments), runInProcess(arguments + ["--json"]),
                        try runSubprocess(arguments, in: scratch)] {
                #expect(run.status != 0, "\(arguments)")
                let output = run.standardOutput + run.standardError
                #expect(!output.contains(hexSentinel), "\(arguments): \(output)")
                #expect(!output.contains(Sentinel.text), "\(arguments): \(output)")
                #expect(output.contains("not shown"), "\(arguments): \(output)")
            }
        }
    }

    @Test("ordinary names and paths are still shown")
    func ordinaryNamesShown() {
        #expect(KeyMaterialRedaction.shownVariableName("NOTES_KEY") == "NOTES_KEY")
        #expect(KeyMaterialRedaction.shown("/etc/notes/notes-2026.key", as: "path") == "/etc/notes/notes-2026.key")
        #expect(KeyMaterialRedaction.looksLikeKey("x'00'"))
        #expect(KeyMaterialRedaction.looksLikeKey(String(repeating: "ab", count: 16)))
        #expect(!KeyMaterialRedaction.looksLikeKey("/var/lib/app/a1b2c3.key"))
    }
}
