#if Services  // trait Services (Package.swift), which turns on Replication
import Foundation
import SQLCipherKit
import SQLCipherKitServices
#if canImport(Glibc)
import Glibc
#endif

/// The writer processes of the power-loss exploration (Tests/PowerLoss/powerloss.py, Docs/Durability.md): each
/// commits `commits` transactions and prints `ack <label>` on standard output (one `write(2)`, which the recorder marks
/// in its trace) after each call returned, so every acknowledged commit can be looked for in every crash state.
///
/// - `pool`: a ``DatabasePool`` (WAL) commits.
/// - `queue`: a ``DatabaseQueue`` on a database in the rollback-journal mode `journal` (`delete` by default) commits.
/// - `hand-over`: a ``DatabaseService`` (no timer) commits, hands over the key its pending key file holds
///   (``DatabaseService/rotateIfPending()``: `ack rotated`), and commits again under the new key.
///
/// Each transaction inserts row `id` of `note` with the body ``CrashWriter/body(of:)`` and adds `id` to the single row
/// of `ledger`, as the replication crash campaign's writer does; a whole database holds ids 1…n, every body as
/// written, and the ledger's count n and total n(n+1)/2.
struct PowerLossWriter {
    let mode: String
    let database: String
    let keyFile: String
    let commits: Int
    let journal: String

    func run() async throws {
        guard !database.isEmpty, !keyFile.isEmpty, commits >= 0 else {
            throw DatabaseError(.invalidArgument, "power-loss needs --database, --key-file and --commits")
        }
        switch mode {
        case "pool":
            let pool = try DatabasePool(path: database, keyProvider: .file(keyFile))
            try await commitAll(from: try await prepare(pool), to: pool)
            pool.close()
        case "queue":
            let queue = try DatabaseQueue(path: database, keyProvider: .file(keyFile))
            let journalMode = journal
            try await queue.writeWithoutTransaction { db in
                let taken = try db.scalar("PRAGMA journal_mode = \(journalMode)", as: String.self)
                guard taken?.lowercased() == journalMode else {
                    throw DatabaseError(.invalidState, "the database did not take journal_mode \(journalMode)")
                }
            }
            try await commitAll(from: try await prepare(queue), to: queue)
            queue.close()
        case "hand-over":
            let configuration = DatabaseService.Configuration(keyFileCheckInterval: nil, metricsName: "power-loss")
            let service = try DatabaseService(path: database, keyFile: keyFile, configuration: configuration)
            let first = try await prepare(service.pool)
            try await commitAll(from: first, to: service.pool)
            guard try await service.rotateIfPending() else {
                throw DatabaseError(.invalidState, "no pending key was handed over")
            }
            emit("ack rotated")
            try await commitAll(from: first + commits, to: service.pool)
            service.pool.close()
        default:
            throw DatabaseError(.invalidArgument, "unknown power-loss mode \(mode): pool, queue or hand-over")
        }
    }

    /// Creates the tables when missing; returns the next id.
    private func prepare(_ writer: some DatabaseWriter) async throws -> Int {
        try await writer.write { db -> Int in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS ledger(k INTEGER PRIMARY KEY CHECK (k = 1), count INTEGER NOT NULL,
                    total INTEGER NOT NULL);
                INSERT OR IGNORE INTO ledger VALUES (1, 0, 0)
                """)
            return (try db.scalar("SELECT coalesce(max(id), 0) FROM note", as: Int.self) ?? 0) + 1
        }
    }

    private func commitAll(from first: Int, to writer: some DatabaseWriter) async throws {
        for id in first..<(first + commits) {
            try await writer.write { db in
                try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, CrashWriter.body(of: id))
                try db.execute("UPDATE ledger SET count = count + 1, total = total + ? WHERE k = 1", id)
            }
            emit("ack \(id)")
        }
    }

    /// One line on standard output in one `write(2)`.
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
