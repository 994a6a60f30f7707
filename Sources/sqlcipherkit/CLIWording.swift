/// The library speaks in API terms (`Encryption.none`, `CipherSettings.salt`); the CLI says which subcommand or
/// option does the same thing. (The HMAC salt mask message needs no entry: the CLI always opens inside the scope.)
enum CLIWording {
    /// Library phrases and the CLI's words for them, most specific first.
    static let replacements: [(library: String, cli: String)] = [
        ("open it with Encryption.none, or encrypt it into a new file with an export",
         "encrypt it into a new file with `sqlcipherkit encrypt`, or run SQL on it as it is with"
            + " `sqlcipherkit exec --plaintext`"),
        ("open it with its key, CipherSettings.plaintextHeaderSize and its salt",
         "open it with its key, --plaintext-header-size (usually 32) and its salt (--salt-file, or a key file"
            + " x'<96 hex>')"),
        ("give it with CipherSettings.salt or a raw key with salt (x'<96 hex>')",
         "give it with --salt-file, or use a key file holding x'<96 hex>' (key and salt)"),
        ("open it with its key (path:", "give its key with --key-file, --key-env or --key-stdin (path:"),
        ("CipherSettings.plaintextHeaderSize", "--plaintext-header-size"),
        ("CipherSettings.salt", "--salt-file"),
        ("with Encryption.none", "with `sqlcipherkit exec --plaintext`"),
        ("Encryption.none", "--plaintext"),
        ("Export it into an encrypted copy with exportEncrypted(to:key:settings:)",
         "Encrypt it into a new file with `sqlcipherkit encrypt`"),
        ("give the destination the source's cipher settings, or use exportEncrypted(to:key:settings:) to change them",
         "give the destination the source's cipher settings (the same cipher options)"),
        ("a plaintext copy is made only by exportDecryptedPlaintextCopy(to:)",
         "a plaintext copy is made only by `sqlcipherkit decrypt`"),
        ("use exportEncrypted(to:key:settings:)", "use `sqlcipherkit encrypt`"),
        ("Use backup(toPath:) or exportEncrypted(to:key:settings:)", "Use `sqlcipherkit backup`"),
    ]

    /// `message` with the library's API names replaced by the CLI's subcommands and options.
    static func translate(_ message: String) -> String {
        var text = message
        for (library, cli) in replacements where text.contains(library) {
            text = text.replacingOccurrences(of: library, with: cli)
        }
        return text
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = self[...]
        while let range = rest.range(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
