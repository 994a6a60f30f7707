import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit encrypt`: a plaintext database into a new encrypted one (``Connection/exportEncrypted(to:key:settings:)``).
struct EncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Copy a plaintext SQLite database into a new encrypted database.",
        discussion: """
            The plaintext database is read, never changed. The encrypted copy is written under a temporary name \
            (mode 0600), verified with the new key (quick_check, schema, user_version, application_id, journal \
            mode), flushed, and renamed into place; the destination must not exist. With --plaintext-header-size \
            (SQLCipher 4 only) the first bytes stay plaintext, and the database salt is not stored in the file: \
            it is taken from the key, which must then be a raw key with salt (keygen --with-salt).

            Delete the plaintext original securely once the copy is checked.

            Example:
              sqlcipherkit keygen --out notes.key
              sqlcipherkit encrypt legacy.db notes.db --new-key-file notes.key
              sqlcipherkit encrypt legacy.db shared.db --new-key-file header.key --plaintext-header-size 32
            """
    )

    @Argument(help: ArgumentHelp("The plaintext database.", valueName: "plaintext"))
    var plaintext: String

    @Argument(help: ArgumentHelp("The encrypted database to create.", valueName: "output"))
    var output: String

    @OptionGroup(title: "Key of the encrypted copy")
    var newKey: NewKeyOptions

    @Option(
        help: ArgumentHelp(
            "Leave this many bytes plaintext (SQLCipher 4; usually 32); needs an x'<96 hex>' key.",
            valueName: "bytes"))
    var plaintextHeaderSize: Int?

    func validate() throws {
        _ = try newKey.requiredSource()
        if let size = plaintextHeaderSize, size < 0 || size % 16 != 0 {
            throw ValidationError("--plaintext-header-size must be a multiple of 16 (usually 32), not \(size)")
        }
        guard plaintext != output else { throw ValidationError("the output must be another file") }
    }

    func run() throws {
        let key = try newKey.loadKey(confirm: true)
        var settings = CipherSettings.engineDefault
        if let size = plaintextHeaderSize, size > 0 {
            guard let salt = key.salt else {
                throw CommandFailure(
                    "--plaintext-header-size needs a raw key with salt (x'<96 hex>', from `sqlcipherkit keygen"
                        + " --with-salt`): a database with a plaintext header does not store its salt",
                    status: .usage)
            }
            settings = .plaintextHeader(size: size, salt: salt)
        }
        guard FileFacts.isNonEmptyFile(plaintext) else {
            throw CommandFailure("\(plaintext) does not exist or is empty; nothing to encrypt")
        }
        let source = try Connection(path: plaintext, encryption: .none, options: OpenOptions(mode: .readWrite))
        ProgressBar(label: "encrypt").announce("copying \(plaintext) into \(output)…")
        try source.exportEncrypted(to: output, key: key, settings: settings)
        source.close()
        Output.result("encrypted \(plaintext) into \(output) (mode 0600, verified); \(plaintext) was not changed")
    }
}
