#if Replication  // trait Replication (Package.swift)
import ArgumentParser
import Dispatch
import Foundation
import SQLCipherKitReplication
import Synchronization

/// The replica options `replicate`, `restore` and `snapshots` share.
struct ReplicaOptions: ParsableArguments {
    @Option(
        name: .customLong("endpoint"),
        help: ArgumentHelp("For s3:// replicas: the store's endpoint (http://host:port); AWS when not given.",
                           valueName: "url"))
    var endpoint: String?

    /// The store a URL names, with the library's error turned into the CLI's.
    func store(_ url: String) throws -> any ReplicaStore {
        try translatingReplicationErrors { try replicaStore(for: url, endpoint: endpoint) }
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
    let outcome = Mutex<Result<T, any Error>?>(nil)
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

/// The CLI's failure for a ``ReplicationError``: its kind in `--json`, and the exit status scripts rely on
/// (4 for a damaged replica or a restored file that does not verify, 3 for a key that does not open it).
func commandFailure(for error: ReplicationError) -> CommandFailure {
    let status: ExitStatus = switch error.kind {
    case .damaged, .verificationFailed: .verificationFailed
    case .wrongKey: .keyDoesNotOpenDatabase
    default: .failure
    }
    return CommandFailure(error.message, status: status, kind: error.kind.name)
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
#endif
