import ArgumentParser
import SQLCipherKit

/// `exec` and `shell`: commands that open one database to run SQL on it, with the same rules for the key, a
/// plaintext database, a missing file and ATTACH without a key.
protocol SQLSessionCommand: OperatorCommand {
    associatedtype Key: KeySourceOptions
    var database: String { get }
    var key: Key { get }
    var cipher: CipherOptions { get }
    var plaintext: Bool { get }
    var create: Bool { get }
    var allowPlaintext: Bool { get }
    /// Whether the key may come from standard input (`exec`); the shell reads its statements from there.
    var acceptsKeyFromStandardInput: Bool { get }
}

extension SQLSessionCommand {
    /// `--plaintext` takes neither a key nor a cipher option.
    func validateOpening() throws {
        if plaintext && (key.isGiven || !cipher.isEmpty) {
            throw ValidationError("--plaintext opens an unencrypted database: give no key and no cipher option")
        }
    }

    /// Opens the database: with the key (asked at the terminal when no option gives it), or without one for
    /// `--plaintext`; a missing file only with `--create` (then mode 0600); ATTACH without a key only with
    /// `--allow-plaintext`.
    func openConnection() throws -> Connection {
        let format = DatabaseFileInspection.inspect(path: database).format
        if !plaintext && !key.isGiven && format == .plaintext {
            throw CommandFailure(
                "\(database) is a plaintext (unencrypted) SQLite database: give --plaintext to run SQL on it as it is,"
                    + " or encrypt it into a new file with `sqlcipherkit encrypt`", status: .usage)
        }
        try FileFacts.refuseFolder(database)
        if !plaintext && !acceptsKeyFromStandardInput && !key.isGiven && !Terminal.isStandardInputTerminal {
            throw CommandFailure(
                "the key is missing: give it with --key-file or --key-env (the shell reads its statements from"
                    + " standard input, and asks for the key only on a terminal)", status: .usage, kind: "usage")
        }
        let encryption: Encryption = plaintext ? .none : try cipher.encryption(for: try key.loadKey())
        if format == .missing && !create {
            throw CommandFailure(
                "\(database) does not exist; pass --create to create a new database", kind: "missingFile")
        }
        return try Connection(
            path: database, encryption: encryption, options: OpenOptions(allowsPlaintextAttachments: allowPlaintext))
    }
}
