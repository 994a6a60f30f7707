/// Where shipping goes on in the log on disk, given what was shipped: the continuity rules of a generation.
///
/// While the replicator holds its pin, SQLite can restart the log only after a checkpoint the replicator ran
/// itself, once everything was shipped (``Replicator`` expects that restart then). Any other change of the log
/// means frames may have been checkpointed and overwritten unshipped: the generation ends there.
#if Replication  // trait Replication (Package.swift)
import SQLCipherKit

enum LogContinuation: Equatable {
    /// Ship from this position; the first segment starts with the log's header when `includesHeader`.
    case from(WALPosition, includesHeader: Bool)
    /// No log (not written yet, or emptied after a complete checkpoint): nothing to ship.
    case nothingYet
    /// The log on disk does not continue what was shipped: why (the next generation's reason) and a sentence.
    case broken(GenerationReason, String)

    /// - Parameters:
    ///   - header: The log file's header now (`nil`: no file, empty, or not yet written).
    ///   - shipped: The position after the last frame shipped (or, for an exact snapshot, where the main file is);
    ///     `nil` when the generation has no log yet.
    ///   - expectsRestart: Everything in the shipped log was checkpointed by the replicator itself: the restarted
    ///     log (salt-1 plus one, ``WALPosition/isRestarted(as:)``) continues the generation.
    ///   - needsHeader: The shipped log's header is not in the replica yet (a generation whose snapshot did not
    ///     record a log position).
    static func decide(
        header: WALFormat.Header?, shipped: WALPosition?, expectsRestart: Bool, needsHeader: Bool
    ) -> LogContinuation {
        guard let header else {
            if let shipped, shipped.frame > 0, !expectsRestart {
                return .broken(
                    .logEmptied,
                    "the write-ahead log was emptied by another connection before the replicator checkpointed it")
            }
            return .nothingYet
        }
        guard let shipped else { return .from(WALPosition(start: header), includesHeader: true) }
        if shipped.isIn(header) {
            return .from(shipped, includesHeader: needsHeader && shipped.frame == 0)
        }
        if expectsRestart && shipped.isRestarted(as: header) {
            return .from(WALPosition(start: header), includesHeader: true)
        }
        return .broken(
            .logRestarted,
            "the write-ahead log was restarted (salt-1 \(shipped.salt1) → \(header.salt1)) by a checkpoint the"
                + " replicator did not run, before its frames were shipped")
    }
}
#endif
