import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit migrate`: SQLCipher 3 format → 4, as a copy-method rotation with the same key.
struct MigrateCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Convert a SQLCipher 3 database to the SQLCipher 4 format (same key).",
        discussion: """
            Needs a SQLCipher 4 engine. The file is first checked to really be in the SQLCipher 3 format (a file \
            already in the 4 format is left alone, exit 0). The migration is a key rotation by copy with the same \
            key: SQLCipher 3 settings before, SQLCipher 4 defaults after (4096-byte pages, PBKDF2-HMAC-SHA512 with \
            256,000 iterations, HMAC-SHA512), verified, and renamed over the original in one atomic step. \
            SQLCipher 3 cannot open the result. The cipher options set the new file's settings where they should \
            differ from SQLCipher 4's defaults, for example --plaintext-header-size 32 (with --salt-file or a key \
            file x'<96 hex>'). On a terminal a progress line names the phase and the pages written (--progress plain: timestamped lines for logs).

            Example:
              sqlcipherkit migrate legacy.db --key-file legacy.key \\
                  --backup-dir /var/backups
              sqlcipherkit migrate legacy.db --key-file legacy-with-salt.key \\
                  --plaintext-header-size 32 --json
            """
    )

    @Argument(help: ArgumentHelp("The SQLCipher 3 database.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @Option(
        name: .customLong("backup-dir"),
        help: ArgumentHelp(
            "Write a verified copy of the original (SQLCipher 3 format) here first, named"
                + " <name>.<unix time>-<random>.before-rotation.",
            valueName: "dir"))
    var backupDirectory: String?

    @Option(help: ArgumentHelp("How long to wait for other connections' locks.", valueName: "seconds"))
    var lockTimeout: Double = 3

    @OptionGroup(title: "Cipher settings of the migrated (SQLCipher 4) file")
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        guard lockTimeout.isFinite, lockTimeout >= 0, lockTimeout <= 86_400 else {
            throw ValidationError("--lock-timeout must be a number of seconds from 0 to 86400")
        }
    }

    func run() throws {
        // Before the key is read: on SQLCipher 3 there is nothing to do but say so.
        try SQLCipher.require(.migrateToVersion4)
        let key = try key.loadKey()
        let inspection = try DatabaseFileInspection.inspect(path: database, encryption: .key(key))
        switch inspection.cipher?.formatMajorVersion {
        case 3:
            break
        case 4:
            Output.setJSONResult(MigrationReport(path: database, migrated: false, durationSeconds: 0, backupPath: nil))
            if !Output.isJSON { Output.result("\(database) is already in the SQLCipher 4 format; nothing to do") }
            return
        default:
            throw CommandFailure(
                "\(database) does not use SQLCipher 3's default settings (custom settings or plaintext); not migrated",
                kind: "unknownFormat")
        }
        let newSettings = try cipher.settings(for: key)
        let request = RotationRequest(
            path: database, oldEncryption: .key(key, settings: .sqlcipher3),
            newEncryption: .key(key, settings: newSettings), method: .copy, backupDirectory: backupDirectory,
            lockTimeout: .milliseconds(Int(lockTimeout * 1000)))
        let phases = RotationPhases(
            path: database, pageSize: 1024, isInPlace: false, backupDirectory: backupDirectory, wording: .migration)
        let note = "nothing changed unless the migration had reached the final rename of the verified copy: \(database)"
            + " is the SQLCipher 3 original if it had not, the verified SQLCipher 4 file if it had, under the same key"
            + " (sqlcipherkit info tells which); the unfinished copy was removed"
        let progress = PhaseProgress(
            label: "migrate \(database)", mode: display.progress, interruptNote: note, state: phases.state)
        let result = try progress.run {
            try KeyRotation.rotate(request) { step in
                phases.record(step)
                progress.update()
            }
        }
        Output.setJSONResult(
            MigrationReport(
                path: database, migrated: true, durationSeconds: seconds(result.duration),
                backupPath: result.backupPath))
        if !Output.isJSON {
            Output.result(
                "migrated \(database) to the SQLCipher 4 format (\(seconds(result.duration)) s)"
                    + (result.backupPath.map { "; original kept at \($0)" } ?? ""))
        }
    }
}

/// `migrate --json`'s `result`.
struct MigrationReport: Encodable, Sendable {
    let path: String
    let migrated: Bool
    let durationSeconds: Double
    @Nullable var backupPath: String?
}
