#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Foundation
import SQLCipherKitReplication

/// `sqlcipherkit snapshots`: a replica's generations, snapshots and restore points (``ReplicaCatalog``).
struct SnapshotsCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshots",
        abstract: "List a replica's generations, snapshots and restore points.",
        discussion: """
            Reads the replica's listing and its small manifests (no snapshot or log segment is downloaded) and \
            shows, per generation: when and why it started, its snapshots, the restore points it can restore \
            (as index ranges, with their times), missing log segments and other problems. `sqlcipherkit restore` \
            takes a time (--at) or a generation and index (--generation, --index). No key is needed.

            Example:
              sqlcipherkit snapshots file:///mnt/replica/notes
              sqlcipherkit snapshots file:///mnt/replica/notes --json
            """
    )

    @Argument(help: ArgumentHelp("The replica: file:///path or s3://BUCKET/PREFIX.", valueName: "url"))
    var replica: String

    @OptionGroup(title: "Replica")
    var replicaOptions: ReplicaOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    func validate() throws {
        try validateReplicaURL(replica)
    }

    func run() throws {
        let replica = Replica(store: try replicaOptions.store(self.replica))
        let catalog = try waitFor {
            do {
                return try await replica.catalog()
            } catch let error as ReplicationError {
                throw commandFailure(for: error)
            }
        }
        let listing = ReplicaListing(replica: self.replica, catalog: catalog)
        Output.setJSONResult(listing)
        guard !Output.isJSON else { return }
        if listing.generations.isEmpty { Output.result("\(self.replica): no generation") }
        for generation in listing.generations {
            Output.result("generation \(generation.name) (started \(generation.createdAt ?? "?"))"
                + (generation.reason.map { ": \($0)" } ?? ""))
            for snapshot in generation.snapshots {
                Output.result("  snapshot at index \(snapshot.index), \(snapshot.createdAt), \(snapshot.byteCount) bytes"
                    + (snapshot.isExact ? "" : " (serves from index \(snapshot.index) on)"))
            }
            if let first = generation.firstRestorePoint, let last = generation.latestRestorePoint {
                Output.result("  restore points: \(generation.restorePointCount), index \(first.index) (\(first.time))"
                    + " to \(last.index) (\(last.time))"
                    + (generation.restorePointRanges.count > 1
                        ? "; ranges " + generation.restorePointRanges.map { "\($0[0])-\($0[1])" }.joined(separator: ", ")
                        : ""))
            } else {
                Output.result("  no restore point")
            }
            if !generation.missingSegmentIndexes.isEmpty {
                Output.result("  missing log segments: " + generation.missingSegmentIndexes.map(String.init).joined(separator: ", "))
            }
            for problem in generation.problems { Output.result("  problem: \(problem)") }
        }
        if !listing.unknownKeys.isEmpty {
            Output.result("\(listing.unknownKeys.count) object(s) under generations/ are not the replica's (left alone)")
        }
    }
}

/// What `snapshots --json` prints.
struct ReplicaListing: Encodable, Sendable {
    struct Generation: Encodable, Sendable {
        let name: String
        @Nullable var createdAt: String?
        @Nullable var reason: String?
        @Nullable var previousGeneration: String?
        @Nullable var engine: String?
        @Nullable var pageSize: Int?
        @Nullable var plaintextHeaderSize: Int?
        let snapshots: [Snapshot]
        let segmentCount: Int
        let byteCount: Int64
        let restorePointCount: Int
        let restorePointRanges: [[Int]]
        @Nullable var firstRestorePoint: RestorePointReport?
        @Nullable var latestRestorePoint: RestorePointReport?
        let missingSegmentIndexes: [Int]
        let problems: [String]
    }

    struct Snapshot: Encodable, Sendable {
        let index: Int
        let createdAt: String
        let byteCount: Int64
        let isExact: Bool
        let replayFromIndex: Int
    }

    let replica: String
    let generations: [Generation]
    let unknownKeys: [String]

    init(replica: String, catalog: ReplicaCatalog) {
        self.replica = replica
        unknownKeys = catalog.unknownKeys
        generations = catalog.generations.map { generation in
            Generation(
                name: generation.name,
                createdAt: generation.engine == nil ? nil : generation.createdAt.replicaText,
                reason: generation.reason, previousGeneration: generation.previousGeneration,
                engine: generation.engine, pageSize: generation.pageSize,
                plaintextHeaderSize: generation.plaintextHeaderSize,
                snapshots: generation.snapshots.map {
                    Snapshot(
                        index: $0.index, createdAt: $0.createdAt.replicaText, byteCount: $0.byteCount,
                        isExact: $0.isExact, replayFromIndex: $0.replayFromIndex)
                },
                segmentCount: generation.segments.count, byteCount: generation.byteCount,
                restorePointCount: generation.restorePointCount,
                restorePointRanges: generation.restorePointRanges.map { [$0.lowerBound, $0.upperBound] },
                firstRestorePoint: generation.firstRestorePoint.map(RestorePointReport.init),
                latestRestorePoint: generation.latestRestorePoint.map(RestorePointReport.init),
                missingSegmentIndexes: generation.missingSegmentIndexes, problems: generation.problems)
        }
    }
}
#endif
