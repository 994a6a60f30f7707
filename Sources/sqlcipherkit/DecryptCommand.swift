import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit decrypt`: a plaintext copy, only when explicitly allowed
/// (``Connection/exportDecryptedPlaintextCopy(to:)``).
struct DecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Write an UNENCRYPTED copy of an encrypted database (needs --allow-plaintext).",
        discussion: """
            Anyone who can read the copy can read the data: the command refuses to run without \
            --allow-plaintext (exit status 2). The copy is created with mode 0600, verified, and renamed into \
            place; the destination must not exist; the encrypted database is not changed. Delete the copy as soon \
            as it has served its purpose.

            Example:
              sqlcipherkit decrypt notes.db /tmp/notes-plain.db --key-file notes.key --allow-plaintext
            """
    )

    @Argument(help: ArgumentHelp("The encrypted database.", valueName: "database"))
    var database: String

    @Argument(help: ArgumentHelp("The plaintext copy to create.", valueName: "output"))
    var output: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings")
    var cipher: CipherOptions

    @Flag(help: "Confirm that an unencrypted copy is wanted.")
    var allowPlaintext = false

    func validate() throws {
        guard allowPlaintext else {
            throw ValidationError(
                "decrypt writes an UNENCRYPTED copy that anyone who can read the file can read; pass"
                    + " --allow-plaintext to confirm")
        }
        guard database != output else { throw ValidationError("the output must be another file") }
        _ = try key.requiredSource()
    }

    func run() throws {
        let encryption = try cipher.encryption(for: try key.loadKey())
        guard FileFacts.isNonEmptyFile(database) else {
            throw CommandFailure("\(database) does not exist or is empty; nothing to decrypt")
        }
        let source = try Connection(path: database, encryption: encryption, options: OpenOptions(mode: .readWrite))
        try source.exportDecryptedPlaintextCopy(to: output)
        source.close()
        Output.result("wrote a plaintext copy of \(database) to \(output) (mode 0600, verified)")
        Output.message("warning: \(output) is NOT encrypted; delete it as soon as it has served its purpose")
    }
}
