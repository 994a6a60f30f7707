import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit backup`: an online, verified, encrypted backup (``Connection/backup(toPath:encryption:pagesPerStep:progress:)``).
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up an encrypted database into an encrypted copy, online and verified.",
        discussion: """
            Uses SQLite's online backup API: other processes may keep reading and writing the database. The \
            copy gets the same cipher settings, under the source's key or another one (--dest-key-file); it is \
            written under a temporary name (mode 0600), reopened with its key and verified (quick_check, and \
            cipher_integrity_check on SQLCipher 4.2+), flushed, and renamed into place. An existing destination is \
            replaced only with --replace. A progress bar is shown when standard error is a terminal.

            Example:
              sqlcipherkit backup notes.db /var/backups/notes.db --key-file notes.key
              sqlcipherkit backup notes.db offsite.db --key-file notes.key --dest-key-file offsite.key --replace
            """
    )

    @Argument(help: ArgumentHelp("The database to back up.", valueName: "database"))
    var database: String

    @Argument(help: ArgumentHelp("The backup file.", valueName: "destination"))
    var destination: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Destination key (optional; the source's key by default)")
    var destinationKey: DestinationKeyOptions

    @OptionGroup(title: "Cipher settings")
    var cipher: CipherOptions

    @Flag(help: "Replace the destination when it exists.")
    var replace = false

    func validate() throws {
        _ = try key.requiredSource()
        try validateOneStandardInputKey(key, destinationKey)
        guard database != destination else { throw ValidationError("the destination must be another file") }
    }

    func run() throws {
        let key = try key.loadKey()
        let destinationKey = try destinationKey.loadOptionalKey() ?? key
        guard FileFacts.isNonEmptyFile(database) else {
            throw CommandFailure("\(database) does not exist or is empty; nothing to back up")
        }
        if !replace && FileFacts.isNonEmptyFile(destination) {
            throw CommandFailure("\(destination) exists; pass --replace to replace it", status: .usage)
        }
        let source = try Connection(
            path: database, encryption: try cipher.encryption(for: key), options: OpenOptions(mode: .readOnly))
        let bar = ProgressBar(label: "backup")
        defer { bar.finish() }
        try source.backup(toPath: destination, encryption: try cipher.encryption(for: destinationKey)) { step in
            bar.update(done: step.pagesCopied, total: step.pageCount)
        }
        source.close()
        bar.finish()
        Output.result("backed up \(database) to \(destination) (mode 0600, verified)")
    }
}
