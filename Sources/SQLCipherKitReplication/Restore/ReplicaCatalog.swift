#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// What a replica holds: its generations, their snapshots and restore points. Read from the store's listing and the
/// small manifests; no snapshot part or log segment is downloaded.
///
/// ```swift
/// let catalog = try await Replica(store: FolderReplicaStore(root: "/mnt/replica")).catalog()
/// for generation in catalog.generations {
///     print(generation.name, generation.restorePointRanges)
/// }
/// ```
public struct ReplicaCatalog: Sendable {
    /// Every generation with a readable manifest, oldest first.
    public let generations: [ReplicaGeneration]
    /// Keys under `generations/` that this layout does not make (never deleted by retention).
    public let unknownKeys: [String]

    /// The newest generation that can be restored.
    public var latestRestorableGeneration: ReplicaGeneration? {
        generations.last { $0.isRestorable }
    }

    /// The generation called `name`.
    public func generation(named name: String) -> ReplicaGeneration? {
        generations.first { $0.name == name }
    }

    /// Lists the store and reads the manifests.
    ///
    /// - Throws: ``ReplicationError`` from the store; a damaged manifest is not thrown but recorded in
    ///   ``ReplicaGeneration/problems``.
    public static func load(from store: any ReplicaStore) async throws -> ReplicaCatalog {
        var manifests: Set<String> = []
        var snapshotManifests: [String: Set<Int>] = [:]
        var parts: [String: [Int: [PartObject]]] = [:]
        var segments: [String: [ReplicaSegment]] = [:]
        var unknown: [String] = []
        var names: Set<String> = []
        for object in try await store.list(prefix: ReplicaLayout.generationsPrefix) {
            switch ReplicaLayout.parse(object.key) {
            case .generationManifest(let generation)?:
                manifests.insert(generation)
                names.insert(generation)
            case .snapshotManifest(let generation, let index)?:
                snapshotManifests[generation, default: []].insert(index)
                names.insert(generation)
            case .snapshotPart(let generation, let index, let part, let sha256)?:
                parts[generation, default: [:]][index, default: []].append(
                    PartObject(key: object.key, part: part, sha256: sha256, byteCount: object.size))
                names.insert(generation)
            case .segment(let generation, let index, let milliseconds, let startsLog, let sha256)?:
                segments[generation, default: []].append(ReplicaSegment(
                    index: index, shippedAt: Date(milliseconds: milliseconds), byteCount: object.size,
                    startsLog: startsLog, key: object.key, sha256: sha256))
                names.insert(generation)
            case nil:
                unknown.append(object.key)
            }
        }
        var generations: [ReplicaGeneration] = []
        for name in names.sorted() {
            var problems: [String] = []
            var manifest: GenerationManifest?
            if manifests.contains(name) {
                let key = ReplicaLayout.generationManifestKey(name)
                do {
                    manifest = try ManifestCoding.decode(GenerationManifest.self, from: try await store.get(key), key: key)
                } catch let error as ReplicationError where error.kind == .damaged || error.kind == .notFound {
                    problems.append(error.message)
                }
            } else {
                problems.append("no \(ReplicaLayout.generationManifestName): the generation was never completed")
            }
            var snapshots: [ReplicaSnapshot] = []
            for index in (snapshotManifests[name] ?? []).sorted() {
                let key = ReplicaLayout.snapshotManifestKey(name, index: index)
                do {
                    let snapshot = try ManifestCoding.decode(SnapshotManifest.self, from: try await store.get(key), key: key)
                    guard snapshot.index == index else {
                        throw ReplicationError(.damaged, "\(key) names index \(snapshot.index); the object is damaged")
                    }
                    snapshots.append(ReplicaSnapshot(manifest: snapshot, generation: name, partObjects: parts[name]?[index] ?? []))
                } catch let error as ReplicationError where error.kind == .damaged || error.kind == .notFound {
                    problems.append(error.message)
                }
            }
            generations.append(ReplicaGeneration(
                name: name, manifest: manifest, snapshots: snapshots,
                segments: (segments[name] ?? []).sorted { $0.index < $1.index }, problems: problems,
                incompleteSnapshotIndexes: Set((parts[name] ?? [:]).keys).subtracting(snapshotManifests[name] ?? [])
                    .sorted()))
        }
        return ReplicaCatalog(generations: inOrder(generations), unknownKeys: unknown)
    }

    /// Oldest first: by start time, and among generations started in the same millisecond, each after the one
    /// its manifest says it follows.
    static func inOrder(_ generations: [ReplicaGeneration]) -> [ReplicaGeneration] {
        var ordered = generations.sorted { ($0.createdAt, $0.name) < ($1.createdAt, $1.name) }
        var index = 0
        var swapsLeft = ordered.count * ordered.count  // a cycle of "follows" (a damaged replica) must not hang
        while index < ordered.count {
            let candidate = ordered[index]
            if swapsLeft > 0, let later = ordered[(index + 1)...].firstIndex(where: {
                $0.createdAt == candidate.createdAt && candidate.previousGeneration == $0.name
            }) {
                swapsLeft -= 1
                ordered.swapAt(index, later)
                continue
            }
            index += 1
        }
        return ordered
    }
}

/// A part object as listed.
struct PartObject: Sendable, Hashable {
    let key: String
    let part: Int
    let sha256: String
    let byteCount: Int64
}

/// One generation: a snapshot of the database, then every log frame since, in segments.
public struct ReplicaGeneration: Sendable {
    /// Its name: the UTC time it started and a random suffix (`20261124T100000123Z-1f2e3d4c`).
    public let name: String
    /// Complete snapshots (their `snapshot.json` was written and checks out), by index.
    public let snapshots: [ReplicaSnapshot]
    /// Its log segments, by index.
    public let segments: [ReplicaSegment]
    /// What is wrong with it, as found by listing (a damaged manifest, a snapshot never completed).
    public let problems: [String]
    /// Snapshots whose parts exist but whose `snapshot.json` does not (an upload that did not finish).
    public let incompleteSnapshotIndexes: [Int]

    let manifest: GenerationManifest?

    init(
        name: String, manifest: GenerationManifest?, snapshots: [ReplicaSnapshot], segments: [ReplicaSegment],
        problems: [String], incompleteSnapshotIndexes: [Int]
    ) {
        self.name = name
        self.manifest = manifest
        self.snapshots = snapshots
        self.segments = segments
        self.problems = problems
        self.incompleteSnapshotIndexes = incompleteSnapshotIndexes
    }

    /// When it started (from its manifest; from its name when the manifest is missing).
    public var createdAt: Date {
        manifest.map { Date(milliseconds: $0.createdAtMilliseconds) } ?? .distantPast
    }

    /// Why it started: the first generation, a log another connection restarted, a gap after an outage, …
    public var reason: String? { manifest?.reason }

    /// The generation it follows, when the replicator knew it.
    public var previousGeneration: String? { manifest?.previousGeneration }

    /// The replicated database's page size, in bytes.
    public var pageSize: Int? { manifest?.pageSize }

    /// 0 for a fully encrypted file; the plaintext header's size (usually 32) otherwise.
    public var plaintextHeaderSize: Int? { manifest?.plaintextHeaderSize }

    /// The salt of a plaintext-header database (which the file does not store; not secret).
    public var plaintextHeaderSalt: [UInt8]? { manifest?.plaintextHeaderSalt.flatMap(Hex.bytes) }

    /// The engine that wrote it (`SQLCipher 4.19.0 community, SQLite 3.53.4`).
    public var engine: String? { manifest?.engine }

    /// Segment indexes missing between the first and the last one present.
    public var missingSegmentIndexes: [Int] {
        guard let first = segments.first?.index, let last = segments.last?.index else { return [] }
        let present = Set(segments.map(\.index))
        return (first...last).filter { !present.contains($0) }
    }

    /// The indexes that can be restored, as ranges: from each snapshot to the end of the unbroken run of segments
    /// after it.
    public var restorePointRanges: [ClosedRange<Int>] {
        guard manifest != nil else { return [] }
        let present = Set(segments.map(\.index))
        let lastIndex = segments.last?.index ?? 0
        var ranges: [ClosedRange<Int>] = []
        for snapshot in snapshots {
            var end = snapshot.replayFromIndex - 1
            while end < lastIndex && present.contains(end + 1) { end += 1 }
            guard end >= snapshot.index else { continue }
            ranges.append(snapshot.index...end)
        }
        return ranges.sorted { $0.lowerBound < $1.lowerBound }.reduce(into: []) { merged, range in
            if let last = merged.last, range.lowerBound <= last.upperBound + 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
    }

    /// Whether some point of it can be restored.
    public var isRestorable: Bool { !restorePointRanges.isEmpty }

    /// The number of restore points.
    public var restorePointCount: Int { restorePointRanges.reduce(0) { $0 + $1.count } }

    /// The restore point at `index`, when there is one.
    public func restorePoint(at index: Int) -> RestorePoint? {
        guard restorePointRanges.contains(where: { $0.contains(index) }) else { return nil }
        return RestorePoint(generation: name, index: index, time: time(of: index))
    }

    /// The first restore point.
    public var firstRestorePoint: RestorePoint? {
        restorePointRanges.first.flatMap { restorePoint(at: $0.lowerBound) }
    }

    /// The last restore point.
    public var latestRestorePoint: RestorePoint? {
        restorePointRanges.last.flatMap { restorePoint(at: $0.upperBound) }
    }

    /// Every restore point, oldest first.
    public var restorePoints: [RestorePoint] {
        restorePointRanges.flatMap { $0.map { RestorePoint(generation: name, index: $0, time: time(of: $0)) } }
    }

    /// When the database was as restore point `index` has it: the time its segment was read (every commit in it
    /// happened before), or the snapshot's time.
    func time(of index: Int) -> Date {
        if let segment = segment(at: index) { return segment.shippedAt }
        return snapshots.last { $0.index == index }?.createdAt ?? createdAt
    }

    func segment(at index: Int) -> ReplicaSegment? {
        var low = 0
        var high = segments.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if segments[middle].index == index { return segments[middle] }
            if segments[middle].index < index { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    /// The total size of its objects as listed.
    public var byteCount: Int64 {
        segments.reduce(0) { $0 + $1.byteCount } + snapshots.reduce(0) { $0 + $1.byteCount }
    }
}

/// A complete snapshot: the main file's bytes, in parts.
public struct ReplicaSnapshot: Sendable {
    /// The first restore point it serves.
    public var index: Int { manifest.index }
    /// When it was taken.
    public var createdAt: Date { Date(milliseconds: manifest.createdAtMilliseconds) }
    /// The main file's size.
    public var byteCount: Int64 { manifest.byteCount }
    /// Whether it is the database exactly at ``index`` (taken right after a complete checkpoint), rather than a
    /// copy that serves restore points from ``index`` on once the log since its start is applied.
    public var isExact: Bool { manifest.isExact }
    /// The first segment a restore applies on top of it.
    public var replayFromIndex: Int { manifest.replayFromIndex }
    /// The number of parts.
    public var partCount: Int { manifest.parts.count }

    let manifest: SnapshotManifest
    let generation: String
    let partObjects: [PartObject]

    /// The key of part `number`.
    func partKey(_ number: Int) -> String {
        ReplicaLayout.snapshotPartKey(generation, index: index, part: number, sha256: manifest.parts[number].sha256)
    }
}

/// A log segment: raw frames of one log (with the log's header first when it starts one), ending at a commit.
public struct ReplicaSegment: Sendable, Hashable {
    /// Its index in the generation (from 1).
    public let index: Int
    /// When its frames were read from the log: every commit in it happened before.
    public let shippedAt: Date
    /// Its size as listed.
    public let byteCount: Int64
    /// Whether it starts a log (its first 32 bytes are the log's header).
    public let startsLog: Bool
    /// Its key in the store.
    public let key: String
    /// The SHA-256 its name carries.
    public let sha256: String
}

/// A point a replica can restore: a generation and an index in it.
public struct RestorePoint: Sendable, Hashable, CustomStringConvertible {
    /// The generation's name.
    public let generation: String
    /// The index: the segment whose last commit the database is restored to (or the snapshot's).
    public let index: Int
    /// When the database was like this (see ``ReplicaGeneration``'s restore points).
    public let time: Date

    /// Creates a restore point.
    public init(generation: String, index: Int, time: Date) {
        self.generation = generation
        self.index = index
        self.time = time
    }

    /// `generation/index (time)`.
    public var description: String { "\(generation)/\(index) (\(ISO8601.string(time)))" }
}

extension Date {
    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// ISO 8601 text with milliseconds, UTC.
enum ISO8601 {
    static func string(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// Parses `2026-11-24T10:00:00Z` or with fractional seconds; `nil` otherwise.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
#endif
