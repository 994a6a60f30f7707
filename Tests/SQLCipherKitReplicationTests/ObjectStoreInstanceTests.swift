#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
import SQLCipherKitTestSupport
import Testing

/// A test's own object store (``ObjectStore/Instance``): free ports of its own, and never left running.
@Suite("A test's own object store", .enabled(if: ObjectStore.isInstalled, ObjectStore.notInstalled))
struct ObjectStoreInstanceTests {
    @Test("two run side by side on ports of their own, and shutDown stops every process of each")
    func sideBySide() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let first = try await ObjectStore.Instance.started(folder: scratch.path("first"))
        defer { first.shutDown() }
        let second = try await ObjectStore.Instance.started(folder: scratch.path("second"))
        defer { second.shutDown() }
        #expect(first.endpoint != second.endpoint)
        let firstUp = try await first.isUp()
        let secondUp = try await second.isUp()
        #expect(firstUp && secondUp)
        let ports = try String(contentsOfFile: scratch.path("first/ports"), encoding: .utf8)
            .split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(ports.count == 5 && Set(ports).count == 5)
        #expect(first.endpoint == "http://127.0.0.1:\(ports[0])")

        await offCooperativePool { first.shutDown() }
        #expect(!first.isGuarded)
        #expect(try await !first.isUp())
        #expect(try await second.isUp())
        // No server of it is left: each pid file went with its process.
        #expect(try folderEntries(scratch.path("first/run")).isEmpty)
    }

    @Test("the process that started it is killed: its guard stops the store")
    func stoppedWhenItsProcessIsKilled() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let folder = scratch.path("store")
        let script = ObjectStore.repositoryRoot + "/.ci/object-store"
        // The test process's part, played by a shell: the guard reads a pipe only the shell (and then `sleep`) holds
        // open, the store is started, and the shell waits for ever, until killed.
        let owner = Process()
        owner.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        owner.arguments = [
            "SQLCIPHERKIT_OBJECT_STORE_DIR=\(folder)", "SQLCIPHERKIT_OBJECT_STORE_PORT=auto", "bash", "-c",
            "exec 3> >(exec setsid -w bash \"$0\" guard >/dev/null 2>&1); bash \"$0\" start >/dev/null 2>&1"
                + " && echo up; exec sleep 100000",
            script,
        ]
        let output = scratch.path("owner.out")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let outputHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        owner.standardOutput = outputHandle
        owner.standardError = outputHandle
        owner.standardInput = FileHandle.nullDevice
        try owner.run()
        try outputHandle.close()
        let variables = ["SQLCIPHERKIT_OBJECT_STORE_DIR=\(folder)", "SQLCIPHERKIT_OBJECT_STORE_PORT=auto"]
        func isUp() throws -> Bool {
            try ObjectStore.run(variables + ["bash", script, "status"]).status == 0
        }
        var killed = false
        defer {
            // Whatever happened, nothing of it is left running.
            if !killed { kill(owner.processIdentifier, SIGKILL) }
            _ = try? ObjectStore.run(variables + ["bash", script, "stop"])
        }
        try await waitForText("up", inFile: output, of: owner)
        #expect(try String(contentsOfFile: output, encoding: .utf8).contains("up"))
        #expect(try isUp())

        #expect(kill(owner.processIdentifier, SIGKILL) == 0)
        killed = true
        owner.waitUntilExit()
        // The guard sees its input end and stops the store (bounded only to turn a hang into a failure).
        #expect(await suspendingWait(within: .seconds(120)) {
            (try? folderEntries(folder + "/run").isEmpty) ?? false
        })
        #expect(try !isUp())
    }
}
#endif
