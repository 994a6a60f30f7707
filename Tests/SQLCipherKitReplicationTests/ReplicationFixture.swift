#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// The text written into every row: no object of a replica may contain it.
let plaintextMarker = "PLAINTEXT-MARKER-5c1f0e"

/// A clock the test moves by hand: the times a replica records, and the ages retention measures.
final class TestClock: Sendable {
    private let current = Locked(Date(timeIntervalSince1970: 1_795_000_000))

    var now: Date { current.withLock { $0 } }

    func advance(seconds: Double) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}

/// A pool on an encrypted database in a temporary folder, a folder store, and a replicator between them, driven by
/// `syncNow()`.
final class ReplicationFixture: Sendable {
    let directory: TemporaryDirectory
    let databasePath: String
    let key: EncryptionKey
    let settings: CipherSettings
    let pool: DatabasePool
    /// The folder store (the replica's store unless another was given).
    let store: FolderReplicaStore
    /// The store the replicator ships to and restores read from.
    let target: any ReplicaStore
    let clock = TestClock()
    /// The replicator's configuration (a second replicator of the test gets the same).
    let configuration: ReplicatorConfiguration
    let replicator: Replicator
    private let nextRow = Locked(1)

    init(
        settings: CipherSettings = .engineDefault, key: EncryptionKey? = nil,
        configure: (inout ReplicatorConfiguration) -> Void = { _ in },
        target makeTarget: ((TemporaryDirectory) throws -> any ReplicaStore)? = nil
    ) throws {
        directory = try TemporaryDirectory()
        databasePath = directory.path("notes.db")
        self.key = try key ?? EncryptionKey.generateRaw()
        self.settings = settings
        pool = try DatabasePool(
            path: databasePath, keyProvider: .fixed(self.key),
            configuration: DatabasePool.Configuration(settings: settings))
        try pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)") }
        store = try FolderReplicaStore(root: directory.path("replica"))
        target = try makeTarget?(directory) ?? store
        let clock = clock
        var configuration = ReplicatorConfiguration(snapshotInterval: nil, retention: nil)
        configuration.now = { clock.now }
        configure(&configuration)
        self.configuration = configuration
        replicator = Replicator(pool: pool, store: target, configuration: configuration)
    }

    var replica: Replica { Replica(store: target) }

    /// Another replicator of the pool, to the same store with the same configuration: the one a process started
    /// again after ``Replicator/closeAsIfKilled()`` would run.
    func newReplicator() -> Replicator {
        Replicator(pool: pool, store: target, configuration: configuration)
    }

    /// Inserts `count` rows (each a few hundred bytes of marker text) in one transaction.
    func insert(_ count: Int) async throws {
        let first = nextRow.withLock { value -> Int in
            defer { value += count }
            return value
        }
        try await pool.write { db in
            for id in first..<(first + count) {
                try db.execute(
                    "INSERT INTO note(id, body) VALUES (?, ?)", id,
                    String(repeating: plaintextMarker + " row \(id) ", count: 8))
            }
        }
    }

    /// Syncs, moving the clock a second first (so every segment has a time of its own).
    @discardableResult
    func sync() async throws -> ReplicationStatus {
        clock.advance(seconds: 1)
        return try await replicator.syncNow()
    }

    /// The source as a checkpointed file would be now: the main file and its log copied aside, the copy opened
    /// with the key and checkpointed (SQLite, not the replica code, applies the log), its bytes read.
    func checkpointedCopy() throws -> [UInt8] {
        let copy = directory.path("oracle-\(UUID().uuidString).db")
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
        }
        try FileManager.default.copyItem(atPath: databasePath, toPath: copy)
        if FileManager.default.fileExists(atPath: databasePath + "-wal") {
            try FileManager.default.copyItem(atPath: databasePath + "-wal", toPath: copy + "-wal")
        }
        let db = try Connection(path: copy, encryption: .key(key, settings: settingsWithSalt()))
        try db.checkpoint(.truncate)
        db.close()
        return try fileBytes(copy)
    }

    /// The settings plus, for a plaintext-header database, its salt (which the file does not store).
    func settingsWithSalt() throws -> CipherSettings {
        var settings = settings
        if (settings.plaintextHeaderSize ?? 0) > 0, settings.salt == nil {
            settings.salt = try pool.read { db in try db.cipherSalt }
        }
        return settings
    }

    /// Restores `target` into a new file and returns its bytes (the file is removed).
    func restoredBytes(_ target: RestoreTarget, options: RestoreOptions = RestoreOptions()) async throws -> [UInt8] {
        let path = directory.path("restored-\(UUID().uuidString).db")
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try await replica.restore(to: path, at: target, options: options)
        return try fileBytes(path)
    }

    /// The last restore point shipped.
    func lastPoint() async throws -> RestoreTarget {
        let status = await replicator.status
        return .point(generation: try #require(status.generation), index: try #require(status.lastIndex))
    }

    /// Every object file of the replica, by key.
    func objectFiles() throws -> [String: [UInt8]] {
        let root = store.root
        var files: [String: [UInt8]] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            var isFolder: ObjCBool = false
            let path = root + "/" + relative
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue else {
                continue
            }
            files[relative] = try fileBytes(path)
        }
        return files
    }

    /// The path of the object `key` in the folder store.
    func objectPath(_ key: String) -> String {
        store.root + "/" + key
    }

    /// Stops the replicator and closes the pool. ``withReplicationFixture(settings:key:configure:target:_:)`` calls
    /// it on every way out of a test; a test calls it itself only to close early (calling it again does nothing).
    func close() async {
        try? await replicator.stop()
        pool.close()
    }
}

/// A running `sqlcipherkit` (the binary beside the test runner) with its output in files.
final class SQLCipherKitProcess {
    let process = Process()
    let errorPath: String
    let outputPath: String

    init(_ arguments: [String], folder: TemporaryDirectory, name: String) throws {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("sqlcipherkit").path
        errorPath = folder.path("\(name).err")
        outputPath = folder.path("\(name).out")
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        try process.run()
    }

    var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits (bounded only to turn a hang into a failure) until it printed `text` or exited.
    func wait(for text: String) async throws {
        try await waitForText(text, inFile: errorPath, of: process)
        #expect(errors.contains(text), "\(errors)")
    }

    /// SIGTERM, then its exit status.
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Waits until it exits by itself (bounded: 120 s) and returns its status.
    func exitStatus() async throws -> Int32? {
        _ = await suspendingWait { !process.isRunning }
        return process.isRunning ? nil : process.terminationStatus
    }

    deinit { if process.isRunning { process.terminate() } }
}

/// Runs `body` with a new ``ReplicationFixture`` and awaits its ``ReplicationFixture/close()`` on every way out:
/// returned, thrown, or stopped by a failed `#require`. A fixture closed from a task the test does not wait for would
/// leave a pool and a replicator running, after a failure too, while the next test starts on the same files.
@discardableResult
func withReplicationFixture<T>(
    settings: CipherSettings = .engineDefault, key: EncryptionKey? = nil,
    configure: (inout ReplicatorConfiguration) -> Void = { _ in },
    target: ((TemporaryDirectory) throws -> any ReplicaStore)? = nil,
    _ body: (ReplicationFixture) async throws -> T
) async throws -> T {
    let fixture = try ReplicationFixture(settings: settings, key: key, configure: configure, target: target)
    return try await closing(fixture, body)
}

/// Runs `body` with `fixture`, then awaits `fixture.close()` whether `body` returned or threw.
func closing<T>(_ fixture: ReplicationFixture, _ body: (ReplicationFixture) async throws -> T) async throws -> T {
    let outcome: Result<T, any Error>
    do {
        outcome = .success(try await body(fixture))
    } catch {
        outcome = .failure(error)
    }
    await fixture.close()
    return try outcome.get()
}

/// Waits until the file at `path` (a child process's output) contains `text`, while `process` runs; bounded only to
/// turn a hang into a failure (120 s). The caller checks the text is there.
func waitForText(_ text: String, inFile path: String, of process: Process) async throws {
    _ = try await suspendingWait {
        try String(contentsOfFile: path, encoding: .utf8).contains(text) || !process.isRunning
    }
}

/// Flips one bit of the byte at `offset` of a file.
func flipByte(in path: String, at offset: Int) throws {
    var bytes = try fileBytes(path)
    bytes[offset] ^= 0x01
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Names of files in a folder (to see that a failed restore left nothing).
func folderEntries(_ path: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: path).sorted()
}
#endif
