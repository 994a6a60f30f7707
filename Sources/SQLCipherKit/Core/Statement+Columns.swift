import CSQLCipher

// The result columns of a statement: their count, names and declared types, and the lookup of a column by name,
// with the table of names `row[name]` asked for (its storage is in the class: an extension cannot store).
extension Statement {
    /// A name asked for by `row[name]` and the column index it resolved to, or -1 when there is none.
    @usableFromInline
    struct NameLookup {
        @usableFromInline let name: String
        @usableFromInline let index: Int
    }

    /// The most names remembered in ``nameLookups``; further names are looked up by hashing every time.
    static let maximumNameLookupCount = 64

    /// The number of columns in the result rows; 0 for statements that return no rows.
    public var columnCount: Int {
        // After the connection closed, the statement is finalized and must not be touched.
        guard handle.isOpen else { return lastColumnNames?.count ?? 0 }
        return Int(sqlite3_column_count(sqliteStatement))
    }

    /// The column names, as SQLite reports them (the `AS` alias when there is one).
    public var columnNames: [String] {
        guard handle.isOpen else { return lastColumnNames ?? [] }
        let names = (0..<CInt(columnCount)).map { String(cString: sqlite3_column_name(sqliteStatement, $0)) }
        lastColumnNames = names
        return names
    }

    /// Reads the column names once, so that rows copied from the statement keep them after the connection closes.
    func rememberColumnNames() {
        if lastColumnNames == nil { _ = columnNames }
    }

    /// The declared type of a result column (`"INTEGER"`, `"TEXT"`, …), or `nil` for an expression.
    ///
    /// - Parameter index: A 0-based column index.
    /// - Throws: ``DatabaseError/invalidArgument`` when the index is out of range.
    public func declaredType(ofColumn index: Int) throws -> String? {
        try checkOpen()
        guard (0..<columnCount).contains(index) else {
            throw DatabaseError.outOfRange("column index \(index) out of range 0..<\(columnCount)", sql: sql)
        }
        return sqlite3_column_decltype(sqliteStatement, CInt(index)).map { String(cString: $0) }
    }

    /// The 0-based index of the first column with this name (compared case-insensitively), or `nil`.
    public func columnIndex(named name: String) -> Int? {
        if let index = columnIndexByName?[name] { return index }
        if columnIndexByName == nil {
            var map: [String: Int] = [:]
            for (index, name) in columnNames.enumerated() {
                if map[name] == nil { map[name] = index }
                let lowered = name.lowercased()
                if map[lowered] == nil { map[lowered] = index }
            }
            columnIndexByName = map
            if let index = map[name] { return index }
        }
        return columnIndexByName?[name.lowercased()]
    }

    /// ``columnIndex(named:)`` for `row[name]`: the predicted name first (see ``nameLookups``), then the names
    /// already asked for, then the hashed lookup.
    @inlinable
    @inline(__always)
    func predictedColumnIndex(named name: String) -> Int? {
        // After the last name of a row comes the first one of the next row.
        let position = nameLookupPosition < nameLookupCount ? nameLookupPosition : 0
        if position < nameLookupCount, let lookups = nameLookups, lookups[position].name == name {
            nameLookupPosition = position &+ 1
            let index = lookups[position].index
            return index >= 0 ? index : nil
        }
        return unpredictedColumnIndex(named: name)
    }

    @usableFromInline
    func unpredictedColumnIndex(named name: String) -> Int? {
        // A new row starts over at the first name; otherwise the caller skipped or reordered names.
        if let lookups = nameLookups {
            for position in 0..<nameLookupCount where lookups[position].name == name {
                nameLookupPosition = position + 1
                let index = lookups[position].index
                return index >= 0 ? index : nil
            }
        }
        let index = columnIndex(named: name)
        if nameLookupCount < Self.maximumNameLookupCount {
            let lookups = nameLookups ?? .allocate(capacity: Self.maximumNameLookupCount)
            nameLookups = lookups
            (lookups + nameLookupCount).initialize(to: NameLookup(name: name, index: index ?? -1))
            nameLookupCount += 1
            nameLookupPosition = nameLookupCount
        }
        return index
    }
}
