#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Dispatch
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sqlcipherkit replicate`: the sidecar replicator (``Replicator/init(databasePath:keyProvider:cipherSettings:store:configuration:)``).
struct ReplicateCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "replicate",
        abstract: "Ship an encrypted database continuously to a replica, until SIGTERM.",
        discussion: CipherOptions.withFoldedNote("""
            Runs next to the service that writes the database (which must be in WAL mode): every --sync-interval \
            it uploads the new log frames, as they are on disk (encrypted: nothing is decrypted, the key is used \
            only to hold a read transaction), checkpoints once they are shipped, and keeps a snapshot of the file \
            per --snapshot-interval. Its read transaction keeps the service's own checkpoints from copying frames \
            it has not shipped (a TRUNCATE or RESTART checkpoint of the service then reports busy). On SIGTERM or \
            SIGINT it ships what is left (within --shutdown-timeout), says up to which restore point, and exits. \
            Store failures are logged and retried; the database is never blocked by them. Every object is \
            authenticated with a key derived from the database key (restore --key-file checks it).

            One replicator per replica: it takes the replica's lease (lease.json) and refuses to start while \
            another live replicator holds it (exit 1, naming it); one that died on this machine is taken over at \
            once, one on another machine after --lease-duration without renewal. It exits non-zero when \
            replication stops for good: the key no longer opens the database (exit 3), another replicator took \
            the lease (a promoted follower: exit 1, naming its generation). See Docs/Replication.md.

            Example:
              sqlcipherkit replicate notes.db --key-file notes.key \\
                  --to file:///mnt/replica/notes
              sqlcipherkit replicate notes.db --key-env NOTES_KEY \\
                  --to file:///mnt/replica/notes --sync-interval 5s
            """)
    )

    @Argument(help: ArgumentHelp("The database (in WAL mode).", valueName: "database"))
    var database: String

    @Option(name: .customLong("to"), help: ArgumentHelp("The replica: file:///path or s3://BUCKET/PREFIX.", valueName: "url"))
    var replica: String

    @OptionGroup(title: "Replica")
    var replicaOptions: ReplicaOptions

    @OptionGroup(title: "Replication")
    var replication: ReplicatorOptions

    @OptionGroup(title: "Key")
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
        let key = try key.loadKey()
        let settings = try cipher.settings(for: key)
        guard FileFacts.isNonEmptyFile(database) else {
            throw CommandFailure("\(database) does not exist or is empty; nothing to replicate", kind: "missingFile")
        }
        let store = try replicaOptions.store(replica)
        let configuration = replication.configuration(label: "sqlcipherkit.replicate")
        let replicator = Replicator(
            databasePath: database, keyProvider: .fixed(key), cipherSettings: settings, store: store,
            configuration: configuration)
        let stopRequests = StopSignals()
        let database = database
        let replica = replica
        let summary = try waitFor { () async throws -> ReplicationSummary in
            do {
                try await replicator.start()
                return try await superviseReplication(
                    replicator, database: database, replica: replica, stopRequests: stopRequests
                ) { first in
                    "replicating \(database) to \(replica): generation \(first.generation ?? "none"), index"
                        + " \(first.lastIndex ?? 0); SIGTERM or SIGINT ships what is left and stops"
                }
            } catch let error as ReplicationError {
                try? await replicator.stop()
                throw commandFailure(for: error)
            }
        }
        Output.setJSONResult(summary)
        if !Output.isJSON {
            Output.result(
                "stopped: \(database) shipped to \(replica) up to generation \(summary.generation ?? "none"), index"
                    + " \(summary.lastIndex.map(String.init) ?? "none")"
                    + (summary.unshippedFrameCount > 0 ? " (\(summary.unshippedFrameCount) frames not shipped)" : ""))
        }
    }
}

/// How a replicator ships: the options `replicate` and `promote` share.
struct ReplicatorOptions: ParsableArguments {
    @Option(help: ArgumentHelp("How often new commits are shipped (500ms, 1s, 1m…).", valueName: "duration"))
    var syncInterval = DurationArgument(argument: "1s")!

    @Option(help: ArgumentHelp("How often a new snapshot is taken (24h by default).", valueName: "duration"))
    var snapshotInterval = DurationArgument(argument: "24h")!

    @Option(help: ArgumentHelp("Snapshots older than this are removed, with what only they need (7d).", valueName: "duration"))
    var retention = DurationArgument(argument: "7d")!

    @Option(help: ArgumentHelp("Keep at most this many snapshots (no limit by default).", valueName: "count"))
    var retainSnapshots: Int?

    @Option(help: ArgumentHelp("How long shipping what is left may take at shutdown.", valueName: "duration"))
    var shutdownTimeout = DurationArgument(argument: "30s")!

    @Option(help: ArgumentHelp(
        "How long the replica's lease lasts without renewal (a replicator on another machine waits this long for a"
            + " live holder to renew it); at most 10m.", valueName: "duration"))
    var leaseDuration = DurationArgument(argument: "15s")!

    func validate() throws {
        guard syncInterval.duration > .zero else { throw ValidationError("--sync-interval must be more than 0") }
        guard leaseDuration.duration > .zero, leaseDuration.duration <= .seconds(600) else {
            // A newcomer on another machine waits at most 10 minutes for a lease to be renewed, whatever it states.
            throw ValidationError("--lease-duration must be more than 0 and at most 10m")
        }
        if let retainSnapshots, retainSnapshots < 1 {
            throw ValidationError("--retain-snapshots must be at least 1, not \(retainSnapshots)")
        }
    }

    /// The replicator's configuration, logging notices and worse to standard error under `label`.
    func configuration(label: String) -> ReplicatorConfiguration {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .notice
        var configuration = ReplicatorConfiguration(
            syncInterval: syncInterval.duration, snapshotInterval: snapshotInterval.duration,
            retention: ReplicaRetention(maximumAge: retention.duration, maximumSnapshotCount: retainSnapshots),
            shutdownTimeout: shutdownTimeout.duration, logger: logger)
        configuration.leaseDuration = leaseDuration.duration
        return configuration
    }
}

/// Runs a started replicator until SIGTERM or SIGINT (then it ships what is left), or until replication stops for
/// good on its own (a key that no longer opens the database, a lease taken over): the process must not stay alive as
/// if it replicated. `announce` words the line printed after the first sync.
func superviseReplication(
    _ replicator: Replicator, database: String, replica: String, stopRequests: StopSignals,
    announce: (ReplicationStatus) -> String
) async throws -> ReplicationSummary {
    let first = try await replicator.syncNow()
    Output.message(announce(first))
    let task = Task { try await replicator.run() }
    await withTaskGroup(of: Bool.self) { group in
        group.addTask { _ = await task.result; return true }
        group.addTask { await stopRequests.wait(); return false }
        // A stop request cancels replication (which then ships what is left), so the first child ends too;
        // replication ending by itself cancels the wait for a signal.
        if await group.next() == false { task.cancel() }
        group.cancelAll()
    }
    try await task.value
    return ReplicationSummary(database: database, replica: replica, status: await replicator.status)
}

/// What `replicate --json` reports when it stops.
struct ReplicationSummary: Encodable, Sendable {
    let database: String
    let replica: String
    @Nullable var generation: String?
    @Nullable var lastIndex: Int?
    let shippedBytes: Int64
    let unshippedFrameCount: Int
    let gapCount: Int
    @Nullable var lastSuccessfulSync: String?

    init(database: String, replica: String, status: ReplicationStatus) {
        self.database = database
        self.replica = replica
        generation = status.generation
        lastIndex = status.lastIndex
        shippedBytes = status.shippedByteCount
        unshippedFrameCount = status.unshippedFrameCount
        gapCount = status.gapCount
        lastSuccessfulSync = status.lastSuccessfulSync?.replicaText
    }
}

/// SIGTERM and SIGINT turned into a stop request: the replicator ships what is left instead of dying mid-upload.
///
/// `@unchecked Sendable`: the signal sources are only kept alive here, never touched after `init`.
final class StopSignals: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]
    private let requested = AsyncStream<Void>.makeStream()

    init() {
        let continuation = requested.continuation
        sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            return source
        }
    }

    /// Returns at the first signal, or when the task is cancelled.
    func wait() async {
        for await _ in requested.stream { return }
    }
}
#endif
