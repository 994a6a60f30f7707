#if Services  // trait Services (Package.swift), which turns on Replication
import Foundation
import SQLCipherKit
import SQLCipherKitReplication
import SQLCipherKitServices
#if canImport(Glibc)
import Glibc
#endif

/// The figures of Docs/Replication.md, "Measured": write throughput of a service with replication on against off
/// (same run, alternating rounds), replication lag at a steady write rate, restore speed from a folder store, and
/// peak memory while a large snapshot is uploaded.
struct ReplicationBenchmarks {
    let folder: String
    let megabytes: Int
    let seconds: Int
    let rate: Int
    let writes: Int
    /// Where the snapshot and restore figures go: `nil` for a folder beside the database, or a replica URL
    /// (`s3://BUCKET/PREFIX` with `endpoint`, the bucket existing) to measure through a real object store.
    let replicaURL: String?
    let endpoint: String?
    /// The folder the throughput and lag rounds' folder stores go under: `nil` for beside the database (the same
    /// disk, so the replica's writes and flushes compete with the database's), or another file system (a tmpfs
    /// shows the replicator's own cost, as a store on another machine would).
    let storeFolder: String?

    func run(_ mode: String) async throws {
        #if DEBUG
        print("WARNING: debug build; the figures mean nothing. Use swift build -c release.\n")
        #endif
        print("SQLCipherKit replication benchmarks (raw key, one process; throughput and lag: folder store"
            + (storeFolder.map { " under \($0)" } ?? " beside the database") + ")")
        print("  SQLCipher \(SQLCipher.version), \(ProcessInfo.processInfo.activeProcessorCount) CPU,"
            + " load average at start \(loadAverage())")
        let base = try temporaryFolder(under: folder)
        defer { try? FileManager.default.removeItem(atPath: base) }
        if mode == "all" || mode == "throughput" { try await throughput(in: base + "/throughput") }
        if mode == "all" || mode == "lag" { try await lag(in: base + "/lag") }
        if mode == "all" || mode == "restore" || mode == "snapshot" { try await snapshotAndRestore(in: base + "/large") }
        print("  load average at end \(loadAverage())")
    }

    // MARK: - Throughput

    /// `writes` single-row transactions through the pool of a service, replication off and on, three rounds each,
    /// alternating (the machine's load changes during a run); the median of each.
    func throughput(in directory: String) async throws {
        var off: [Double] = []
        var on: [Double] = []
        for round in 0..<6 {
            let replicated = round % 2 == 1
            let path = directory + "/round\(round)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let store = replicated ? try folderStore(path + "/replica") : nil
            let service = try makeService(in: path, replication: store.map { .init(store: $0) })
            let serving = Task { try await service.run() }
            try await service.pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
            if let replicator = service.replicator { try await replicator.syncNow() }
            let body = String(repeating: "x", count: 200)
            let started = ContinuousClock.now
            for id in 1...writes {
                try await service.pool.write { db in try db.execute("INSERT INTO note VALUES (?, ?)", id, body) }
            }
            let elapsed = ContinuousClock.now - started
            (replicated ? { on.append($0) } : { off.append($0) })(Double(writes) / elapsed.seconds)
            serving.cancel()
            _ = try? await serving.value
            try? FileManager.default.removeItem(atPath: path)
            if let store { try? FileManager.default.removeItem(atPath: store.root) }  // under --store-folder
        }
        let medianOff = median(off)
        let medianOn = median(on)
        print("\nthroughput: \(writes) single-row write transactions through DatabaseService.pool, 3 rounds each")
        print("  replication off: \(format(medianOff)) writes/s (rounds: \(off.map { format($0) }.joined(separator: ", ")))")
        print("  replication on:  \(format(medianOn)) writes/s (rounds: \(on.map { format($0) }.joined(separator: ", ")))")
        print("  on/off: \(format(medianOn / medianOff, decimals: 2))x (goal >= 0.9x)")
    }

    // MARK: - Lag

    /// Writes at a steady `rate` for `seconds` with a 1 s sync interval; each write's lag is from its commit to
    /// the end of the upload of the first log segment read after it (the segment's name holds when it was read).
    func lag(in directory: String) async throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = TimingStore(try folderStore(directory + "/replica"))
        let service = try makeService(in: directory, replication: .init(store: store, syncInterval: .seconds(1)))
        let serving = Task { try await service.run() }
        try await service.pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
        try await service.replicator?.syncNow()
        let body = String(repeating: "y", count: 200)
        let total = rate * seconds
        var commits: [Int64] = []
        commits.reserveCapacity(total)
        let clock = ContinuousClock()
        let start = clock.now
        var late = 0
        for id in 1...total {
            let due = start + .nanoseconds(Int64(id - 1) * 1_000_000_000 / Int64(rate))
            if due > clock.now { try await Task.sleep(until: due, clock: clock) } else { late += 1 }
            try await service.pool.write { db in try db.execute("INSERT INTO note VALUES (?, ?)", id, body) }
            commits.append(Int64(Date().timeIntervalSince1970 * 1000))
        }
        let achieved = Double(total) / (clock.now - start).seconds
        try await service.replicator?.syncNow()
        serving.cancel()
        _ = try? await serving.value
        try? FileManager.default.removeItem(atPath: store.inner.root)  // under --store-folder
        let segments = store.segments.sorted { $0.readAt < $1.readAt }
        var lags: [Double] = []
        var unmatched = 0
        for commit in commits {
            // The first segment read after the commit carries it (a commit in the same millisecond as a read is
            // counted in the next one: the figure errs long, never short).
            guard let segment = segments.first(where: { $0.readAt > commit }) else {
                unmatched += 1
                continue
            }
            lags.append(Double(segment.storedAt - commit) / 1000)
        }
        lags.sort()
        print("\nlag: \(total) writes at \(rate)/s for \(seconds) s (achieved \(format(achieved))/s, \(late) writes"
            + " started late), sync interval 1 s, \(segments.count) segments")
        print("  p50 \(format(percentile(lags, 0.50), decimals: 3)) s, p99 \(format(percentile(lags, 0.99), decimals: 3))"
            + " s, max \(format(lags.last ?? 0, decimals: 3)) s (goal p99 <= 2 s); \(unmatched) unmatched")
    }

    // MARK: - Snapshot upload memory and restore speed

    /// Makes a database of `megabytes` MB, measures peak memory (VmHWM, reset first) while the first sync uploads
    /// its snapshot, then the speed of a restore from the folder store, beside a plain copy of the file.
    func snapshotAndRestore(in directory: String) async throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try snapshotStore(in: directory)
        let service = try makeService(in: directory, replication: .init(store: store, syncInterval: .seconds(3600)))
        let rows = megabytes * 1024 / 8
        try await service.pool.write { db in
            try db.execute("CREATE TABLE blob(id INTEGER PRIMARY KEY, data BLOB)")
            for id in 1...rows {
                try db.execute("INSERT INTO blob VALUES (?, randomblob(8000))", id)
            }
        }
        _ = try await service.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        let size = fileSize(service.path)
        resetPeakMemory()
        let before = memory()
        let started = ContinuousClock.now
        try await service.replicator?.syncNow()
        let uploadTime = ContinuousClock.now - started
        let after = memory()
        print("\nsnapshot upload: \(format(Double(size) / 1e6)) MB database to \(store.description) in"
            + " \(format(uploadTime.seconds, decimals: 1)) s")
        print("  resident memory before \(format(Double(before.current) / 1e6)) MB; peak during the upload"
            + " \(format(Double(after.peak) / 1e6)) MB (+\(format(Double(after.peak - before.current) / 1e6)) MB)")
        try await service.replicator?.stop()
        service.pool.close()

        let restored = directory + "/restored.db"
        let restoreStarted = ContinuousClock.now
        let report = try await Replica(store: store).restore(to: restored, at: .latest)
        let restoreTime = ContinuousClock.now - restoreStarted
        let copyStarted = ContinuousClock.now
        try FileManager.default.copyItem(atPath: service.path, toPath: directory + "/copy.db")
        let copyFile = open(directory + "/copy.db", O_RDONLY)
        fsync(copyFile)
        close(copyFile)
        let copyTime = ContinuousClock.now - copyStarted
        print("restore: \(format(Double(report.byteCount) / 1e6)) MB in \(format(restoreTime.seconds, decimals: 2)) s ="
            + " \(format(Double(report.byteCount) / 1e6 / restoreTime.seconds)) MB/s (checksums checked, flushed);"
            + " cp + fsync of the same file: \(format(Double(size) / 1e6 / copyTime.seconds)) MB/s")
    }

    // MARK: - Helpers

    /// A folder store at `path`, or under ``storeFolder`` when one was given.
    private func folderStore(_ path: String) throws -> FolderReplicaStore {
        guard let storeFolder else { return try FolderReplicaStore(root: path) }
        return try FolderReplicaStore(root: storeFolder + "/" + UUID().uuidString)
    }

    /// The store of the snapshot figures: a folder, or `replicaURL` under a prefix of its own for this run.
    private func snapshotStore(in directory: String) throws -> any ReplicaStore {
        guard let replicaURL else { return try FolderReplicaStore(root: directory + "/replica") }
        let separator = replicaURL.hasSuffix("/") ? "" : "/"
        return try replicaStore(for: replicaURL + separator + "benchmark-" + UUID().uuidString, endpoint: endpoint)
    }

    private func makeService(in directory: String, replication: DatabaseService.ReplicationOptions?) throws
        -> DatabaseService
    {
        let keyFile = directory + "/db.key"
        if !FileManager.default.fileExists(atPath: keyFile) {
            let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            _ = FileManager.default.createFile(
                atPath: keyFile, contents: Data("x'\(hex)'\n".utf8), attributes: [.posixPermissions: 0o600])
        }
        var configuration = DatabaseService.Configuration(metricsName: "benchmark")
        configuration.replication = replication
        return try DatabaseService(path: directory + "/db.sqlite", keyFile: keyFile, configuration: configuration)
    }
}

/// A folder store that notes, for each log segment, when it was read (in its name) and when its upload ended.
final class TimingStore: ConditionalReplicaStore {
    struct Segment: Sendable {
        let readAt: Int64
        let storedAt: Int64
    }

    let inner: FolderReplicaStore
    private let stored = Locked<[Segment]>([])

    init(_ inner: FolderReplicaStore) { self.inner = inner }

    var segments: [Segment] { stored.withLock { $0 } }
    var description: String { inner.description }

    private func note(_ key: String) {
        // generations/<g>/wal/<index>-<milliseconds>-<n|c>-<sha256>-<mac>.wal
        guard key.contains("/wal/"), let name = key.split(separator: "/").last else { return }
        let fields = name.split(separator: "-")
        guard fields.count >= 2, let readAt = Int64(fields[1]) else { return }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        stored.withLock { $0.append(Segment(readAt: readAt, storedAt: now)) }
    }

    func put(_ key: String, bytes: [UInt8]) async throws {
        try await inner.put(key, bytes: bytes)
        note(key)
    }

    func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        try await inner.put(key, file: path, offset: offset, length: length, progress: progress)
        note(key)
    }

    func get(_ key: String) async throws -> [UInt8] { try await inner.get(key) }
    func getVersioned(_ key: String) async throws -> (bytes: [UInt8], version: String?)? {
        try await inner.getVersioned(key)
    }
    func put(_ key: String, bytes: [UInt8], if condition: WriteCondition) async throws -> ConditionalWrite {
        try await inner.put(key, bytes: bytes, if: condition)
    }
    func list(prefix: String) async throws -> [ReplicaObject] { try await inner.list(prefix: prefix) }
    func delete(_ keys: [String]) async throws { try await inner.delete(keys) }
}

func median(_ values: [Double]) -> Double { percentile(values.sorted(), 0.5) }

func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
}

func format(_ value: Double, decimals: Int = 0) -> String { String(format: "%.\(decimals)f", value) }

func loadAverage() -> String {
    var values = [Double](repeating: 0, count: 3)
    guard getloadavg(&values, 3) == 3 else { return "unknown" }
    return values.map { format($0, decimals: 2) }.joined(separator: " ")
}

func fileSize(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
}

/// Resident memory now and its peak (VmRSS, VmHWM of /proc/self/status), in bytes.
func memory() -> (current: Int64, peak: Int64) {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int64 {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
        return (Int64(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
    }
    return (field("VmRSS"), field("VmHWM"))
}

/// Resets VmHWM to the current resident size (Linux: writing 5 to /proc/self/clear_refs).
func resetPeakMemory() {
    let descriptor = open("/proc/self/clear_refs", O_WRONLY)
    guard descriptor >= 0 else { return }
    _ = write(descriptor, "5", 1)
    close(descriptor)
}

func temporaryFolder(under parent: String) throws -> String {
    let path = (parent.hasSuffix("/") ? parent : parent + "/") + "sqlcipherkit-replication-benchmarks-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
#endif
