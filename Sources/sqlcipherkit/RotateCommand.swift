import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit rotate`: a thin shell over ``KeyRotation/rotateAll(_:progress:)``.
struct RotateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Change the key of one or more encrypted databases, safely.",
        discussion: """
            Each database is rotated on its own: it ends with the new key, or it is left exactly as it was (a \
            failure of one does not stop the others). Before anything changes the current key is checked, other \
            processes holding the file are refused, and an exclusive lock is taken (waiting at most \
            --lock-timeout seconds). Afterwards the new key must open the file and pass quick_check, and the old \
            key must not open it. A crash at any moment leaves the file openable with exactly one of the two keys.

            Methods: copy (default) writes a verified copy under the new key and renames it over the original in \
            one atomic step; in-place uses SQLCipher's rekey (one transaction, no extra disk space).

            The exit status is 0 when every database was rotated; otherwise that of the failures (3 when the \
            current key did not open them, 1 for mixed failures). See Docs/KeyRotation.md.

            Example:
              sqlcipherkit rotate notes.db --key-file old.key --new-key-file new.key --backup-dir /var/backups
              sqlcipherkit rotate tenants/*.db --key-env OLD_KEY --new-key-env NEW_KEY --method in-place --json
            """
    )

    @Argument(help: ArgumentHelp("The databases to rotate.", valueName: "database"))
    var databases: [String] = []

    @OptionGroup(title: "Current key")
    var key: KeyOptions

    @OptionGroup(title: "New key")
    var newKey: NewKeyOptions

    @OptionGroup(title: "Cipher settings (the same before and after)")
    var cipher: CipherOptions

    @Option(help: ArgumentHelp("copy (default) or in-place.", valueName: "method"))
    var method: MethodArgument = .copy

    @Option(
        name: .customLong("backup-dir"),
        help: ArgumentHelp(
            "Write a verified copy of each original (under the old key) into this folder first.", valueName: "dir"))
    var backupDirectory: String?

    @Option(help: ArgumentHelp("How long to wait for other connections' locks.", valueName: "seconds"))
    var lockTimeout: Double = 3

    @Flag(help: "Print the results as JSON.")
    var json = false

    func validate() throws {
        guard !databases.isEmpty else { throw ValidationError("give at least one database to rotate") }
        guard Set(databases).count == databases.count else {
            throw ValidationError("a database is named twice")
        }
        _ = try key.requiredSource()
        _ = try newKey.requiredSource()
        try validateOneStandardInputKey(key, newKey)
        guard lockTimeout.isFinite, lockTimeout >= 0, lockTimeout <= 86_400 else {
            throw ValidationError("--lock-timeout must be a number of seconds from 0 to 86400")
        }
    }

    func run() throws {
        let oldKey = try key.loadKey()
        let newKey = try newKey.loadKey(confirm: true)
        guard !oldKey.isSameKey(as: newKey) else {
            throw CommandFailure("the new key is the same as the current key; nothing was done", status: .usage)
        }
        let settings = try cipher.settings(for: oldKey)
        let requests = databases.map {
            RotationRequest(
                path: $0, oldEncryption: .key(oldKey, settings: settings),
                newEncryption: .key(newKey, settings: settings), method: method.rotationMethod,
                backupDirectory: backupDirectory, lockTimeout: .milliseconds(Int(lockTimeout * 1000)))
        }
        let progress = MultiFileProgress()
        let results = KeyRotation.rotateAll(requests) { path, step in progress.update(path: path, step) }
        progress.finish()

        let statuses = results.map { $0.error.map(ExitStatus.status(for:)) ?? .success }
        if json {
            try Output.json(RotationReport(method: method.rawValue, results: results, statuses: statuses))
        } else {
            for result in results { Output.result(Self.line(for: result)) }
        }
        let failedCount = results.filter { !$0.isRotated }.count
        guard failedCount == 0 else {
            throw CommandFailure(
                "\(failedCount) of \(results.count) database(s) not rotated; each was left as it was",
                status: ExitStatus.combined(statuses))
        }
    }

    static func line(for result: RotationResult) -> String {
        guard let error = result.error else {
            return "rotated \(result.path) (\(result.method), \(seconds(result.duration)) s)"
                + (result.backupPath.map { "; original kept at \($0)" } ?? "")
        }
        let state = switch result.keyState {
        case .old: "it still opens with the old key"
        case .new: "it opens with the new key"
        case .neither: "it opens with neither key given"
        case .unknown: "which key opens it is unknown"
        }
        return "FAILED  \(result.path): \(error.message); \(state)"
    }
}

/// `--method`: the library's ``RotationMethod`` as an argument.
enum MethodArgument: String, ExpressibleByArgument, CaseIterable {
    case copy
    case inPlace = "in-place"

    var rotationMethod: RotationMethod {
        switch self {
        case .copy: .copy
        case .inPlace: .inPlace
        }
    }
}

/// A progress bar per database, redrawn as pages are copied (copy method only; rekey reports nothing).
final class MultiFileProgress {
    private var current: (path: String, bar: ProgressBar)?

    func update(path: String, _ progress: BackupProgress) {
        if current?.path != path {
            current?.bar.finish()
            current = (path, ProgressBar(label: path))
        }
        current?.bar.update(done: progress.pagesCopied, total: progress.pageCount)
    }

    func finish() {
        current?.bar.finish()
    }
}

/// `rotate --json`.
struct RotationReport: Encodable {
    struct Database: Encodable {
        let path: String
        let rotated: Bool
        let keyState: String
        let method: String
        let durationSeconds: Double
        let backupPath: String?
        let error: ErrorReport?
        let exitStatus: Int32
    }

    let method: String
    let rotatedCount: Int
    let failedCount: Int
    let databases: [Database]

    init(method: String, results: [RotationResult], statuses: [ExitStatus]) {
        self.method = method
        rotatedCount = results.filter(\.isRotated).count
        failedCount = results.count - rotatedCount
        databases = zip(results, statuses).map { result, status in
            Database(
                path: result.path, rotated: result.isRotated, keyState: result.keyState.rawValue,
                method: result.method.rawValue, durationSeconds: seconds(result.duration),
                backupPath: result.backupPath, error: result.error.map(ErrorReport.init), exitStatus: status.rawValue)
        }
    }
}

/// A ``DatabaseError`` in JSON output: kind, code and message (never key material; the library keeps it out).
struct ErrorReport: Encodable {
    let kind: String
    let code: Int32
    let message: String

    init(_ error: DatabaseError) {
        kind = error.kind.name
        code = error.extendedResultCode.rawValue
        message = error.message
    }
}

/// A duration in seconds, rounded to milliseconds.
func seconds(_ duration: Duration) -> Double {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return (value * 1000).rounded() / 1000
}
