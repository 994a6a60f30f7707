#if Replication  // trait Replication (Package.swift)
import Foundation

/// What a restore downloads: a generation's snapshot, then its segments up to the restore point.
struct RestorePlan: Sendable {
    let generation: ReplicaGeneration
    let snapshot: ReplicaSnapshot
    let segments: [ReplicaSegment]
    let point: RestorePoint

    /// Chooses the restore point for `target`, then the latest snapshot that serves it, and checks that every
    /// segment in between is in the store.
    ///
    /// - Throws: ``ReplicationError`` (`notFound` when there is no such point; `damaged` naming the first missing
    ///   object and the last restore point before it).
    init(catalog: ReplicaCatalog, target: RestoreTarget) throws {
        let (generation, index) = try Self.choose(catalog, target)
        let snapshots = generation.snapshots.filter { $0.index <= index }
        guard let snapshot = snapshots.last else {
            throw ReplicationError(
                .notFound,
                "generation \(generation.name) has no snapshot at or before index \(index)"
                    + Self.lastGoodHint(generation, before: index))
        }
        var segments: [ReplicaSegment] = []
        if index >= snapshot.replayFromIndex {
            for wanted in snapshot.replayFromIndex...index {
                guard let segment = generation.segment(at: wanted) else {
                    throw ReplicationError(
                        .damaged,
                        "the log segment \(generation.name)/\(wanted) is missing (no object "
                            + "\(ReplicaLayout.generationPrefix(generation.name))wal/"
                            + "\(ReplicaLayout.padded(wanted, 10))-…); restore stopped"
                            + Self.lastGoodHint(generation, before: wanted))
                }
                segments.append(segment)
            }
        }
        self.generation = generation
        self.snapshot = snapshot
        self.segments = segments
        point = RestorePoint(generation: generation.name, index: index, time: generation.time(of: index))
    }

    private static func choose(_ catalog: ReplicaCatalog, _ target: RestoreTarget) throws -> (ReplicaGeneration, Int) {
        switch target {
        case .latest:
            guard let generation = catalog.generations.last(where: { !$0.snapshots.isEmpty }) else {
                throw ReplicationError(.notFound, "the replica has no complete generation (no snapshot); nothing to restore")
            }
            return (generation, lastIndex(of: generation))
        case .generation(let name):
            let generation = try named(catalog, name)
            return (generation, lastIndex(of: generation))
        case .point(let name, let index):
            return (try named(catalog, name), index)
        case .time(let date):
            var best: RestorePoint?
            for generation in catalog.generations {
                for range in generation.restorePointRanges {
                    // Times grow with the index: the last point of the range at or before the date.
                    var low = range.lowerBound
                    var high = range.upperBound
                    var found: Int?
                    while low <= high {
                        let middle = (low + high) / 2
                        if generation.time(of: middle) <= date {
                            found = middle
                            low = middle + 1
                        } else {
                            high = middle - 1
                        }
                    }
                    if let found {
                        let point = generation.restorePoint(at: found)!
                        if best.map({ point.time >= $0.time }) ?? true { best = point }
                    }
                }
            }
            guard let best, let generation = catalog.generation(named: best.generation) else {
                let earliest = catalog.generations.compactMap(\.firstRestorePoint).min { $0.time < $1.time }
                throw ReplicationError(
                    .notFound,
                    "the replica has no restore point at or before \(ISO8601.string(date))"
                        + (earliest.map { "; the earliest is \($0)" } ?? ""))
            }
            return (generation, best.index)
        }
    }

    private static func named(_ catalog: ReplicaCatalog, _ name: String) throws -> ReplicaGeneration {
        guard let generation = catalog.generation(named: name) else {
            throw ReplicationError(.notFound, "the replica has no generation \(name)")
        }
        return generation
    }

    /// The generation's last index, whether or not every segment before it is present (a gap is then reported).
    private static func lastIndex(of generation: ReplicaGeneration) -> Int {
        max(generation.segments.last?.index ?? 0, generation.snapshots.last?.index ?? 0)
    }

    /// "; the last good restore point is …" for a restore that stopped at `index`: the last restore point before
    /// it.
    static func lastGoodHint(_ generation: ReplicaGeneration, before index: Int) -> String {
        let candidates = generation.restorePointRanges.compactMap { range -> Int? in
            range.lowerBound < index ? min(range.upperBound, index - 1) : nil
        }
        guard let last = candidates.max(), let point = generation.restorePoint(at: last) else {
            return "; this generation has no restore point before it"
        }
        return "; the last good restore point is \(point)"
    }
}
#endif
