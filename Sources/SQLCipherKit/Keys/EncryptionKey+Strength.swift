extension EncryptionKey {
    /// The shortest passphrase, in bytes, that a key rotation (``KeyRotation``, a live hand-over of
    /// `DatabaseService`) accepts as the new key unless the caller opts in.
    ///
    /// Any key text that is not `x'…'` is a passphrase, whatever it says: a secret agent that writes an error message
    /// into a key file, or an operator who pastes the wrong line, would otherwise have the database rekeyed to it.
    /// 20 bytes is longer than such accidents usually are, and well within what a generated passphrase has; a raw key
    /// (`sqlcipherkit keygen`) has no floor.
    public static let minimumRotationPassphraseByteCount = 20

    /// Why this key should not become a database's new key, or `nil` when it may: a passphrase shorter than
    /// ``minimumRotationPassphraseByteCount``, or one with a line break or another control character inside
    /// (a key file holds one line), or an environment variable's value that is the path of an existing file (see
    /// ``init(environmentVariable:)``). Never shows the key.
    public var weakRotationKeyReason: String? {
        guard kind == .passphrase else { return nil }
        if mistakeHint == .readKeyFileInsteadOfPath {
            return "the new key is the path of an existing file, taken from an environment variable as if it were the"
                + " key itself"
        }
        return material.withUnsafeBytes { bytes -> String? in
            if bytes.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                return "the new key is a passphrase with a line break or another control character inside: a key"
                    + " file holds one line, so this is more likely text written by mistake than a key"
            }
            if bytes.count < Self.minimumRotationPassphraseByteCount {
                return "the new key is a passphrase of \(bytes.count) bytes; a new passphrase must have at"
                    + " least \(Self.minimumRotationPassphraseByteCount) bytes (any text that is not x'…' is a"
                    + " passphrase, so a message written into a key file by mistake would become the key)"
            }
            return nil
        }
    }

    /// Throws when ``weakRotationKeyReason`` has a reason and the caller did not opt in, with the remedy
    /// ``DatabaseError/Remedy/allowWeakPassphrase`` (a tool words the opt-in in its own terms).
    ///
    /// - Throws: ``DatabaseError/invalidKey``.
    package func checkStrongEnoughForRotation(allowsWeakPassphrase: Bool) throws {
        guard !allowsWeakPassphrase, let reason = weakRotationKeyReason else { return }
        throw DatabaseError(
            .invalidKey, "\(reason). Use a raw key or a longer passphrase; nothing was changed",
            remedy: .allowWeakPassphrase)
    }

    /// Throws when ``weakRotationKeyReason`` has a reason and the caller did not opt in.
    ///
    /// - Parameters:
    ///   - allowsWeakPassphrase: The caller's opt-in.
    ///   - remedy: What the caller can do, in the caller's words (an option name, an API name).
    /// - Throws: ``DatabaseError/invalidKey``.
    package func checkStrongEnoughForRotation(allowsWeakPassphrase: Bool, remedy: String) throws {
        guard !allowsWeakPassphrase, let reason = weakRotationKeyReason else { return }
        throw Self.invalid("\(reason). Use a raw key (sqlcipherkit keygen) or a longer passphrase; \(remedy)")
    }
}
