/// What an INSERT does when it would violate a UNIQUE, NOT NULL, CHECK or PRIMARY KEY constraint.
///
/// See [The ON CONFLICT Clause](https://www.sqlite.org/lang_conflict.html).
public enum ConflictResolution: String, Sendable {
    /// Roll back the whole transaction and fail.
    case rollback = "ROLLBACK"
    /// Undo the statement and fail; the transaction stays open (SQLite's default).
    case abort = "ABORT"
    /// Fail, keeping the rows the statement changed before the violation.
    case fail = "FAIL"
    /// Skip the row silently.
    case ignore = "IGNORE"
    /// Delete the rows in the way, then insert.
    case replace = "REPLACE"
}

extension Connection {
    /// Inserts an `Encodable` record as one row: each encoded key is a column.
    ///
    /// ```swift
    /// struct Note: Codable { var id: Int64?; var body: String; var tags: [String] }
    /// let id = try db.insert(Note(id: nil, body: "hello", tags: ["a"]), into: "note")
    /// // INSERT INTO "note"("id","body","tags") VALUES (?,?,?)   -- tags bound as the JSON TEXT ["a"]
    /// ```
    ///
    /// Identifiers are quoted and values are bound, never spliced into the SQL. Values of
    /// ``DatabaseValueConvertible`` types are stored natively (a `Date` as UTC TEXT, a `UUID` as a 16-byte BLOB,
    /// `nil` as NULL, so a `nil` INTEGER PRIMARY KEY gets a new rowid); single-value types (a `RawRepresentable`
    /// enum) as their single value; anything else (arrays, dictionaries, nested structs) as JSON TEXT.
    ///
    /// - Parameters:
    ///   - record: The record.
    ///   - table: The table name (quoted as one identifier).
    ///   - conflictResolution: An `INSERT OR …` clause; none by default.
    /// - Returns: The rowid of the inserted row (``lastInsertRowID``).
    /// - Throws: ``DatabaseError/valueConversion`` naming the field when a value cannot be encoded (or the record
    ///   does not encode a keyed container); ``DatabaseError/invalidArgument`` when it encodes no field or a value is
    ///   too big to bind (naming the field); a SQLite error such as a constraint violation or an unknown column.
    ///
    /// See [INSERT](https://www.sqlite.org/lang_insert.html).
    @discardableResult
    public func insert<Record: Encodable>(
        _ record: Record, into table: String, onConflict conflictResolution: ConflictResolution? = nil
    ) throws -> Int64 {
        let encoding = try RecordEncoding(record)
        guard !encoding.columns.isEmpty else {
            throw DatabaseError(
                .invalidArgument,
                "\(Record.self) encodes no field to insert into `\(table)`")
        }
        let verb = conflictResolution.map { "INSERT OR \($0.rawValue)" } ?? "INSERT"
        let sql = "\(verb) INTO \(Self.quoteIdentifier(table))("
            + encoding.columns.map(Self.quoteIdentifier).joined(separator: ",") + ") VALUES ("
            + Array(repeating: "?", count: encoding.columns.count).joined(separator: ",") + ")"
        try run(sql, values: encoding.values, fields: encoding.columns, recordType: Record.self)
        return lastInsertRowID
    }

    /// Updates the row of `table` whose primary key equals the record's: every other encoded key is a column to set.
    ///
    /// ```swift
    /// note.body = "edited"
    /// try db.update(note, in: "note")      // UPDATE "note" SET "body"=?,"tags"=? WHERE "id"=?
    /// ```
    ///
    /// Values are encoded as in ``insert(_:into:onConflict:)``, bound, never spliced.
    ///
    /// - Parameters:
    ///   - record: The record; it must encode a value for every primary key column.
    ///   - table: The table name (quoted as one identifier).
    ///   - primaryKey: The key columns; by default the table's declared PRIMARY KEY (read with
    ///     `PRAGMA table_info`).
    /// - Returns: `true` when a row was updated, `false` when no row has that key.
    /// - Throws: ``DatabaseError/invalidArgument`` when the table has no declared primary key (and none is given),
    ///   when the record lacks a key column, or when it has no other column; the errors of
    ///   ``insert(_:into:onConflict:)``.
    ///
    /// See [UPDATE](https://www.sqlite.org/lang_update.html).
    @discardableResult
    public func update<Record: Encodable>(
        _ record: Record, in table: String, primaryKey: [String]? = nil
    ) throws -> Bool {
        let encoding = try RecordEncoding(record)
        let keyColumns = try primaryKey ?? primaryKeyColumns(of: table)
        guard !keyColumns.isEmpty else {
            throw DatabaseError(
                .invalidArgument,
                "table `\(table)` has no declared PRIMARY KEY (or does not exist); pass primaryKey:")
        }
        var keyPositions: [Int] = []
        for column in keyColumns {
            guard let position = encoding.columns.firstIndex(where: { $0.caseInsensitiveEquals(column) }) else {
                throw DatabaseError(
                    .invalidArgument,
                    "\(Record.self) encodes no field for the primary key column `\(column)` of `\(table)`")
            }
            keyPositions.append(position)
        }
        let setPositions = encoding.columns.indices.filter { !keyPositions.contains($0) }
        guard !setPositions.isEmpty else {
            throw DatabaseError(
                .invalidArgument,
                "\(Record.self) encodes no field besides the primary key of `\(table)`: nothing to update")
        }
        let sql = "UPDATE \(Self.quoteIdentifier(table)) SET "
            + setPositions.map { Self.quoteIdentifier(encoding.columns[$0]) + "=?" }.joined(separator: ",")
            + " WHERE " + keyPositions.map { Self.quoteIdentifier(encoding.columns[$0]) + "=?" }
                .joined(separator: " AND ")
        let order = setPositions + keyPositions
        try run(
            sql, values: order.map { encoding.values[$0] }, fields: order.map { encoding.columns[$0] },
            recordType: Record.self)
        return changesCount > 0
    }

    /// The columns of the table's declared primary key, in key order; empty for a table without one.
    func primaryKeyColumns(of table: String) throws -> [String] {
        var columns: [(position: Int, name: String)] = []
        // PRAGMA table_info takes no bound parameter (and pragma_table_info() needs SQLite 3.16): the name is
        // quoted as an identifier.
        try cursor("PRAGMA table_info(\(Self.quoteIdentifier(table)))").forEach { row in
            let position: Int = try row["pk"]
            if position > 0 { columns.append((position, try row["name"])) }
        }
        return columns.sorted { $0.position < $1.position }.map(\.name)
    }

    /// Binds the values one by one (so a failure names its field), then runs the statement.
    private func run(_ sql: String, values: [DatabaseValue], fields: [String], recordType: Any.Type) throws {
        let statement = try cachedStatement(sql)
        try statement.resetIfBusy()
        for (offset, value) in values.enumerated() {
            do {
                try statement.bind(value, at: offset + 1)
            } catch let error as DatabaseError {
                throw DatabaseError(
                    kind: error.kind, code: error.extendedResultCode,
                    message: "field `\(fields[offset])` of \(recordType): \(error.message)", sql: sql)
            }
        }
        try statement.runToCompletion()
    }
}
