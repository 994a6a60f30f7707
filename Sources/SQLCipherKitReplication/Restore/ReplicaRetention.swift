#if Replication  // trait Replication (Package.swift)
import Foundation

/// How long a replica keeps its snapshots, and with them the log segments and generations only they need.
///
/// A snapshot goes when it is older than `maximumAge` (by the time it was taken) or when `maximumSnapshotCount`
/// newer ones exist (newer: of a later generation, by sequence number, or later in its generation); the newest
/// snapshot always stays. The restore points before the oldest snapshot kept go with it.
public struct ReplicaRetention: Sendable, Hashable {
    /// Snapshots older than this are removed; `nil` keeps them whatever their age.
    package var maximumAge: Duration?
    /// At most this many snapshots are kept (the newest); `nil` for no limit.
    package var maximumSnapshotCount: Int?

    /// Creates a policy (by default: a week of snapshots).
    ///
    /// - Parameters:
    ///   - maximumAge: Snapshots older than this are removed; `nil` keeps them whatever their age.
    ///   - maximumSnapshotCount: At most this many snapshots are kept (the newest); `nil` for no limit.
    public init(maximumAge: Duration? = .seconds(7 * 24 * 3600), maximumSnapshotCount: Int? = nil) {
        self.maximumAge = maximumAge
        self.maximumSnapshotCount = maximumSnapshotCount
    }

    /// Keeps everything (what ``ReplicatorConfiguration/retention`` `nil` does).
    package static let keepEverything = ReplicaRetention(maximumAge: nil, maximumSnapshotCount: nil)
}

/// What retention removed.
package struct RetentionReport: Sendable, Hashable {
    /// Snapshots removed, as `generation/index`.
    package let removedSnapshots: [String]
    /// Generations removed whole.
    package let removedGenerations: [String]
    /// Objects removed in all.
    package let removedObjectCount: Int
}

extension Replica {
    /// Removes what `retention` no longer keeps.
    ///
    /// Objects go in an order that leaves a consistent replica at every step: segments and snapshot parts before
    /// the manifests that make them restorable. A generation without a complete snapshot that is newer than the
    /// newest kept snapshot is left alone (a replicator may be writing it), and so is `activeGeneration`.
    ///
    /// - Parameters:
    ///   - now: The time ages are measured against.
    ///   - activeGeneration: The generation a replicator is writing, never removed.
    /// - Returns: What was removed.
    /// - Throws: ``ReplicationError`` from the store, ``DatabaseError`` for a local store's file errors.
    @discardableResult
    package func applyRetention(
        _ retention: ReplicaRetention, now: Date = Date(), activeGeneration: String? = nil
    ) async throws -> RetentionReport {
        let catalog = try await catalog()
        // Newest first: by the generations' order (their sequence numbers), then by index.
        let allSnapshots = catalog.generations.reversed().flatMap { generation in
            generation.snapshots.reversed().map { (generation, $0) }
        }
        var kept: Set<String> = []
        for (rank, (generation, snapshot)) in allSnapshots.enumerated() {
            let isYoung = retention.maximumAge.map { now.timeIntervalSince(snapshot.createdAt) <= $0.seconds } ?? true
            let isWithinCount = retention.maximumSnapshotCount.map { rank < max($0, 1) } ?? true
            if rank == 0 || (isYoung && isWithinCount) { kept.insert(generation.name + "/\(snapshot.index)") }
        }
        let newestKept = allSnapshots.first?.0.sequence ?? .max
        var removedSnapshots: [String] = []
        var removedGenerations: [String] = []
        var removedCount = 0
        for generation in catalog.generations {
            let keptHere = generation.snapshots.filter { kept.contains(generation.name + "/\($0.index)") }
            var keys: [String] = []
            if keptHere.isEmpty {
                // A generation still being written has no snapshot yet and is newer than every kept one.
                if generation.name == activeGeneration
                    || (generation.snapshots.isEmpty && generation.sequence >= newestKept) { continue }
                keys = try await everyKey(of: generation.name)
                removedGenerations.append(generation.name)
                removedSnapshots += generation.snapshots.map { generation.name + "/\($0.index)" }
            } else {
                let oldest = keptHere[0]
                keys += generation.segments.filter { $0.index < oldest.replayFromIndex }.map(\.key)
                for snapshot in generation.snapshots where snapshot.index < oldest.index {
                    keys += (0..<snapshot.partCount).map(snapshot.partKey)
                    keys.append(ReplicaLayout.snapshotManifestKey(generation.name, index: snapshot.index))
                    removedSnapshots.append(generation.name + "/\(snapshot.index)")
                }
                for index in generation.incompleteSnapshotIndexes where index < oldest.index {
                    keys += try await store.list(prefix: ReplicaLayout.snapshotPrefix(generation.name, index: index))
                        .map(\.key)
                }
            }
            guard !keys.isEmpty else { continue }
            // Manifests last: until they go, what they describe is still whole.
            let manifests = keys.filter { $0.hasSuffix(".json") }
            try await store.delete(keys.filter { !$0.hasSuffix(".json") })
            let generationManifests = manifests.filter { $0.hasSuffix(ReplicaLayout.generationManifestName) }
            try await store.delete(manifests.filter { !$0.hasSuffix(ReplicaLayout.generationManifestName) })
            try await store.delete(generationManifests)
            removedCount += keys.count
        }
        return RetentionReport(
            removedSnapshots: removedSnapshots, removedGenerations: removedGenerations, removedObjectCount: removedCount)
    }

    private func everyKey(of generation: String) async throws -> [String] {
        try await store.list(prefix: ReplicaLayout.generationPrefix(generation)).map(\.key)
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
#endif
