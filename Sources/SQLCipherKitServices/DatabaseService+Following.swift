#if Services  // trait Services (Package.swift)
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication
import ServiceLifecycle

extension DatabaseService {
    /// Opens a service in follower mode: a local copy of the replica in ``Configuration/replication`` that follows
    /// the primary (a ``ReplicaFollower``), serves reads, refuses writes, and becomes the primary without a restart
    /// of the process on ``promote()`` or on an operator's `sqlcipherkit promote URL PATH`.
    ///
    /// ```swift
    /// var configuration = DatabaseService.Configuration()
    /// configuration.replication = .init(store: try replicaStore(for: "s3://backups/notes"))
    /// let database = try await DatabaseService(
    ///     followingReplicaInto: "/srv/notes.db", keyFile: "/run/secrets/notes.key", configuration: configuration)
    /// // database.pool serves reads; database.isFollowing until it is promoted, then it writes and replicates
    /// ```
    ///
    /// The copy is restored from the replica's newest point when neither it nor its follower state file
    /// (`path.follower`) exists, and goes on from where it was otherwise. ``run()`` then applies each new segment
    /// and generation the primary ships, every ``ReplicationOptions/pollInterval``; readers of ``pool`` (and of other
    /// processes) see one shipped commit at a time. Writes through ``pool`` fail with `SQLITE_READONLY` (the pool's
    /// connections run with `PRAGMA query_only`) until the service is promoted. ``checkHealth()`` reports how stale
    /// the copy may be (``FollowingHealth``), degraded past ``ReplicationOptions/lagThreshold``.
    ///
    /// **Promotion.** ``promote()`` takes the replica's lease (the old primary, should it come back, stops at its
    /// next sync), applies everything the old primary shipped, lets go of the copy, opens writes on the pool and
    /// starts replicating the copy to the same store as a new generation. An operator's `sqlcipherkit promote` on the
    /// copy reaches a running service through a request file beside the copy, which ``run()`` looks for at each
    /// poll; the command waits for the service's answer.
    ///
    /// - Parameters:
    ///   - path: The copy.
    ///   - keyFile: The database's key (the primary's), `EncryptionKey(contentsOf:)` format, mode 0600. After a
    ///     promotion, the key file is watched as in any service (live rotation).
    ///   - configuration: ``Configuration/replication`` is required: the store followed, and replicated to once
    ///     promoted.
    /// - Throws: ``DatabaseError`` `invalidArgument` without ``Configuration/replication``; `busy` when another
    ///   follower (of any process) has the copy; `wrongKey`; ``ReplicationError`` `destinationExists` when `path`
    ///   exists without a follower's state file (a database this follower did not restore, or one promoted already:
    ///   open that with ``init(path:keyFile:configuration:)``); what ``ReplicaFollower/start()`` throws.
    public convenience init(followingReplicaInto path: String, keyFile: String, configuration: Configuration)
        async throws
    {
        guard let replication = configuration.replication else {
            throw DatabaseError(
                .invalidArgument,
                "a service in follower mode needs Configuration.replication: the store it follows, and replicates to"
                    + " once promoted")
        }
        let key = try EncryptionKey(contentsOf: keyFile)
        var followerConfiguration = ReplicaFollower.Configuration(
            pollInterval: replication.pollInterval, logger: configuration.logger,
            metricsName: configuration.metricsName)
        followerConfiguration.metricsFactory = configuration.metricsFactory
        let follower = ReplicaFollower(
            replica: Replica(store: replication.store), path: path,
            key: VerificationKey(name: "the key file \(keyFile)", key: key, settings: configuration.pool.settings),
            configuration: followerConfiguration)
        do {
            try await follower.start()
        } catch let error as ReplicationError where error.kind == .destinationExists {
            throw ReplicationError(
                .destinationExists,
                "\(path) exists and is not a follower's copy (there is no \(follower.statePath)): a database this"
                    + " follower did not restore, or one promoted already (open that as the primary:"
                    + " DatabaseService(path:keyFile:configuration:)); nothing was written")
        }
        do {
            try self.init(path: path, keyFile: keyFile, configuration: configuration, following: follower)
        } catch {
            await follower.stop()
            throw error
        }
    }

    /// Whether the service follows a replica (it has not been promoted yet).
    public var isFollowing: Bool { role.withLock { !$0.isPrimary } }

    /// The follower keeping the copy current, while the service follows; `nil` for a primary.
    public var follower: ReplicaFollower? { role.withLock { $0.follower } }

    /// Makes a service in follower mode the primary, without a restart: the follower takes the replica's lease
    /// (fencing the old primary), applies everything the old primary shipped and lets go of the copy; the pool's
    /// connections accept writes; a ``Replicator`` starts shipping the copy to the same store as a new generation
    /// (reason ``GenerationReason/promoted``) and ``run()`` goes on as a primary's (replication, live key rotation).
    ///
    /// Commits the old primary made but had not shipped are lost, as with any asynchronous replica.
    ///
    /// - Returns: The restore point of the old primary the copy holds (where the new primary's history starts).
    /// - Throws: ``DatabaseError`` `invalidState` when the service is the primary already or another promotion is
    ///   running; what ``ReplicaFollower/promote(pool:configuration:)`` throws (the service then goes on following,
    ///   with writes refused).
    @discardableResult
    public func promote() async throws -> RestorePoint? {
        let promotion = try role.withLock { role in
            switch role {
            case .primary:
                throw DatabaseError(.invalidState, "\(path) is the primary already: there is nothing to promote")
            case .promoting:
                throw DatabaseError(.invalidState, "\(path) is being promoted already")
            case .following(let follower):
                // A task of its own: a caller that is cancelled does not leave the promotion half done, and run()
                // at shutdown waits for it to settle.
                let promotion = Task { try await self.promote(follower) }
                role = .promoting(follower, promotion)
                return promotion
            }
        }
        return try await promotion.value
    }

    private func promote(_ follower: ReplicaFollower) async throws -> RestorePoint? {
        guard let options = configuration.replication else {
            // Not reachable: a follower service cannot be made without it.
            role.withLock { $0 = .following(follower) }
            throw DatabaseError(.invalidState, "\(path) follows without Configuration.replication")
        }
        let replicatorConfiguration = options.replicatorConfiguration(for: configuration)
        let pool = pool
        let refusesWrites = refusesWrites
        let replicator: Replicator
        do {
            replicator = try await follower.promote {
                // The follower has let go of the copy: connections opened from now on (the replicator's) accept
                // writes. The pool writer's own connection is switched below, once the replicator has started.
                refusesWrites.withLock { $0 = false }
                return Replicator(pool: pool, store: options.store, configuration: replicatorConfiguration)
            }
        } catch {
            refusesWrites.withLock { $0 = true }
            role.withLock { $0 = .following(follower) }
            logger.error(
                "promotion failed; the service goes on following", metadata: ["path": "\(path)", "error": "\(error)"])
            throw error
        }
        keyRotation.refusesChecks.withLock { $0 = nil }
        keyRotation.pausesReplication(replicator)
        role.withLock { $0 = .primary(replicator) }
        // The copy is the primary's from here on, whatever happens next: run() goes on as a primary's.
        promotions.continuation.yield()
        try await pool.writeWithoutTransaction { db in try db.execute("PRAGMA query_only = 0") }
        // The new generation is in the store before this returns (a restore anywhere then starts from it); when the
        // store fails now, run() retries as for any sync.
        do {
            try await replicator.syncNow()
        } catch {
            logger.warning(
                "promoted, but the first sync of the new generation failed; replication retries it",
                metadata: ["path": "\(path)", "error": "\(error)"])
        }
        let point = await follower.status.point
        logger.notice(
            "promoted: the service is the primary and writes",
            metadata: ["path": "\(path)", "follows": "\(point.map { "\($0.generation)/\($0.index)" } ?? "none")"])
        return point
    }

    /// Where following stands, in ``HealthReport/following``.
    public struct FollowingHealth: Sendable, CustomStringConvertible {
        /// The follower's status (restore point applied, when it last caught up, the last failure).
        public let status: ReplicaFollower.Status
        /// How stale the copy may be when the report was made (``ReplicaFollower/Status/staleness(at:)``).
        public let staleness: Duration
        /// ``ReplicationOptions/lagThreshold``.
        public let lagThreshold: Duration

        /// The copy may be staler than the threshold.
        public var isLagging: Bool { staleness > lagThreshold }

        /// One line: where following stands (no key material, no credential).
        public var description: String {
            var parts = [
                isLagging
                    ? "following: stale, last current \(staleness) ago (threshold \(lagThreshold))"
                    : "following: current within \(staleness)"
            ]
            if let point = status.point { parts.append("at generation \(point.generation) point \(point.index)") }
            if let error = status.lastError { parts.append("last failure: \(error)") }
            return parts.joined(separator: ", ")
        }
    }

    // MARK: - Running as a follower

    /// Keeps the copy current and answers operators' promotion requests until the service is promoted or shut
    /// down; at shutdown, waits for a promotion under way to settle and closes the follower's copy.
    ///
    /// - Returns: Whether the service is the primary now.
    func followUntilPromoted() async -> Bool {
        let polling = Task { [self] in await poll() }
        await cancelWhenGracefulShutdown { [promotions] in
            for await _ in promotions.stream { return }
        }
        polling.cancel()
        await polling.value
        if case .promoting(_, let promotion) = role.withLock({ $0 }) { _ = try? await promotion.value }
        if let follower { await follower.stop() }
        return !isFollowing
    }

    /// One look at the store per poll interval, and at the request file before it.
    private func poll() async {
        guard let options = configuration.replication else { return }
        var stoppedBecause: String?
        while !Task.isCancelled {
            guard let follower else { return }
            if let request = takePromotionRequest() {
                await answer(request)
                if !isFollowing { return }
            }
            do {
                try await follower.catchUp()
                stoppedBecause = nil
            } catch _ where !isFollowing {
                return  // promoted meanwhile
            } catch let error as DatabaseError where ReplicaFollower.stopsFollowing(error) {
                // The copy cannot go on following (another connection wrote to it, the replica holds another
                // database): it keeps serving its last state, the health check shows it stale, and the operator
                // decides (promote it, or restore it again).
                if stoppedBecause != "\(error)" {  // once per cause, not at every poll
                    stoppedBecause = "\(error)"
                    logger.error(
                        "the follower cannot go on; the copy serves its last state",
                        metadata: ["path": "\(path)", "error": "\(error)"])
                }
            } catch {
                // Recorded in the follower's status; looked at again at the next poll.
            }
            try? await Task.sleep(for: options.pollInterval)
        }
    }

    private func takePromotionRequest() -> TakenPromotionRequest? {
        do {
            return try PromotionRequest.take(for: path)
        } catch {
            logger.error("a promotion request cannot be read", metadata: ["path": "\(path)", "error": "\(error)"])
            return nil
        }
    }

    /// Promotes on an operator's request and writes the answer the command waits for.
    private func answer(_ taken: TakenPromotionRequest) async {
        let request = taken.request
        logger.notice(
            "an operator asked for a promotion", metadata: ["path": "\(path)", "requestedBy": "\(request.requestedBy)"])
        let answer: PromotionAnswer
        do {
            let point = try await promote()
            let generation = await replicator?.generationName
            answer = PromotionAnswer(
                request: request.id, promoted: true, promotedFrom: point.map { "\($0.generation)/\($0.index)" },
                generation: generation, error: nil)
        } catch {
            answer = PromotionAnswer(
                request: request.id, promoted: false, promotedFrom: nil, generation: nil, error: "\(error)")
        }
        do {
            try taken.answer(answer)
        } catch {
            logger.error(
                "the answer to a promotion request cannot be written", metadata: ["path": "\(path)", "error": "\(error)"])
        }
    }

    /// The following part of a health report; `nil` unless the service follows.
    func followingHealth() async -> FollowingHealth? {
        guard let follower, let options = configuration.replication else { return nil }
        let status = await follower.status
        return FollowingHealth(status: status, staleness: status.staleness(), lagThreshold: options.lagThreshold)
    }
}

/// Whether a service follows a replica, is being promoted, or is the primary (with its replicator, if it replicates).
enum ServiceRole: Sendable {
    case following(ReplicaFollower)
    case promoting(ReplicaFollower, Task<RestorePoint?, any Error>)
    case primary(Replicator?)

    var isFollowing: Bool {
        if case .following = self { return true }
        if case .promoting = self { return true }
        return false
    }

    var isPrimary: Bool {
        if case .primary = self { return true }
        return false
    }

    var follower: ReplicaFollower? {
        switch self {
        case .following(let follower), .promoting(let follower, _): return follower
        case .primary: return nil
        }
    }

    var replicator: Replicator? {
        if case .primary(let replicator) = self { return replicator }
        return nil
    }
}
#endif
