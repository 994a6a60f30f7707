import CSQLCipher

/// What an authorizer is asked about: one action of a statement being compiled.
///
/// See [Compile-Time Authorization Callbacks](https://www.sqlite.org/c3ref/set_authorizer.html) for the action
/// codes and what the arguments hold for each.
public struct AuthorizerRequest: Sendable, Hashable {
    /// The action code (`SQLITE_INSERT` = 18, `SQLITE_READ` = 20, `SQLITE_DELETE` = 9, `SQLITE_PRAGMA` = 19, …).
    public let actionCode: CInt
    /// The first argument (for reads and writes: the table).
    public let argument1: String?
    /// The second argument (for reads and updates: the column).
    public let argument2: String?
    /// The database name (`main`, `temp`, an attached schema).
    public let databaseName: String?
    /// The innermost trigger or view responsible, if any.
    public let triggerOrView: String?

    /// `SQLITE_INSERT`.
    public static let insert: CInt = SQLITE_INSERT
    /// `SQLITE_DELETE`.
    public static let delete: CInt = SQLITE_DELETE
    /// `SQLITE_UPDATE`.
    public static let update: CInt = SQLITE_UPDATE
    /// `SQLITE_READ`.
    public static let read: CInt = SQLITE_READ
    /// `SQLITE_SELECT`.
    public static let select: CInt = SQLITE_SELECT
    /// `SQLITE_DROP_TABLE`.
    public static let dropTable: CInt = SQLITE_DROP_TABLE
}

/// An authorizer's answer.
public enum AuthorizerDecision: Sendable {
    /// Allow the action.
    case allow
    /// Refuse: the statement fails to compile with `SQLITE_AUTH`.
    case deny
    /// Let the statement compile, but read NULL for the column / skip the action (see SQLite's documentation).
    case ignore

    var code: CInt {
        switch self {
        case .allow: SQLITE_OK
        case .deny: SQLITE_DENY
        case .ignore: SQLITE_IGNORE
        }
    }
}

/// The caller's authorizer, with the handle it runs for (the handle's guard state holds it; closing the handle lets
/// go of it).
final class AuthorizerBox {
    let authorize: (AuthorizerRequest) -> AuthorizerDecision
    let handle: ConnectionHandle

    init(_ authorize: @escaping (AuthorizerRequest) -> AuthorizerDecision, handle: ConnectionHandle) {
        self.authorize = authorize
        self.handle = handle
    }
}

extension Connection {
    /// Installs an authorizer, asked about every action of every statement compiled from now on. `nil` removes it.
    ///
    /// SQLCipherKit's own guard runs first and cannot be overridden: key and cipher PRAGMAs (other than the reads it
    /// allows), `temp_store` other than MEMORY, a plaintext ATTACH on an encrypted connection, a key in an ATTACH
    /// file name and `VACUUM INTO` stay refused whatever the authorizer answers (see Docs/Security.md).
    ///
    /// The authorizer must not use the connection (SQLite forbids it): a call into the connection from inside it
    /// throws ``DatabaseError/callbackMisuse``, ``close()`` does nothing, and the statement being compiled is then
    /// refused with that error.
    ///
    /// See [sqlite3_set_authorizer](https://www.sqlite.org/c3ref/set_authorizer.html).
    public func setAuthorizer(_ authorizer: ((AuthorizerRequest) -> AuthorizerDecision)?) throws {
        try register("authorizer") { connection in
            _ = try connection.checkedConnection()
            connection.handle.guardState.userAuthorizer = authorizer.map { AuthorizerBox($0, handle: connection.handle) }
        }
        // Statements compiled under the previous authorizer must be compiled again.
        statementCache.removeAll()
    }
}
