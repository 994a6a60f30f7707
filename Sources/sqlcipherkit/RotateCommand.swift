import ArgumentParser
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sqlcipherkit rotate`: a thin shell over ``KeyRotation/rotateAll(_:progress:)``.
struct RotateCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Change the key of one or more encrypted databases, safely.",
        discussion: CipherOptions.withFoldedNote("""
            Each database is rotated on its own: it ends with the new key, or it is left exactly as it was (a \
            failure of one does not stop the others). Before anything changes the current key is checked, other \
            processes holding the file are refused, and an exclusive lock is taken (waiting at most \
            --lock-timeout seconds). Afterwards the new key must open the file and pass quick_check, and the old \
            key must not open it. A crash at any moment leaves the file openable with exactly one of the two keys.

            Methods: copy (default) writes a verified copy under the new key and renames it over the original in \
            one atomic step; in-place uses SQLCipher's rekey (one transaction, no extra disk space).

            The exit status is 0 when every database was rotated; otherwise that of the failures (3 when the \
            current key did not open them, 1 for mixed failures). See Docs/KeyRotation.md.

            On a terminal a progress line names the phase (keeping the original, writing the copy, rekeying in \
            place, verifying) with pages done; for steps SQLCipher reports nothing about, the count is estimated \
            from the size of the file being written; --progress plain prints timestamped lines for logs instead.

            Example:
              sqlcipherkit rotate notes.db --key-file old.key --new-key-file new.key \\
                  --backup-dir /var/backups
              sqlcipherkit rotate tenants/*.db --key-env OLD_KEY --new-key-env NEW_KEY \\
                  --method in-place --json
              sqlcipherkit rotate legacy.db --key-file old.key --new-key-file new.key \\
                  --cipher-compatibility 3
            """)
    )

    @Argument(help: ArgumentHelp("The databases to rotate.", valueName: "database"))
    var databases: [String] = []

    @OptionGroup(title: "Current key")
    var key: KeyOptions

    @OptionGroup(title: "New key")
    var newKey: NewKeyOptions

    @OptionGroup(title: "Cipher settings (advanced) (the same before and after)", visibility: .hidden)
    var cipher: CipherOptions

    @Option(help: ArgumentHelp("copy (default) or in-place.", valueName: "method"))
    var method: RotationMethod = .copy

    @Option(
        name: .customLong("backup-dir"),
        help: ArgumentHelp(
            "Write a verified copy of each original (under the old key) into this folder first, named"
                + " <name>.<unix time>-<random>.before-rotation.",
            valueName: "dir"))
    var backupDirectory: String?

    @Option(help: ArgumentHelp("How long to wait for other connections' locks.", valueName: "seconds"))
    var lockTimeout: Double = 3

    @OptionGroup
    var weakPassphrase: WeakPassphraseOption

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        guard !databases.isEmpty else { throw ValidationError("give at least one database to rotate") }
        guard Set(databases).count == databases.count else {
            throw ValidationError("a database is named twice")
        }
        try validateOneStandardInputKey(key, newKey)
        guard lockTimeout.isFinite, lockTimeout >= 0, lockTimeout <= 86_400 else {
            throw ValidationError("--lock-timeout must be a number of seconds from 0 to 86400")
        }
    }

    func run() throws {
        // Both keys must have a source before either is read (a missing one is a usage error).
        try key.requireSource()
        try newKey.requireSource()
        let oldKey = try key.loadKey()
        let newKey = try newKey.loadKey(confirm: true)
        guard !oldKey.isSameKey(as: newKey) else {
            throw CommandFailure("the new key is the same as the current key; nothing was done", status: .usage)
        }
        try weakPassphrase.check(newKey: newKey)
        let settings = try cipher.settings(for: oldKey)
        try Self.refuseUnsaltedNewKey(settings: settings, oldKey: oldKey, newKey: newKey, method: method)
        let requests = databases.map {
            RotationRequest(
                path: $0, oldEncryption: .key(oldKey, settings: settings),
                newEncryption: .key(newKey, settings: settings), method: method,
                backupDirectory: backupDirectory, lockTimeout: .milliseconds(Int(lockTimeout * 1000)),
                allowsWeakPassphrase: weakPassphrase.allowWeakPassphrase)
        }
        // All requests go to the library in one call: it refuses a file named twice (`s.db ./s.db`, a symlink, a
        // hard link) before rotating anything of it, and runs each of the others inside the closure, which draws
        // that database's progress.
        let results = KeyRotation.rotateAll(requests, enclosing: { request, rotate in
            let phases = RotationPhases(
                path: request.path, pageSize: cipher.effectivePageSize, isInPlace: method == .inPlace,
                backupDirectory: backupDirectory)
            let progress = PhaseProgress(
                label: "rotate \(request.path)", mode: display.progress,
                interruptNote: Self.interruptNote(path: request.path, method: method), state: phases.state)
            return progress.run(isSuccess: { $0.isRotated }) {
                rotate { step in
                    phases.record(step)
                    progress.update()
                }
            }
        })

        let statuses = results.map { $0.error.map(ExitStatus.status(for:)) ?? .success }
        if Output.isJSON {
            Output.setJSONResult(RotationReport(method: method.rawValue, results: results, statuses: statuses))
        } else {
            for result in results { Output.result(Self.line(for: result)) }
        }
        let failures = results.compactMap(\.error)
        guard failures.isEmpty else {
            // One reason: said here too (standard error is what an operator reads first; with --json the FAILED
            // lines are not printed). Several: each has its own line, or its entry in `databases`.
            let reasons = Set(failures.map(ErrorWording.message(for:)))
            let reason = reasons.count == 1 ? reasons.first.map { ": " + $0 } ?? ""
                : " (the reason of each is in its FAILED line, or in --json's databases)"
            throw CommandFailure(
                "\(failures.count) of \(results.count) database(s) not rotated\(reason); each was left as it was",
                status: ExitStatus.combined(statuses))
        }
    }

    /// What an interrupted rotation left: the file opens with exactly one of the two keys, the current one unless
    /// the rotation had come to its last step (the rename of the verified copy, or the commit of the rekey).
    static func interruptNote(path: String, method: RotationMethod) -> String {
        let last = method == .copy ? "the final rename of the verified copy" : "the commit of the rekey"
        return "nothing changed unless the rotation had reached \(last): \(path) opens with exactly one of the two"
            + " keys, the current one if it had not (sqlcipherkit verify tells which)"
            + (method == .copy ? "; the unfinished copy was removed" : "; an unfinished rekey is rolled back when the"
                + " file is next opened")
    }

    /// A plaintext-header database does not store its salt. When it is kept in the old key file (not in a
    /// `--salt-file`), the new key file must carry it too, or the new key file alone could never open the database
    /// once the old one is gone; an in-place rotation keeps the salt, so a new key with another salt would not open
    /// it either.
    static func refuseUnsaltedNewKey(
        settings: CipherSettings, oldKey: EncryptionKey, newKey: EncryptionKey, method: RotationMethod
    ) throws {
        guard (settings.plaintextHeaderSize ?? 0) > 0, settings.salt == nil else { return }
        guard let newSalt = newKey.salt else {
            throw CommandFailure(
                "the database has a plaintext header, which does not store its salt, and the new key file has no"
                    + " salt: the new key file alone could not open the database. Make the new key file with the"
                    + " salt: sqlcipherkit keygen --out NEW.key --salt-from OLD.key (or keep the salt in a file"
                    + " given with --salt-file). Nothing was changed", status: .usage)
        }
        if method == .inPlace, let oldSalt = oldKey.salt, oldSalt != newSalt {
            throw CommandFailure(
                "an in-place rotation keeps the database's salt, and the new key file has another one: it could not"
                    + " open the database afterwards. Make the new key file with the same salt (sqlcipherkit keygen"
                    + " --out NEW.key --salt-from OLD.key) or rotate with --method copy. Nothing was changed",
                status: .usage)
        }
    }

    static func line(for result: RotationResult) -> String {
        guard let error = result.error else {
            // resolvedPath is absolute: only a link named on the command line is worth saying.
            let target = symlinkTarget(of: result.path) == nil
                ? result.path : "\(result.path) (symlink followed: \(result.resolvedPath))"
            return "rotated \(target) (\(result.method), \(seconds(result.duration)) s)"
                + (result.backupPath.map { "; original kept at \($0)" } ?? "")
                + result.warnings.map { "\nwarning: \($0)" }.joined()
        }
        let state = result.keyState?.description ?? "the file was not looked at"
        let line = "FAILED  \(result.path): \(ErrorWording.message(for: error)); \(state)"
        guard error.remedy == .stopOtherProcesses else { return line }
        return line + "\n" + liveRotationHint
    }

    /// What to do instead when a running service holds the file (the rotation itself is refused: the service would
    /// go on with the old file).
    static let liveRotationHint = """
        hint: to rotate the key of a database a running service holds, hand the new key to the service instead: \
        a service built on SQLCipherKitServices' DatabaseService watches for <its key file>.next; write the new \
        key there (mode 0600, under another name first, then mv), and it rekeys between requests, verifies, and \
        renames it over its key file. See Docs/Services.md, "Rotating the key of a live service".
        """
}

/// `--method`: the library's ``RotationMethod`` is the argument (`copy`, `in-place`).
extension RotationMethod: ExpressibleByArgument {}

/// `rotate --json`.
struct RotationReport: Encodable, Sendable {
    struct Database: Encodable, Sendable {
        let path: String
        /// `path` with symbolic links resolved: the file that was rotated.
        let resolvedPath: String
        let rotated: Bool
        @Nullable var keyState: String?
        let method: String
        let durationSeconds: Double
        @Nullable var backupPath: String?
        @Nullable var error: ErrorReport?
        let exitStatus: Int32
        /// What the operator should know about a rotation that succeeded.
        let warnings: [String]
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
                path: result.path, resolvedPath: result.resolvedPath, rotated: result.isRotated, keyState: result.keyState?.rawValue,
                method: result.method.rawValue, durationSeconds: seconds(result.duration),
                backupPath: result.backupPath, error: result.error.map { ErrorReport($0, database: result.path) },
                exitStatus: status.rawValue,
                warnings: result.warnings)
        }
    }
}

/// A duration in seconds, rounded to milliseconds.
func seconds(_ duration: Duration) -> Double {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return (value * 1000).rounded() / 1000
}
