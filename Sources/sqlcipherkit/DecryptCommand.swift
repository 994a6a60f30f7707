import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit decrypt`: a plaintext copy, only when explicitly allowed
/// (``Connection/exportDecryptedPlaintextCopy(to:)``).
struct DecryptCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Write an UNENCRYPTED copy of an encrypted database (needs --allow-plaintext).",
        discussion: CipherOptions.withFoldedNote("""
            Anyone who can read the copy can read the data: the command refuses to run without \
            --allow-plaintext (exit status 2). The copy is created with mode 0600, verified, and renamed into \
            place; the destination must not exist; the encrypted database is not changed. Delete the copy as soon \
            as it has served its purpose.

            On a terminal a progress line shows the pages written, estimated from the size of the file being \
            written (SQLCipher reports no progress for an export); --progress plain prints timestamped lines \
            for logs instead.

            Example:
              sqlcipherkit decrypt notes.db /tmp/notes-plain.db --key-file notes.key \\
                  --allow-plaintext
              sqlcipherkit decrypt legacy.db /tmp/plain.db --key-file legacy.key \\
                  --cipher-compatibility 2 --allow-plaintext
            """)
    )

    @Argument(help: ArgumentHelp("The encrypted database.", valueName: "database"))
    var database: String

    @Argument(help: ArgumentHelp("The plaintext copy to create.", valueName: "output"))
    var destination: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @Flag(help: "Confirm that an unencrypted copy is wanted.")
    var allowPlaintext = false

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func validate() throws {
        guard allowPlaintext else {
            throw ValidationError(
                "decrypt writes an UNENCRYPTED copy that anyone who can read the file can read; pass"
                    + " --allow-plaintext to confirm")
        }
        guard database != destination else { throw ValidationError("the output must be another file") }
    }

    func run() throws {
        let encryption = try cipher.encryption(for: try key.loadKey())
        try FileFacts.requireDatabase(database, nothingTo: "decrypt")
        try FileFacts.refuseExistingDestination(destination)
        let source = try Connection(path: database, encryption: encryption, options: OpenOptions(mode: .readWrite))
        let growth = ExportGrowth(source: source, destination: destination, destinationPageSize: nil)
        try PhaseProgress(
            label: "decrypt", mode: display.progress,
            interruptNote: "nothing changed: \(database) is untouched and the unfinished plaintext copy was removed"
        ) {
            growth.state(phase: "writing the plaintext copy (export)")
        }.run { try source.exportDecryptedPlaintextCopy(to: destination) }
        source.close()
        Output.setJSONResult(CopyReport(source: database, destination: destination, isEncrypted: false))
        if !Output.isJSON {
            Output.result("wrote a plaintext copy of \(database) to \(destination) (mode 0600, verified)")
        }
        Output.message("warning: \(destination) is NOT encrypted; delete it as soon as it has served its purpose")
    }
}

/// `encrypt`/`decrypt --json`'s `result`.
struct CopyReport: Encodable, Sendable {
    let source: String
    let destination: String
    let isEncrypted: Bool
}

/// Pages an export has written, estimated from the size of its temporary file beside the destination (SQLCipher
/// reports no progress for `sqlcipher_export`).
struct ExportGrowth: Sendable {
    let growth: FileGrowth
    let expectedPageCount: Int?

    init(source: Connection, destination: String, destinationPageSize: Int?) {
        let sourcePages = (try? source.scalar("PRAGMA page_count", as: Int.self)) ?? nil
        let sourcePageSize = (try? source.scalar("PRAGMA page_size", as: Int.self)) ?? nil
        let pageSize = destinationPageSize ?? sourcePageSize ?? 4096
        let (folder, name) = FileGrowth.split(destination)
        growth = FileGrowth(newFilesIn: [(folder, name)], pageSize: pageSize)
        if let sourcePages, let sourcePageSize {
            expectedPageCount = max(1, (sourcePages * sourcePageSize + pageSize - 1) / pageSize)
        } else {
            expectedPageCount = nil
        }
    }

    func state(phase: String) -> PhaseState {
        let done = growth.pagesWritten()
        if let done, let expectedPageCount, done >= expectedPageCount {
            return PhaseState(phase: "verifying the copy (opened again, quick_check, header fields)")
        }
        return PhaseState(phase: phase, done: done ?? 0, total: expectedPageCount, isEstimate: true)
    }
}
