import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Key rotation")
struct RotationTests {
    static func contents(_ path: String, key: EncryptionKey, settings: CipherSettings = .engineDefault) throws -> [String] {
        try Connection(path: path, key: key, settings: settings).all("SELECT body FROM t ORDER BY id", as: String.self)
    }

    @Test("copy and in-place rotations keep the data; afterwards only the new key opens the file",
          arguments: RotationMethod.allCases, ["DELETE", "WAL"])
    func rotates(method: RotationMethod, journalMode: String) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("tenant.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.passphrase, journalMode: journalMode)
            let before = try Self.contents(path, key: TestKeys.passphrase)
            let result = try KeyRotation.rotate(RotationRequest(
                path: path, oldEncryption: .key(TestKeys.passphrase), newEncryption: .key(TestKeys.raw), method: method))
            #expect(result.isRotated)
            #expect(result.keyState == .new)
            #expect(try Self.contents(path, key: TestKeys.raw) == before)
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
            #expect(try fileMode(path) == 0o600)
            let files = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
            #expect(files.allSatisfy { !$0.contains("sqlcipherkit-") }, "\(files)")
            // A copy of the main file alone does not open with the old key either.
            try FileManager.default.copyItem(atPath: path, toPath: dir.path("copy.db"))
            expectError(.wrongKey) { try Connection(path: dir.path("copy.db"), key: TestKeys.passphrase) }
            #expect(try Self.contents(dir.path("copy.db"), key: TestKeys.raw) == before)
        }
    }

    @Test("a rotation through a symbolic link rotates the real file and says so; a path that only looks different does not")
    func symlinkDescription() throws {
        try withTemporaryDirectory { dir in
            let real = dir.path("real.db")
            try EncryptionTests.makeDatabase(real, key: TestKeys.passphrase)
            try FileManager.default.createSymbolicLink(atPath: dir.path("current.db"), withDestinationPath: real)
            let linked = try KeyRotation.rotate(RotationRequest(
                path: dir.path("current.db"), oldEncryption: .key(TestKeys.passphrase), newEncryption: .key(TestKeys.raw)))
            #expect(linked.isRotated)
            #expect(linked.description.contains("symlink to"), "\(linked)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: dir.path("current.db")) == real)
            // The same file named with a `..` detour: resolved differently, but no link to report.
            let detour = dir.url.path + "/../" + dir.url.lastPathComponent + "/real.db"
            let plain = try KeyRotation.rotate(RotationRequest(
                path: detour, oldEncryption: .key(TestKeys.raw), newEncryption: .key(TestKeys.passphrase)))
            #expect(plain.isRotated)
            #expect(!plain.description.contains("symlink"), "\(plain)")
        }
    }

    @Test("a wrong old key, a busy database and an open connection leave the file untouched")
    func refusals() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("tenant.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.raw)
            let before = try snapshot(path)
            let request = RotationRequest(
                path: path, oldEncryption: .key(TestKeys.passphrase), newEncryption: .key(TestKeys.otherPassphrase),
                lockTimeout: .milliseconds(200))
            let wrongOld = expectError(.wrongKey) { try KeyRotation.rotate(request) }
            #expect(wrongOld != nil)

            var good = request
            good.oldEncryption = .key(TestKeys.raw)
            for method in RotationMethod.allCases {
                good.method = method
                let foreign = try RawHandle(path: path, key: TestKeys.rawText)
                try foreign.execute("BEGIN IMMEDIATE")
                // Refused after the lock timeout (no wall-clock bound here: a loaded machine may be slow).
                let busy = expectError(code: DatabaseError.SQLITE_BUSY) { try KeyRotation.rotate(good) }
                #expect(busy?.message.contains("busy") == true)
                try foreign.execute("ROLLBACK")
                foreign.close()

                let open = try Connection(path: path, key: TestKeys.raw)
                expectError(.invalidState) { try KeyRotation.rotate(good) }
                open.close()
            }
            #expect(try snapshot(path) == before)
            try KeyRotation.rotate(good)
        }
    }

    @Test("another process with the file open is named and the rotation refused", .enabled(if: isLinux,
        "finding other processes reads /proc, which only Linux has"))
    func otherProcess() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("shared.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.raw)
            // It holds the file until the test ends it, and says when it has it open.
            let holder = try FileHolder(path: path)
            defer { holder.stop() }
            let error = expectError(.invalidState) {
                try KeyRotation.rotate(RotationRequest(
                    path: path, oldEncryption: .key(TestKeys.raw), newEncryption: .key(TestKeys.passphrase)))
            }
            #expect(error?.message.contains("PID \(holder.processIdentifier)") == true, "\(String(describing: error))")
            #expect(try Self.contents(path, key: TestKeys.raw).count == 200)
        }
    }

    @Test("several databases: each is rotated or left as it was, with a result per database")
    func many() throws {
        try withTemporaryDirectory { dir in
            var requests: [RotationRequest] = []
            for index in 0..<3 {
                let path = dir.path("tenant-\(index).db")
                try EncryptionTests.makeDatabase(path, key: TestKeys.raw, rows: 20)
                requests.append(RotationRequest(path: path, oldEncryption: .key(TestKeys.raw),
                                                newEncryption: .key(TestKeys.otherPassphrase)))
            }
            requests[1].oldEncryption = .key(TestKeys.passphrase)       // wrong: this one must fail alone
            let untouched = try snapshot(requests[1].path)
            let results = KeyRotation.rotateAll(requests)
            #expect(results.map(\.isRotated) == [true, false, true])
            #expect(results[1].keyState == .neither, "the given old key was wrong, so neither given key opens it")
            #expect("\(results[1])".contains("neither"))
            #expect(results[1].error?.kind == .wrongKey)
            #expect(try snapshot(requests[1].path) == untouched)
            #expect(try Self.contents(requests[0].path, key: TestKeys.otherPassphrase).count == 20)
        }
    }

    @Test("a folder of per-tenant databases, each with its own keys")
    func folder() throws {
        try withTemporaryDirectory { dir in
            let folder = dir.path("tenants")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            func keys(_ tenant: String) throws -> (EncryptionKey, EncryptionKey) {
                (try EncryptionKey(passphrase: "old-\(tenant)-passphrase-of-2025"),
                 try EncryptionKey(passphrase: "new-\(tenant)-passphrase-of-2026"))
            }
            for tenant in ["acme", "globex"] {
                try EncryptionTests.makeDatabase("\(folder)/\(tenant).db", key: try keys(tenant).0, rows: 10)
            }
            try Data("not a database".utf8).write(to: URL(fileURLWithPath: "\(folder)/notes.txt"))
            let results = try KeyRotation.rotateDatabases(inFolder: folder) { path in
                let tenant = String(path.split(separator: "/").last!.dropLast(3))
                let (old, new) = try keys(tenant)
                return (.key(old), .key(new))
            }
            #expect(results.count == 2)
            #expect(results.allSatisfy { $0.isRotated })
            #expect(try Self.contents("\(folder)/acme.db", key: try keys("acme").1).count == 10)
            expectError(.wrongKey) { try Connection(path: "\(folder)/globex.db", key: try keys("acme").1) }
        }
    }

    @Test("a backup of the original is kept when asked, still under the old key")
    func backupDirectory() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("tenant.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.raw)
            let backups = dir.path("backups")
            try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: true)
            let result = try KeyRotation.rotate(RotationRequest(
                path: path, oldEncryption: .key(TestKeys.raw), newEncryption: .key(TestKeys.passphrase),
                backupDirectory: backups))
            let backupPath = try #require(result.backupPath)
            #expect(try Self.contents(backupPath, key: TestKeys.raw).count == 200)
        }
    }

    @Test("the copy method can change settings; in place it cannot")
    func settingsChange() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("tenant.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.raw)
            let newSettings = CipherSettings(pageSize: 8192)
            expectError(.invalidState) {
                try KeyRotation.rotate(RotationRequest(
                    path: path, oldEncryption: .key(TestKeys.raw),
                    newEncryption: .key(TestKeys.passphrase, settings: newSettings), method: .inPlace))
            }
            try KeyRotation.rotate(RotationRequest(
                path: path, oldEncryption: .key(TestKeys.raw),
                newEncryption: .key(TestKeys.passphrase, settings: newSettings)))
            #expect(try Self.contents(path, key: TestKeys.passphrase, settings: newSettings).count == 200)
        }
    }

    @Test("the passphrase floor is for a new key: a rotation keeping a short passphrase is done, a new one is refused")
    func passphraseFloorIsForNewKeys() throws {
        try withTemporaryDirectory { dir in
            // SQLCipher's own test databases are keyed with `testkey`: 7 bytes, under the 20-byte floor.
            let path = dir.path("fixture.db")
            let testkey = try EncryptionKey(passphrase: "testkey")
            let old = CipherSettings(kdfIterations: 4000)
            let db = try Connection(path: path, key: testkey, settings: old)
            try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
            try db.transaction { for index in 0..<200 { try db.execute("INSERT INTO t(body) VALUES (?)", "\(index)") } }
            db.close()
            let kept = try KeyRotation.rotate(RotationRequest(
                path: path, oldEncryption: .key(testkey, settings: old),
                newEncryption: .key(testkey, settings: CipherSettings(kdfIterations: 8000))))
            #expect(kept.isRotated)
            #expect(try Self.contents(path, key: testkey, settings: CipherSettings(kdfIterations: 8000)).count == 200)
            let before = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
            let shortNewKey = try EncryptionKey(passphrase: "testkey2")
            do {
                try KeyRotation.rotate(RotationRequest(
                    path: path, oldEncryption: .key(testkey, settings: CipherSettings(kdfIterations: 8000)),
                    newEncryption: .key(shortNewKey, settings: CipherSettings(kdfIterations: 8000))))
                Issue.record("a new 8-byte passphrase was accepted")
            } catch let error as DatabaseError {
                #expect(error.kind == .invalidKey)
                #expect(error.remedy == .allowWeakPassphrase, "a tool words the opt-in itself")
                #expect(!error.reason.contains("allowsWeakPassphrase"), "the API name is in the remedy, not the reason")
                #expect(error.message.contains("RotationRequest.allowsWeakPassphrase"))
            }
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == before)
        }
    }

    @Test("temporary files of an interrupted rotation are removed by the next one")
    func staleTemporaryFiles() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("tenant.db")
            try EncryptionTests.makeDatabase(path, key: TestKeys.raw)
            // A run killed outright left a temporary copy nobody locks; a live run's file is locked (flock) by its
            // process, here by this one through a descriptor of its own (see LeftoverClaimTests for other
            // processes and PID namespaces).
            let stale = path + ".sqlcipherkit-tmp-\(try deadProcessID())-deadbeef"
            let live = path + ".sqlcipherkit-tmp-1-c0ffee"
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: stale))
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: stale + "-journal"))
            try Data([4, 5, 6]).write(to: URL(fileURLWithPath: live))
            let claim = open(live, O_RDONLY | O_CLOEXEC)
            defer { close(claim) }
            #expect(claim >= 0 && flock(claim, LOCK_EX | LOCK_NB) == 0)
            try KeyRotation.rotate(RotationRequest(
                path: path, oldEncryption: .key(TestKeys.raw), newEncryption: .key(TestKeys.passphrase)))
            #expect(!FileManager.default.fileExists(atPath: stale))
            #expect(!FileManager.default.fileExists(atPath: stale + "-journal"))
            #expect(FileManager.default.fileExists(atPath: live))
        }
    }
}

#if os(Linux)
let isLinux = true
#else
let isLinux = false
#endif
