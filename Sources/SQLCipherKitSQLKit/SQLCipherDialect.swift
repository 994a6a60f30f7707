#if SQLKit  // trait SQLKit (Package.swift)
import SQLCipherKit
import SQLKit

/// The SQL dialect of the SQLite engine inside the linked SQLCipher, with capabilities read from its version at run
/// time.
///
/// The system SQLCipher 3.4.1 of Debian 12 carries SQLite 3.15.2; SQLCipher 4.19 carries SQLite 3.53. Features
/// SQLite added after 3.15 (upsert, `RETURNING`, window functions, `DROP COLUMN`, `TRUE`/`FALSE` literals) are
/// used only when the engine that is actually loaded has them, never assumed from the headers the package was
/// compiled against. ``capabilities`` says which are there.
public struct SQLCipherDialect: SQLDialect {
    /// The SQLite features that depend on the engine's version.
    public struct Capabilities: Sendable, Hashable {
        /// The SQLite version the capabilities were decided from.
        public let sqliteVersion: SQLCipher.Version
        /// Whether the engine was built with the JSON1 extension (JSON functions are built in from SQLite 3.38.0).
        public let hasJSON1Extension: Bool

        /// The version each feature needs.
        public enum Feature: String, Sendable, CaseIterable, CustomStringConvertible {
            /// `TRUE` and `FALSE` keywords (before, `1` and `0`).
            case booleanLiterals = "TRUE/FALSE literals"
            /// `INSERT … ON CONFLICT … DO UPDATE/NOTHING`.
            case upsert = "upsert (ON CONFLICT DO UPDATE)"
            /// More than 999 bound parameters in one statement (a multi-row INSERT of many models).
            case manyBoundParameters = "more than 999 bound parameters in one statement"
            /// `RENAME COLUMN`.
            case renameColumn = "ALTER TABLE RENAME COLUMN"
            /// `OVER (…)` window functions.
            case windowFunctions = "window functions"
            /// `INSERT/UPDATE/DELETE … RETURNING`.
            case returning = "RETURNING"
            /// `ALTER TABLE DROP COLUMN`.
            case dropColumn = "ALTER TABLE DROP COLUMN"
            /// `->` and `->>` JSON operators.
            case jsonOperators = "JSON -> and ->> operators"
            /// `json_extract` and the other JSON functions (before 3.38.0 only in builds with JSON1).
            case jsonFunctions = "JSON functions (json_extract)"

            /// The first SQLite version with the feature.
            public var minimumVersion: SQLCipher.Version {
                switch self {
                case .booleanLiterals: SQLCipher.Version(3, 23, 0)
                case .upsert: SQLCipher.Version(3, 24, 0)
                case .renameColumn, .windowFunctions: SQLCipher.Version(3, 25, 0)
                case .manyBoundParameters: SQLCipher.Version(3, 32, 0)
                case .returning, .dropColumn: SQLCipher.Version(3, 35, 0)
                case .jsonOperators, .jsonFunctions: SQLCipher.Version(3, 38, 0)
                }
            }

            /// The feature's name.
            public var description: String { rawValue }
        }

        /// Capabilities of a given SQLite version (for tests and documentation).
        public init(sqliteVersion: SQLCipher.Version, hasJSON1Extension: Bool = false) {
            self.sqliteVersion = sqliteVersion
            self.hasJSON1Extension = hasJSON1Extension
        }

        /// Capabilities of the SQLite inside the SQLCipher loaded in this process.
        public static var linked: Capabilities { linkedCapabilities }

        private static let linkedCapabilities: Capabilities = {
            let number = SQLCipher.sqliteVersionNumber  // e.g. 3015002 for 3.15.2
            // JSON1 is a compile-time option before 3.38 (Debian's SQLCipher 3.4.1 is built without it): ask the
            // engine, on a private in-memory database.
            let json1 = (try? Connection(path: ":memory:", encryption: .none)).flatMap { db in
                defer { db.close() }
                return try? db.scalar("SELECT sqlite_compileoption_used('ENABLE_JSON1')", as: Int.self)
            } == 1
            return Capabilities(
                sqliteVersion: SQLCipher.Version(number / 1_000_000, number / 1_000 % 1_000, number % 1_000),
                hasJSON1Extension: json1)
        }()

        /// Whether the engine has `feature`.
        public func supports(_ feature: Feature) -> Bool {
            if feature == .jsonFunctions, hasJSON1Extension { return true }
            return sqliteVersion >= feature.minimumVersion
        }

        /// Why a feature is missing, in words for a skip message or an error: the feature, the version it needs and
        /// the version linked. `nil` when the feature is there.
        public func missingReason(_ feature: Feature) -> String? {
            guard !supports(feature) else { return nil }
            let build = feature == .jsonFunctions ? " built without JSON1" : ""
            return "\(feature) needs SQLite \(feature.minimumVersion); the linked engine is SQLite \(sqliteVersion)"
                + "\(build) (SQLCipher \(SQLCipher.version))"
        }
    }

    /// The capabilities this dialect generates SQL for.
    public let capabilities: Capabilities

    /// The dialect of the linked engine.
    public init() {
        self.init(capabilities: .linked)
    }

    /// The dialect for given capabilities.
    public init(capabilities: Capabilities) {
        self.capabilities = capabilities
    }

    /// `"sqlite"`: SQL written for Fluent's and SQLKit's SQLite dialect runs unchanged.
    public var name: String { "sqlite" }

    public var identifierQuote: any SQLExpression { SQLRaw("\"") }

    public var literalStringQuote: any SQLExpression { SQLRaw("'") }

    public func bindPlaceholder(at position: Int) -> any SQLExpression { SQLRaw("?\(position)") }

    public func literalBoolean(_ value: Bool) -> any SQLExpression {
        // Before 3.23 `TRUE` is an identifier ("no such column: TRUE").
        if capabilities.supports(.booleanLiterals) { return SQLRaw(value ? "TRUE" : "FALSE") }
        return SQLRaw(value ? "1" : "0")
    }

    public var literalDefault: any SQLExpression { SQLLiteral.null }

    public var supportsIfExists: Bool { true }

    public var supportsDropBehavior: Bool { false }

    public var supportsAutoIncrement: Bool { false }

    public var autoIncrementClause: any SQLExpression { SQLRaw("AUTOINCREMENT") }

    public var enumSyntax: SQLEnumSyntax { .unsupported }

    public var triggerSyntax: SQLTriggerSyntax {
        SQLTriggerSyntax(create: [.supportsBody, .supportsCondition, .supportsUpdateColumns], drop: [])
    }

    public var alterTableSyntax: SQLAlterTableSyntax { SQLAlterTableSyntax(allowsBatch: false) }

    public var upsertSyntax: SQLUpsertSyntax { capabilities.supports(.upsert) ? .standard : .unsupported }

    public var supportsReturning: Bool { capabilities.supports(.returning) }

    public var unionFeatures: SQLUnionFeatures { [.union, .unionAll, .intersect, .except] }

    public func customDataType(for dataType: SQLDataType) -> (any SQLExpression)? {
        // An INTEGER PRIMARY KEY is the rowid; BIGINT would make it an ordinary column.
        if case .bigint = dataType { return SQLDataType.int }
        return nil
    }

    public func nestedSubpathExpression(in column: any SQLExpression, for path: [String]) -> (any SQLExpression)? {
        // Without JSON functions the SQL still names json_extract: SQLite then fails with "no such function".
        guard !path.isEmpty else { return nil }
        return SQLFunction("json_extract", args: [column, SQLLiteral.string("$.\(path.joined(separator: "."))")])
    }
}

/// The linked engine's SQLite version, as SQLKit reports database versions.
public struct SQLCipherReportedVersion: SQLDatabaseReportedVersion {
    /// The SQLite version.
    public let version: SQLCipher.Version

    /// The version of the linked engine.
    public init() {
        version = SQLCipherDialect.Capabilities.linked.sqliteVersion
    }

    public var intValue: Int { version.major * 1_000_000 + version.minor * 1_000 + version.patch }

    public var stringValue: String { version.description }

    public func isEqual(to otherVersion: any SQLDatabaseReportedVersion) -> Bool {
        (otherVersion as? SQLCipherReportedVersion)?.version == version
    }

    public func isOlder(than otherVersion: any SQLDatabaseReportedVersion) -> Bool {
        guard let other = otherVersion as? SQLCipherReportedVersion else { return false }
        return version < other.version
    }
}
#endif
