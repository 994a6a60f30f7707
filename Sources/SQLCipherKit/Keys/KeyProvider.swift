#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a ``DatabaseQueue`` or ``DatabasePool`` gets its key: asked each time a connection opens, so a key that
/// was rotated (a new key file, a new secret) is picked up by the next connection.
///
/// ```swift
/// let pool = try DatabasePool(path: "notes.db", keyProvider: .file("/run/secrets/notes.key"))
/// let viaEnvironment = KeyProvider.environment("NOTES_DB_KEY")
/// let fromVault = KeyProvider.custom { try EncryptionKey(keyText: vault.secret(named: "notes-db")) }
/// ```
///
/// A provider's failure is thrown as ``DatabaseError/invalidKey`` (a ``DatabaseError`` it throws is passed on as is)
/// and the connection is not opened.
public struct KeyProvider: Sendable, CustomStringConvertible {
    private let fetch: @Sendable () throws -> EncryptionKey
    private let name: String

    private init(name: String, fetch: @escaping @Sendable () throws -> EncryptionKey) {
        self.name = name
        self.fetch = fetch
    }

    /// Always the same key.
    public static func fixed(_ key: EncryptionKey) -> KeyProvider {
        KeyProvider(name: "fixed key") { key }
    }

    /// A key file, read at every call (see ``EncryptionKey/init(contentsOf:permissions:)`` for the format and the
    /// permission check).
    public static func file(
        _ path: String, permissions: EncryptionKey.KeyFilePermissionPolicy = .requireOwnerOnly
    ) -> KeyProvider {
        KeyProvider(name: "key file \(path)") { try EncryptionKey(contentsOf: path, permissions: permissions) }
    }

    /// An environment variable holding the key in the key-file format, read by
    /// ``EncryptionKey/init(environmentVariable:)`` each time the key is asked for. The provider's name hides the
    /// variable's name as that initializer's messages do (when it looks like a key typed in the wrong place).
    ///
    /// - Warning: Environment variables are visible to the process's user in `/proc/PID/environ`; prefer a file.
    public static func environment(_ variable: String) -> KeyProvider {
        KeyProvider(name: "environment variable \(KeyMaterialRedaction.shownVariableName(variable))") {
            try EncryptionKey(environmentVariable: variable)
        }
    }

    /// A closure, for secret managers and anything else.
    public static func custom(
        _ name: String = "custom key provider", _ body: @escaping @Sendable () throws -> EncryptionKey
    ) -> KeyProvider {
        KeyProvider(name: name, fetch: body)
    }

    /// Asks for the key.
    public func key() throws -> EncryptionKey {
        do {
            return try fetch()
        } catch let error as DatabaseError {
            throw error
        } catch {
            throw EncryptionKey.invalid("the \(name) failed: \(error)")
        }
    }

    /// The provider's kind and source; never the key.
    public var description: String { "KeyProvider(\(name))" }
}
