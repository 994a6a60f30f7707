import CSQLCipher

/// A column of a table, from `PRAGMA table_info`.
public struct ColumnInfo: Sendable, Hashable {
    /// The column name.
    public let name: String
    /// The declared type (`INTEGER`, `TEXT`, …), or `""`.
    public let declaredType: String
    /// Whether the column is NOT NULL.
    public let isNotNull: Bool
    /// The default value's SQL text, if any.
    public let defaultValueSQL: String?
    /// The 1-based position in the primary key, or 0 when the column is not part of it.
    public let primaryKeyPosition: Int
}

/// An index of a table, from `PRAGMA index_list` and `PRAGMA index_info`.
public struct IndexInfo: Sendable, Hashable {
    /// The index name (`sqlite_autoindex_…` for those SQLite creates for UNIQUE and PRIMARY KEY constraints).
    public let name: String
    /// Whether the index is UNIQUE.
    public let isUnique: Bool
    /// The indexed columns, in order (an expression column is `""`).
    public let columns: [String]
}

/// A foreign key of a table, from `PRAGMA foreign_key_list`.
public struct ForeignKeyInfo: Sendable, Hashable {
    /// The referenced table.
    public let destinationTable: String
    /// The columns of this table, in order.
    public let originColumns: [String]
    /// The referenced columns, in order (`""` when the key references the primary key implicitly).
    public let destinationColumns: [String]
    /// The ON UPDATE action (`NO ACTION`, `CASCADE`, …).
    public let onUpdate: String
    /// The ON DELETE action.
    public let onDelete: String

    /// Creates a description (for comparisons in tests and migrations).
    public init(destinationTable: String, originColumns: [String], destinationColumns: [String], onUpdate: String,
                onDelete: String) {
        self.destinationTable = destinationTable
        self.originColumns = originColumns
        self.destinationColumns = destinationColumns
        self.onUpdate = onUpdate
        self.onDelete = onDelete
    }
}

/// How a WAL checkpoint waits for other connections.
///
/// See [sqlite3_wal_checkpoint_v2](https://www.sqlite.org/c3ref/wal_checkpoint_v2.html).
public enum CheckpointMode: Sendable {
    /// Copy what can be copied without waiting.
    case passive
    /// Wait for writers, then copy everything (readers may still hold the end of the log).
    case full
    /// Like `full`, then wait for readers so the next writer restarts the log.
    case restart
    /// Like `restart`, then truncate the `-wal` file to zero bytes.
    case truncate

    var code: CInt {
        switch self {
        case .passive: SQLITE_CHECKPOINT_PASSIVE
        case .full: SQLITE_CHECKPOINT_FULL
        case .restart: SQLITE_CHECKPOINT_RESTART
        case .truncate: SQLITE_CHECKPOINT_TRUNCATE
        }
    }
}

/// The outcome of a checkpoint: frames in the log, and how many were copied into the database.
public struct CheckpointResult: Sendable, Hashable {
    /// Frames in the WAL (−1 when the database is not in WAL mode).
    public let logFrameCount: Int
    /// Frames copied into the database file (−1 when not in WAL mode).
    public let checkpointedFrameCount: Int
}

extension Connection {
    // MARK: - Schema

    /// The tables of a schema (`main` by default), without SQLite's internal `sqlite_*` tables.
    public func tableNames(in schema: String = "main") throws -> [String] {
        try all("SELECT name FROM \(Self.quoteIdentifier(schema)).sqlite_master WHERE type = 'table'"
                + " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name", as: String.self)
    }

    /// Whether a table exists (case-insensitive, as in SQL).
    public func tableExists(_ table: String, in schema: String = "main") throws -> Bool {
        try scalar("SELECT count(*) FROM \(Self.quoteIdentifier(schema)).sqlite_master WHERE type = 'table'"
                   + " AND name = ? COLLATE NOCASE", table, as: Int.self) == 1
    }

    /// The columns of a table.
    ///
    /// - Throws: ``DatabaseError/invalidArgument`` when there is no such table.
    public func columns(in table: String, schema: String = "main") throws -> [ColumnInfo] {
        let columns = try all("PRAGMA \(Self.quoteIdentifier(schema)).table_info(\(Self.quoteIdentifier(table)))") { row in
            ColumnInfo(
                name: try row["name"], declaredType: try row["type"], isNotNull: try row["notnull"],
                defaultValueSQL: try row["dflt_value"], primaryKeyPosition: try row["pk"])
        }
        guard !columns.isEmpty else { throw Self.noSuchTable(table) }
        return columns
    }

    /// The indexes of a table, by name.
    public func indexes(on table: String, schema: String = "main") throws -> [IndexInfo] {
        _ = try columns(in: table, schema: schema)
        let quotedSchema = Self.quoteIdentifier(schema)
        let list = try all("PRAGMA \(quotedSchema).index_list(\(Self.quoteIdentifier(table)))") { row in
            (name: try row["name"] as String, isUnique: try row["unique"] as Bool)
        }
        return try list.sorted { $0.name < $1.name }.map { index in
            let columns = try all("PRAGMA \(quotedSchema).index_info(\(Self.quoteIdentifier(index.name)))") { row in
                (rank: try row["seqno"] as Int, name: try row["name"] as String? ?? "")
            }
            return IndexInfo(
                name: index.name, isUnique: index.isUnique, columns: columns.sorted { $0.rank < $1.rank }.map(\.name))
        }
    }

    /// The foreign keys of a table.
    public func foreignKeys(in table: String, schema: String = "main") throws -> [ForeignKeyInfo] {
        _ = try columns(in: table, schema: schema)
        let rows = try all("PRAGMA \(Self.quoteIdentifier(schema)).foreign_key_list(\(Self.quoteIdentifier(table)))") { row in
            (id: try row["id"] as Int, sequence: try row["seq"] as Int, table: try row["table"] as String,
             from: try row["from"] as String, to: try row["to"] as String? ?? "",
             onUpdate: try row["on_update"] as String, onDelete: try row["on_delete"] as String)
        }
        return Dictionary(grouping: rows, by: \.id).sorted { $0.key < $1.key }.map { _, parts in
            let parts = parts.sorted { $0.sequence < $1.sequence }
            return ForeignKeyInfo(
                destinationTable: parts[0].table, originColumns: parts.map(\.from), destinationColumns: parts.map(\.to),
                onUpdate: parts[0].onUpdate, onDelete: parts[0].onDelete)
        }
    }

    private static func noSuchTable(_ table: String) -> DatabaseError {
        DatabaseError(kind: .invalidArgument, code: DatabaseError.SQLITE_ERROR, message: "no such table: \(table)")
    }

    // MARK: - Maintenance

    /// Runs a WAL checkpoint.
    ///
    /// - Throws: `SQLITE_BUSY` when a `full`, `restart` or `truncate` checkpoint could not finish within the busy
    ///   timeout.
    @discardableResult
    public func checkpoint(_ mode: CheckpointMode = .passive, schema: String = "main") throws -> CheckpointResult {
        let sqliteConnection = try checkedConnection()
        var logFrames: CInt = -1
        var checkpointed: CInt = -1
        let code = sqlite3_wal_checkpoint_v2(sqliteConnection, schema, mode.code, &logFrames, &checkpointed)
        guard code == SQLITE_OK else {
            throw DatabaseError.fromSQLite(code: code, connection: sqliteConnection, sql: "checkpoint")
        }
        return CheckpointResult(logFrameCount: Int(logFrames), checkpointedFrameCount: Int(checkpointed))
    }

    /// Rebuilds the database file, reclaiming free pages (`VACUUM`). The file stays encrypted with the same key and
    /// settings. Needs temporary space in memory (`temp_store` is MEMORY) about the size of the database.
    public func vacuum() throws {
        try execute("VACUUM")
    }
}
