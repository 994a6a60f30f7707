import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit encrypt`: a plaintext database into a new encrypted one (``Connection/exportEncrypted(to:key:settings:)``).
struct EncryptCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Copy a plaintext SQLite database into a new encrypted database.",
        discussion: """
            The plaintext database is read, never changed. The encrypted copy is written under a temporary name \
            (mode 0600), verified with the new key (quick_check, schema, user_version, application_id, journal \
            mode), flushed, and renamed into place; the destination must not exist. With --plaintext-header-size \
            (SQLCipher 4 only) the first bytes stay plaintext, and the database salt is not stored in the file: \
            it is taken from the key, which must then be a raw key with salt (keygen --with-salt). A passphrase \
            shorter than 20 bytes, or with a line break inside, is refused as the new key unless \
            --allow-weak-passphrase is given.

            The cipher options choose the new file's settings (the engine's defaults otherwise), for example \
            --cipher-compatibility 3 for a file SQLCipher 3 can open. On a terminal a progress line shows the pages \
            written, estimated from the size of the file being written (SQLCipher reports no progress for an \
            export); --progress plain prints timestamped lines for logs instead.

            Delete the plaintext original securely once the copy is checked.

            Example:
              sqlcipherkit keygen --out notes.key
              sqlcipherkit encrypt legacy.db notes.db --new-key-file notes.key
              sqlcipherkit encrypt legacy.db shared.db --new-key-file header.key \\
                  --plaintext-header-size 32
              sqlcipherkit encrypt legacy.db v3.db --new-key-file notes.key \\
                  --cipher-compatibility 3 --json
            """
    )

    @Argument(help: ArgumentHelp("The plaintext database.", valueName: "plaintext"))
    var plaintext: String

    @Argument(help: ArgumentHelp("The encrypted database to create.", valueName: "output"))
    var destination: String

    @OptionGroup(title: "Key of the encrypted copy")
    var newKey: NewKeyOptions

    @OptionGroup
    var weakPassphrase: WeakPassphraseOption

    @OptionGroup(title: "Cipher settings of the encrypted copy")
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        guard plaintext != destination else { throw ValidationError("the output must be another file") }
    }

    func run() throws {
        let key = try newKey.loadKey(confirm: true)
        try weakPassphrase.check(newKey: key)
        let settings = try cipher.settings(for: key)
        try FileFacts.requireDatabase(plaintext, nothingTo: "encrypt")
        try FileFacts.refuseExistingDestination(destination)
        let source: Connection
        do {
            source = try Connection(path: plaintext, encryption: .none, options: OpenOptions(mode: .readWrite))
        } catch let error as DatabaseError where error.kind == .missingKey {
            // The library's advice (give its key) fits commands that take a key; encrypt takes a plaintext file.
            throw CommandFailure(
                "\(plaintext) is not a plaintext database: it is probably encrypted already, and `encrypt` reads a"
                    + " plaintext one. To change its key use `sqlcipherkit rotate`; to copy it, `sqlcipherkit backup`",
                status: .keyDoesNotOpenDatabase, kind: "missingKey")
        }
        let growth = ExportGrowth(source: source, destination: destination, destinationPageSize: cipher.effectivePageSize)
        try PhaseProgress(
            label: "encrypt", mode: display.progress,
            interruptNote: "nothing changed: \(plaintext) is untouched and the unfinished encrypted copy was removed"
        ) {
            growth.state(phase: "writing the encrypted copy (export)")
        }.run { try source.exportEncrypted(to: destination, key: key, settings: settings) }
        source.close()
        Output.setJSONResult(CopyReport(source: plaintext, destination: destination, isEncrypted: true))
        if !Output.isJSON {
            Output.result("encrypted \(plaintext) into \(destination) (mode 0600, verified); \(plaintext) was not changed")
        }
    }
}
