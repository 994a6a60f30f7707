
/// Opens the connections of a ``DatabaseQueue`` or ``DatabasePool``: asks the key provider each time, and derives a
/// passphrase into a raw key once (with OpenSSL, the engine's KDF settings and the file's salt), so later
/// connections skip SQLCipher's PBKDF2 (25–85 ms each).
final class ConnectionFactory: Sendable {
    let path: String
    let settings: CipherSettings
    let options: OpenOptions
    private let state: Locked<State>

    private struct State {
        var keyProvider: KeyProvider?
        /// The last passphrase and the raw key derived from it. Secret: both live in wiped buffers, released
        /// (and wiped) when replaced or when the factory goes away.
        var derived: (passphrase: EncryptionKey, parameters: KeyDerivation.Parameters, key: EncryptionKey)?
    }

    init(path: String, keyProvider: KeyProvider?, settings: CipherSettings, options: OpenOptions) {
        self.path = path
        self.settings = settings
        self.options = options
        self.state = Locked(State(keyProvider: keyProvider, derived: nil))
    }

    var isEncrypted: Bool { state.withLock { $0.keyProvider != nil } }

    /// Opens one more connection.
    func open(readOnly: Bool = false) throws -> Connection {
        let connection = try Connection(path: path, encryption: try encryption(), options: options)
        if readOnly {
            // query_only: a reader cannot write, whatever SQL it is given.
            try connection.execute("PRAGMA query_only = 1")
        }
        return connection
    }

    /// The encryption for the next connection: the provider's key, with a passphrase replaced by its derived key.
    func encryption() throws -> Encryption {
        try state.withLock { state in
            guard let provider = state.keyProvider else { return .none }
            let key = try provider.key()
            guard key.kind == .passphrase else { return .key(key, settings: settings) }
            let parameters = KeyDerivation.Parameters(settings: settings)
            if let derived = state.derived, derived.parameters == parameters, derived.passphrase.isSameKey(as: key) {
                return .key(derived.key, settings: settings)
            }
            let derivedKey = try KeyDerivation.derive(passphrase: key, salt: try salt(), parameters: parameters)
            state.derived = (key, parameters, derivedKey)
            return .key(derivedKey, settings: settings)
        }
    }

    /// Derives `key` for this database without opening it (rekey needs the new key in raw form).
    func derivedEncryption(for key: EncryptionKey) throws -> Encryption {
        guard key.kind == .passphrase else { return .key(key, settings: settings) }
        let parameters = KeyDerivation.Parameters(settings: settings)
        return .key(try KeyDerivation.derive(passphrase: key, salt: try salt(), parameters: parameters), settings: settings)
    }

    /// Replaces the key provider (after a rekey).
    func replaceKeyProvider(_ provider: KeyProvider, derived: (EncryptionKey, EncryptionKey)?) {
        state.withLock { state in
            state.keyProvider = provider
            state.derived = derived.map { ($0.0, KeyDerivation.Parameters(settings: settings), $0.1) }
        }
    }

    /// The salt SQLCipher will use: the settings' (plaintext header), the file's first 16 bytes, or a new random one
    /// for a new file (the first connection then creates the file with it).
    private func salt() throws -> [UInt8] {
        if let salt = settings.salt { return salt }
        let size = regularFileSize(atPath: path) ?? 0
        if (settings.plaintextHeaderSize ?? 0) > 0 {
            guard size == 0 else {
                throw EncryptionKey.invalid(
                    "a database with a plaintext header does not store its salt; give it with CipherSettings.salt")
            }
            return (0..<EncryptionKey.saltByteCount).map { _ in UInt8.random(in: 0...255) }
        }
        if size >= EncryptionKey.saltByteCount {
            return readFilePrefix(atPath: path, count: EncryptionKey.saltByteCount)
        }
        var generator = SystemRandomNumberGenerator()
        return (0..<EncryptionKey.saltByteCount).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
}
