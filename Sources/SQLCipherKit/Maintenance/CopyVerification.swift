import CSQLCipher

/// What a copy of a database must have in common with its source: checked before the copy is renamed into place.
struct DatabaseSummary: Equatable {
    /// Rows of `sqlite_master`: tables, indexes, views, triggers.
    var schemaObjectCount: Int
    /// The row count of every table, by name; `nil` when not counted (a source other connections may write to).
    var rowCounts: [String: Int]?
    var userVersion: Int64
    var applicationID: Int64
    /// `wal`, `delete`, …
    var journalMode: String
}

extension Connection {
    /// The summary of a schema's database (`main` or an attached one), read in the current transaction when there
    /// is one.
    func summary(schema: String = "main", countingRows: Bool) throws -> DatabaseSummary {
        let quoted = Self.quoteIdentifier(schema)
        var rowCounts: [String: Int]?
        if countingRows {
            var counts: [String: Int] = [:]
            let tables = try all(
                "SELECT name FROM \(quoted).sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'",
                as: String.self)
            for table in tables {
                counts[table] = try scalar(
                    "SELECT count(*) FROM \(quoted).\(Self.quoteIdentifier(table))", as: Int.self) ?? 0
            }
            rowCounts = counts
        }
        return DatabaseSummary(
            schemaObjectCount: try scalar("SELECT count(*) FROM \(quoted).sqlite_master", as: Int.self) ?? 0,
            rowCounts: rowCounts,
            userVersion: try scalar("PRAGMA \(quoted).user_version", as: Int64.self) ?? 0,
            applicationID: try scalar("PRAGMA \(quoted).application_id", as: Int64.self) ?? 0,
            journalMode: (try pragmaText("\(quoted).journal_mode") ?? "delete").lowercased())
    }

    /// The page count of the main database.
    func pageCount() throws -> Int {
        try pragmaInteger("page_count") ?? 0
    }

    /// Opens a copy without creating it, with the key and settings it must open with, and checks it: every page
    /// (`quick_check`, and page HMACs on SQLCipher 4.2+), the header is not plaintext when it must be encrypted,
    /// and what it has in common with the source (schema, row counts when counted, `user_version`,
    /// `application_id`, journal mode, page count when given).
    ///
    /// - Throws: ``DatabaseError/verificationFailed`` naming the first difference; the open's own error (a wrong
    ///   key, a missing file) as it is.
    ///
    /// `checksFreePages`: whether `cipher_integrity_check` also authenticates the pages `quick_check` does not read
    /// (free-list pages, which hold no data and are overwritten whole before they are used again). A key rotation
    /// leaves it out: its copy's every data page is already authenticated by `quick_check`.
    static func verifyCopy(
        at path: String, encryption: Encryption, expected: DatabaseSummary?, pageCount expectedPageCount: Int? = nil,
        checksFreePages: Bool = true
    ) throws {
        func fail(_ message: String) -> DatabaseError {
            DatabaseError.checkFailed("the copy did not verify: \(message); it was removed")
        }
        if encryption.requiresEncryptedHeader && hasPlaintextSQLiteHeader(atPath: path) {
            throw fail("its header is plaintext although it should be encrypted")
        }
        let copy = try Connection(path: path, encryption: encryption, options: OpenOptions(mode: .readWrite))
        defer { copy.close() }
        let report = try copy.quickCheckProblems()
        guard report.isEmpty else {
            throw fail("PRAGMA quick_check: " + report.prefix(5).joined(separator: "; "))
        }
        let rows = checksFreePages && copy.checksCipherIntegrity ? try copy.cipherIntegrityRows() : []
        let failures = rows.filter { !IntegrityReport.isNotice($0) }
        guard failures.isEmpty else {
            throw fail(failures.prefix(3).joined(separator: "; "))
        }
        if let expectedPageCount {
            let pageCount = try copy.pageCount()
            guard pageCount == expectedPageCount else {
                throw fail("it has \(pageCount) pages, the source \(expectedPageCount)")
            }
        }
        guard let expected else { return }
        let actual = try copy.summary(countingRows: expected.rowCounts != nil)
        guard actual.schemaObjectCount == expected.schemaObjectCount else {
            throw fail("it has \(actual.schemaObjectCount) schema objects, the source \(expected.schemaObjectCount)")
        }
        if let expectedCounts = expected.rowCounts, let actualCounts = actual.rowCounts, expectedCounts != actualCounts {
            let table = expectedCounts.keys.sorted().first { expectedCounts[$0] != actualCounts[$0] } ?? "?"
            throw fail(
                "table \(table) has \(actualCounts[table].map(String.init) ?? "no") rows, the source"
                    + " \(expectedCounts[table].map(String.init) ?? "none")")
        }
        guard actual.userVersion == expected.userVersion, actual.applicationID == expected.applicationID else {
            throw fail("user_version or application_id differ from the source")
        }
        guard actual.journalMode == expected.journalMode || expected.journalMode != "wal" else {
            throw fail("its journal mode is \(actual.journalMode), the source's wal")
        }
    }
}
