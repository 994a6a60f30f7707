import CSQLCipher

/// An authorizer installed on every connection that refuses the SQL that would defeat the encryption:
/// - `PRAGMA key`, `rekey`, `hexkey`, `hexrekey`, `textkey`, `textrekey`: keys never travel in SQL text, and keying a
///   handle that has done I/O corrupts the file (SQLCIPHER-FACTS §0.3); use ``Connection/rekey(to:)``;
/// - `PRAGMA temp_store` set to anything but MEMORY: FILE writes plaintext temporary files (SQLCIPHER-FACTS §9).
///
/// Such a statement fails to prepare with `SQLITE_AUTH`.
enum EncryptionGuard {
    static let refusedPragmas: Set<String> = ["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]

    /// Installs the guard, followed by the caller's authorizer when there is one (the guard always decides first).
    static func install(on sqliteConnection: OpaquePointer, userAuthorizer: AuthorizerBox? = nil) {
        sqlite3_set_authorizer(
            sqliteConnection, authorize, userAuthorizer.map { Unmanaged.passUnretained($0).toOpaque() })
    }

    /// Explains an `SQLITE_AUTH` failure caused by this guard.
    static let refusalHint = "SQLCipherKit refuses PRAGMA key/rekey in SQL (use Connection.rekey(to:)) and"
        + " temp_store other than MEMORY (it writes plaintext temporary files)"

    private static let authorize: @convention(c) (
        UnsafeMutableRawPointer?, CInt, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?
    ) -> CInt = { context, action, argument1, argument2, argument3, argument4 in
        if action == SQLITE_PRAGMA, let pragmaName = argument1 {
            let name = String(cString: pragmaName).lowercased()
            if refusedPragmas.contains(name) {
                return SQLITE_DENY
            }
            if name == "temp_store", let pragmaValue = argument2 {
                let value = String(cString: pragmaValue).lowercased().trimmingWhitespace()
                if !(value == "memory" || value == "2" || value == "'memory'" || value == "\"memory\"") {
                    return SQLITE_DENY
                }
            }
        }
        guard let context else { return SQLITE_OK }
        let box = Unmanaged<AuthorizerBox>.fromOpaque(context).takeUnretainedValue()
        let request = AuthorizerRequest(
            actionCode: action, argument1: argument1.map { String(cString: $0) },
            argument2: argument2.map { String(cString: $0) }, databaseName: argument3.map { String(cString: $0) },
            triggerOrView: argument4.map { String(cString: $0) })
        return box.authorize(request).code
    }
}
