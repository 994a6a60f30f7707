#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `lease.json`: which replicator writes the replica. One writer per replica: two replicators shipping into one
/// prefix (a systemd unit and a manual run; two hosts on a shared volume) would write different segments under the
/// same indexes, and a restore could then only stop where they diverge.
///
/// Nothing in it is secret, and it is not authenticated: someone who can write to the store can stop replication by
/// writing a lease (as they could by deleting objects), but cannot make a restore give a wrong state.
struct LeaseRecord: Codable, Sendable, Equatable {
    var format: Int
    /// The replicator's random identity (32 hex digits), new for each ``Replicator``.
    var holder: String
    var host: String
    /// The kernel's boot identity, the process's PID namespace and its start time: with them a replicator on the
    /// same machine tells a holder that died (its process is gone) from one that is alive, at once.
    var bootID: String?
    var pidNamespace: String?
    var pid: Int32
    var processStart: UInt64?
    /// The generation it writes (`nil` before its first).
    var generation: String?
    /// Counts renewals: a holder renews while it runs, so a lease that stays the same for longer than
    /// ``durationMilliseconds`` belongs to a replicator that stopped.
    var renewal: Int
    var durationMilliseconds: Int64
    /// When it was last renewed, by the holder's clock (for people: never compared with another clock).
    var renewedAtMilliseconds: Int64

    /// `host pid N (generation G, renewed T by its clock)`.
    var holderDescription: String {
        "replicator \(holder.prefix(8)) on \(host), process \(pid)"
            + (generation.map { ", writing generation \($0)" } ?? "")
            + ", renewed at \(ISO8601.string(Date(milliseconds: renewedAtMilliseconds))) by its clock"
    }
}

/// The process a lease names, as this machine can tell.
struct ProcessIdentity: Sendable {
    let host: String
    let bootID: String?
    let pidNamespace: String?
    let pid: Int32
    let processStart: UInt64?

    static let current: ProcessIdentity = {
        var name = [UInt8](repeating: 0, count: 256)
        let host = name.withUnsafeMutableBufferPointer { buffer in
            gethostname(UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), buffer.count)
        } == 0 ? String(decoding: name.prefix { $0 != 0 }, as: UTF8.self) : "unknown"
        let pid = getpid()
        return ProcessIdentity(
            host: host, bootID: readTrimmed("/proc/sys/kernel/random/boot_id"),
            pidNamespace: readLink("/proc/self/ns/pid"), pid: pid, processStart: startTime(of: pid))
    }()

    /// What a record's holder is, seen from here.
    enum Judgement: Equatable {
        /// Its process runs on this machine, in this PID namespace, since the lease was taken.
        case alive
        /// Its process is gone (or the PID belongs to a newer process).
        case dead
        /// Another machine, container or boot: only time tells (a lease not renewed for its duration).
        case unknown
    }

    func judge(_ record: LeaseRecord) -> Judgement {
        guard record.host == host, let bootID, record.bootID == bootID, let pidNamespace,
              record.pidNamespace == pidNamespace, let recorded = record.processStart
        else { return .unknown }
        guard let start = Self.startTime(of: record.pid), start == recorded else { return .dead }
        // This very process: alive while that replicator holds it (one that was dropped without stopping is gone).
        if record.pid == pid && start == processStart {
            return ReplicaLease.liveHolders.withLock { $0.contains(record.holder) } ? .alive : .dead
        }
        return .alive
    }

    /// Field 22 of `/proc/PID/stat`: the process's start time in clock ticks since boot.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let text = readTrimmed("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces), from field 3 on.
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    private static func readTrimmed(_ path: String) -> String? {
        guard let file = try? ReadOnlyFile(path: path), let bytes = try? file.read(count: 4096, at: 0) else {
            return nil
        }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The lease as one replicator holds it: taken when it starts, checked before every sync (a replicator that lost
/// it stops: ``ReplicationError/Kind/fenced``), renewed while it runs, given back when it stops.
///
/// Where the store writes conditionally (AWS S3's `If-None-Match`/`If-Match`, a folder store's lock) two
/// replicators starting at the same moment cannot both take it. Where it cannot (OpenStack Swift's S3 API), each
/// reads its write back; two that start within one round trip may both pass, and the one whose write was overwritten
/// stops at its next sync, having written at most the start of a generation that no restore chooses
/// (``ReplicaCatalog`` refuses two generations with one sequence number unless one is named).
actor ReplicaLease {
    let store: any ReplicaStore
    let holder: String
    let identity: ProcessIdentity
    let duration: Duration
    private(set) var record: LeaseRecord?
    private var lastWrittenAt: Date?

    init(store: any ReplicaStore, duration: Duration, identity: ProcessIdentity = .current) {
        self.store = store
        self.duration = duration
        self.identity = identity
        holder = Hex.string((0..<16).map { _ in UInt8.random(in: 0...255) })
    }

    var isHeld: Bool { record != nil }

    /// The holders of this process that hold their lease now: another replicator of the same process judges a
    /// lease by them (its process is alive either way).
    static let liveHolders = Locked<Set<String>>([])

    /// Forgets the lease without giving it back, as a process that dies does.
    func abandon() {
        if record != nil { _ = Self.liveHolders.withLock { $0.remove(holder) } }
        record = nil
    }

    /// The longest a newcomer waits for a holder on another machine to renew, whatever duration the lease states:
    /// the lease object is writable by anyone with access to the bucket, and a stated duration of years must not
    /// keep replication from starting, silently, for years.
    static let longestWait = Duration.seconds(600)

    /// Takes the lease: free, given back, ours already, or its holder provably dead; a holder on another machine
    /// is given the lease's duration (at most ``longestWait``) to renew it (read again after `wait(duration)`,
    /// `waiting` told first so that the wait is not silent); `force` takes it whatever (a promotion fences the old
    /// primary).
    ///
    /// - Throws: ``ReplicationError`` (`leaseHeld`, naming the holder); the store's errors.
    func acquire(
        generation: String?, now: Date, force: Bool = false,
        waiting: @Sendable (_ holder: String, _ duration: Duration) -> Void = { _, _ in },
        wait: @Sendable (Duration) async throws -> Void
    ) async throws {
        for _ in 0..<4 {
            let current = try await store.versionedObject(ReplicaLayout.leaseKey)
            let existing = current.flatMap { try? JSONDecoder().decode(LeaseRecord.self, from: Data($0.bytes)) }
            if let existing, existing.holder != holder, !force {
                switch identity.judge(existing) {
                case .alive:
                    throw held(by: existing)
                case .dead:
                    break
                case .unknown:
                    // Only time tells: a live holder renews within its lease's duration.
                    let stated = Duration.milliseconds(max(0, existing.durationMilliseconds))
                    let duration = min(stated, Self.longestWait)
                    waiting(existing.holderDescription, duration)
                    try await wait(duration)
                    let again = try await store.versionedObject(ReplicaLayout.leaseKey)
                    let later = again.flatMap { try? JSONDecoder().decode(LeaseRecord.self, from: Data($0.bytes)) }
                    if let later, later.holder != existing.holder || later.renewal != existing.renewal {
                        throw held(by: later)
                    }
                    if again?.bytes != current?.bytes { continue }
                }
            }
            var next = LeaseRecord(
                format: replicaFormat, holder: holder, host: identity.host, bootID: identity.bootID,
                pidNamespace: identity.pidNamespace, pid: identity.pid, processStart: identity.processStart,
                generation: generation, renewal: (existing?.renewal ?? 0) + 1,
                durationMilliseconds: Int64(duration.components.seconds * 1000
                    + duration.components.attoseconds / 1_000_000_000_000_000),
                renewedAtMilliseconds: now.milliseconds)
            if existing?.holder == holder { next.renewal = max(next.renewal, (record?.renewal ?? 0) + 1) }
            if try await write(next, replacing: current) {
                record = next
                lastWrittenAt = now
                _ = Self.liveHolders.withLock { $0.insert(holder) }
                return
            }
        }
        let current = try await store.versionedObject(ReplicaLayout.leaseKey)
        if let existing = current.flatMap({ try? JSONDecoder().decode(LeaseRecord.self, from: Data($0.bytes)) }) {
            throw held(by: existing)
        }
        throw ReplicationError(.leaseHeld, "the replica's lease changed at every attempt to take it")
    }

    /// Before a sync: the lease must still be ours (otherwise the replicator stops for good); renewed when a third of
    /// its duration has passed, or when the generation it names changed.
    ///
    /// - Throws: ``ReplicationError`` (`fenced`, naming the new holder and its generation); the store's errors.
    func check(generation: String?, now: Date) async throws {
        guard var mine = record else { return }
        let current = try await store.versionedObject(ReplicaLayout.leaseKey)
        guard let current else {
            // Gone (removed by hand): taken again, as on a start.
            abandon()
            try await acquire(generation: generation, now: now, wait: { _ in })
            return
        }
        let found = try? JSONDecoder().decode(LeaseRecord.self, from: Data(current.bytes))
        guard let found, found.holder == holder else {
            abandon()
            throw ReplicationError(
                .fenced,
                "this replicator no longer holds the replica's lease: "
                    + (found.map { "it is held by \($0.holderDescription)" } ?? "lease.json was replaced")
                    + "; it stops and writes nothing more", remedy: .replicaMovedOn)
        }
        let isDue = lastWrittenAt.map { now.timeIntervalSince($0) >= duration.seconds / 3 } ?? true
        guard isDue || found.generation != generation else { return }
        mine.generation = generation
        mine.renewal = found.renewal + 1
        mine.renewedAtMilliseconds = now.milliseconds
        if try await write(mine, replacing: current) {
            record = mine
            lastWrittenAt = now
        } else {
            // Changed between the read and the write: whoever wrote it holds it now.
            try await check(generation: generation, now: now)
        }
    }

    /// Gives the lease back when it is still ours (a replicator started next takes it at once).
    func release() async {
        defer { abandon() }
        guard record != nil, let current = try? await store.versionedObject(ReplicaLayout.leaseKey),
              let found = try? JSONDecoder().decode(LeaseRecord.self, from: Data(current.bytes)), found.holder == holder
        else { return }
        try? await store.delete([ReplicaLayout.leaseKey])
    }

    /// Writes the record in place of `current` (conditionally where the store can, then read back either way).
    ///
    /// - Returns: Whether the lease now holds `record` (`false`: another write came first).
    private func write(_ record: LeaseRecord, replacing current: (bytes: [UInt8], version: String?)?) async throws -> Bool {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let bytes = Array(try encoder.encode(record))
        let condition: WriteCondition? = switch current {
        case nil: .absent
        case let current? where current.version != nil: .version(current.version!)
        default: nil
        }
        var outcome = ConditionalWrite.unsupported
        if let condition { outcome = try await store.putIf(condition, ReplicaLayout.leaseKey, bytes: bytes) }
        switch outcome {
        case .conditionFailed:
            return false
        case .unsupported:
            try await store.put(ReplicaLayout.leaseKey, bytes: bytes)
        case .written:
            break
        }
        // Read back: without conditional writes this is what tells two writers apart.
        return try await store.versionedObject(ReplicaLayout.leaseKey)?.bytes == bytes
    }

    private func held(by record: LeaseRecord) -> ReplicationError {
        ReplicationError(
            .leaseHeld,
            "another replicator holds the replica's lease (\(record.holderDescription)); two replicators writing one"
                + " replica would fork it, so this one does not start", remedy: .stopOtherReplicator)
    }
}
#endif
