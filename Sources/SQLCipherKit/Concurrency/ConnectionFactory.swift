
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
            let derivedKey: EncryptionKey
            if let salt = try salt() {
                derivedKey = try KeyDerivation.derive(passphrase: key, salt: salt, parameters: parameters)
            } else if let createdKey = try createFileWithSalt(passphrase: key, parameters: parameters) {
                derivedKey = createdKey
            } else {
                // Read-only, or a URI: nothing can be created here; SQLCipher derives from the passphrase itself.
                return .key(key, settings: settings)
            }
            state.derived = (key, parameters, derivedKey)
            return .key(derivedKey, settings: settings)
        }
    }

    /// Serialises the creation of new files across the pools and queues of this process; counts the files created.
    /// (Not `Locked<Void>`: ThreadSanitizer takes the zero-sized value's address for the mutex field's and reports
    /// a race.)
    private static let newFileLock = Locked(0)

    /// For a new (empty or missing) file: derives the key from the salt the file actually gets. A key derived from a
    /// salt of our own choosing is only right if our page 1 is the one written: another pool or process keying the
    /// same new file picks its own salt, and whichever writes first wins (the other then reads "not a database";
    /// SQLCipher 3 even fixes a passphrase connection's salt when it is keyed). So the file is created here, under
    /// an exclusive lock, with the derived key and its salt; when another writer got there first, its salt is read
    /// back and the key derived again from it.
    ///
    /// - Returns: `nil` when the file cannot be created here (read-only, URI).
    private func createFileWithSalt(
        passphrase: EncryptionKey, parameters: KeyDerivation.Parameters
    ) throws -> EncryptionKey? {
        guard !options.isURI, options.mode != .readOnly else { return nil }
        return try Self.newFileLock.withLock { createdCount -> EncryptionKey? in
            // Another pool of this process may have created it while this one waited.
            if let salt = try salt() {
                return try KeyDerivation.derive(passphrase: passphrase, salt: salt, parameters: parameters)
            }
            var generator = SystemRandomNumberGenerator()
            let candidate = (0..<EncryptionKey.saltByteCount).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let derivedKey = try KeyDerivation.derive(passphrase: passphrase, salt: candidate, parameters: parameters)
            if try writeFirstPage(key: derivedKey) {
                createdCount += 1
                return derivedKey
            }
            // Another process wrote page 1 first: its salt is the file's.
            guard let salt = try salt() else {
                throw DatabaseError(
                    kind: .invalidState, code: DatabaseError.SQLITE_ERROR,
                    message: "the new database file could not be created with a salt (path: \(path))")
            }
            return try KeyDerivation.derive(passphrase: passphrase, salt: salt, parameters: parameters)
        }
    }

    /// Writes page 1 of an empty file with `key` (a raw key with salt): opening a connection to the new file writes
    /// it, under an exclusive lock (`Connection.createEncryptedFile`, the one writer of a new file's page 1).
    ///
    /// - Returns: `false` when another connection had written it first (its page 1 does not open with this key).
    private func writeFirstPage(key: EncryptionKey) throws -> Bool {
        let creationOptions = OpenOptions(
            mode: .readWriteCreate, busyTimeout: options.busyTimeout ?? .seconds(5), statementCacheCapacity: 4,
            logger: options.logger)
        let connection: Connection
        do {
            connection = try Connection(path: path, encryption: .key(key, settings: settings), options: creationOptions)
        } catch DatabaseError.wrongKey {
            return false
        }
        defer { connection.close() }
        return connection.wroteFirstPage
    }

    /// Derives `key` for this database without opening it (rekey needs the new key in raw form).
    func derivedEncryption(for key: EncryptionKey) throws -> Encryption {
        guard key.kind == .passphrase else { return .key(key, settings: settings) }
        let parameters = KeyDerivation.Parameters(settings: settings)
        // A new file without a salt yet is rekeyed with the passphrase itself.
        guard let salt = try salt() else { return .key(key, settings: settings) }
        return .key(try KeyDerivation.derive(passphrase: key, salt: salt, parameters: parameters), settings: settings)
    }

    /// Replaces the key provider (after a rekey).
    func replaceKeyProvider(_ provider: KeyProvider, derived: (EncryptionKey, EncryptionKey)?) {
        state.withLock { state in
            state.keyProvider = provider
            state.derived = derived.map { ($0.0, KeyDerivation.Parameters(settings: settings), $0.1) }
        }
    }

    /// The salt SQLCipher will use: the settings' (plaintext header), a new random one for a new plaintext-header
    /// file (which does not store it), the file's first 16 bytes, or `nil` for a new file that has no salt yet.
    private func salt() throws -> [UInt8]? {
        if let salt = settings.salt { return salt }
        let size = regularFileSize(atPath: path) ?? 0
        if (settings.plaintextHeaderSize ?? 0) > 0 {
            guard size == 0 else {
                throw DatabaseError(
                    .invalidKey, "a database with a plaintext header does not store its salt", remedy: .giveSalt)
            }
            return (0..<EncryptionKey.saltByteCount).map { _ in UInt8.random(in: 0...255) }
        }
        if size >= EncryptionKey.saltByteCount {
            return readFilePrefix(atPath: path, count: EncryptionKey.saltByteCount)
        }
        return nil
    }
}
