import SQLCipherKit

/// `.tables`, `.schema` and `.indexes`: the main schema's objects, filtered by a LIKE pattern (case-insensitive,
/// `%` and `_` as wildcards) on the name or, for `.schema` and `.indexes`, the table the object belongs to. SQLite's
/// own `sqlite_*` objects are left out of `.tables` and `.schema` (they cannot be created again from their SQL).
enum SchemaListing {
    /// Table and view names, one per line.
    static func tables(matching pattern: String?, on connection: Connection) throws -> [String] {
        try connection.all(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                + " AND (?1 IS NULL OR name LIKE ?1) ORDER BY name",
            pattern, as: String.self)
    }

    /// The `CREATE` statements, each ending with a semicolon (``SQLDump/terminated(_:)``), in the order they were
    /// made.
    static func schema(matching pattern: String?, on connection: Connection) throws -> [String] {
        try connection.all(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                + " AND (?1 IS NULL OR name LIKE ?1 OR tbl_name LIKE ?1) ORDER BY rowid",
            pattern, as: String.self
        ).map(SQLDump.terminated)
    }

    /// Index names (those SQLite made for UNIQUE and PRIMARY KEY constraints included).
    static func indexes(ofTablesMatching pattern: String?, on connection: Connection) throws -> [String] {
        try connection.all(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND (?1 IS NULL OR tbl_name LIKE ?1) ORDER BY name",
            pattern, as: String.self)
    }
}
