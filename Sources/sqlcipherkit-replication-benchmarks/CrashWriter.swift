#if Services  // trait Services (Package.swift), which turns on Replication
import Foundation
import SQLCipherKit
import SQLCipherKitReplication
import SQLCipherKitServices
#if canImport(Glibc)
import Glibc
#endif

/// The process .ci/replication-crash-campaign kills: a ``DatabaseService`` replicating to a folder, writing one
/// transaction after another, and printing `ack <id> <unix milliseconds>` on standard output after each commit
/// returned (an acknowledged write). Run again on the same files after a kill, it goes on from the last row.
///
/// Each transaction inserts row `id` of `note`, whose body is ``body(of:)`` (up to ~6 KB: some rows span overflow
/// pages, so a transaction writes several pages), and adds `id` to the single row of `ledger`. A restored database
/// is whole when its ids are 1…n without a hole, every body is ``body(of:)``, and the ledger holds n and the sum.
struct CrashWriter {
    let database: String
    let keyFile: String
    let replica: String
    let syncInterval: Duration
    let rate: Int
    let checkpointFrames: Int
    let snapshotInterval: Duration

    /// The body of row `id`; the campaign computes the same text.
    static func body(of id: Int) -> String {
        let unit = "row \(id) "
        let length = (id * 7919) % 6000 + 20
        return String(String(repeating: unit, count: length / unit.count + 1).prefix(length))
    }

    func run() async throws {
        guard !database.isEmpty, !keyFile.isEmpty, !replica.isEmpty else {
            throw DatabaseError(.invalidArgument, "writer needs --database, --key-file and --replica")
        }
        var configuration = DatabaseService.Configuration(metricsName: "crash")
        var replicator = ReplicatorConfiguration(snapshotInterval: snapshotInterval, retention: nil)
        replicator.checkpointFrameCount = checkpointFrames
        configuration.replication = .init(
            store: try FolderReplicaStore(root: replica), syncInterval: syncInterval, replicator: replicator)
        let service = try DatabaseService(path: database, keyFile: keyFile, configuration: configuration)
        let last = try await service.pool.write { db -> Int in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS ledger(k INTEGER PRIMARY KEY CHECK (k = 1), count INTEGER NOT NULL,
                    total INTEGER NOT NULL);
                INSERT OR IGNORE INTO ledger VALUES (1, 0, 0)
                """)
            return try db.scalar("SELECT coalesce(max(id), 0) FROM note", as: Int.self) ?? 0
        }
        let serving = Task { try await service.run() }
        try await service.replicator?.syncNow()
        emit("ready \(last)")
        let pause = rate > 0 ? Duration.nanoseconds(1_000_000_000 / rate) : .zero
        var id = last + 1
        let clock = ContinuousClock()
        var next = clock.now
        while !serving.isCancelled {
            let row = id
            try await service.pool.write { db in
                try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", row, Self.body(of: row))
                try db.execute("UPDATE ledger SET count = count + 1, total = total + ? WHERE k = 1", row)
            }
            emit("ack \(row) \(Int64(Date().timeIntervalSince1970 * 1000))")
            id += 1
            if pause > .zero {
                next += pause
                if next > clock.now { try await Task.sleep(until: next, clock: clock) } else { next = clock.now }
            }
        }
    }

    /// One line on standard output, written at once (the campaign reads it while the process runs).
    private func emit(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
#endif
