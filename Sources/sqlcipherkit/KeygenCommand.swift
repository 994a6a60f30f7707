import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit keygen`: a new random raw key in a new key file.
struct KeygenCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Generate a random 256-bit raw key into a new key file (mode 0600).",
        discussion: """
            The key comes from OpenSSL's CSPRNG and is written as SQLCipher's raw-key text x'<64 hex>' (with \
            --with-salt, x'<96 hex>': key and a random 16-byte salt, needed by databases with a plaintext header). \
            A raw key skips the key derivation, so databases open faster than with a passphrase. The file is \
            created with mode 0600 and flushed to disk, and so is its folder; an existing file is never overwritten. \
            The key is not printed.

            Example:
              sqlcipherkit keygen --out /etc/myservice/notes-2026.key
              sqlcipherkit keygen --out header.key --with-salt
              sqlcipherkit keygen --out header-2027.key --salt-from header.key
              sqlcipherkit keygen --out notes.key --json
            """
    )

    @Option(name: .customLong("out"), help: ArgumentHelp("The key file to create.", valueName: "path"))
    var keyFile: String

    @Flag(help: "Add a random 16-byte salt (x'<96 hex>'), for databases with a plaintext header.")
    var withSalt = false

    @Option(
        name: .customLong("salt-from"),
        help: ArgumentHelp(
            "Give the new key the salt of this key file (x'<96 hex>'): the new key of a plaintext-header database"
                + " must carry the database's salt.", valueName: "key-file"))
    var saltFrom: String?

    func validate() throws {
        if withSalt && saltFrom != nil {
            throw ValidationError("--with-salt makes a new salt and --salt-from copies one: give one of them")
        }
    }

    @OptionGroup(title: "Output")
    var output: OutputOptions

    func run() throws {
        try FileFacts.refuseExistingDestination(keyFile)
        var key = try EncryptionKey.generateRaw(withSalt: withSalt)
        if let saltFrom {
            guard let salt = try EncryptionKey(contentsOf: saltFrom).salt else {
                throw CommandFailure(
                    "the key file \(KeyMaterialRedaction.shown(saltFrom, as: "key file path")) has no salt (it is not"
                        + " x'<96 hex>'); nothing was written", status: .usage)
            }
            key = try key.withSalt(salt)
        }
        let isSalted = key.salt != nil
        try key.write(toKeyFile: keyFile)
        Output.setJSONResult(KeygenReport(path: keyFile, withSalt: isSalted))
        if !Output.isJSON {
            let salt = saltFrom != nil ? " with the salt of \(saltFrom!)" : (withSalt ? " with salt" : "")
            Output.result("wrote a new random raw key\(salt) to \(keyFile) (mode 0600)")
        }
    }
}

/// `keygen --json`'s `result` (never the key).
struct KeygenReport: Encodable, Sendable {
    let path: String
    let withSalt: Bool
}
