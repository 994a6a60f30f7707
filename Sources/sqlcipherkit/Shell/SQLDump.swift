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
        // Text is read as its bytes, so that text that is not valid UTF-8 is written as it is stored. In a UTF-16
        // database the bytes would be UTF-16: there the text is read as SQLite converts it.
        let readsTextBytes = try connection.scalar("PRAGMA encoding", as: String.self) == "UTF-8"
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
                try sink.write(Self.terminated(table.sql) + "\n")
            }
            try writeRows(of: table.name, literals: literals, readsTextBytes: readsTextBytes, to: sink)
        }
        let others = try connection.all(
            "SELECT sql FROM sqlite_master WHERE type IN ('index', 'trigger', 'view') AND sql IS NOT NULL"
                + " AND (?1 IS NULL OR tbl_name LIKE ?1) ORDER BY rowid",
            tablePattern, as: String.self)
        for sql in others { try sink.write(Self.terminated(sql) + "\n") }
        try sink.write("COMMIT;\n")
        try sink.flush()
    }

    private func isShadowTable(_ name: String, of virtualTables: [String]) -> Bool {
        virtualTables.contains { table in
            name.count > table.count + 1 && name.lowercased().hasPrefix(table.lowercased() + "_")
                && Self.shadowSuffixes.contains(String(name.dropFirst(table.count + 1)).lowercased())
        }
    }

    private func writeRows(
        of table: String, literals: SQLLiteral, readsTextBytes: Bool, to sink: any TextSink
    ) throws {
        let quotedTable = Connection.quoteIdentifier(table)
        // Generated columns (SQLite 3.31+) cannot be inserted: list the others. table_xinfo is unknown to older
        // engines, which ignore an unknown PRAGMA and return no row; they have no generated column either.
        var columns = try connection.all("PRAGMA table_xinfo(\(quotedTable))") { row in
            (name: try row["name"] as String, hidden: try row["hidden"] as Int)
        }
        let listsColumns = columns.contains { $0.hidden != 0 }
        if columns.isEmpty {
            columns = try connection.all("PRAGMA table_info(\(quotedTable))") { row in (name: try row["name"] as String, hidden: 0) }
        }
        let names = columns.filter { $0.hidden == 0 }.map { Connection.quoteIdentifier($0.name) }
        let prefix = "INSERT INTO \(quotedTable)" + (listsColumns ? "(\(names.joined(separator: ",")))" : "") + " VALUES("
        guard readsTextBytes && !names.isEmpty else {
            try connection.cursor("SELECT \(listsColumns ? names.joined(separator: ",") : "*") FROM \(quotedTable)")
                .forEach { row in
                    let values = try row.databaseValues.map(literals.literal)
                    try sink.write(prefix + values.joined(separator: ",") + ");\n")
                }
            return
        }
        // Each column twice: text as its bytes (any other value as it is), and whether it is text.
        let selected = names.map { name in
            "CASE WHEN typeof(\(name)) = 'text' THEN CAST(\(name) AS BLOB) ELSE \(name) END, typeof(\(name)) = 'text'"
        }
        try connection.cursor("SELECT \(selected.joined(separator: ", ")) FROM \(quotedTable)").forEach { row in
            let values = try row.databaseValues
            var literalTexts: [String] = []
            literalTexts.reserveCapacity(names.count)
            for index in stride(from: 0, to: values.count, by: 2) {
                if case .integer(1) = values[index + 1], case .blob(let bytes) = values[index] {
                    literalTexts.append(SQLLiteral.literal(textBytes: bytes))
                } else {
                    literalTexts.append(try literals.literal(values[index]))
                }
            }
            try sink.write(prefix + literalTexts.joined(separator: ",") + ");\n")
        }
    }

    /// `sql` (a `CREATE` statement as SQLite keeps it) and the semicolon that ends it. SQLite keeps the text up to
    /// its last token, so a view or index can end inside a comment: after `-- …` the semicolon goes on a line of its
    /// own (on the same line it would be part of the comment, and so would everything after it), and a `/* …`
    /// that was never closed is closed first (the only way to end the statement; the comment's text stays).
    static func terminated(_ sql: String) -> String {
        var buffer = StatementBuffer()
        buffer.append(sql)
        switch buffer.endMode {
        case .lineComment: return sql + "\n;"
        case .blockComment: return sql + "*/;"
        case .blockCommentStar: return sql + "/;"
        case .between, .word, .quoted, .slash, .dash: return sql + ";"
        }
    }
}
