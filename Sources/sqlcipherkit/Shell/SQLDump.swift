import SQLCipherKit

/// `.dump [TABLE]`: the database as SQL text, like the sqlite3 shell's: `PRAGMA foreign_keys=OFF;`, `BEGIN
/// TRANSACTION;`, each table's `CREATE` and one `INSERT` per row, then the indexes, triggers and views, `COMMIT;`.
/// The rows are read inside one savepoint, so the dump is one consistent snapshot even while another process
/// writes. Also written, unlike sqlite3's: `PRAGMA user_version` and `application_id` when they are not 0 (a full
/// dump only). Of the optimizer's statistics only `sqlite_stat1` is written: `sqlite_stat3` and `sqlite_stat4` exist
/// only in builds with STAT4 (SQLCipher 4's, not Debian's sqlite3), which another SQLite may not be able to create;
/// `ANALYZE` makes them again. Virtual tables (FTS, R-Tree) are created again and refilled from their columns (rowids are not
/// kept); their shadow tables are not written. Values: ``SQLLiteral``.
struct SQLDump {
    let connection: Connection
    /// A LIKE pattern on table names; `nil` for every table.
    let tablePattern: String?

    /// The suffixes of the shadow tables FTS3/4/5 and R-Tree create beside a virtual table.
    private static let shadowSuffixes: Set<String> = [
        "content", "segments", "segdir", "docsize", "stat", "data", "idx", "config", "node", "parent", "rowid",
    ]

    func write(to sink: any TextSink) throws {
        let ownsTransaction = !connection.isInsideTransaction
        if ownsTransaction { try connection.execute("SAVEPOINT sqlcipherkit_dump") }
        defer { if ownsTransaction { try? connection.execute("RELEASE sqlcipherkit_dump") } }
        try sink.write("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")
        if tablePattern == nil {
            for pragma in ["user_version", "application_id"] {
                if let value = try connection.scalar("PRAGMA \(pragma)", as: Int64.self), value != 0 {
                    try sink.write("PRAGMA \(pragma)=\(value);\n")
                }
            }
        }
        let literals = try SQLLiteral(connection: connection)
        let tables = try connection.all(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL"
                + " AND (?1 IS NULL OR tbl_name LIKE ?1) ORDER BY tbl_name = 'sqlite_sequence', rowid",
            tablePattern
        ) { row in (name: try row["name"] as String, sql: try row["sql"] as String) }
        let virtualTables = tables.filter { $0.sql.uppercased().hasPrefix("CREATE VIRTUAL TABLE") }.map(\.name)
        for table in tables {
            let lowercasedName = table.name.lowercased()
            if lowercasedName == "sqlite_sequence" {
                try sink.write("DELETE FROM sqlite_sequence;\n")
            } else if lowercasedName == "sqlite_stat1" {
                // Creates the table without gathering anything (SQLite's own tables are never analysed).
                try sink.write("ANALYZE sqlite_master;\n")
            } else if lowercasedName.hasPrefix("sqlite_") || isShadowTable(table.name, of: virtualTables) {
                continue
            } else {
                try sink.write(table.sql + ";\n")
            }
            try writeRows(of: table.name, literals: literals, to: sink)
        }
        let others = try connection.all(
            "SELECT sql FROM sqlite_master WHERE type IN ('index', 'trigger', 'view') AND sql IS NOT NULL"
                + " AND (?1 IS NULL OR tbl_name LIKE ?1) ORDER BY rowid",
            tablePattern, as: String.self)
        for sql in others { try sink.write(sql + ";\n") }
        try sink.write("COMMIT;\n")
        try sink.flush()
    }

    private func isShadowTable(_ name: String, of virtualTables: [String]) -> Bool {
        virtualTables.contains { table in
            name.count > table.count + 1 && name.lowercased().hasPrefix(table.lowercased() + "_")
                && Self.shadowSuffixes.contains(String(name.dropFirst(table.count + 1)).lowercased())
        }
    }

    private func writeRows(of table: String, literals: SQLLiteral, to sink: any TextSink) throws {
        let quotedTable = Connection.quoteIdentifier(table)
        // Generated columns (SQLite 3.31+) cannot be inserted: list the others. table_xinfo is unknown to older
        // engines, which ignore an unknown PRAGMA and return no row; they have no generated column either.
        let columns = try connection.all("PRAGMA table_xinfo(\(quotedTable))") { row in
            (name: try row["name"] as String, hidden: try row["hidden"] as Int)
        }
        let writable = columns.filter { $0.hidden == 0 }
        let listsColumns = !columns.isEmpty && writable.count != columns.count
        let selected = listsColumns ? writable.map { Connection.quoteIdentifier($0.name) }.joined(separator: ",") : "*"
        let prefix = "INSERT INTO \(quotedTable)" + (listsColumns ? "(\(selected))" : "") + " VALUES("
        try connection.cursor("SELECT \(selected) FROM \(quotedTable)").forEach { row in
            let values = try row.databaseValues.map(literals.literal)
            try sink.write(prefix + values.joined(separator: ",") + ");\n")
        }
    }
}
