import Foundation
import Testing
@testable import sqlcipherkit

/// The power-loss exploration's sample in the regular suite (Docs/Durability.md), and the flushes its findings added,
/// observed through its recorder (Tests/PowerLoss/recorder.c, preloaded into the binary): what a power cut keeps is
/// decided by the order of the calls, which no return code shows.
@Suite("Power loss")
struct PowerLossTests {
    @Test(
        "keygen flushes the new key file and then its folder before it reports success")
    func keygenFlushesTheFolder() throws {
        try Recorder.requireLibrary()
        let scratch = try Scratch()
        let traces = try Scratch()
        let folder = try #require(realPath(scratch.url.path))
        let keyFile = folder + "/new.key"
        let (result, trace) = try Recorder.run(["keygen", "--out", keyFile], root: folder, traces: traces, in: scratch)
        #expect(result.status == 0, "\(result)")
        let created = try #require(trace.firstIndex { $0.op == "open" && $0.path == keyFile && $0.created })
        let fileFlush = try #require(trace.firstIndex(after: created) { $0.op == "fsync" && $0.path == keyFile })
        // Without it, a power cut after keygen said "wrote" can leave no key file at all: the name was never flushed.
        #expect(
            trace.firstIndex(after: fileFlush) { $0.op == "fsync" && $0.path == folder } != nil,
            "no fsync of \(folder) after the key file's: \(trace.map(\.summary))")
    }

    @Test(
        "a commit in the DELETE journal mode flushes the folder after it removes the journal, before it returns")
    func deleteModeCommitFlushesTheFolder() throws {
        try Recorder.requireLibrary()
        let scratch = try Scratch()
        let traces = try Scratch()
        let folder = try #require(realPath(scratch.url.path))
        let (keyFile, key) = try scratch.rawKeyFile("db.key")
        let database = try scratch.database("db.db", key: key, journalMode: "DELETE")
        let (result, trace) = try Recorder.run(
            ["exec", database, "--key-file", keyFile, "INSERT INTO item(body) VALUES ('after')"], root: folder,
            traces: traces, in: scratch)
        #expect(result.status == 0, "\(result)")
        // The commit point is the journal's unlink; until the folder is flushed, a power cut brings the journal back
        // and the next open rolls the acknowledged insert away (Docs/Durability.md).
        let journal = folder + "/db.db-journal"
        let removed = try #require(
            trace.lastIndex { $0.op == "unlink" && $0.path == journal }, "\(trace.map(\.summary))")
        #expect(
            trace.firstIndex(after: removed) { $0.op == "fsync" && $0.path == folder } != nil,
            "no fsync of \(folder) after the journal's unlink: \(trace.map(\.summary))")
    }

    #if Replication  // trait Replication (Package.swift): the binary has `replicate`
    @Test(
        "replicate to a folder flushes the parent of every folder it creates: a power cut cannot take a generation's folder with the objects in it")
    func replicateFlushesNewFolders() throws {
        try Recorder.requireLibrary()
        let library = try #require(Recorder.library)
        let scratch = try Scratch()
        let traces = try Scratch()
        let folder = try #require(realPath(scratch.url.path))
        let (keyFile, key) = try scratch.rawKeyFile("db.key")
        let database = try scratch.database("db.db", key: key, journalMode: "WAL")
        let tracePath = traces.path("trace.jsonl")
        let replica = folder + "/replica"
        let running = try RunningCommand(
            ["replicate", database, "--key-file", keyFile, "--to", "file://" + replica, "--sync-interval", "100ms"],
            environment: [
                // Kept in front of what the environment preloads already (the SQLCipher 4 runtime's libpython).
                "LD_PRELOAD": [library, ProcessInfo.processInfo.environment["LD_PRELOAD"]].compactMap { $0 }
                    .joined(separator: " "),
                "POWERLOSS_TRACE": tracePath, "POWERLOSS_ROOT": folder,
            ], in: scratch)
        // Waits for the first snapshot's manifest (the first sync's last object), bounded only to turn a hang into
        // a failure.
        let deadline = ContinuousClock.now + .seconds(120)
        func snapshotStored() -> Bool {
            guard let paths = FileManager.default.enumerator(atPath: replica) else { return false }
            return paths.contains { ($0 as? String)?.hasSuffix("snapshot.json") == true }
        }
        while !snapshotStored() && running.isRunning && ContinuousClock.now < deadline { usleep(20_000) }
        running.terminate()
        let result = try running.finish()
        #expect(result.status == 0, "\(result)")
        let trace = Recorder.calls(in: tracePath)
        let made = trace.enumerated().filter { $0.element.op == "mkdir" && $0.element.path?.hasPrefix(replica) == true }
        #expect(!made.isEmpty, "no mkdir under \(replica): \(trace.map(\.summary))")
        for (index, call) in made {
            let path = try #require(call.path)
            let parent = (path as NSString).deletingLastPathComponent
            // Before the folder store flushed parents, a power cut after the first sync could lose the mkdir of
            // replica/generations and, with it, every object under it (Docs/Durability.md).
            #expect(
                trace.firstIndex(after: index) { $0.op == "fsync" && $0.path == parent } != nil,
                "no fsync of \(parent) after mkdir \(path)")
        }
    }
    #endif

    @Test(
        "a sample of the power-loss exploration: every crash state of the CLI's workloads passes every check")
    func explorationSample() throws {
        try Recorder.requireLibrary()
        guard PeerProcess.isAvailable else { try Test.cancel("skipped: \(PeerProcess.unavailableReason)") }
        let scratch = try Scratch()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", Recorder.repository + "/Tests/PowerLoss/powerloss.py", "run",
            "--only", Self.sampled.joined(separator: ","),
            "--budget", "60", "--cache", scratch.path("cache"),
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["SQLCIPHERKIT_BIN"] = binaryPath
        environment["SQLCIPHERKIT_EXPECTED_ENGINE"] = Engine.isVersion4 ? "4" : "3"
        process.environment = environment
        let output = scratch.path("output")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        try handle.close()
        let text = String(decoding: try fileBytes(output), as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(text)")
        // Every workload ran and checked states: none was skipped, none explored nothing.
        for workload in Self.sampled {
            let line = text.split(separator: "\n").first { $0.hasPrefix(workload + ":") }
            #expect(line?.contains(" 0 failing") == true && line?.contains("distinct") == true, "\(text)")
        }
    }
}

extension PowerLossTests {
    /// The workloads of the sample: the CLI's (the writers need the Services trait), with at most 60 distinct states
    /// each.
    static let sampled = [
        "keygen", "rotate-copy-delete", "rotate-in-place-delete", "rotate-in-place-wal", "backup", "decrypt",
        "shell-output",
    ]
}

/// The recorder, compiled once per test run with the system's C compiler.
enum Recorder {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Cancels the test, saying why, when the recorder cannot be built here.
    static func requireLibrary() throws {
        guard library == nil else { return }
        try Test.cancel("skipped: needs a C compiler (cc, gcc or clang) to build Tests/PowerLoss/recorder.c")
    }

    /// The compiled library, or `nil` when no compiler is found.
    static let library: String? = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlcipherkit-recorder-\(getpid())")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let output = folder.appendingPathComponent("recorder.so").path
        for compiler in ["cc", "gcc", "clang"] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                compiler, "-shared", "-fPIC", "-O2", "-o", output, repository + "/Tests/PowerLoss/recorder.c", "-ldl",
                "-lpthread",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            var environment = ProcessInfo.processInfo.environment
            environment["LD_PRELOAD"] = nil
            process.environment = environment
            guard (try? process.run()) != nil else { continue }
            process.waitUntilExit()
            if process.terminationStatus == 0 { return output }
        }
        return nil
    }()

    /// One recorded call.
    struct Call {
        let op: String
        let path: String?
        let created: Bool

        var summary: String { "\(op) \(path ?? "")" }
    }

    /// Runs the binary with the recorder preloaded, recording the calls under `root`.
    static func run(
        _ arguments: [String], root: String, traces: Scratch, in scratch: Scratch
    ) throws -> (CommandResult, [Call]) {
        let library = try #require(library)
        let tracePath = traces.path("trace.jsonl")
        let preload = [library, ProcessInfo.processInfo.environment["LD_PRELOAD"]].compactMap { $0 }
        let result = try runSubprocess(
            arguments,
            environment: [
                "LD_PRELOAD": preload.joined(separator: " "), "POWERLOSS_TRACE": tracePath, "POWERLOSS_ROOT": root,
            ],
            in: scratch)
        return (result, calls(in: tracePath))
    }

    /// The calls a trace file holds, in order.
    static func calls(in tracePath: String) -> [Call] {
        let text = String(decoding: (try? fileBytes(tracePath)) ?? [], as: UTF8.self)
        return text.split(separator: "\n").compactMap { line -> Call? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let op = object["op"] as? String
            else { return nil }
            return Call(op: op, path: object["path"] as? String, created: (object["created"] as? Int ?? 0) == 1)
        }
    }
}

extension Array {
    /// The first index after `index` whose element matches.
    func firstIndex(after index: Int, where matches: (Element) -> Bool) -> Int? {
        self[(index + 1)...].firstIndex(where: matches)
    }
}

private func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}
