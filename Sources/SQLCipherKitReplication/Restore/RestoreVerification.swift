#if Replication  // trait Replication (Package.swift)
import SQLCipherKit

/// Which given key opens a restored database, and whether every page then checks out.
enum RestoreVerification {
    /// Tries each key in turn on the file at `path` (a copy that has no log: a wrong key writes nothing).
    ///
    /// - Returns: The name of the first key that opens it, and its integrity report (intact).
    /// - Throws: ``DatabaseError``: `wrongKey` when none opens it (saying which generation and period the file
    ///   belongs to, since a key changed since then is the usual cause), `verificationFailed` when the key opens it
    ///   but a check fails.
    static func verify(
        _ path: String, keys: [VerificationKey], generation: ReplicaGeneration, point: RestorePoint
    ) throws -> (name: String, report: IntegrityReport) {
        for candidate in keys {
            var settings = candidate.settings
            if (generation.plaintextHeaderSize ?? 0) > 0 {
                if settings.plaintextHeaderSize == nil { settings.plaintextHeaderSize = generation.plaintextHeaderSize }
                if settings.salt == nil { settings.salt = generation.salt }
            }
            let connection: Connection
            do {
                connection = try Connection(
                    path: path, encryption: .key(candidate.key, settings: settings),
                    options: OpenOptions(mode: .readWrite))
            } catch let error as DatabaseError
                where [.wrongKey, .notADatabase, .notEncrypted, .invalidKey].contains(error.kind) {
                continue
            }
            defer { connection.close() }
            let report = try connection.checkIntegrity()
            guard report.isIntact else {
                let problems = report.quickCheckProblems + (report.cipherIntegrityProblems ?? [])
                throw DatabaseError(
                    .verificationFailed,
                    "the restored database (\(point)) opens with \(candidate.name) but does not verify: "
                        + problems.prefix(3).joined(separator: "; ") + "; nothing was written")
            }
            return (candidate.name, report)
        }
        let names = keys.map(\.name).joined(separator: ", ")
        let since = generation.createdAt.map { " from \(ISO8601.string($0))" } ?? ""
        throw DatabaseError(
            .wrongKey,
            "none of the given keys (\(names)) opens the restored database (\(point)); nothing was written. Generation"
                + " \(generation.name) holds the database as it was\(since): if its key was changed since (a rotation"
                + " starts a new generation), verify with the key it had then")
    }
}
#endif
