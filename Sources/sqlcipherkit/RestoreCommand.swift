#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Foundation
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

            Example:
              sqlcipherkit restore file:///mnt/replica/notes notes-restored.db
              sqlcipherkit restore file:///mnt/replica/notes notes.db \\
                  --at 2026-11-24T10:00:00Z --key-file notes.key
              sqlcipherkit restore file:///mnt/replica/notes notes.db \\
                  --generation 0000000007-1f2e3d4c --index 42
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
    }

    var target: RestoreTarget {
        if let at, let date = Date(replicaText: at) { return .time(date) }
        if let generation, let index { return .point(generation: generation, index: index) }
        if let generation { return .generation(generation) }
        return .latest
    }

    func run() throws {
        let keys: [VerificationKey] = try key.loadOptionalKey().map { verificationKey in
            [VerificationKey(
                name: key.files.first.map { "the key file \($0)" } ?? "the given key", key: verificationKey,
                settings: try cipher.settings(for: verificationKey))]
        } ?? []
        let replica = Replica(store: try replicaOptions.store(self.replica))
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
