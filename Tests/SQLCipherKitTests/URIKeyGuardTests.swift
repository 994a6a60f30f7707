import Foundation
import SQLCipherKit
import Testing

/// A URI file name can carry a key (`file:x.db?key=…`, `hexkey=`, `textkey=`) that SQLCipher uses for an ATTACH:
/// refused in every spelling, whether the name is written in the SQL, bound, or computed.
@Suite("URI keys in file names")
struct URIKeyGuardTests {
    static let key = "\(TestKeys.sentinel)-uri"

    /// `{X}` is the attached file's path.
    static let literalForms: [String] = [
        "ATTACH 'file:{X}?key=\(key)' AS x",
        "ATTACH DATABASE 'file:{X}?hexkey=00112233' AS x",
        "ATTACH 'file:{X}?textkey=\(key)' AS x",
        "ATTACH 'file:{X}?KEY=\(key)' AS x",
        "ATTACH 'FILE:{X}?Key=\(key)' AS x",
        "ATTACH 'file:{X}?%6Bey=\(key)' AS x",
        "ATTACH 'file:{X}?%68%65%78%6b%65%79=00' AS x",
        "ATTACH 'file:{X}?key%00ignored=\(key)' AS x",
        "ATTACH 'file:{X}?mode=rwc&cache=private&key=\(key)' AS x",
        "ATTACH 'file:{X}?key' AS x",
        "ATTACH 'file:{X}?key=' AS x",
        "ATTACH 'file://localhost{X}?key=\(key)' AS x",
        "ATTACH 'file:{X}#?key=\(key)' AS x",
        "ATTACH 'file:{X}?key=\(key)' AS x KEY 'other-\(key)'",
        "attach 'file:{X}?hexkey=00' as \"x\"",
    ]

    /// Checks what a refused ATTACH left: the folder as it was, the main file's bytes, one schema, no key in the error.
    static func expectRefused(
        _ error: DatabaseError?, scene: GuardScene, dir: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let (db, listing, mainBytes) = (scene.db, scene.listing, scene.mainBytes)
        #expect(error?.message.contains("key in a file name") == true, "\(error.map { "\($0)" } ?? "")",
                sourceLocation: sourceLocation)
        #expect(error?.sql == nil, sourceLocation: sourceLocation)
        #expect(error.map { "\($0)" }?.contains(TestKeys.sentinel) == false, sourceLocation: sourceLocation)
        #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"], sourceLocation: sourceLocation)
        db.close()
        #expect(try folderListing(dir.url.path) == listing, sourceLocation: sourceLocation)
        #expect(try snapshot(dir.path("main.db")) == mainBytes, sourceLocation: sourceLocation)
    }

    @Test("a key in an ATTACH file name written in SQL is refused before any file is made, in every spelling",
          arguments: literalForms, SQLPath.allCases)
    func literalNames(form: String, path: SQLPath) throws {
        for isURI in [false, true] {
            try withTemporaryDirectory { dir in
                let scene = try GuardScene(in: dir, isURI: isURI)
                let error = expectError(code: DatabaseError.SQLITE_AUTH) {
                    try path.run(form.replacingOccurrences(of: "{X}", with: dir.path("x.db")), on: scene.db)
                }
                try Self.expectRefused(error, scene: scene, dir: dir)
            }
        }
    }

    @Test("a key in a bound or computed file name is refused once SQLite has read it; the attachment is gone",
          arguments: SQLPath.allCases)
    func hiddenNames(path: SQLPath) throws {
        for isURI in [false, true] {
            try withTemporaryDirectory { dir in
                let scene = try GuardScene(in: dir, isURI: isURI)
                let (db, listing, mainBytes) = (scene.db, scene.listing, scene.mainBytes)
                let uri = "file:\(dir.path("x.db"))?key=\(Self.key)"
                // With URI file names off (SQLCipher 3.4.1 without isURI), SQLite takes the name as a relative path
                // inside a folder "file:", which does not exist: the ATTACH fails by itself, creates nothing, and
                // the message that would name the file (and the key) is replaced by the refusal.
                let cases: [(String, StatementArguments?)] = [
                    ("ATTACH ? AS x", [uri]),
                    ("ATTACH :name AS x KEY 'other'", [":name": uri]),
                    ("ATTACH 'file:\(dir.path("x.db"))?' || 'k' || 'ey=\(Self.key)' AS x", nil),
                ]
                for (sql, arguments) in cases where path.takesArguments || arguments == nil {
                    let error = #expect(throws: DatabaseError.self) {
                        try path.run(sql, arguments: arguments ?? [], on: db)
                    }
                    #expect(error?.message.contains("key in a file name") == true, "\(sql): \(error.map { "\($0)" } ?? "")")
                    #expect(error.map { "\($0)" }?.contains(TestKeys.sentinel) == false)
                    #expect(try db.all("PRAGMA database_list") { try $0[1] as String } == ["main"])
                    #expect(try folderListing(dir.url.path) == listing, "\(sql)")
                }
                db.close()
                #expect(try snapshot(dir.path("main.db")) == mainBytes)
            }
        }
    }

    @Test("Connection.attach refuses a path with a URI key and creates nothing")
    func libraryAttach() throws {
        try withTemporaryDirectory { dir in
            try EncryptionTests.makeDatabase(dir.path("main.db"), rows: 1)
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(isURI: true))
            let listing = try folderListing(dir.url.path)
            expectError(code: DatabaseError.SQLITE_AUTH) {
                try db.attach("file:\(dir.path("x.db"))?hexkey=00", as: "x", encryption: .key(TestKeys.otherPassphrase))
            }
            #expect(try folderListing(dir.url.path) == listing)
        }
    }

    @Test("URI file names without a key still attach, with the key given as a bound parameter")
    func uriWithoutKey() throws {
        try withTemporaryDirectory { dir in
            try EncryptionTests.makeDatabase(dir.path("main.db"), rows: 1)
            let db = try Connection(path: dir.path("main.db"), key: TestKeys.raw, options: OpenOptions(isURI: true))
            try db.execute("ATTACH ? AS x KEY ?", arguments: ["file:\(dir.path("x.db"))?mode=rwc", Self.key])
            try db.execute("CREATE TABLE x.t(v); INSERT INTO x.t VALUES ('\(EncryptionTests.marker)')")
            try db.detach("x")
            db.close()
            let listing = try folderListing(dir.url.path)
            #expect(listing == ["main.db": 0o600, "x.db": 0o600], "\(listing)")
            #expect(!contains(try snapshot(dir.path("x.db")), EncryptionTests.marker))
            let attached = try Connection(path: dir.path("x.db"), key: try EncryptionKey(passphrase: Self.key))
            #expect(try attached.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
        }
    }
}
