import CSQLCipher

/// An authorizer installed on every connection that refuses the SQL that would defeat the encryption:
/// - `PRAGMA key`, `rekey`, `hexkey`, `hexrekey`, `textkey`, `textrekey`: keys never travel in SQL text, and keying a
///   handle that has done I/O corrupts the file (SQLCIPHER-FACTS §0.3); use ``Connection/rekey(to:)``;
/// - `PRAGMA temp_store` set to anything but MEMORY: FILE writes plaintext temporary files (SQLCIPHER-FACTS §9).
///
/// Such a statement fails to prepare with `SQLITE_AUTH`.
enum EncryptionGuard {
    static let refusedPragmas: Set<String> = ["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]

    static func install(on sqliteConnection: OpaquePointer) {
        sqlite3_set_authorizer(sqliteConnection, authorize, nil)
    }

    /// Explains an `SQLITE_AUTH` failure caused by this guard.
    static let refusalHint = "SQLCipherKit refuses PRAGMA key/rekey in SQL (use Connection.rekey(to:)) and"
        + " temp_store other than MEMORY (it writes plaintext temporary files)"

    private static let authorize: @convention(c) (
        UnsafeMutableRawPointer?, CInt, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?
    ) -> CInt = { _, action, pragmaName, pragmaValue, _, _ in
        guard action == SQLITE_PRAGMA, let pragmaName else { return SQLITE_OK }
        let name = String(cString: pragmaName).lowercased()
        if refusedPragmas.contains(name) {
            return SQLITE_DENY
        }
        if name == "temp_store", let pragmaValue {
            let value = String(cString: pragmaValue).lowercased().trimmingWhitespace()
            return value == "memory" || value == "2" || value == "'memory'" || value == "\"memory\""
                ? SQLITE_OK : SQLITE_DENY
        }
        return SQLITE_OK
    }
}
