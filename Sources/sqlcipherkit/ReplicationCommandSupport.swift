#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Dispatch
import Foundation
import SQLCipherKit
import SQLCipherKitReplication

/// The replica options `replicate`, `restore` and `snapshots` share.
struct ReplicaOptions: ParsableArguments {
    @Option(
        name: .customLong("endpoint"),
        help: ArgumentHelp("For s3:// replicas: the store's endpoint (http://host:port); AWS when not given.",
                           valueName: "url"))
    var endpoint: String?

    /// The store a URL names, with the library's error turned into the CLI's. A plain-http endpoint on another
    /// machine is warned about on standard error.
    func store(_ url: String) throws -> any ReplicaStore {
        let store = try translatingReplicationErrors { try replicaStore(for: url, endpoint: endpoint) }
        if let warning = (store as? S3ReplicaStore)?.transportWarning { Output.message("warning: " + warning) }
        return store
    }
}

/// A replica URL's scheme, checked before anything runs (a usage error otherwise).
func validateReplicaURL(_ url: String) throws {
    guard url.hasPrefix("file:///") || url.hasPrefix("s3://") else {
        throw ValidationError("\(url) is not a replica URL: give file:///path/to/folder or s3://BUCKET/PREFIX")
    }
}

/// A duration given as `500ms`, `1s`, `2m`, `24h` or `7d`.
struct DurationArgument: ExpressibleByArgument, Sendable, CustomStringConvertible {
    let duration: Duration
    let text: String

    init?(argument: String) {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (unit, milliseconds) in units where argument.hasSuffix(unit) {
            let number = argument.dropLast(unit.count)
            guard let value = Int64(number), value >= 0, !(unit == "m" && number.hasSuffix("m")) else { continue }
            duration = .milliseconds(value * milliseconds)
            text = argument
            return
        }
        return nil
    }

    var description: String { text }

    static var defaultCompletionKind: CompletionKind { .default }
}

/// Runs the library's async work from a command's synchronous `run()`, waiting for it on this thread.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Locked<Result<T, any Error>?>(nil)
    let finished = DispatchSemaphore(value: 0)
    // The output's task-local bindings are carried over explicitly: this may be called outside any task.
    let capture = Output.capture
    let jsonReport = Output.jsonReport
    Task {
        let result: Result<T, any Error>
        do {
            result = .success(try await Output.$capture.withValue(capture) {
                try await Output.$jsonReport.withValue(jsonReport) { try await body() }
            })
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
        finished.signal()
    }
    finished.wait()
    return try outcome.withLock { $0! }.get()
}

/// The CLI's failure for a ``ReplicationError``: its kind in `--json`, the exit status scripts rely on (4 for a
/// replica that is damaged or does not verify, 3 for a key that is not the generation's), and the remedy in the
/// CLI's own words.
func commandFailure(for error: ReplicationError) -> CommandFailure {
    var status: ExitStatus = switch error.kind {
    case .damaged, .notAuthentic: .verificationFailed
    default: .failure
    }
    if case .verifyWithKeyOfGeneration? = error.remedy { status = .keyDoesNotOpenDatabase }
    let advice = error.remedy.map { "; " + cliWording($0) } ?? ""
    return CommandFailure(error.reason + advice, status: status, kind: error.kind.name)
}

/// A ``ReplicationError/Remedy`` in the CLI's words.
func cliWording(_ remedy: ReplicationError.Remedy) -> String {
    switch remedy {
    case .checkCredentials:
        "check the access key ID and secret (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; AWS_SESSION_TOKEN for"
            + " temporary credentials; or the credentials file)"
    case .createBucketOrCorrectURL:
        "create the bucket, or correct the s3:// URL or --endpoint"
    case .setClock:
        "set this machine's clock right (NTP)"
    case .checkReplicaURL:
        "check the replica's URL (a typo in the folder, bucket or prefix reads as an empty replica)"
    case .nameRestorePoint(let lastGood?):
        "to restore an older state on purpose, name it: --generation \(lastGood.generation) --index"
            + " \(lastGood.index) is the last good point (`sqlcipherkit snapshots` lists them)"
    case .nameRestorePoint(nil):
        "to restore an older state on purpose, name it with --generation (and --index); `sqlcipherkit snapshots`"
            + " lists them"
    case .verifyWithKeyOfGeneration(let generation):
        "give the key the database had when generation \(generation) was written (--key-file …); if no key of the"
            + " database verifies it, its objects were altered or copied in by someone without the key"
    case .stopOtherReplicator:
        "stop the other replicator (`sqlcipherkit replicate` or a service replicating this database), or wait"
            + " until its lease expires: one that died leaves it"
    case .replicaMovedOn:
        "the replica goes on from the new holder's generation; this process must not write to it"
    case .replaceOnPurpose:
        "replace it only on purpose: --replace"
    }
}

func translatingReplicationErrors<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ReplicationError {
        throw commandFailure(for: error)
    }
}

/// A restore point in `--json` output.
struct RestorePointReport: Encodable, Sendable {
    let generation: String
    let index: Int
    let time: String

    init(_ point: RestorePoint) {
        generation = point.generation
        index = point.index
        time = point.time.replicaText
    }
}

extension Date {
    /// ISO 8601 with milliseconds, UTC: how the replication commands print times.
    var replicaText: String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: self)
    }

    /// Parses `2026-11-24T10:00:00Z` (fractional seconds and offsets allowed).
    init?(replicaText text: String) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) {
            self = date
            return
        }
        formatter.formatOptions = [.withInternetDateTime]
        guard let date = formatter.date(from: text) else { return nil }
        self = date
    }
}
extension KeyOptions {
    /// `key`, read, as the key a replica is verified with, named the way every replication command's reports name
    /// it: the key file given, or "the given key" (an environment variable, standard input).
    func verificationKey(_ key: EncryptionKey, cipher: CipherOptions) throws -> VerificationKey {
        VerificationKey(
            name: files.first.map { "the key file \(KeyMaterialRedaction.shown($0, as: "key file path"))" }
                ?? "the given key",
            key: key, settings: try cipher.settings(for: key))
    }
}
#endif
