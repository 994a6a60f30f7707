#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// The replicator's pin (a read transaction that keeps other connections' checkpoints from copying frames it has not
/// shipped) is released only for its own checkpoint, and taken again whatever that checkpoint did.
@Suite("The replicator's pin")
struct ReplicatorPinTests {
    @Test("a checkpoint that fails because another process holds the checkpoint lock leaves the pin taken again")
    func pinSurvivesFailedCheckpoint() async throws {
        let fixture = try ReplicationFixture { $0.checkpointFrameCount = 1 }
        try await fixture.insert(5)
        try await fixture.sync()
        #expect(try #require(await fixture.replicator.database).isPinned)
        // Another process holds SQLite's checkpoint lock (byte 121 of the -shm file: the lock area starts at 120,
        // the checkpoint lock is its second byte), as a checkpoint of the writing service does while it runs.
        let holder = Process()
        let input = Pipe()
        let output = Pipe()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = [
            "python3", "-c",
            "import fcntl, sys\nf = open(sys.argv[1], 'r+b')\nfcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 121)\n"
                + "print('locked', flush=True)\nsys.stdin.readline()",
            fixture.databasePath + "-shm",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = nil
        environment["LD_LIBRARY_PATH"] = nil
        holder.environment = environment
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        let line = String(decoding: output.fileHandleForReading.readData(ofLength: 7), as: UTF8.self)
        #expect(line == "locked\n")
        try await fixture.insert(5)
        // The sync ships and then checkpoints: the checkpoint finds the lock held (busy).
        _ = try? await fixture.sync()
        #expect(try #require(await fixture.replicator.database).isPinned, "the pin was left released")
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        await fixture.close()
    }
}
#endif
