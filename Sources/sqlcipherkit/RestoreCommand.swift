#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication

/// `sqlcipherkit restore`: a point-in-time restore from a replica (``Replica/restore(to:at:options:)``).
struct RestoreCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a database from a replica into a new file, as it was at a point in time.",
        discussion: CipherOptions.withFoldedNote("""
            Writes the replica's snapshot, then every log frame up to the restore point, byte for byte as the \
            database file was then (checkpointed). The bytes stay encrypted, so no key is needed; but only with \
            the key (--key-file…) is every object authenticated (its MAC): without one the restore checks \
            integrity only and says so. Every object is checked against its SHA-256 and every frame against the \
            log's own checksums; a damaged, missing or unauthentic object stops the restore (exit 4) naming it \
            and the last good restore point. The newest state or an error: without --at or --generation the \
            newest restore point is restored, and anything newer that cannot be read (a damaged manifest, a \
            generation whose snapshot never completed) stops the restore instead of restoring something older; \
            name a generation (and --index) to restore an older state on purpose. Generations are ordered by \
            their sequence numbers, never by a host's clock. The output names the newest point the replica \
            holds and its time. The file is written under a temporary name beside DEST (mode 0600), flushed, \
            and linked into place; an existing DEST is never touched unless --replace is given (then it is \
            replaced atomically). With a key the result is opened and checked first (quick_check, \
            cipher_integrity_check on SQLCipher 4.2+): a key that does not open it, or is not the key its \
            generation was written with, exits with 3 and nothing is written. `sqlcipherkit snapshots URL` \
            lists the points. A progress line shows on a terminal (--progress plain: timestamped lines for logs).

            With --follow (the key is needed) DEST becomes a follower's copy: restored once, then kept current \
            every --poll-interval by applying each new log segment as the primary ships it, and each new \
            generation by its snapshot, until SIGTERM or SIGINT. Readers (`sqlcipherkit exec DEST`, a service's \
            read-only pool) see one shipped commit at a time, never a half-applied one; nothing else may write to \
            DEST. A damaged or unauthentic object, or the store being down, stops the applying at the last good \
            point: DEST keeps serving it, and the error is logged. The copy's state file DEST.follower lets a \
            follower started again go on where it was, and `sqlcipherkit promote URL DEST` make it the primary. \
            Exit 0 when it stopped current (its last look at the store succeeded), 1 when it stopped stale \
            (saying how stale), 3 when the key does not open the copy or verify the replica.

            Example:
              sqlcipherkit restore file:///mnt/replica/notes notes-restored.db
              sqlcipherkit restore file:///mnt/replica/notes notes.db \\
                  --at 2026-11-24T10:00:00Z --key-file notes.key
              sqlcipherkit restore file:///mnt/replica/notes notes.db \\
                  --generation 0000000007-1f2e3d4c --index 42
              sqlcipherkit restore s3://backups/notes /srv/notes-follower.db \\
                  --follow --key-file notes.key
            """)
    )

    @Argument(help: ArgumentHelp("The replica: file:///path or s3://BUCKET/PREFIX.", valueName: "url"))
    var replica: String

    @Argument(help: ArgumentHelp("The file to write (must not exist unless --replace).", valueName: "destination"))
    var destination: String

    @OptionGroup(title: "Replica")
    var replicaOptions: ReplicaOptions

    @Option(help: ArgumentHelp(
        "The database as it was at this time (ISO 8601, e.g. 2026-11-24T10:00:00Z): the last restore point at or"
            + " before it.", valueName: "time"))
    var at: String?

    @Option(help: ArgumentHelp("The generation to restore from (its last point unless --index).", valueName: "name"))
    var generation: String?

    @Option(help: ArgumentHelp("The restore point's index in --generation.", valueName: "n"))
    var index: Int?

    @Flag(help: "Replace the destination when it exists (atomically, once the new file is complete and verified).")
    var replace = false

    @Flag(help: ArgumentHelp(
        "Keep DEST current: apply each new segment and generation as the primary ships them, until SIGTERM (needs"
            + " the key)."))
    var follow = false

    @Option(help: ArgumentHelp("With --follow: how long to wait between two looks at the store.", valueName: "duration"))
    var pollInterval = DurationArgument(argument: "1s")!

    @OptionGroup(title: "Key (optional: to verify the restored file)")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        try validateReplicaURL(replica)
        if at != nil && (generation != nil || index != nil) {
            throw ValidationError("give either --at or --generation (with --index), not both")
        }
        if index != nil && generation == nil { throw ValidationError("--index needs --generation") }
        if let at, Date(replicaText: at) == nil {
            throw ValidationError("--at needs an ISO 8601 time such as 2026-11-24T10:00:00Z, not \(at)")
        }
        if let index, index < 0 { throw ValidationError("--index must be 0 or more, not \(index)") }
        if follow && (at != nil || generation != nil || index != nil || replace) {
            throw ValidationError(
                "--follow follows the newest point: it takes no --at, --generation, --index or --replace")
        }
        guard pollInterval.duration > .zero else { throw ValidationError("--poll-interval must be more than 0") }
    }

    var target: RestoreTarget {
        if let at, let date = Date(replicaText: at) { return .time(date) }
        if let generation, let index { return .point(generation: generation, index: index) }
        if let generation { return .generation(generation) }
        return .latest
    }

    func run() throws {
        let keys: [VerificationKey] = try key.loadOptionalKey().map { verificationKey in
            [try key.verificationKey(verificationKey, cipher: cipher)]
        } ?? []
        let replica = Replica(store: try replicaOptions.store(self.replica))
        if follow { return try runFollow(replica, key: keys.first) }
        let state = Locked(PhaseState(phase: "reading the replica's listing"))
        let progressBox = Locked<PhaseProgress?>(nil)
        let options = RestoreOptions(replacesExisting: replace, verificationKeys: keys) { progress in
            defer { progressBox.withLock { $0 }?.update() }
            state.withLock {
                $0 = progress.completedByteCount < progress.totalByteCount || keys.isEmpty
                    ? PhaseState(
                        phase: "downloading and checking", done: Int(progress.completedByteCount / 1024),
                        total: Int(progress.totalByteCount / 1024), unit: "KiB")
                    : PhaseState(phase: "verifying with the key (quick_check, cipher_integrity_check)")
            }
        }
        let destination = destination
        let target = target
        let note = "nothing changed: the replica is only read, "
            + (replace ? "\(destination) was left as it was" : "nothing was written to \(destination)")
            + " and the unfinished restore was removed"
        let progress = PhaseProgress(
            label: "restore", mode: display.progress, interruptNote: note, state: { state.withLock { $0 } })
        progressBox.withLock { $0 = progress }
        let report = try progress.run {
            try waitFor {
                do {
                    return try await replica.restore(to: destination, at: target, options: options)
                } catch let error as ReplicationError {
                    throw commandFailure(for: error)
                }
            }
        }
        let result = RestoreResult(report, replica: self.replica)
        Output.setJSONResult(result)
        if !Output.isJSON {
            Output.result(
                "restored \(self.replica) at \(result.point.generation)/\(result.point.index)"
                    + " (\(result.point.time)) into \(result.path): \(result.byteCount) bytes, snapshot"
                    + " \(result.snapshotIndex) + \(result.segmentCount) log segment(s)"
                    + (result.verifiedWith.map { ", authenticated and verified with \($0)" }
                        ?? "; integrity checked only: no key given, so the objects' authenticity was not checked"))
            if let newest = result.newestPoint {
                Output.result(
                    newest.generation == result.point.generation && newest.index == result.point.index
                        ? "the newest point the replica holds: \(newest.generation)/\(newest.index) (\(newest.time))"
                        : "not the newest point: the replica holds up to \(newest.generation)/\(newest.index)"
                            + " (\(newest.time))")
            }
        }
    }
}

extension RestoreCommand {
    /// `restore --follow`: a ``ReplicaFollower`` until SIGTERM or SIGINT.
    func runFollow(_ replica: Replica, key verification: VerificationKey?) throws {
        guard let verification else {
            throw CommandFailure(
                "--follow needs the database's key (--key-file, --key-env or --key-stdin): the copy is opened and"
                    + " every object authenticated with it; nothing was written", status: .usage, kind: "missingKey")
        }
        var logger = Logger(label: "sqlcipherkit.follow") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .notice
        let follower = ReplicaFollower(
            replica: replica, path: destination, key: verification,
            configuration: ReplicaFollower.Configuration(pollInterval: pollInterval.duration, logger: logger))
        let stopRequests = StopSignals()
        let source = self.replica
        let destination = destination
        let status = try waitFor { () async throws -> ReplicaFollower.Status in
            do {
                let started = try await follower.start()
                Output.message(
                    "following \(source) into \(destination): at \(started.point.map { "\($0)" } ?? "nothing yet")"
                        + (started.lastError.map { " (stale: \($0))" } ?? "")
                        + "; SIGTERM or SIGINT stops (the copy stays; `sqlcipherkit promote` makes it the primary)")
                let task = Task { try await follower.run() }
                await withTaskGroup(of: Bool.self) { group in
                    group.addTask { _ = await task.result; return true }
                    group.addTask { await stopRequests.wait(); return false }
                    if await group.next() == false { task.cancel() }
                    group.cancelAll()
                }
                let outcome = await task.result
                let status = await follower.status
                await follower.stop()
                try outcome.get()
                return status
            } catch let error as ReplicationError {
                await follower.stop()
                throw commandFailure(for: error)
            } catch {
                await follower.stop()
                throw error
            }
        }
        let result = FollowResult(status, replica: source, path: destination)
        Output.setJSONResult(result)
        guard result.isCurrent else {
            throw CommandFailure(
                "stopped following: \(destination) holds \(result.point.map { "\($0.generation)/\($0.index)" } ?? "nothing")"
                    + " but the last look at the store failed (\(status.lastError ?? "unknown")); the copy may be"
                    + " \(Int(result.stalenessSeconds)) s stale", kind: "stale")
        }
        if !Output.isJSON {
            Output.result(
                "stopped following: \(destination) holds \(result.point.map { "\($0.generation)/\($0.index) (\($0.time))" } ?? "nothing"),"
                    + " current at the last look; \(destination).follower lets a follower go on from here")
        }
    }
}

/// What `restore --follow --json` reports when it stops.
struct FollowResult: Encodable, Sendable {
    let replica: String
    let path: String
    /// The restore point the copy holds.
    @Nullable var point: RestorePointReport?
    /// When the copy was last known current (the last successful look at the store).
    @Nullable var lastCaughtUp: String?
    /// Seconds since then.
    let stalenessSeconds: Double
    /// Whether the last look at the store succeeded (the copy held everything shipped then).
    let isCurrent: Bool
    @Nullable var lastError: String?

    init(_ status: ReplicaFollower.Status, replica: String, path: String) {
        self.replica = replica
        self.path = path
        point = status.point.map(RestorePointReport.init)
        lastCaughtUp = status.lastCaughtUp?.replicaText
        let staleness = status.staleness()
        stalenessSeconds = Double(staleness.components.seconds) + Double(staleness.components.attoseconds) / 1e18
        isCurrent = status.lastError == nil && status.lastCaughtUp != nil
        lastError = status.lastError
    }
}

/// What `restore --json` reports.
struct RestoreResult: Encodable, Sendable {
    let replica: String
    let point: RestorePointReport
    let path: String
    let byteCount: Int64
    let snapshotIndex: Int
    let segmentCount: Int
    @Nullable var verifiedWith: String?
    let isVerified: Bool
    /// Whether every object restored was authenticated (its MAC checked with the key).
    let isAuthenticated: Bool
    /// The newest point the replica holds (what a restore without --at/--generation restores).
    @Nullable var newestPoint: RestorePointReport?

    init(_ report: RestoreReport, replica: String) {
        self.replica = replica
        point = RestorePointReport(report.point)
        path = report.path
        byteCount = report.byteCount
        snapshotIndex = report.snapshotIndex
        segmentCount = report.segmentCount
        verifiedWith = report.verifiedWith
        isVerified = report.integrity?.isIntact ?? false
        isAuthenticated = report.authenticatedWith != nil
        newestPoint = report.newestPoint.map(RestorePointReport.init)
    }
}
#endif
