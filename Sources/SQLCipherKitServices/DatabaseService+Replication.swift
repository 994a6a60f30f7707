#if Services  // trait Services (Package.swift)
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication

extension DatabaseService {
    /// Replication of a service's database (``DatabaseService/Configuration/replication``): where the replica goes,
    /// how often it is brought up to date, and how much lag the health check accepts.
    ///
    /// ```swift
    /// var configuration = DatabaseService.Configuration()
    /// configuration.replication = .init(store: try replicaStore(for: "file:///mnt/replica/notes"))
    /// let database = try DatabaseService(path: "notes.db", keyFile: "notes.key", configuration: configuration)
    /// ```
    public struct ReplicationOptions: Sendable {
        /// Where the replica goes: a folder or an S3-compatible bucket (`replicaStore(for:endpoint:credentials:)`
        /// makes one from a `file://` or `s3://` URL), or any other ``ReplicaStore``.
        public var store: any ReplicaStore
        /// How the replicator ships, checkpoints, snapshots and rides out an outage (sync interval, log limit
        /// during an outage, shutdown timeout, retention). Its `logger`, `metricsName` and `metricsFactory` are
        /// replaced by the service's: one name and one backend per database.
        public var replicator: ReplicatorConfiguration
        /// ``DatabaseService/checkHealth()`` reports the service as degraded when commits have waited longer than
        /// this to be shipped, or when replication stopped; in follower mode, when the copy may be staler than this.
        public var lagThreshold: Duration
        /// In follower mode, how long the follower waits between two looks at the store (1 s by default).
        public var pollInterval: Duration

        /// Creates the options.
        ///
        /// - Parameters:
        ///   - store: Where the replica goes.
        ///   - syncInterval: How often new commits are shipped (replaces `replicator.syncInterval`).
        ///   - lagThreshold: The lag the health check accepts (10 s by default: ten missed syncs at the default
        ///     interval).
        ///   - replicator: Everything else about shipping.
        ///   - pollInterval: In follower mode, how long to wait between two looks at the store.
        public init(
            store: any ReplicaStore, syncInterval: Duration = .seconds(1), lagThreshold: Duration = .seconds(10),
            replicator: ReplicatorConfiguration = ReplicatorConfiguration(), pollInterval: Duration = .seconds(1)
        ) {
            self.store = store
            self.pollInterval = pollInterval
            self.replicator = replicator
            self.replicator.syncInterval = syncInterval
            self.lagThreshold = lagThreshold
        }

        func replicatorConfiguration(for service: Configuration) -> ReplicatorConfiguration {
            var configuration = replicator
            configuration.logger = service.logger
            configuration.metricsName = service.metricsName
            configuration.metricsFactory = service.metricsFactory
            return configuration
        }
    }

    /// Where the service's replication stands, in ``HealthReport/replication``.
    public struct ReplicationHealth: Sendable, CustomStringConvertible {
        /// The replicator's status (generation, last restore point, lag, failures, gaps).
        public let status: ReplicationStatus
        /// ``ReplicationOptions/lagThreshold``.
        public let lagThreshold: Duration
        /// Why replication stopped, when it did (it is started again after a pause); `nil` while it runs or
        /// before ``DatabaseService/run()``.
        public let stoppedBecause: String?
        /// Whether ``DatabaseService/run()`` is replicating.
        public let isRunning: Bool

        /// Commits have waited longer than the threshold, or replication stopped on an error.
        public var isLagging: Bool { stoppedBecause != nil || status.isLagging(over: lagThreshold) }

        /// One line: where replication stands (no key material, no credential).
        public var description: String {
            var parts: [String] = []
            if let stoppedBecause {
                parts.append("replication stopped: \(stoppedBecause)")
            } else if !isRunning {
                parts.append("replication not running")
            } else if status.isLagging(over: lagThreshold) {
                parts.append("replication lags \(status.lag) (threshold \(lagThreshold))")
            } else {
                parts.append("replication up to date")
            }
            if let generation = status.generation {
                parts.append("generation \(generation) point \(status.lastIndex ?? 0)")
            }
            if status.consecutiveFailureCount > 0 {
                parts.append("\(status.consecutiveFailureCount) failed syncs in a row: \(status.lastError ?? "")")
            }
            if status.gapCount > 0 { parts.append("\(status.gapCount) gaps") }
            return parts.joined(separator: ", ")
        }
    }

    /// Runs the replicator until the task is cancelled. `Replicator.run()` retries store failures itself; it ends
    /// with an error only for what retrying cannot fix (a key that no longer opens the file, a plaintext database):
    /// that is logged, shown by the health check, and tried again after a pause (a key rotated in by another replica
    /// of the service is reopened by the key check meanwhile).
    func replicate(_ replicator: Replicator) async {
        var failures = 0
        while !Task.isCancelled {
            replicationState.withLock { $0 = .running }
            do {
                try await replicator.run()
                break
            } catch {
                failures += 1
                let pause = min(
                    replicator.configuration.syncInterval * (1 << min(failures, 16)),
                    replicator.configuration.maximumRetryInterval)
                replicationState.withLock { $0 = .failed("\(error)") }
                logger.error(
                    "replication stopped; it starts again after a pause while the database keeps serving",
                    metadata: ["path": "\(path)", "error": "\(error)", "nextAttemptIn": "\(pause)"])
                try? await replicator.configuration.wait(pause)
            }
        }
        replicationState.withLock { $0 = .stopped }
    }

    /// At graceful shutdown: cancels the replication task, which ships what is left within the replicator's
    /// ``ReplicatorConfiguration/shutdownTimeout`` and logs up to which point. The wait here is bounded by the same
    /// timeout (a sync stuck on an unresponsive store would otherwise hold the shutdown up): past it, the pool closes
    /// anyway and the log says so.
    func finishReplication(_ replication: Task<Void, Never>) async {
        guard let replicator else { return }
        let timeout = replicator.configuration.shutdownTimeout
        logger.info(
            "shipping what replication has left before closing the database",
            metadata: ["path": "\(path)", "timeout": "\(timeout)"])
        replication.cancel()
        // The wait runs in a task of its own (outcome(of:timeout:)): when run() itself was cancelled (not a graceful
        // shutdown), a child task would inherit the cancellation and its timeout would end at once. The replicator's
        // own stop takes at most twice its timeout (the last ship, then as long again for it to honour
        // cancellation); what it shipped, it says.
        let ended = await SQLCipherKit.outcome(of: { await replication.value }, timeout: timeout * 2 + .seconds(1))
        var finished = false
        if case .finished = ended { finished = await replicator.shippedEverythingAtLastStop == true }
        if finished {
            let status = await replicator.status
            logger.info(
                "replication finished before the database closes",
                metadata: [
                    "path": "\(path)", "generation": "\(status.generation ?? "none")",
                    "index": "\(status.lastIndex ?? 0)",
                ])
        } else {
            logger.warning(
                .init(stringLiteral: "replication did not finish shipping within the shutdown timeout; the database"
                    + " closes anyway, and the replica ends at the last point shipped"),
                metadata: ["path": "\(path)", "timeout": "\(timeout)"])
        }
    }

    /// The replication part of a health report; `nil` when the service does not replicate.
    func replicationHealth() async -> ReplicationHealth? {
        guard let replicator, let options = configurationReplication else { return nil }
        let status = await replicator.status
        let state = replicationState.withLock { $0 }
        var stoppedBecause: String?
        if case .failed(let reason) = state { stoppedBecause = reason }
        return ReplicationHealth(
            status: status, lagThreshold: options.lagThreshold, stoppedBecause: stoppedBecause,
            isRunning: state == .running)
    }
}

/// Where the service's replication task is.
enum ReplicationRunState: Sendable, Equatable {
    case notStarted
    case running
    case failed(String)
    case stopped
}

extension DatabaseService.HealthReport {
    func with(replication: DatabaseService.ReplicationHealth) -> Self {
        Self(
            path: path, schemaObjectCount: schemaObjectCount, readerConnectionCount: readerConnectionCount,
            engineVersion: engineVersion, replication: replication, following: following)
    }

    func with(following: DatabaseService.FollowingHealth) -> Self {
        Self(
            path: path, schemaObjectCount: schemaObjectCount, readerConnectionCount: readerConnectionCount,
            engineVersion: engineVersion, replication: replication, following: following)
    }
}
#endif
