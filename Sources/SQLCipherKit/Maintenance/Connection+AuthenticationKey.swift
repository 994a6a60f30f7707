extension Connection {
    /// A key for `purpose` derived from this connection's database key (see ``AuthenticationKey``): what a replica
    /// of this database is authenticated with.
    ///
    /// - Throws: ``DatabaseError`` (`invalidState`) for a plaintext database or one with no salt yet (nothing
    ///   written); the key derivation's errors.
    package func authenticationKey(purpose: String) throws -> AuthenticationKey {
        guard let key = encryption.key else {
            throw DatabaseError(.invalidState, "\(filePath) is not encrypted: it has no key to authenticate with")
        }
        let salt = try cipherSalt
        if key.kind == .passphrase && salt == nil {
            throw DatabaseError(.invalidState, "\(filePath) has no salt yet (nothing was written to it)")
        }
        return try AuthenticationKey.derive(from: key, settings: encryption.settings, salt: salt, purpose: purpose)
    }
}
