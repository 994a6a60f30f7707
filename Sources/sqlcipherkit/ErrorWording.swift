import SQLCipherKit
import Synchronization

/// The library's errors in the CLI's words: the library's reason as it is, and its advice (``DatabaseError/remedy``,
/// a value, never parsed from text) in the CLI's options and subcommands rather than the library's API names.
enum ErrorWording {
    /// Whether the advice is for `sqlcipherkit shell` (set by the shell before it opens the database): its key never
    /// comes from standard input, which holds its statements, and a plaintext file is opened with `shell --plaintext`.
    static let isForShell = Atomic(false)

    /// The options that give a key to the running subcommand.
    static var keyOptions: String {
        isForShell.load(ordering: .relaxed) ? "--key-file or --key-env" : "--key-file, --key-env or --key-stdin"
    }

    /// The subcommand that runs SQL on a database (`exec`, or `shell` inside the shell).
    static var sessionCommand: String { isForShell.load(ordering: .relaxed) ? "shell" : "exec" }

    /// The message of `error` for operators.
    static func message(for error: DatabaseError) -> String {
        guard let remedy = error.remedy else { return error.reason }
        return "\(error.reason); \(remedy.cliWording)"
    }
}

extension DatabaseError.Remedy {
    /// The advice in the CLI's words (``libraryWording`` is the library's).
    var cliWording: String {
        switch self {
        case .openWithoutKeyOrEncrypt:
            "encrypt it into a new file with `sqlcipherkit encrypt`, or run SQL on it as it is with"
                + " `sqlcipherkit \(ErrorWording.sessionCommand) --plaintext`"
        case .openWithKey:
            "give its key with \(ErrorWording.keyOptions)"
        case .openWithPlaintextHeaderSettings:
            "open it with its key, --plaintext-header-size (usually 32) and its salt (--salt-file, or a key file"
                + " x'<96 hex>')"
        case .giveSalt:
            "give it with --salt-file, or use a key file holding x'<96 hex>' (key and salt)"
        case .encryptIntoNewFile:
            "encrypt it into a new file with `sqlcipherkit encrypt`"
        case .decryptIntoNewFile:
            "a plaintext copy is made only by `sqlcipherkit decrypt`"
        case .matchSourceCipherSettings:
            "give the destination the source's cipher settings (the same cipher options)"
        case .copyWithBackup, .copyWithVacuumInto:
            "use `sqlcipherkit backup` (a private copy with the same key and settings, verified)"
        case .keyThroughAPI:
            "give the key with \(ErrorWording.keyOptions), and change it with `sqlcipherkit rotate`"
        case .cipherSettingsWhenOpening:
            "give them as cipher options (--cipher-compatibility, --page-size, --plaintext-header-size, …); to"
                + " change them, re-encrypt with `sqlcipherkit rotate` or `sqlcipherkit migrate`"
        case .pageSizeWhenCreating:
            "give --page-size when the database is created"
        case .migrateWithExport:
            "to migrate, use `sqlcipherkit migrate`"
        case .attachWithKey:
            "give the attached file a key (ATTACH … KEY ?), or allow plaintext attachments with --allow-plaintext"
        case .attachPlaintextWithEmptyKey:
            "it is attached as plaintext with KEY '' and --allow-plaintext; to keep it encrypted, encrypt it into a"
                + " new file with `sqlcipherkit encrypt` and attach that"
        case .stopOtherProcesses:
            "stop them first: they would keep using the old file"
        case .openWithCompatibility(let version):
            "this file opens with --cipher-compatibility \(version)"
                + (version == 3 ? " (`sqlcipherkit migrate` converts it to SQLCipher 4's format)" : "")
        case .openWithSQLCipher4:
            "run sqlcipherkit linked with SQLCipher 4 (the engine `sqlcipherkit --version` names is older)"
        case .allowWeakPassphrase:
            "to accept it anyway, give --allow-weak-passphrase"
        case .readKeyFileInsteadOfPath:
            "the environment variable holds the path of an existing file, but --key-env takes the key itself: give the"
                + " file with --key-file"
        case .removeWhitespaceAfterRawKey, .writeRawKeyWithQuotes, .checkTrailingSpaceInPassphrase,
             .checkLeadingSpaceInPassphrase:
            libraryWording
        }
    }
}
