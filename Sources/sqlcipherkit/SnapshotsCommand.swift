#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Foundation
import SQLCipherKitReplication

/// `sqlcipherkit snapshots`: a replica's generations, snapshots and restore points (``ReplicaCatalog``).
struct SnapshotsCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshots",
        abstract: "List a replica's generations, snapshots and restore points.",
        discussion: CipherOptions.withFoldedNote("""
            Reads the replica's listing and its small manifests (no snapshot or log segment is downloaded) and \
            shows, per generation (in the order of their sequence numbers): when and why it started, its \
            snapshots, the restore points it can restore (as index ranges, with their times by the writing \
            host's clock), missing log segments and other problems. With the key (--key-file…) every manifest's \
            and segment's MAC is checked, and objects that do not verify count as no restore point; without, \
            checksums only. A replica URL under which nothing is stored is an error (exit 1): a typo in the \
            folder, bucket or prefix must not read as an empty replica. `sqlcipherkit restore` takes a time \
            (--at) or a generation and index (--generation, --index).

            Example:
              sqlcipherkit snapshots file:///mnt/replica/notes
              sqlcipherkit snapshots file:///mnt/replica/notes --json
            """)
    )

    @Argument(help: ArgumentHelp("The replica: file:///path or s3://BUCKET/PREFIX.", valueName: "url"))
    var replica: String

    @OptionGroup(title: "Replica")
    var replicaOptions: ReplicaOptions

    @OptionGroup(title: "Key (optional: to authenticate the replica)")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        try validateReplicaURL(replica)
    }

    func run() throws {
        let keys: [VerificationKey] = try key.loadOptionalKey().map { verificationKey in
            [try key.verificationKey(verificationKey, cipher: cipher)]
        } ?? []
        let replica = Replica(store: try replicaOptions.store(self.replica))
        let url = self.replica
        let catalog = try waitFor {
            do {
                let catalog = try await replica.catalog(verifyingWith: keys)
                if catalog.isEmpty {
                    throw ReplicationError(.notFound, "nothing is stored under \(url)", remedy: .checkReplicaURL)
                }
                // With a key, a listing in which nothing verifies is not an answer: the key is not the one the
                // database had (or every generation was altered). restore says the same with status 3.
                if !keys.isEmpty, let newest = catalog.generations.last,
                   catalog.generations.allSatisfy({ $0.authenticity == .failed }) {
                    throw ReplicationError(
                        .notAuthentic,
                        "no generation of \(url) verifies with " + keys.map(\.name).joined(separator: ", "),
                        remedy: .verifyWithKeyOfGeneration(newest.name))
                }
                return catalog
            } catch let error as ReplicationError {
                throw commandFailure(for: error)
            }
        }
        let listing = ReplicaListing(replica: self.replica, catalog: catalog)
        Output.setJSONResult(listing)
        guard !Output.isJSON else { return }
        if listing.generations.isEmpty { Output.result("\(self.replica): no generation") }
        if !keys.isEmpty || !listing.generations.isEmpty {
            Output.result(keys.isEmpty
                ? "checksums checked only: no key given, so authenticity was not checked"
                : "authenticated with \(keys[0].name) (generations it does not verify say so)")
        }
        for generation in listing.generations {
            Output.result("generation \(generation.name), sequence \(generation.sequence)"
                + " (started \(generation.createdAt ?? "?") by its host's clock)"
                + (generation.reason.map { ": \($0)" } ?? "")
                + (generation.reasonDetail.map { " (\($0))" } ?? "")
                + (generation.authenticity.map { ", \($0)" } ?? ""))
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
        if let newest = listing.newestPoint {
            Output.result("newest point: \(newest.generation)/\(newest.index) (\(newest.time))")
        }
        if !catalog.format1Generations.isEmpty {
            Output.result(
                "\(catalog.format1Generations.count) generation(s) of replica format 1 (written before generations"
                    + " were numbered and authenticated) are not read by this version")
        }
        if !listing.unknownKeys.isEmpty {
            Output.result("\(listing.unknownKeys.count) object(s) are not the replica's (left alone)")
        }
    }
}

/// What `snapshots --json` prints.
struct ReplicaListing: Encodable, Sendable {
    struct Generation: Encodable, Sendable {
        let name: String
        let sequence: Int
        @Nullable var createdAt: String?
        @Nullable var reason: String?
        @Nullable var reasonDetail: String?
        /// "authenticated with NAME", "does not verify", or null without a key.
        @Nullable var authenticity: String?
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
    let isAuthenticated: Bool
    let generations: [Generation]
    @Nullable var newestPoint: RestorePointReport?
    let unknownKeys: [String]

    init(replica: String, catalog: ReplicaCatalog) {
        self.replica = replica
        isAuthenticated = catalog.isAuthenticated
        unknownKeys = catalog.unknownKeys
        newestPoint = catalog.newestPoint.map(RestorePointReport.init)
        generations = catalog.generations.map { generation in
            let authenticity: String? = switch generation.authenticity {
            case .notChecked: nil
            case .verified(let name): "authenticated with \(name)"
            case .failed: "does not verify with the key given"
            }
            return Generation(
                name: generation.name, sequence: generation.sequence,
                createdAt: generation.createdAt?.replicaText,
                reason: generation.reason?.rawValue, reasonDetail: generation.reasonDetail,
                authenticity: authenticity, previousGeneration: generation.previousGeneration,
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
