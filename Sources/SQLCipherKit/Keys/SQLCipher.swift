import CSQLCipher

/// Facts about the linked engine: SQLCipher and SQLite versions, crypto provider, and the features it supports.
///
/// The engine is the one the dynamic linker loaded (`libsqlcipher`), which need not be the one whose header the
/// package was compiled against. The facts are read once per process.
///
/// ```swift
/// print(SQLCipher.version)            // "3.4.1" or "4.19.0 community"
/// if SQLCipher.supports(.plaintextHeader) { … }
/// ```
public enum SQLCipher {
    /// A feature that only some SQLCipher versions have.
    public struct Feature: Hashable, Sendable, CustomStringConvertible {
        /// A readable name, such as "plaintext header".
        public let name: String
        /// The first SQLCipher version that has it, as (major, minor, patch).
        public let minimumVersion: Version

        /// `cipher_plaintext_header_size` and `cipher_salt` (SQLCipher 4.0).
        public static let plaintextHeader = Feature(name: "plaintext header", minimumVersion: Version(4, 0, 0))
        /// `cipher_kdf_algorithm` and `cipher_hmac_algorithm` (SQLCipher 4.0).
        public static let algorithmSelection = Feature(
            name: "KDF and HMAC algorithm selection", minimumVersion: Version(4, 0, 0))
        /// `cipher_compatibility` (SQLCipher 4.0.1).
        public static let compatibility = Feature(
            name: "cipher_compatibility", minimumVersion: Version(4, 0, 1))
        /// `cipher_integrity_check` (SQLCipher 4.2).
        public static let cipherIntegrityCheck = Feature(
            name: "cipher_integrity_check", minimumVersion: Version(4, 2, 0))
        /// `cipher_migrate` from SQLCipher 3 to 4 format (SQLCipher 4.0).
        public static let migrateToVersion4 = Feature(
            name: "migration to the SQLCipher 4 format", minimumVersion: Version(4, 0, 0))
        /// SQLCipher 4's database format (SHA512 KDF and HMAC, 4096-byte pages).
        public static let version4Format = Feature(
            name: "the SQLCipher 4 format", minimumVersion: Version(4, 0, 0))

        /// The name.
        public var description: String { name }
    }

    /// A version as (major, minor, patch), comparable.
    public struct Version: Comparable, Hashable, Sendable, CustomStringConvertible {
        public let major: Int
        public let minor: Int
        public let patch: Int

        /// Creates a version.
        public init(_ major: Int, _ minor: Int, _ patch: Int) {
            self.major = major
            self.minor = minor
            self.patch = patch
        }

        /// Parses the leading `major.minor.patch` of a version string such as `4.19.0 community`.
        init?(parsing text: String) {
            let numbers = text.split(separator: " ").first?.split(separator: ".").compactMap { Int($0) } ?? []
            guard numbers.count >= 2 else { return nil }
            self.init(numbers[0], numbers[1], numbers.count > 2 ? numbers[2] : 0)
        }

        public static func < (lhs: Version, rhs: Version) -> Bool {
            (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
        }

        /// `major.minor.patch`.
        public var description: String { "\(major).\(minor).\(patch)" }
    }

    struct Facts: Sendable {
        let version: String
        let provider: String
        let providerVersion: String
    }

    static let facts: Facts = {
        var connection: OpaquePointer?
        defer { sqlite3_close(connection) }
        guard sqlite3_open_v2(":memory:", &connection, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK,
              let connection
        else {
            return Facts(version: "", provider: "", providerVersion: "")
        }
        func text(_ sql: String) -> String {
            var statement: OpaquePointer?
            defer { sqlite3_finalize(statement) }
            guard sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK, let statement,
                  sqlite3_step(statement) == SQLITE_ROW, let value = sqlite3_column_text(statement, 0)
            else { return "" }
            return String(cString: value)
        }
        // An unknown PRAGMA returns no row: plain SQLite answers "" to cipher_version.
        let version = text("PRAGMA cipher_version")
        // The provider PRAGMAs answer only on a keyed connection; this memory database holds nothing.
        let probeKey: [UInt8] = Array("sqlcipherkit-engine-probe".utf8)
        guard !version.isEmpty, sqlite3_key(connection, probeKey, CInt(probeKey.count)) == SQLITE_OK else {
            return Facts(version: version, provider: "", providerVersion: "")
        }
        return Facts(
            version: version,
            provider: text("PRAGMA cipher_provider"),
            providerVersion: text("PRAGMA cipher_provider_version"))
    }()

    /// The SQLCipher version string (`PRAGMA cipher_version`), or `""` when the linked library is not SQLCipher.
    public static var version: String { facts.version }

    /// The SQLCipher version as numbers, or `nil` when the linked library is not SQLCipher.
    public static var parsedVersion: Version? { parsedFactsVersion }

    /// Parsed once: ``supports(_:)`` runs at every open.
    private static let parsedFactsVersion: Version? = Version(parsing: facts.version)

    /// The crypto provider SQLCipher uses, such as `openssl`.
    public static var cryptoProvider: String { facts.provider }

    /// The crypto provider's version, as SQLCipher reports it.
    public static var cryptoProviderVersion: String { facts.providerVersion }

    /// The SQLite version SQLCipher is built on (`sqlite3_libversion()`).
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    /// The SQLite version as a number, such as 3015002 for 3.15.2.
    public static var sqliteVersionNumber: Int { Int(sqlite3_libversion_number()) }

    /// The SQLite version of the header the package was compiled against.
    public static var compiledSQLiteVersion: String { SQLITE_VERSION }

    /// `true` when the linked library is SQLCipher.
    public static var isSQLCipher: Bool { !facts.version.isEmpty }

    /// Whether the linked engine has a feature.
    public static func supports(_ feature: Feature) -> Bool {
        guard let version = parsedVersion else { return false }
        return version >= feature.minimumVersion
    }

    /// Throws ``DatabaseError/unsupportedByEngine`` naming the feature, the version it needs and the version linked.
    public static func require(_ feature: Feature) throws {
        guard supports(feature) else {
            throw DatabaseError(
                .unsupportedByEngine,
                "\(feature.name) needs SQLCipher \(feature.minimumVersion) or later; the linked engine is "
                    + (isSQLCipher ? "SQLCipher \(version)" : "SQLite \(sqliteVersion) without SQLCipher"))
        }
    }

    /// Throws ``DatabaseError/notSQLCipher`` when the linked library is plain SQLite.
    static func requireSQLCipher() throws {
        guard isSQLCipher else {
            throw DatabaseError(
                .notSQLCipher,
                "the linked library is SQLite \(sqliteVersion) without SQLCipher (PRAGMA cipher_version is"
                    + " empty); SQLCipherKit refuses to run, since nothing would be encrypted. Install SQLCipher"
                    + " (Debian: libsqlcipher-dev) and make sure libsqlcipher is the library loaded.")
        }
    }
}
