#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// What a replica holds: its generations, their snapshots and restore points, and what is wrong with them. Read
/// from the store's listing and the small manifests; no snapshot part or log segment is downloaded.
///
/// With verification keys (``Replica/catalog(verifyingWith:)``) every manifest and every segment's MAC is checked
/// (``ReplicationError/Kind/notAuthentic`` objects count as no restore point); without, only checksums and the
/// replica's structure are.
///
/// ```swift
/// let catalog = try await Replica(store: replicaStore(for: "file:///mnt/replica")).catalog()
/// for generation in catalog.generations {
///     print(generation.name, generation.restorePointRanges)
/// }
/// ```
public struct ReplicaCatalog: Sendable {
    /// Every generation in the store, oldest first: by sequence number, never by a host's clock.
    public let generations: [ReplicaGeneration]
    /// Keys this layout does not make (never deleted by retention), generations of format 1 among them.
    package let unknownKeys: [String]
    /// Nothing at all is stored under the replica's root.
    package let isEmpty: Bool
    /// Generations written in format 1 (by a version before generations were numbered and authenticated).
    package let format1Generations: [String]
    /// The names of the keys the catalog checked MACs with; empty when it checked integrity only.
    let keyNames: [String]

    /// The generation called `name`.
    package func generation(named name: String) -> ReplicaGeneration? {
        generations.first { $0.name == name }
    }

    /// Whether MACs were checked (with the keys given to ``Replica/catalog(verifyingWith:)``).
    package var isAuthenticated: Bool { !keyNames.isEmpty }

    /// The newest point the replica holds, whether or not it can be restored: the last index of the generation
    /// with the highest sequence number; with keys, of the highest that verifies (a generation that does not is
    /// no point of this replica's, and must not be shown as how recent it is).
    package var newestPoint: RestorePoint? {
        let candidates = isAuthenticated ? generations.filter { $0.authenticity != .failed } : generations
        guard let top = candidates.last else { return nil }
        return RestorePoint(generation: top.name, index: top.lastIndex, time: top.time(of: top.lastIndex))
    }

    // MARK: - Loading

    /// Lists the store and reads the manifests; with `keys`, checks every MAC.
    ///
    /// - Throws: ``ReplicationError`` from the store. What is wrong with the replica is recorded in each
    ///   generation's ``ReplicaGeneration/problems``, not thrown.
    static func load(from store: any ReplicaStore, keys: [VerificationKey]) async throws -> ReplicaCatalog {
        try await load(from: store, authentications: AuthenticationCache(keys: keys))
    }

    /// Lists the store and reads the manifests, checking MACs with `authentications`.
    static func load(
        from store: any ReplicaStore, authentications: AuthenticationCache
    ) async throws -> ReplicaCatalog {
        var listed: [String: ListedGeneration] = [:]
        var unknown: [String] = []
        var format1: Set<String> = []
        let objects = try await store.list(prefix: "")
        for object in objects {
            guard object.key.hasPrefix(ReplicaLayout.generationsPrefix) else {
                if object.key != ReplicaLayout.leaseKey { unknown.append(object.key) }
                continue
            }
            switch ReplicaLayout.parse(object.key) {
            case .generationManifest(let generation)?:
                listed[generation, default: ListedGeneration()].hasManifest = true
            case .snapshotManifest(let generation, let index)?:
                listed[generation, default: ListedGeneration()].snapshotManifests.insert(index)
            case .snapshotPart(let generation, let index, let part, let sha256)?:
                listed[generation, default: ListedGeneration()].parts[index, default: []].append(
                    PartObject(key: object.key, part: part, sha256: sha256, byteCount: object.size))
            case .segment(let name)?:
                listed[name.generation, default: ListedGeneration()].segments.append(
                    ReplicaSegment(name: name, key: object.key, byteCount: object.size))
            case nil:
                let folder = object.key.dropFirst(ReplicaLayout.generationsPrefix.count).prefix { $0 != "/" }
                if ReplicaLayout.isFormat1GenerationName(String(folder)) { format1.insert(String(folder)) }
                unknown.append(object.key)
            }
        }
        var authentications = authentications
        var generations: [ReplicaGeneration] = []
        let names = listed.keys.sorted { (ReplicaLayout.sequence(ofGeneration: $0)!, $0) < (ReplicaLayout.sequence(ofGeneration: $1)!, $1) }
        for name in names {
            generations.append(try await ReplicaGeneration.load(
                name: name, listed: listed[name]!, store: store, authentications: &authentications))
        }
        checkLinks(&generations)
        return ReplicaCatalog(
            generations: generations, unknownKeys: unknown, isEmpty: objects.isEmpty,
            format1Generations: format1.sorted(), keyNames: authentications.keyNames)
    }

    /// Each generation names the point of the one before it that it follows: that point must carry the MAC the
    /// link records (compared as listed: no key needed), and the generation before must not go on past it (a
    /// replicator that kept writing after another took over).
    private static func checkLinks(_ generations: inout [ReplicaGeneration]) {
        for position in generations.indices {
            guard let link = generations[position].manifest?.previous,
                  let previous = generations.firstIndex(where: { $0.name == link.generation })
            else { continue }
            let before = generations[previous]
            let recorded = link.index == 0 ? before.chainValue(at: 0) : before.segment(at: link.index)?.name.mac
                ?? before.chainValue(at: link.index)
            if let recorded, recorded != link.chain {
                generations[position].hasBrokenLink = true
                generations[position].problems.append(
                    "it says it follows \(link.generation)/\(link.index), but that point carries another MAC: the two"
                        + " generations do not belong to one history")
            }
            let later = before.segments.filter { $0.index > link.index }
            if !later.isEmpty {
                generations[previous].problems.append(
                    "\(later.count) segment(s) after index \(link.index), the point generation"
                        + " \(generations[position].name) follows: written by a replicator after another took over"
                        + " (not part of the replica's history)")
            }
        }
    }

    /// What the listing says of one generation.
    struct ListedGeneration {
        var hasManifest = false
        var snapshotManifests: Set<Int> = []
        var parts: [Int: [PartObject]] = [:]
        var segments: [ReplicaSegment] = []
    }

    /// The authentication of each verification key for each salt, derived once (a passphrase's costs a PBKDF2).
    struct AuthenticationCache {
        private let keys: [VerificationKey]
        /// A replicator's own: the authentication of its database.
        private let fixed: ReplicaAuthentication?
        private var derived: [String: [(name: String, authentication: ReplicaAuthentication)]] = [:]

        init(keys: [VerificationKey]) {
            self.keys = keys
            fixed = nil
        }

        init(fixed authentication: ReplicaAuthentication) {
            keys = []
            fixed = authentication
        }

        var keyNames: [String] { fixed == nil ? keys.map(\.name) : ["the database's key"] }

        mutating func authentications(salt: [UInt8]?) -> [(name: String, authentication: ReplicaAuthentication)] {
            // The database's own key, derived with its own salt: a generation of another salt does not verify.
            if let fixed { return [("the database's key", fixed)] }
            let cacheKey = salt.map(Hex.string) ?? ""
            if let found = derived[cacheKey] { return found }
            let made = keys.compactMap { key in
                (try? ReplicaAuthentication(verificationKey: key, salt: salt)).map { (key.name, $0) }
            }
            derived[cacheKey] = made
            return made
        }
    }

    // MARK: - Choosing what to restore

    /// The generation and index `target` names, checked so that a restore gives the newest authentic state it
    /// asks for or stops: nothing newer than the point chosen may be unreadable (unless the target names the
    /// generation), and every object from the snapshot to the point must check out.
    ///
    /// - Throws: ``ReplicationError``: `notFound` (an empty replica, no such generation or point), `damaged` or
    ///   `notAuthentic` naming the object that stops it, with the last good point as the remedy.
    func plan(for target: RestoreTarget) throws -> RestorePlan {
        let (generation, index) = try choose(target)
        return try generation.plan(to: index, catalog: self)
    }

    private func choose(_ target: RestoreTarget) throws -> (ReplicaGeneration, Int) {
        switch target {
        case .latest:
            let top = try newestGeneration()
            return (top, top.lastIndex)
        case .generation(let name):
            let generation = try named(name)
            try generation.requireReadable(catalog: self)
            return (generation, generation.lastIndex)
        case .point(let name, let index):
            let generation = try named(name)
            try generation.requireReadable(catalog: self)
            guard index <= generation.lastIndex else {
                throw ReplicationError(
                    .notFound,
                    "no such restore point: generation \(name) holds points up to index \(generation.lastIndex), not"
                        + " \(index)")
            }
            return (generation, index)
        case .time(let date):
            try requireNotEmpty()
            // Newest generation first: the first one (by sequence) with a point at or before the date. A newer
            // generation that cannot be read might hold one, so it stops the restore.
            for generation in generations.reversed() {
                try generation.requireReadable(catalog: self)
                if let index = generation.lastPoint(atOrBefore: date) { return (generation, index) }
            }
            let earliest = generations.first { !$0.restorePointRanges.isEmpty }.flatMap(\.firstRestorePoint)
            throw ReplicationError(
                .notFound,
                "the replica has no restore point at or before \(ISO8601.string(date))"
                    + (earliest.map { "; the earliest is \($0)" } ?? ""))
        }
    }

    /// The generation with the highest sequence number, when it is the only one with that number, readable, and
    /// of the same replica as the one before it.
    private func newestGeneration() throws -> ReplicaGeneration {
        try requireNotEmpty()
        guard let top = generations.last else {
            throw ReplicationError(.notFound, "the replica holds no generation", remedy: .checkReplicaURL)
        }
        let rivals = generations.filter { $0.sequence == top.sequence }
        if rivals.count > 1 {
            throw ReplicationError(
                .damaged,
                "generations \(rivals.map(\.name).joined(separator: " and ")) both claim sequence number"
                    + " \(top.sequence) (two replicators started at once on this replica; one was stopped); restore"
                    + " stopped", remedy: .nameRestorePoint(lastGood: nil))
        }
        try top.requireReadable(catalog: self)
        // The generation to compare with is the nearest older one whose manifest can be trusted: with keys, one
        // that verifies (a forged manifest slipped in below a copied generation must not vouch for it); without,
        // any that reads.
        if let before = generations.dropLast().last(where: { $0.manifest != nil && $0.authenticity != .failed }),
           let topManifest = top.manifest,
           let beforeManifest = before.manifest, topManifest.replica != beforeManifest.replica {
            throw ReplicationError(
                isAuthenticated ? .notAuthentic : .damaged,
                "generation \(top.name) belongs to another replica (\(topManifest.replica)) than generation"
                    + " \(before.name) before it (\(beforeManifest.replica)): its objects were copied into this one;"
                    + " restore stopped", remedy: .nameRestorePoint(lastGood: before.latestRestorePoint))
        }
        return top
    }

    // MARK: - A generation being started

    /// The generations at the top of the replica that a replicator is still starting, oldest first: each
    /// ``ReplicaGeneration/mayBeStarting`` (its `generation.json` reads and verifies, no `snapshot.json` of it is
    /// listed, nothing of it is provably damaged) and alone with its sequence number. Empty when the newest
    /// generation has a complete snapshot, or is damaged: a generation without a complete snapshot below one that
    /// has one is not being started (its replicator gave up on it), and stays a problem of the catalog.
    package var startingGenerations: [ReplicaGeneration] {
        var count = 0
        for generation in generations.reversed() {
            guard generation.mayBeStarting,
                  generations.count(where: { $0.sequence == generation.sequence }) == 1
            else { break }
            count += 1
        }
        return Array(generations.suffix(count))
    }

    /// `.latest` as a follower reads it: the plan of ``plan(for:)`` for `.latest`, unless the newest generations are
    /// still being started (``startingGenerations``); then the last point of the newest generation below them, or
    /// the point of it the first of them follows when that is earlier (what its old primary shipped after the new
    /// one began is not part of the replica's history).
    ///
    /// - Returns: The plan, and the generations being started that it leaves out (empty when it is `.latest`'s).
    /// - Throws: What ``plan(for:)`` throws for `.latest` on the generations below the starting ones; `notFound`
    ///   when every generation is still being started (nothing can be restored yet); `plan(for: .latest)`'s own
    ///   error when a starting generation belongs to another replica than the one below it.
    func planFollowingStart() throws -> (plan: RestorePlan, starting: [ReplicaGeneration]) {
        let starting = startingGenerations
        guard let first = starting.first else { return (try plan(for: .latest), []) }
        let settled = ReplicaCatalog(
            generations: Array(generations.dropLast(starting.count)), unknownKeys: unknownKeys, isEmpty: isEmpty,
            format1Generations: format1Generations, keyNames: keyNames)
        guard !settled.generations.isEmpty else {
            throw ReplicationError(
                .notFound,
                "the replica's first generation \(first.name) is still being started (its first snapshot is not"
                    + " complete yet): nothing can be restored before it is", remedy: .checkReplicaURL)
        }
        var plan = try settled.plan(for: .latest)
        // Objects copied in from another replica are not a generation being started: .latest says why.
        if starting.contains(where: { $0.replicaIdentity != plan.generation.replicaIdentity }) {
            return (try self.plan(for: .latest), [])
        }
        if let link = first.manifest?.previous, link.generation == plan.generation.name,
           link.index < plan.point.index {
            plan = try plan.generation.plan(to: link.index, catalog: settled)
        }
        return (plan, starting)
    }

    private func requireNotEmpty() throws {
        if isEmpty {
            throw ReplicationError(.notFound, "the replica is empty", remedy: .checkReplicaURL)
        }
        if generations.isEmpty {
            let older = format1Generations.isEmpty
                ? "" : "; it holds \(format1Generations.count) generation(s) of format 1, which this version does not"
                    + " read (restore them with the version that wrote them)"
            throw ReplicationError(.notFound, "the replica holds no generation" + older, remedy: .checkReplicaURL)
        }
    }

    private func named(_ name: String) throws -> ReplicaGeneration {
        try requireNotEmpty()
        guard let generation = generation(named: name) else {
            throw ReplicationError(.notFound, "the replica has no generation \(name)")
        }
        return generation
    }

    /// The newest restore point of the generations before `generation` (by sequence), for a remedy.
    func lastGoodPoint(before generation: ReplicaGeneration) -> RestorePoint? {
        generations.filter { $0.sequence < generation.sequence }.reversed().lazy.compactMap(\.latestRestorePoint).first
    }
}

/// A part object as listed.
struct PartObject: Sendable, Hashable {
    let key: String
    let part: Int
    let sha256: String
    let byteCount: Int64
}

/// Whether a generation's objects were checked against their MACs, and with which key.
package enum Authenticity: Sendable, Hashable {
    /// No key was given: checksums and structure only.
    case notChecked
    /// The manifest verifies with the key of this name.
    case verified(by: String)
    /// No given key verifies the manifest (or there is no readable manifest to verify).
    case failed
}

/// One generation: a snapshot of the database, then every log frame since, in segments.
public struct ReplicaGeneration: Sendable {
    /// Its name: its sequence number and a random suffix (`0000000007-1f2e3d4c`).
    public let name: String
    /// Its sequence number: one more than the replica's newest generation when it started.
    package let sequence: Int
    /// Complete snapshots that can be used (their `snapshot.json` reads, and verifies when keys were given), by
    /// index.
    package let snapshots: [ReplicaSnapshot]
    /// Its log segments as listed, by index.
    package let segments: [ReplicaSegment]
    /// What is wrong with it: a damaged or missing manifest, a snapshot never completed, an object that does not
    /// verify, a segment after the point the next generation follows.
    public internal(set) var problems: [String]
    /// Whether its MACs were checked, and how that went.
    package let authenticity: Authenticity
    /// The restore points it can restore, as index ranges: from each usable snapshot to the end of the unbroken run
    /// of usable segments after it.
    public let restorePointRanges: [ClosedRange<Int>]

    let manifest: GenerationManifest?
    /// The MAC chain's value at each index it could be checked (with keys).
    let chain: [Int: String]

    /// The MAC chain's value at `index` as checked, or as the objects record it (a segment's name, a snapshot's
    /// manifest, the generation manifest's MAC for index 0).
    func chainValue(at index: Int) -> String? {
        chain[index] ?? segment(at: index)?.name.mac ?? snapshots.first { $0.index == index }?.manifest.chain
            ?? (index == 0 ? manifestMAC : nil)
    }

    /// The MAC `generation.json` carries.
    let manifestMAC: String?
    /// Segments that cannot be used, and why: a duplicate index, a MAC that does not verify (with keys).
    let unusableSegments: [Int: (reason: String, kind: ReplicationError.Kind)]
    /// Snapshot indexes whose parts exist but whose manifest does not, or does not read.
    package let incompleteSnapshotIndexes: [Int]
    /// Whether any `snapshot.json` of it is listed (read or not).
    let listsSnapshotManifest: Bool
    /// Whether it names a point of the generation before it that carries another MAC than its link records.
    var hasBrokenLink = false

    /// Whether it may be a generation its replicator is still starting rather than a damaged one: its
    /// `generation.json` reads (and verifies, with keys), no `snapshot.json` of it is listed yet, and nothing of it
    /// is provably damaged (no segment that does not verify or claims an index twice, none missing between index 1
    /// and its last, a link to the generation before that checks out).
    ///
    /// A replicator writes a generation in this order: `generation.json`; then, when its checkpoint copied the
    /// whole log, the snapshot's parts (index 0) and its `snapshot.json`, and only after that segments; otherwise
    /// (another connection's reader held older frames) the log from its first frame in segments from index 1, then
    /// the parts of the snapshot at the index whose segment reached the pinned frame, then its `snapshot.json`.
    /// Objects appear whole (a store's put is atomic), so until the first `snapshot.json` is listed the
    /// generation is incomplete, and that alone proves no damage: a reader that looks at that moment sees exactly
    /// this. Whether it is being written or was abandoned (its replicator stopped) shows once a later generation
    /// exists: ``ReplicaCatalog/startingGenerations`` counts only generations above the newest complete one.
    var mayBeStarting: Bool {
        manifest != nil && authenticity != .failed && !listsSnapshotManifest && snapshots.isEmpty
            && unusableSegments.isEmpty && missingSegmentIndexes.isEmpty && (segments.first?.index ?? 1) == 1
            && !hasBrokenLink
    }

    /// When it started, by the writing host's clock (informative); `nil` without a readable manifest.
    package var createdAt: Date? { manifest.map { Date(milliseconds: $0.createdAtMilliseconds) } }

    /// Why it started; `nil` without a readable manifest.
    public var reason: GenerationReason? { manifest?.reason }

    /// The reason's detail (a sentence).
    package var reasonDetail: String? { manifest?.reasonDetail }

    /// The generation it follows, when there was one.
    package var previousGeneration: String? { manifest?.previous?.generation }

    /// The restore point at `index`, when it can be restored.
    public func restorePoint(at index: Int) -> RestorePoint? {
        guard restorePointRanges.contains(where: { $0.contains(index) }) else { return nil }
        return RestorePoint(generation: name, index: index, time: time(of: index))
    }

    package var pageSize: Int? { manifest?.pageSize }
    package var plaintextHeaderSize: Int? { manifest?.plaintextHeaderSize }
    package var salt: [UInt8]? { manifest?.salt.flatMap(Hex.bytes) }
    package var engine: String? { manifest?.engine }
    package var replicaIdentity: String? { manifest?.replica }

    package var firstRestorePoint: RestorePoint? {
        restorePointRanges.first.flatMap { restorePoint(at: $0.lowerBound) }
    }

    package var latestRestorePoint: RestorePoint? {
        restorePointRanges.last.flatMap { restorePoint(at: $0.upperBound) }
    }

    package var restorePointCount: Int { restorePointRanges.reduce(0) { $0 + $1.count } }

    /// The last index anything of it reaches (a segment or a snapshot), restorable or not.
    package var lastIndex: Int { max(segments.last?.index ?? 0, snapshots.last?.index ?? 0) }

    /// Segment indexes missing between the first and the last one listed.
    package var missingSegmentIndexes: [Int] {
        guard let first = segments.first?.index, let last = segments.last?.index else { return [] }
        let present = Set(segments.map(\.index))
        return (first...last).filter { !present.contains($0) }
    }

    /// The total size of its objects as listed.
    package var byteCount: Int64 {
        segments.reduce(0) { $0 + $1.byteCount } + snapshots.reduce(0) { $0 + $1.byteCount }
    }

    /// When the database was as restore point `index` has it: the time its segment was read (every commit in it
    /// happened before), or the snapshot's time; by the writing host's clock.
    func time(of index: Int) -> Date {
        if let segment = segment(at: index) { return segment.shippedAt }
        return snapshots.last { $0.index == index }?.createdAt ?? createdAt ?? .distantPast
    }

    /// The segment listed at `index` (the first, when two claim it).
    func segment(at index: Int) -> ReplicaSegment? {
        var low = 0
        var high = segments.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if segments[middle].index == index {
                var first = middle
                while first > 0 && segments[first - 1].index == index { first -= 1 }
                return segments[first]
            }
            if segments[middle].index < index { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    // MARK: - Loading

    static func load(
        name: String, listed: ReplicaCatalog.ListedGeneration, store: any ReplicaStore,
        authentications: inout ReplicaCatalog.AuthenticationCache
    ) async throws -> ReplicaGeneration {
        let sequence = ReplicaLayout.sequence(ofGeneration: name)!
        var problems: [String] = []
        var manifest: GenerationManifest?
        var manifestMAC: String?
        var authenticity = Authenticity.notChecked
        var authentication: ReplicaAuthentication?
        var chain: [Int: String] = [:]
        let isChecking = !authentications.keyNames.isEmpty
        if isChecking { authenticity = .failed }
        let manifestKey = ReplicaLayout.generationManifestKey(name)
        if listed.hasManifest {
            do {
                let stored = try StoredManifest<GenerationManifest>.decode(try await store.get(manifestKey), key: manifestKey)
                // With keys the MAC decides first (it covers the name: a manifest copied under another name does
                // not verify); without, a manifest that names another generation is damaged.
                guard isChecking || (stored.value.generation == name && stored.value.sequence == sequence) else {
                    throw ReplicationError(
                        .damaged, "\(manifestKey) names generation \(stored.value.generation); the object is damaged")
                }
                manifest = stored.value
                manifestMAC = stored.mac
                if isChecking {
                    let salt = stored.value.salt.flatMap(Hex.bytes)
                    if let (keyName, found) = authentications.authentications(salt: salt).first(where: {
                        $0.authentication.generationMAC(generation: name, jsonSHA256: stored.sha256) == stored.mac
                    }) {
                        authenticity = .verified(by: keyName)
                        authentication = found
                        chain[0] = stored.mac
                    } else {
                        problems.append(
                            "\(manifestKey) does not verify with "
                                + authentications.keyNames.joined(separator: ", ")
                                + ": written with another key, or not by a replicator holding the key")
                    }
                }
            } catch let error as ReplicationError where error.kind == .damaged || error.kind == .notFound {
                problems.append(error.reason)
            }
        } else {
            problems.append("\(manifestKey) is missing")
        }

        var snapshots: [ReplicaSnapshot] = []
        var incomplete = Set(listed.parts.keys).subtracting(listed.snapshotManifests)
        for index in listed.snapshotManifests.sorted() {
            let key = ReplicaLayout.snapshotManifestKey(name, index: index)
            do {
                let stored = try StoredManifest<SnapshotManifest>.decode(try await store.get(key), key: key)
                guard stored.value.index == index else {
                    throw ReplicationError(.damaged, "\(key) names index \(stored.value.index); the object is damaged")
                }
                if isChecking {
                    guard let authentication,
                          authentication.snapshotMAC(generation: name, index: index, jsonSHA256: stored.sha256)
                            == stored.mac
                    else {
                        throw ReplicationError(
                            .notAuthentic, "\(key) does not verify with the key that verifies its generation")
                    }
                    if let known = chain[index], known != stored.value.chain {
                        problems.append("\(key) names another chain value at index \(index) than its generation")
                    }
                    chain[index] = stored.value.chain
                }
                snapshots.append(ReplicaSnapshot(
                    manifest: stored.value, generation: name, partObjects: listed.parts[index] ?? []))
            } catch let error as ReplicationError
                where error.kind == .damaged || error.kind == .notFound || error.kind == .notAuthentic {
                problems.append(error.reason)
                incomplete.insert(index)
            }
        }
        for index in incomplete.sorted() where !listed.snapshotManifests.contains(index) {
            problems.append(
                "the snapshot at index \(index) has parts but no snapshot.json: never completed (the replicator"
                    + " stopped while writing it), or its manifest was removed")
        }

        // Segments: in index order; a duplicate index or (with keys) a MAC that does not chain on makes a segment
        // unusable. A snapshot's chain value lets checking start again after a segment retention removed.
        let segments = listed.segments.sorted { ($0.index, $0.key) < ($1.index, $1.key) }
        var unusable: [Int: (reason: String, kind: ReplicationError.Kind)] = [:]
        let counts = Dictionary(grouping: segments, by: \.index).mapValues(\.count)
        for (index, count) in counts where count > 1 {
            unusable[index] = (
                "\(count) segments claim index \(index) of generation \(name) (two replicators wrote it at once)",
                .damaged)
        }
        if isChecking {
            for segment in segments where unusable[segment.index] == nil {
                guard let authentication, let previous = chain[segment.index - 1] else {
                    unusable[segment.index] = (
                        "\(segment.key) cannot be checked: nothing verified comes before it", .notAuthentic)
                    continue
                }
                let expected = authentication.segmentMAC(segment.name, previous: previous)
                if expected == segment.name.mac {
                    if let claimed = chain[segment.index], claimed != expected {
                        problems.append(
                            "the snapshot at index \(segment.index) names another chain value than \(segment.key)")
                    }
                    chain[segment.index] = expected
                } else {
                    unusable[segment.index] = (
                        "\(segment.key) does not verify (its MAC does not chain on from the object before it):"
                            + " altered, replayed or not written by a replicator holding the key", .notAuthentic)
                }
            }
        }
        problems += unusable.keys.sorted().map { unusable[$0]!.reason }
        let usable = Set(segments.map(\.index)).subtracting(unusable.keys)
        let lastListed = segments.last?.index ?? 0
        var ranges: [ClosedRange<Int>] = []
        if manifest != nil && authenticity != .failed {
            for snapshot in snapshots {
                var end = snapshot.replayFromIndex - 1
                while end < lastListed && usable.contains(end + 1) { end += 1 }
                guard end >= snapshot.index else { continue }
                ranges.append(snapshot.index...end)
            }
        }
        return ReplicaGeneration(
            name: name, sequence: sequence, snapshots: snapshots, segments: segments, problems: problems,
            authenticity: authenticity, restorePointRanges: merged(ranges), manifest: manifest, chain: chain,
            manifestMAC: manifestMAC, unusableSegments: unusable, incompleteSnapshotIndexes: incomplete.sorted(),
            listsSnapshotManifest: !listed.snapshotManifests.isEmpty)
    }

    private static func merged(_ ranges: [ClosedRange<Int>]) -> [ClosedRange<Int>] {
        ranges.sorted { $0.lowerBound < $1.lowerBound }.reduce(into: []) { merged, range in
            if let last = merged.last, range.lowerBound <= last.upperBound + 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
    }

    // MARK: - Restoring

    /// Stops a restore that would read this generation when its manifest is missing or damaged, or (with keys)
    /// does not verify.
    func requireReadable(catalog: ReplicaCatalog) throws {
        let lastGood = catalog.lastGoodPoint(before: self)
        guard manifest != nil else {
            throw ReplicationError(
                .damaged,
                "generation \(name) (sequence \(sequence)) cannot be read: "
                    + (problems.first ?? "its generation.json is missing") + "; restore stopped",
                remedy: .nameRestorePoint(lastGood: lastGood))
        }
        if authenticity == .failed {
            throw ReplicationError(
                .notAuthentic,
                "generation \(name) (sequence \(sequence)) does not verify with "
                    + catalog.keyNames.joined(separator: ", ")
                    + ": it was written with another key, or not by a replicator holding the key; restore stopped",
                remedy: .verifyWithKeyOfGeneration(name))
        }
    }

    /// The plan that restores `index`: the newest usable snapshot at or before it, then every segment up to it.
    ///
    /// - Throws: ``ReplicationError``: `damaged` or `notAuthentic` naming the first object that is missing or does
    ///   not check out, with the last good point.
    func plan(to index: Int, catalog: ReplicaCatalog) throws -> RestorePlan {
        let point = RestorePoint(generation: name, index: index, time: time(of: index))
        guard let newestSnapshot = snapshots.last(where: { $0.index <= index }) else {
            if let oldest = snapshots.first {
                // Retention removed what restored it: not damage, a point the replica no longer holds.
                throw ReplicationError(
                    .notFound,
                    "no such restore point: generation \(name) has no snapshot at or before index \(index) (its"
                        + " earliest is at index \(oldest.index); retention removes older ones)")
            }
            let found = problems.isEmpty ? "" : " (" + problems.joined(separator: "; ") + ")"
            throw ReplicationError(
                .damaged,
                "generation \(name) (sequence \(sequence)) has no complete snapshot\(found): its first snapshot never"
                    + " completed (the replicator stopped while starting the generation), was damaged or was removed;"
                    + " restore stopped",
                remedy: .nameRestorePoint(lastGood: catalog.lastGoodPoint(before: self)))
        }
        // The newest snapshot whose segments up to the point all check out.
        var firstProblem: (index: Int, message: String, kind: ReplicationError.Kind)?
        for snapshot in snapshots.reversed() where snapshot.index <= index {
            var segments: [ReplicaSegment] = []
            var problem: (index: Int, message: String, kind: ReplicationError.Kind)?
            if index >= snapshot.replayFromIndex {
                for wanted in snapshot.replayFromIndex...index {
                    if let unusable = unusableSegments[wanted] {
                        problem = (wanted, unusable.reason, unusable.kind)
                        break
                    }
                    guard let segment = segment(at: wanted) else {
                        problem = (
                            wanted,
                            "the log segment \(name)/\(wanted) is missing (no object "
                                + "\(ReplicaLayout.generationPrefix(name))wal/\(ReplicaLayout.padded(wanted, 10))-…)",
                            .damaged)
                        break
                    }
                    segments.append(segment)
                }
            }
            if let problem {
                if firstProblem == nil || snapshot.index == newestSnapshot.index { firstProblem = problem }
                continue
            }
            return RestorePlan(generation: self, snapshot: snapshot, segments: segments, point: point)
        }
        let problem = firstProblem!
        let lastGood = lastGoodPoint(before: problem.index)
        throw ReplicationError(
            problem.kind,
            problem.message + "; restore stopped" + Self.lastGoodText(lastGood),
            remedy: .nameRestorePoint(lastGood: lastGood ?? catalog.lastGoodPoint(before: self)))
    }

    /// The last restore point whose time is at or before `date` (times grow with the index).
    func lastPoint(atOrBefore date: Date) -> Int? {
        for range in restorePointRanges.reversed() {
            var low = range.lowerBound
            var high = range.upperBound
            var found: Int?
            while low <= high {
                let middle = (low + high) / 2
                if time(of: middle) <= date {
                    found = middle
                    low = middle + 1
                } else {
                    high = middle - 1
                }
            }
            if let found { return found }
        }
        return nil
    }

    /// The last restore point of this generation before `index`.
    func lastGoodPoint(before index: Int) -> RestorePoint? {
        let candidates = restorePointRanges.compactMap { range -> Int? in
            range.lowerBound < index ? min(range.upperBound, index - 1) : nil
        }
        return candidates.max().flatMap(restorePoint(at:))
    }

    static func lastGoodText(_ point: RestorePoint?) -> String {
        point.map { "; the last good restore point is \($0)" } ?? "; this generation has no restore point before it"
    }
}

/// A complete snapshot: the main file's bytes, in parts.
package struct ReplicaSnapshot: Sendable {
    /// The first restore point it serves.
    package var index: Int { manifest.index }
    /// When it was taken, by the writing host's clock.
    package var createdAt: Date { Date(milliseconds: manifest.createdAtMilliseconds) }
    /// The main file's size.
    package var byteCount: Int64 { manifest.byteCount }
    /// Whether it is the database exactly at ``index`` (taken right after a complete checkpoint), rather than a
    /// copy that serves restore points from ``index`` on once the log since its start is applied.
    package var isExact: Bool { manifest.isExact }
    /// The first segment a restore applies on top of it.
    package var replayFromIndex: Int { manifest.replayFromIndex }
    /// The number of parts.
    package var partCount: Int { manifest.parts.count }

    let manifest: SnapshotManifest
    let generation: String
    let partObjects: [PartObject]

    /// The key of part `number`.
    func partKey(_ number: Int) -> String {
        ReplicaLayout.snapshotPartKey(generation, index: index, part: number, sha256: manifest.parts[number].sha256)
    }
}

/// A log segment: raw frames of one log (with the log's header first when it starts one), ending at a commit.
package struct ReplicaSegment: Sendable, Hashable {
    /// Its index in the generation (from 1).
    package var index: Int { name.index }
    /// When its frames were read from the log, by the writing host's clock: every commit in it happened before.
    package var shippedAt: Date { Date(milliseconds: name.milliseconds) }
    /// Its size as listed.
    package let byteCount: Int64
    /// Its key in the store.
    package let key: String

    let name: ReplicaLayout.SegmentName

    init(name: ReplicaLayout.SegmentName, key: String, byteCount: Int64) {
        self.name = name
        self.key = key
        self.byteCount = byteCount
    }

    /// Whether it starts a log (its first 32 bytes are the log's header).
    var startsLog: Bool { name.startsLog }
    /// The SHA-256 its name carries.
    var sha256: String { name.sha256 }
}

/// A point a replica can restore: a generation and an index in it.
public struct RestorePoint: Sendable, Hashable, CustomStringConvertible {
    /// The generation's name.
    public let generation: String
    /// The index: the segment whose last commit the database is restored to (or the snapshot's).
    public let index: Int
    /// When the database was like this, by the writing host's clock.
    public let time: Date

    /// Creates a restore point (a catalog gives them; ``RestoreTarget/point(generation:index:)`` names one).
    package init(generation: String, index: Int, time: Date) {
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
}
#endif
