extension SQLCipher {
    /// SQLCipher's default HMAC salt mask (`cipher_hmac_salt_mask`), `0x3a`.
    public static let defaultHMACSaltMask: UInt8 = 0x3a

    /// Runs `body` with SQLCipher's process-wide HMAC salt mask set to `mask`, then restores
    /// ``defaultHMACSaltMask``.
    ///
    /// Only SQLCipher 2.0 beta files need another mask (`0x00`). Both SQLCipher 3 and 4 keep the mask for the whole
    /// process rather than per connection: while it is changed, every connection that derives its key (opens a file)
    /// uses it, and a default file opened meanwhile fails with "not a database". Scopes never overlap (a second one,
    /// from another thread, waits), and ``CipherSettings/hmacSaltMask`` is accepted at open only when it equals the
    /// mask in force.
    ///
    /// ```swift
    /// let settings = CipherSettings(compatibility: 2, fastKDFIterations: 4000, hmacSaltMask: 0x00)
    /// try SQLCipher.withHMACSaltMask(0x00) {
    ///     let old = try Connection(path: "beta.db", key: key, settings: settings)
    ///     try old.exportEncrypted(to: "current.db", key: key)   // the copy uses the default mask
    /// }
    /// ```
    ///
    /// - Warning: Use it only in a process that opens nothing else meanwhile (a command-line tool, a migration
    ///   step): connections opened on other threads during `body` get the mask too.
    /// - Throws: ``DatabaseError/invalidState`` when called inside another scope with a different mask; the engine's
    ///   error when the mask cannot be set or restored; whatever `body` throws (the default is restored first).
    public static func withHMACSaltMask<Result>(_ mask: UInt8, _ body: () throws -> Result) throws -> Result {
        try HMACSaltMaskScope.run(mask, body)
    }
}

/// The one scope in which the process-wide HMAC salt mask may differ from the default.
enum HMACSaltMaskScope {
    /// Held for a whole scope, so scopes from different threads run one after the other.
    private static let scopeLock = Locked(())
    /// The mask of the running scope; `nil` outside any scope.
    private static let activeMask = Locked<UInt8?>(nil)
    /// The mask of the scope the current task runs in (to let a nested scope with the same mask through).
    @TaskLocal private static var currentMask: UInt8?

    static func run<Result>(_ mask: UInt8, _ body: () throws -> Result) throws -> Result {
        if let currentMask {
            guard currentMask == mask else {
                throw DatabaseError(
                    .invalidState,
                    "an HMAC salt mask scope (0x\(Hex.string([currentMask]))) is already running; scopes with"
                        + " different masks cannot nest")
            }
            return try body()
        }
        return try scopeLock.withLock { _ in
            activeMask.withLock { $0 = mask }
            var result: Result?
            var bodyError: (any Error)?
            do {
                try apply(mask)
                result = try $currentMask.withValue(mask) { try body() }
            } catch {
                bodyError = error
            }
            activeMask.withLock { $0 = nil }
            try apply(SQLCipher.defaultHMACSaltMask)
            if let bodyError { throw bodyError }
            return result!
        }
    }

    /// Whether a connection may open with `mask`: it must be the mask in force.
    static func checkAllowed(_ mask: UInt8) throws {
        let inForce = activeMask.withLock { $0 } ?? SQLCipher.defaultHMACSaltMask
        guard mask == inForce else {
            throw DatabaseError(
                .invalidState,
                "the HMAC salt mask 0x\(Hex.string([mask])) applies to the whole process in SQLCipher, not to one"
                    + " connection; open the database inside SQLCipher.withHMACSaltMask(0x\(Hex.string([mask]))) { … }")
        }
    }

    /// Sets the process-wide mask through a keyed in-memory connection (the same settings path as every open).
    private static func apply(_ mask: UInt8) throws {
        let connection = try Connection.inMemory(
            encryption: .key(try EncryptionKey.generateRaw(), settings: CipherSettings(hmacSaltMask: mask)))
        connection.close()
    }
}
