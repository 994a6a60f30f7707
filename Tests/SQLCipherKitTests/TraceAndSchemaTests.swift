import Foundation
import Logging
import SQLCipherKit
import Testing

@Suite("Tracing, schema introspection, checkpoints and VACUUM")
struct TraceAndSchemaTests {
    @Test("tracing reports statements and durations; bound values only on request; never a key")
    func tracing() throws {
        let dir = try TemporaryDirectory()
        let db = try Connection(path: dir.path("trace.db"), key: TestKeys.passphrase)
        var events: [TraceEvent] = []
        try db.trace { events.append($0) }
        try db.execute("CREATE TABLE t(secret TEXT)")
        try db.execute("INSERT INTO t VALUES (?)", "VALUE-\(TestKeys.sentinel)")
        #expect(events.contains { $0.sql == "INSERT INTO t VALUES (?)" })
        #expect(events.allSatisfy { $0.expandedSQL == nil && $0.duration >= .zero })

        events.removeAll()
        try db.trace(includingBoundValues: true) { events.append($0) }
        try db.execute("INSERT INTO t VALUES (?)", "visible on request")
        #expect(events.contains { $0.expandedSQL?.contains("visible on request") == true })

        // Everything traced, bound values included, while keys travel: attach, export, rekey.
        events.removeAll()
        let records = LogLines()
        let logger = records.logger("trace")
        try db.attach(dir.path("other.db"), as: "other", encryption: .key(TestKeys.otherPassphrase))
        try db.detach("other")
        try db.exportEncrypted(to: dir.path("export.db"), key: TestKeys.otherPassphrase)
        try db.trace(to: logger, level: .info, includingBoundValues: true)
        try db.attach(dir.path("other.db"), as: "other", encryption: .key(TestKeys.otherPassphrase))
        try db.rekey(to: TestKeys.raw)
        try db.execute("SELECT count(*) FROM t")
        #expect(!events.isEmpty)
        #expect(!records.all.isEmpty)
        for text in events.map(\.description) + events.compactMap(\.expandedSQL) + records.all {
            #expect(!text.contains(TestKeys.sentinel), "\(text)")
            #expect(!text.contains("7f3a9c01"), "\(text)")
        }
        #expect(events.contains { $0.sql.hasPrefix("ATTACH") && $0.expandedSQL == nil })
    }

    @Test("tables, columns, indexes and foreign keys are introspected")
    func schema() throws {
        let dir = try TemporaryDirectory()
        let db = try Connection(path: dir.path("schema.db"), key: TestKeys.raw)
        try db.execute("""
            CREATE TABLE author(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
            CREATE TABLE book(id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT 'untitled',
                              author_id INTEGER REFERENCES author(id) ON DELETE CASCADE, year INTEGER);
            CREATE INDEX book_author_year ON book(author_id, year);
            """)
        #expect(try db.tableNames() == ["author", "book"])
        #expect(try db.tableExists("BOOK"))
        #expect(try !db.tableExists("missing"))
        let columns = try db.columns(in: "book")
        #expect(columns.map(\.name) == ["id", "title", "author_id", "year"])
        #expect(columns[0].primaryKeyPosition == 1)
        #expect(columns[1].isNotNull && columns[1].defaultValueSQL == "'untitled'")
        #expect(columns[2].declaredType == "INTEGER")
        let indexes = try db.indexes(on: "book")
        #expect(indexes.map(\.name) == ["book_author_year"])
        #expect(indexes[0].columns == ["author_id", "year"] && !indexes[0].isUnique)
        #expect(try db.indexes(on: "author").contains { $0.isUnique && $0.columns == ["name"] })
        let keys = try db.foreignKeys(in: "book")
        #expect(keys == [ForeignKeyInfo(destinationTable: "author", originColumns: ["author_id"],
                                        destinationColumns: ["id"], onUpdate: "NO ACTION", onDelete: "CASCADE")])
        expectError(.invalidArgument) { try db.columns(in: "missing") }
    }

    @Test("checkpoints in WAL mode, and VACUUM keeps the file encrypted")
    func checkpointAndVacuum() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("wal.db")
        try EncryptionTests.makeDatabase(path, key: TestKeys.raw, journalMode: "WAL", rows: 500)
        let db = try Connection(path: path, key: TestKeys.raw)
        try db.execute("DELETE FROM t WHERE id % 2 = 0")
        let result = try db.checkpoint(.truncate)
        #expect(result.logFrameCount == 0 || result.checkpointedFrameCount == result.logFrameCount)
        #expect((try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) == 0)
        try db.vacuum()
        #expect(!contains(try fileBytes(path), EncryptionTests.marker))
        #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 250)

        let copy = dir.path("vacuumed.db")
        if SQLCipher.sqliteVersionNumber >= 3_027_000 {
            try db.vacuum(into: copy)
            #expect(!contains(try fileBytes(copy), EncryptionTests.marker))
            #expect(Array(try fileBytes(copy).prefix(16)) != EncryptionTests.magic)
            #expect(try Connection(path: copy, key: TestKeys.raw).scalar("SELECT count(*) FROM t", as: Int.self) == 250)
            expectError(.fileSystem) { try db.vacuum(into: copy) }
        } else {
            let error = expectError(.unsupportedByEngine) { try db.vacuum(into: copy) }
            #expect(error?.message.contains("3.27") == true)
            #expect(!FileManager.default.fileExists(atPath: copy))
        }
    }
}
