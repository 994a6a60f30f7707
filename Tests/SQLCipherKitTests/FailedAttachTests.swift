import Foundation
import SQLCipherKit
import Testing

/// SQLite creates an ATTACH's file before it checks the key: a failed ATTACH removes the file it created (one that
/// did not exist before and is still empty), and leaves every other file as it was.
@Suite("Failed ATTACH")
struct FailedAttachTests {
    /// ATTACHes that fail on both engines after SQLite created the file, or before; `{X}` is the file.
    static let failingForms: [String] = [
        "ATTACH '{X}' AS x KEY 0",
        "ATTACH DATABASE '{X}' AS x KEY 1.5",
        "ATTACH '{X}' AS x KEY -1",
        "ATTACH 'file:{X}?mode=bogus' AS x",
        "ATTACH 'file:{X}?vfs=no-such-vfs' AS x KEY 'k'",
        "ATTACH '{X}' AS main KEY 'k'",
        "ATTACH '{X}' AS x KEY 0; CREATE TABLE x.t(v)",
    ]

    /// Each form with every path that can run it: a prepared statement holds one statement, so `prepare` refuses a
    /// form of two (for that reason, not the ATTACH's) and those forms go through the paths that run scripts only.
    static let formsAndPaths: [(String, SQLPath)] = failingForms.flatMap { form in
        SQLPath.allCases.filter { !$0.takesArguments || !form.contains(";") }.map { (form, $0) }
    }

    @Test("a failed ATTACH leaves no file behind, through every path", arguments: formsAndPaths)
    func leavesNothing(form: String, path: SQLPath) throws {
        for isURI in [false, true] {
            try withTemporaryDirectory { dir in
                let scene = try GuardScene(in: dir, isURI: isURI)
                #expect(throws: DatabaseError.self, "\(form)") {
                    try path.run(form.replacingOccurrences(of: "{X}", with: dir.path("x.db")), on: scene.db)
                }
                #expect(try scene.db.all("PRAGMA database_list") { try $0[1] as String } == ["main"])
                scene.db.close()
                #expect(try folderListing(dir.url.path) == scene.listing, "\(form) (URI \(isURI))")
                #expect(try snapshot(dir.path("main.db")) == scene.mainBytes)
            }
        }
    }

    @Test("a failed ATTACH whose file name is a bound parameter leaves no file behind either")
    func boundFileName() throws {
        try withTemporaryDirectory { dir in
            let scene = try GuardScene(in: dir)
            let (db, listing) = (scene.db, scene.listing)
            let path = dir.path("x.db")
            let cases: [(String, StatementArguments)] = [
                ("ATTACH ? AS x KEY 0", [path]),
                ("ATTACH DATABASE ?1 AS x KEY 1.5", [path]),
                ("ATTACH :file AS x KEY 0", [":file": path]),
                ("ATTACH @file AS x KEY 0", ["@file": path]),
                ("ATTACH $file AS x KEY -1", ["$file": path]),
            ]
            for (sql, arguments) in cases {
                #expect(throws: DatabaseError.self, "\(sql)") { try db.execute(sql, arguments: arguments) }
                #expect(try folderListing(dir.url.path) == listing, "\(sql)")
                let statement = try db.prepare(sql)
                #expect(throws: DatabaseError.self, "\(sql)") { try statement.run(arguments: arguments) }
                #expect(try folderListing(dir.url.path) == listing, "\(sql), prepared")
            }
            #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"])
        }
    }

    @Test("a file that existed before a failed ATTACH stays, with its bytes and mode", arguments: [0, 4096])
    func existingFileStays(size: Int) throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(x)")
            let existing = dir.path("x.db")
            if size == 0 {
                _ = FileManager.default.createFile(atPath: existing, contents: nil)
            } else {
                try EncryptionTests.makeDatabase(existing, key: TestKeys.passphrase, rows: 20)
            }
            try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: existing)
            let listing = try folderListing(dir.url.path)
            let bytes = try snapshot(existing)
            for sql in ["ATTACH '\(existing)' AS x KEY 0", "ATTACH '\(existing)' AS x KEY 'wrong key'"] {
                if size == 0 && sql.contains("wrong") { continue }  // an empty file opens with any key
                #expect(throws: DatabaseError.self, "\(sql)") { try db.execute(sql) }
                #expect(try folderListing(dir.url.path) == listing, "\(sql)")
                #expect(try snapshot(existing) == bytes)
            }
        }
    }

    @Test("Connection.attach removes the file it created when the ATTACH fails")
    func libraryAttach() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw)
            try db.execute("CREATE TABLE t(x); ATTACH ':memory:' AS busy")
            let listing = try folderListing(dir.url.path)
            // The schema name is taken: SQLite refuses after the library created the file (mode 0600).
            #expect(throws: DatabaseError.self) {
                try db.attach(dir.path("x.db"), as: "busy", encryption: .key(TestKeys.otherPassphrase))
            }
            #expect(try folderListing(dir.url.path) == listing)
        }
    }
}
