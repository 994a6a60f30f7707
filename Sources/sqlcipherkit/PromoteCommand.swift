#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication

/// `sqlcipherkit promote`: a follower's copy becomes the primary (``ReplicaFollower/promote(pool:configuration:)``),
/// and this process its replicator.
struct PromoteCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "promote",
        abstract: "Make a follower's copy the primary: fence the old primary, catch up, and replicate the copy.",
        discussion: CipherOptions.withFoldedNote("""
            For when the primary is gone: DEST must be a follower's copy. When a running service follows it (an \
            application's database service in follower mode), promote asks that service to promote itself (a \
            request file beside DEST, which it looks for at each poll), waits for its answer (--wait for it to take \
            the request), and exits 0 once the service is the primary, or 1 with its reason. When no process has \
            the copy (stop a `restore --follow` process first), promote takes the replica's lease whoever holds it, so an old primary that \
            was only cut off stops at its next sync (exit 1, naming this generation) instead of forking the \
            replica; applies everything the old primary shipped until then; and starts a new generation that \
            follows the last point applied (reason promoted). Then it runs as DEST's replicator, as `replicate` \
            does, until SIGTERM or SIGINT: start the service that writes DEST (in WAL mode) beside it. Commits the \
            old primary made but had not shipped are lost, as with any asynchronous replica; a segment it stores \
            after the lease changed hands is not part of the replica's history (no restore uses it). Exit 3 when \
            the key does not open the copy or verify the replica. See Docs/Replication.md, "Failover".

            Example:
              sqlcipherkit promote s3://backups/notes /srv/notes.db --key-file notes.key
            """)
    )

    @Argument(help: ArgumentHelp("The replica: file:///path or s3://BUCKET/PREFIX.", valueName: "url"))
    var replica: String

    @Argument(help: ArgumentHelp("The follower's copy (it has a state file DEST.follower).", valueName: "destination"))
    var destination: String

    @Option(
        name: .customLong("wait"),
        help: ArgumentHelp(
            "When a running service follows DEST: how long to wait for it to take the request (default 60).",
            valueName: "seconds"))
    var waitSeconds: Double = 60

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
        guard waitSeconds.isFinite, waitSeconds > 0 else {
            throw ValidationError("--wait must be a positive number of seconds")
        }
    }

    func run() throws {
        let key = try key.loadKey()
        let settings = try cipher.settings(for: key)
        let store = try replicaOptions.store(replica)
        var logger = Logger(label: "sqlcipherkit.promote") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .notice
        let follower = ReplicaFollower(
            replica: Replica(store: store), path: destination,
            key: try self.key.verificationKey(key, cipher: cipher),
            configuration: ReplicaFollower.Configuration(logger: logger))
        guard FileManager.default.fileExists(atPath: follower.statePath) else {
            throw CommandFailure(
                "\(destination) is not a follower's copy (there is no \(follower.statePath)); nothing was changed:"
                    + " `sqlcipherkit restore \(replica) \(destination) --follow --key-file …` makes one",
                kind: "notAFollower")
        }
        let configuration = replication.configuration(label: "sqlcipherkit.promote")
        let stopRequests = StopSignals()
        let database = destination
        let replica = replica
        let summary = try waitFor { () async throws -> PromoteResult? in
            var promoted: RestorePoint?
            do {
                let started: ReplicaFollower.Status
                do {
                    started = try await follower.start()
                } catch let error as DatabaseError where error.kind == .busy {
                    return nil  // a process follows the copy: it is asked below
                }
                promoted = started.point
                let replicator = try await follower.promote {
                    Replicator(
                        databasePath: database, keyProvider: .fixed(key), cipherSettings: settings, store: store,
                        configuration: configuration)
                }
                promoted = await follower.status.point
                do {
                    let summary = try await superviseReplication(
                        replicator, database: database, replica: replica, stopRequests: stopRequests
                    ) { first in
                        "promoted \(database): it follows \(promoted.map { "\($0.generation)/\($0.index)" } ?? "nothing")"
                            + "; replicating it to \(replica) as generation \(first.generation ?? "none"); start the"
                            + " service that writes it; SIGTERM or SIGINT ships what is left and stops"
                    }
                    return PromoteResult(summary: summary, promotedFrom: promoted)
                } catch {
                    try? await replicator.stop()
                    throw error
                }
            } catch let error as ReplicationError {
                await follower.stop()
                throw commandFailure(for: error)
            } catch {
                await follower.stop()
                throw error
            }
        }
        guard let summary else { return try askFollowingProcess(key: key, settings: settings) }
        Output.setJSONResult(summary)
        if !Output.isJSON {
            Output.result(
                "stopped: \(database) (promoted from \(summary.promotedFrom.map { "\($0.generation)/\($0.index)" } ?? "none"))"
                    + " shipped to \(replica) up to generation \(summary.replication.generation ?? "none"), index"
                    + " \(summary.replication.lastIndex.map(String.init) ?? "none")")
        }
    }
}

extension PromoteCommand {
    /// Asks the process that follows the copy (a service in follower mode) to promote it, and waits for its answer:
    /// `--wait` for the request to be taken, then until the answer comes or the process stops without one.
    func askFollowingProcess(key: EncryptionKey, settings: CipherSettings) throws {
        // The key given must open the copy, as when this command promotes it itself (exit 3 otherwise): an operator
        // with the wrong key file is told so rather than promoting a service whose key they do not hold.
        let copy = try Connection(
            path: destination, encryption: .key(key, settings: settings), options: OpenOptions(mode: .readOnly))
        defer { copy.close() }
        _ = try copy.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
        let request = PromotionRequest()
        try request.place(for: destination)
        if !Output.isJSON {
            Output.message("a process follows \(destination): asked it to promote the copy; waiting for its answer")
        }
        let deadline = Date().addingTimeInterval(waitSeconds)
        while true {
            if let answer = try request.answer(for: destination) {
                request.removeAnswer(for: destination)
                guard answer.promoted else {
                    throw CommandFailure(
                        "the process following \(destination) did not promote it: \(answer.error ?? "no reason given");"
                            + " it goes on following", kind: "promotionFailed")
                }
                let result = PromotedByFollowerResult(
                    promotedBy: "the process following \(destination)", promotedFrom: answer.promotedFrom,
                    generation: answer.generation)
                Output.setJSONResult(result)
                if !Output.isJSON {
                    Output.result(
                        "promoted \(destination): the process following it is the primary now (it follows"
                            + " \(answer.promotedFrom ?? "nothing")) and replicates it to \(replica) as generation"
                            + " \(answer.generation ?? "none")")
                }
                return
            }
            if FileManager.default.fileExists(atPath: PromotionRequest.requestPath(for: destination)) {
                // Not taken yet: given up after --wait, or at once when no process follows the copy any more.
                let givesUp = Date() >= deadline || !PromotionRequest.isFollowed(destination)
                if givesUp && request.withdraw(for: destination) {
                    throw CommandFailure(
                        "no process took the request to promote \(destination)"
                            + (Date() >= deadline ? " within \(waitSeconds) s" : " (the process following it stopped)")
                            + " (a `restore --follow` process does not take requests: stop it and run promote again);"
                            + " the request was withdrawn and nothing changed", kind: "notTaken")
                }
            } else if !PromotionRequest.isBeingAnswered(destination), try request.answer(for: destination) == nil {
                throw CommandFailure(
                    "the process following \(destination) took the request and stopped without answering: whether it"
                        + " was promoted is unknown; `sqlcipherkit snapshots \(replica)` shows the replica's generations"
                        + " (a promoted copy starts one, reason promoted)", kind: "noAnswer")
            }
            usleep(50_000)
        }
    }
}

/// What `promote --json` reports when it stops.
struct PromoteResult: Encodable, Sendable {
    /// The old primary's point the copy had reached when it was promoted.
    @Nullable var promotedFrom: RestorePointReport?
    let replication: ReplicationSummary

    init(summary: ReplicationSummary, promotedFrom: RestorePoint?) {
        self.promotedFrom = promotedFrom.map(RestorePointReport.init)
        replication = summary
    }
}

/// What `promote --json` reports when a running follower promoted the copy on request.
struct PromotedByFollowerResult: Encodable, Sendable {
    /// Which process is the primary now.
    let promotedBy: String
    /// The old primary's point (`generation/index`) the copy had reached.
    @Nullable var promotedFrom: String?
    /// The generation the new primary writes.
    @Nullable var generation: String?
}
#endif
