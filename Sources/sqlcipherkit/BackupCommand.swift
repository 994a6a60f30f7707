import ArgumentParser
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sqlcipherkit backup`: an online, verified, encrypted backup (``Connection/backup(toPath:encryption:pagesPerStep:progress:)``).
struct BackupCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up an encrypted database into an encrypted copy, online and verified.",
        discussion: CipherOptions.withFoldedNote("""
            Uses SQLite's online backup API: other processes may keep reading and writing the database. The \
            copy gets the same cipher settings, under the source's key or another one (--dest-key-file); it is \
            written under a temporary name (mode 0600), reopened with its key and verified (quick_check, and \
            cipher_integrity_check on SQLCipher 4.2+), flushed, and renamed into place. An existing destination is \
            replaced only with --replace (without it: exit 1, nothing written). A destination passphrase shorter \
            than 20 bytes, or with a line break inside, is refused unless --allow-weak-passphrase is given. On a terminal a progress line \
            shows the pages copied, then the verification (--progress plain: timestamped lines for logs).

            Example:
              sqlcipherkit backup notes.db /var/backups/notes.db --key-file notes.key
              sqlcipherkit backup notes.db offsite.db --key-file notes.key \\
                  --dest-key-file offsite.key --replace
              sqlcipherkit backup legacy.db legacy-copy.db --key-file legacy.key \\
                  --cipher-compatibility 3 --json
            """)
    )

    @Argument(help: ArgumentHelp("The database to back up.", valueName: "database"))
    var database: String

    @Argument(help: ArgumentHelp("The backup file.", valueName: "destination"))
    var destination: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Destination key (optional; the source's key by default)")
    var destinationKey: DestinationKeyOptions

    @OptionGroup
    var weakPassphrase: WeakPassphraseOption

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @Flag(help: "Replace the destination when it exists.")
    var replace = false

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        try validateOneStandardInputKey(key, destinationKey)
        guard database != destination else { throw ValidationError("the destination must be another file") }
    }

    func run() throws {
        let key = try key.loadKey()
        let chosenKey = try destinationKey.loadOptionalKey()
        // A destination key is chosen now (the source's own key is not judged: it is the key the copy keeps).
        if let chosenKey, !chosenKey.isSameKey(as: key) { try weakPassphrase.check(newKey: chosenKey) }
        let destinationKey = chosenKey ?? key
        try FileFacts.requireDatabase(database, nothingTo: "back up")
        if !replace && FileFacts.isNonEmptyFile(destination) {
            try FileFacts.refuseExistingDestination(destination, replaceOption: "--replace")
        }
        // A symlinked destination is followed on purpose (the file it points to is replaced, the link stays a
        // link); the result line names that file, so nobody is surprised where the backup went.
        let followedDestination = symlinkTarget(of: destination)
        // A replaced file's owner, group and mode are given to the new one; only a new file gets 0600.
        let replacesExisting = access(destination, F_OK) == 0
        let source = try Connection(
            path: database, encryption: try cipher.encryption(for: key), options: OpenOptions(mode: .readOnly))
        let phases = BackupPhases()
        let note = "nothing changed: \(database) is untouched (a backup only reads it)"
            + (replacesExisting ? ", \(destination) was left as it was" : ", no backup was written")
            + " and the unfinished copy was removed"
        let progress = PhaseProgress(label: "backup", mode: display.progress, interruptNote: note, state: phases.state)
        try progress.run {
            try source.backup(toPath: destination, encryption: try cipher.encryption(for: destinationKey)) { step in
                phases.record(step)
                progress.update()
            }
        }
        source.close()
        Output.setJSONResult(CopyReport(source: database, destination: destination, isEncrypted: true))
        if !Output.isJSON {
            let target = followedDestination.map { "\(destination) (symlink followed: \($0))" } ?? destination
            let kept = replacesExisting ? "owner, group and mode of the replaced file kept" : "mode 0600"
            Output.result("backed up \(database) to \(target) (\(kept), verified)")
        }
    }
}

/// The phases of a backup: pages copied (reported by SQLite's backup API), then the verification of the copy.
final class BackupPhases: Sendable {
    private let progress = Locked<(step: BackupProgress?, endShown: Bool)>((nil, false))

    func record(_ step: BackupProgress) {
        progress.withLock { $0.step = step }
    }

    /// The copy's last step is shown once as what it is (every page copied), then the verification.
    func state() -> PhaseState {
        let (step, showsEnd) = progress.withLock { value -> (BackupProgress?, Bool) in
            guard let step = value.step, step.pagesCopied >= step.pageCount else { return (value.step, false) }
            defer { value.endShown = true }
            return (step, !value.endShown)
        }
        guard let step else { return PhaseState(phase: "opening the copy") }
        guard step.pagesCopied < step.pageCount || showsEnd else {
            return PhaseState(phase: "verifying the copy (opened with its key, quick_check)")
        }
        return PhaseState(phase: "copying pages", done: min(step.pagesCopied, step.pageCount), total: step.pageCount)
    }
}

/// The real path behind `path` when `path` is a symbolic link (to an existing file); `nil` otherwise.
func symlinkTarget(of path: String) -> String? {
    var status = stat()
    guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFLNK, let resolved = realpath(path, nil) else {
        return nil
    }
    defer { free(resolved) }
    return String(cString: resolved)
}
