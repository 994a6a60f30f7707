import SQLCipherKit
import Testing

/// An encrypted connection with tables exercising each constraint.
private func openWithConstraints(_ dir: borrowing TemporaryDirectory) throws -> Connection {
    let db = try Connection(path: dir.path("errors.db"), key: TestKeys.raw)
    try db.execute("""
        PRAGMA foreign_keys = ON;
        CREATE TABLE parent(id INTEGER PRIMARY KEY, code TEXT UNIQUE, name TEXT NOT NULL);
        CREATE TABLE child(parent_id INTEGER REFERENCES parent(id));
        CREATE TABLE pair(a, b, PRIMARY KEY (a, b));
        CREATE TABLE checked(x INTEGER CHECK (x > 0));
        INSERT INTO parent(id, code, name) VALUES (1, 'one', 'first');
        INSERT INTO pair VALUES (1, 1);
        """)
    return db
}

@Suite("DatabaseError and ResultCode")
struct DatabaseErrorTests {
    static let codeValues: [(ResultCode, Int32)] = [
        (DatabaseError.SQLITE_OK, 0), (DatabaseError.SQLITE_ERROR, 1), (DatabaseError.SQLITE_INTERNAL, 2),
        (DatabaseError.SQLITE_PERM, 3), (DatabaseError.SQLITE_ABORT, 4), (DatabaseError.SQLITE_BUSY, 5),
        (DatabaseError.SQLITE_LOCKED, 6), (DatabaseError.SQLITE_NOMEM, 7), (DatabaseError.SQLITE_READONLY, 8),
        (DatabaseError.SQLITE_INTERRUPT, 9), (DatabaseError.SQLITE_IOERR, 10), (DatabaseError.SQLITE_CORRUPT, 11),
        (DatabaseError.SQLITE_NOTFOUND, 12), (DatabaseError.SQLITE_FULL, 13), (DatabaseError.SQLITE_CANTOPEN, 14),
        (DatabaseError.SQLITE_PROTOCOL, 15), (DatabaseError.SQLITE_EMPTY, 16), (DatabaseError.SQLITE_SCHEMA, 17),
        (DatabaseError.SQLITE_TOOBIG, 18), (DatabaseError.SQLITE_CONSTRAINT, 19),
        (DatabaseError.SQLITE_MISMATCH, 20), (DatabaseError.SQLITE_MISUSE, 21), (DatabaseError.SQLITE_NOLFS, 22),
        (DatabaseError.SQLITE_AUTH, 23), (DatabaseError.SQLITE_FORMAT, 24), (DatabaseError.SQLITE_RANGE, 25),
        (DatabaseError.SQLITE_NOTADB, 26), (DatabaseError.SQLITE_NOTICE, 27), (DatabaseError.SQLITE_WARNING, 28),
        (DatabaseError.SQLITE_CONSTRAINT_FOREIGNKEY, 787), (DatabaseError.SQLITE_CONSTRAINT_NOTNULL, 1299),
        (DatabaseError.SQLITE_CONSTRAINT_PRIMARYKEY, 1555), (DatabaseError.SQLITE_CONSTRAINT_UNIQUE, 2067),
        (DatabaseError.SQLITE_READONLY_DBMOVED, 1032), (DatabaseError.SQLITE_IOERR_SHORT_READ, 522),
    ]

    // MARK: - ResultCode

    @Test("a result code knows its primary code and whether it is extended")
    func resultCodeParts() {
        let unique = DatabaseError.SQLITE_CONSTRAINT_UNIQUE
        #expect(unique.rawValue == 2067)
        #expect(unique.isExtended)
        #expect(unique.primaryResultCode == DatabaseError.SQLITE_CONSTRAINT)
        #expect(!DatabaseError.SQLITE_CONSTRAINT.isExtended)
        #expect(DatabaseError.SQLITE_CONSTRAINT.primaryResultCode == DatabaseError.SQLITE_CONSTRAINT)
        #expect(ResultCode(rawValue: 19) == DatabaseError.SQLITE_CONSTRAINT)
        #expect(DatabaseError.SQLITE_BUSY.description == "5 (database is locked)")
        #expect(DatabaseError.SQLITE_CONSTRAINT.description.contains("constraint failed"))
        #expect(DatabaseError.SQLITE_OK.rawValue == 0)
        #expect(DatabaseError.SQLITE_NOTADB.rawValue == 26)
        #expect(DatabaseError.SQLITE_READONLY_DBMOVED.primaryResultCode == DatabaseError.SQLITE_READONLY)
        #expect(DatabaseError.SQLITE_IOERR_SHORT_READ.primaryResultCode == DatabaseError.SQLITE_IOERR)
    }

    @Test("the result codes have SQLite's values", arguments: DatabaseErrorTests.codeValues)
    func resultCodeValues(code: ResultCode, value: Int32) {
        #expect(code.rawValue == value)
    }

    @Test("a primary code pattern matches its extended codes; an extended pattern matches only itself")
    func resultCodeMatching() {
        let unique = DatabaseError.SQLITE_CONSTRAINT_UNIQUE
        #expect(DatabaseError.SQLITE_CONSTRAINT ~= unique)
        #expect(DatabaseError.SQLITE_CONSTRAINT ~= DatabaseError.SQLITE_CONSTRAINT)
        #expect(unique ~= unique)
        #expect(!(unique ~= DatabaseError.SQLITE_CONSTRAINT))
        #expect(!(unique ~= DatabaseError.SQLITE_CONSTRAINT_NOTNULL))
        #expect(!(DatabaseError.SQLITE_BUSY ~= unique))
        // SQLITE_IOERR_SHORT_READ (522) must not match SQLITE_ERROR (1) or SQLITE_IOERR_* siblings.
        #expect(DatabaseError.SQLITE_IOERR ~= DatabaseError.SQLITE_IOERR_SHORT_READ)
        #expect(!(DatabaseError.SQLITE_ERROR ~= DatabaseError.SQLITE_IOERR_SHORT_READ))
        switch unique {
        case DatabaseError.SQLITE_CONSTRAINT: break
        default: Issue.record("a switch over codes should match the primary code")
        }
    }

    // MARK: - Errors from SQLite

    @Test("each constraint violation carries its extended code and SQLite's message", arguments: [
        ("INSERT INTO parent(id, code, name) VALUES (2, 'one', 'x')", DatabaseError.SQLITE_CONSTRAINT_UNIQUE,
         "UNIQUE constraint failed: parent.code"),
        ("INSERT INTO parent(id, code, name) VALUES (2, 'two', NULL)", DatabaseError.SQLITE_CONSTRAINT_NOTNULL,
         "NOT NULL constraint failed: parent.name"),
        ("INSERT INTO pair VALUES (1, 1)", DatabaseError.SQLITE_CONSTRAINT_PRIMARYKEY,
         "UNIQUE constraint failed: pair.a, pair.b"),
        ("INSERT INTO child VALUES (42)", DatabaseError.SQLITE_CONSTRAINT_FOREIGNKEY,
         "FOREIGN KEY constraint failed"),
        ("INSERT INTO checked VALUES (0)", ResultCode(rawValue: 275), "CHECK constraint failed"),
    ])
    func constraintCodes(sql: String, code: ResultCode, message: String) throws {
        try withTemporaryDirectory { dir in
            let db = try openWithConstraints(dir)
            let before = try db.scalar("SELECT total_changes()", as: Int.self)
            let error = expectError(code: code) { try db.execute(sql) }
            #expect(error?.kind == .sqlite)
            #expect(error?.extendedResultCode == code)
            #expect(error?.resultCode == DatabaseError.SQLITE_CONSTRAINT)
            #expect(error?.message.hasPrefix(message) == true)
            #expect(error?.sql == sql)
            #expect(try db.scalar("SELECT total_changes()", as: Int.self) == before)
        }
    }

    @Test("a wrong datatype for an INTEGER PRIMARY KEY gives SQLITE_MISMATCH")
    func mismatch() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithConstraints(dir)
            let error = expectError(code: DatabaseError.SQLITE_MISMATCH) {
                try db.execute("INSERT INTO parent(id, name) VALUES (?, 'x')", "not an integer")
            }
            #expect(error?.message.contains("mismatch") == true)
        }
    }

    @Test("catch clauses match errors by primary code, extended code and kind")
    func catchPatterns() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithConstraints(dir)
            var matched: [String] = []
            do {
                try db.execute("INSERT INTO parent(id, code, name) VALUES (2, 'one', 'x')")
            } catch DatabaseError.SQLITE_BUSY {
                matched.append("busy")
            } catch DatabaseError.SQLITE_CONSTRAINT {
                matched.append("constraint")
            }
            do {
                try db.execute("INSERT INTO parent(id, code, name) VALUES (2, 'one', 'x')")
            } catch DatabaseError.SQLITE_CONSTRAINT_NOTNULL {
                matched.append("not null")
            } catch DatabaseError.SQLITE_CONSTRAINT_UNIQUE {
                matched.append("unique")
            }
            do {
                _ = try db.query("SELECT 'x'").first.map { try $0[0] as Int }
            } catch DatabaseError.wrongKey {
                matched.append("wrong key")
            } catch DatabaseError.valueConversion {
                matched.append("conversion")
            }
            do {
                _ = try db.prepare("SELECT 1; SELECT 2")
            } catch DatabaseError.SQLITE_MISUSE {
                matched.append("misuse")
            }
            #expect(matched == ["constraint", "unique", "conversion", "misuse"])
            // Errors of other types never match.
            #expect(!(DatabaseError.SQLITE_ERROR ~= (CancellationError() as any Error)))
            #expect(!(DatabaseError.sqlite ~= (CancellationError() as any Error)))
        }
    }

    // MARK: - Kinds and description

    @Test("kinds have stable names and describe themselves by name")
    func kindNames() {
        let kinds: [(DatabaseError.Kind, String)] = [
            (.sqlite, "sqlite"), (.wrongKey, "wrongKey"), (.notEncrypted, "notEncrypted"),
            (.missingKey, "missingKey"), (.notADatabase, "notADatabase"), (.notSQLCipher, "notSQLCipher"),
            (.unsupportedByEngine, "unsupportedByEngine"), (.invalidKey, "invalidKey"),
            (.valueConversion, "valueConversion"), (.invalidArgument, "invalidArgument"),
            (.connectionClosed, "connectionClosed"), (.invalidSQL, "invalidSQL"),
            (.transactionMisuse, "transactionMisuse"), (.verificationFailed, "verificationFailed"),
            (.invalidState, "invalidState"), (.fileSystem, "fileSystem"),
        ]
        for (kind, name) in kinds {
            #expect(kind.name == name)
            #expect(kind.description == name)
        }
        #expect(Set(kinds.map(\.0)).count == kinds.count)
        #expect(DatabaseError.wrongKey == DatabaseError.Kind.wrongKey)
        #expect(DatabaseError.fileSystem == DatabaseError.Kind.fileSystem)
    }

    @Test("an error built by hand keeps its parts and describes kind, code, message and SQL")
    func descriptionFormat() {
        let error = DatabaseError(
            kind: .invalidState, code: DatabaseError.SQLITE_MISUSE, message: "other connections are open",
            sql: "PRAGMA rekey")
        #expect(error.kind == .invalidState)
        #expect(error.extendedResultCode == DatabaseError.SQLITE_MISUSE)
        #expect(error.resultCode == DatabaseError.SQLITE_MISUSE)
        #expect(error.message == "other connections are open")
        #expect(error.sql == "PRAGMA rekey")
        #expect(error.description
            == "invalidState: other connections are open — while executing `PRAGMA rekey` (code 21)")
        let plain = DatabaseError(kind: .sqlite, code: DatabaseError.SQLITE_BUSY, message: "database is locked")
        #expect(plain.sql == nil)
        #expect(plain.description == "SQLite error 5: database is locked")
    }

    @Test("errors name the SQL but never the bound values")
    func errorsHideArguments() throws {
        try withTemporaryDirectory { dir in
            let db = try openWithConstraints(dir)
            let secret = "secret-value-xyz"
            try db.execute("INSERT INTO parent(id, code, name) VALUES (?, ?, ?)", 7, secret, "n")
            let sql = "INSERT INTO parent(id, code, name) VALUES (?, ?, ?)"
            let unique = expectError(code: DatabaseError.SQLITE_CONSTRAINT) { try db.execute(sql, 8, secret, "n") }
            let named = expectError(code: DatabaseError.SQLITE_CONSTRAINT) {
                try db.execute("INSERT INTO parent(id, code, name) VALUES (:id, :code, :name)",
                               arguments: ["id": 9, "code": secret, "name": "n"])
            }
            let conversion = expectError(.valueConversion) {
                try db.scalar("SELECT code FROM parent WHERE code = ?", secret, as: Int.self)
            }
            let big = expectError(.invalidArgument) { try db.execute(sql, 10, secret, UInt64.max) }
            for error in [unique, named, conversion, big] {
                let text = "\(String(describing: error)) \(error?.message ?? "") \(error?.sql ?? "")"
                #expect(!text.contains(secret))
                #expect(!text.contains("\(UInt64.max)"))
            }
            #expect(unique?.sql == sql)
        }
    }

    @Test("errors carry no key material")
    func errorsHideKeys() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("k.db")
            try Connection(path: path, key: TestKeys.passphrase).execute("CREATE TABLE t(x)")
            let error = expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            #expect(error.map { "\($0)" }?.contains(TestKeys.sentinel) == false)
            #expect(error?.message.contains(TestKeys.sentinel) == false)
        }
    }

    @Test("an error made from its kind carries the kind's usual result code")
    func kindFactory() {
        let cases: [(DatabaseError.Kind, ResultCode)] = [
            (.invalidArgument, DatabaseError.SQLITE_MISUSE), (.invalidState, DatabaseError.SQLITE_MISUSE),
            (.valueConversion, DatabaseError.SQLITE_MISMATCH), (.fileSystem, DatabaseError.SQLITE_CANTOPEN),
            (.wrongKey, DatabaseError.SQLITE_NOTADB), (.damaged, DatabaseError.SQLITE_CORRUPT),
            (.diskFull, DatabaseError.SQLITE_FULL), (.busy, DatabaseError.SQLITE_BUSY),
            (.migrationFailed, DatabaseError.SQLITE_ABORT), (.verificationFailed, DatabaseError.SQLITE_ERROR),
        ]
        for (kind, code) in cases {
            let error = DatabaseError(kind, "message", sql: "SELECT 1")
            #expect(error.kind == kind)
            #expect(error.extendedResultCode == code, "\(kind)")
            #expect(error.message == "message" && error.sql == "SELECT 1")
        }
    }
}
