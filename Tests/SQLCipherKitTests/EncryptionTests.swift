import Foundation
import SQLCipherKit
import Testing

/// "Unreadable without the key": every test reads the file's bytes or forces the failure.
@Suite("Encryption at rest")
struct EncryptionTests {
    static let marker = "MARKER-PLAINTEXT-5b1e"
    static let magic = Array("SQLite format 3".utf8) + [0]

    /// Creates a database with marker rows.
    static func makeDatabase(_ path: String, key: EncryptionKey = TestKeys.raw, journalMode: String = "DELETE",
                             rows: Int = 200) throws {
        let db = try Connection(path: path, key: key)
        _ = try db.pragmaValue("journal_mode = \(journalMode)")
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
        try db.transaction {
            for index in 0..<rows {
                try db.execute("INSERT INTO t(body) VALUES (?)", "\(marker) row \(index)")
            }
        }
    }

    @Test("no marker in the main file, -wal or -journal, during and after transactions",
          arguments: ["DELETE", "WAL"], [false, true])
    func noPlaintextOnDisk(journalMode: String, passphrase: Bool) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("secret.db")
            let key = passphrase ? TestKeys.passphrase : TestKeys.raw
            try Self.makeDatabase(path, key: key, journalMode: journalMode)
            let db = try Connection(path: path, key: key)
            var sawCompanion = false
            try db.transaction {
                try db.execute("UPDATE t SET body = body || ?", " \(Self.marker) updated")
                try db.execute("INSERT INTO t(body) VALUES (?)", String(repeating: Self.marker, count: 500))
                for suffix in ["", "-journal", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
                    let bytes = try fileBytes(path + suffix)
                    sawCompanion = sawCompanion || (suffix != "" && !bytes.isEmpty)
                    #expect(!contains(bytes, Self.marker), "marker found in \(suffix.isEmpty ? "main file" : suffix)")
                }
            }
            for suffix in ["", "-journal", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
                let bytes = try fileBytes(path + suffix)
                sawCompanion = sawCompanion || (suffix != "" && !bytes.isEmpty)
                #expect(!contains(bytes, Self.marker))
            }
            // The rollback journal lives during the transaction, the WAL after the commit.
            #expect(sawCompanion, "the test must look at a live -journal or -wal file")
            #expect(Array(try fileBytes(path).prefix(16)) != Self.magic)
            #expect(try db.scalar("SELECT count(*) FROM t WHERE body LIKE ?", "%\(Self.marker)%", as: Int.self) == 201)
        }
    }

    @Test("created files are mode 0600, companions included")
    func privateModes() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("private.db")
            let db = try Connection(path: path, key: TestKeys.raw)
            _ = try db.pragmaValue("journal_mode = WAL")
            try db.execute("CREATE TABLE t(x)")
            try db.execute("INSERT INTO t VALUES (1)")
            for file in [path, path + "-wal", path + "-shm"] {
                let mode = try fileMode(file)
                #expect(mode == 0o600, "\(file) has mode \(String(mode, radix: 8))")
            }
        }
    }

    @Test("opening without the key, with a wrong key or one byte off fails and leaves the file unchanged")
    func wrongKeys() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("secret.db")
            try Self.makeDatabase(path, key: TestKeys.passphrase)
            let before = try snapshot(path)

            expectError(.missingKey) { try Connection(path: path, encryption: .none) }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.otherPassphrase) }
            let oneByteOff = try EncryptionKey(passphrase: "\(TestKeys.sentinel)-passphrasf")
            expectError(.wrongKey) { try Connection(path: path, key: oneByteOff) }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.raw) }
            #expect(try snapshot(path) == before)
            #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
        }
    }

    @Test("a raw key one bit off fails")
    func rawKeyOneBitOff() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("raw.db")
            try Self.makeDatabase(path, key: TestKeys.raw)
            let before = try snapshot(path)
            let flipped = try EncryptionKey(sqlcipherRawKeyText: "x'" + String(repeating: "7f3a9c01", count: 7) + "7f3a9c00'")
            expectError(.wrongKey) { try Connection(path: path, key: flipped) }
            #expect(try snapshot(path) == before)
        }
    }

    @Test("the right key with the wrong cipher settings fails")
    func wrongSettings() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("secret.db")
            try Self.makeDatabase(path, key: TestKeys.passphrase)
            let before = try snapshot(path)
            let otherPageSize = CipherSettings(pageSize: Engine.isVersion4 ? 1024 : 4096)
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase, settings: otherPageSize) }
            expectError(.wrongKey) {
                try Connection(path: path, key: TestKeys.passphrase, settings: CipherSettings(kdfIterations: 1000))
            }
            #expect(try snapshot(path) == before)
        }
    }

    @Test("a plaintext file opened with a key is reported as plaintext and left alone")
    func plaintextWithKey() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("plain.db")
            let plain = try openPlain(path)
            try plain.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            plain.close()
            let before = try snapshot(path)
            let error = expectError(.notEncrypted) { try Connection(path: path, key: TestKeys.raw) }
            #expect(error?.message.contains("plaintext") == true)
            #expect(try snapshot(path) == before)
            #expect(try openPlain(path).scalar("SELECT x FROM t", as: Int.self) == 1)
        }
    }

    @Test("garbage is not a database; a truncated file with the right key is damaged, not a wrong key")
    func garbageAndTruncated() throws {
        try withTemporaryDirectory { dir in
            let garbage = dir.path("garbage.db")
            _ = FileManager.default.createFile(atPath: garbage, contents: Data((0..<3000).map { _ in UInt8.random(in: 0...255) }))
            let garbageBefore = try snapshot(garbage)
            expectError(.notADatabase) { try Connection(path: garbage, key: TestKeys.raw) }
            expectError(.notADatabase) { try Connection(path: garbage, encryption: .none) }
            #expect(try snapshot(garbage) == garbageBefore)

            // Whole pages of random bytes look exactly like an encrypted file with another key.
            let pages = dir.path("pages.db")
            _ = FileManager.default.createFile(atPath: pages, contents: Data((0..<4096).map { _ in UInt8.random(in: 0...255) }))
            let pagesError = expectError(.wrongKey) { try Connection(path: pages, key: TestKeys.raw) }
            #expect(pagesError?.message.contains("not an SQLCipher database") == true)

            let truncated = dir.path("truncated.db")
            try Self.makeDatabase(truncated)
            let bytes = try fileBytes(truncated)
            let pageSize = SQLCipher.supports(.version4Format) ? 4096 : 1024
            try Data(bytes.prefix(pageSize + 476)).write(to: URL(fileURLWithPath: truncated))
            let truncatedBefore = try snapshot(truncated)
            let truncatedError = expectError(.damaged) { try Connection(path: truncated, key: TestKeys.raw) }
            #expect(truncatedError?.message.contains("truncated") == true)
            #expect(try snapshot(truncated) == truncatedBefore)

            // Two stray bytes after the last page: the data reads, the file is still not what it should be.
            let appended = dir.path("appended.db")
            try Self.makeDatabase(appended)
            try Data(try fileBytes(appended) + [0x0a, 0x0a]).write(to: URL(fileURLWithPath: appended))
            let appendedError = expectError(.damaged) { try Connection(path: appended, key: TestKeys.raw) }
            #expect(appendedError?.message.contains("2 bytes of a partial page") == true)
        }
    }

    @Test("a flipped byte in page 1 or in a later page makes reads fail, never return wrong data")
    func tampering() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("tamper.db")
            try Self.makeDatabase(path, rows: 400)
            let pageSize = Engine.isVersion4 ? 4096 : 1024
            var bytes = try fileBytes(path)
            #expect(bytes.count >= pageSize * 4)

            var page1 = bytes
            page1[100] ^= 0x01
            try Data(page1).write(to: URL(fileURLWithPath: path))
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.raw) }

            bytes[pageSize * 3 + 200] ^= 0x01
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let db = try Connection(path: path, key: TestKeys.raw)
            expectError(code: DatabaseError.SQLITE_CORRUPT) {
                try db.all("SELECT body FROM t", as: String.self)
            }
        }
    }

    @Test("the stock sqlite3 shell cannot read the file")
    func stockShellCannotRead() throws {
        guard let sqlite3 = which("sqlite3") else {
            Issue.record("the sqlite3 shell is not installed (.ci/run installs it)")
            return
        }
        try withTemporaryDirectory { dir in
            let path = dir.path("secret.db")
            try Self.makeDatabase(path)
            let result = try run(sqlite3, [path, "SELECT body FROM t LIMIT 1;"])
            #expect(result.status != 0)
            #expect(result.output.contains("not a database"))
            #expect(!result.output.contains(Self.marker))
        }
    }

    @Test("the sqlcipher shell reads the file with its key", .enabled(if: !Engine.isVersion4,
        "the system sqlcipher shell is SQLCipher 3.4.1; it cannot open files in the SQLCipher 4 format this leg writes"))
    func sqlcipherShellReads() throws {
        guard let shell = which("sqlcipher") else {
            Issue.record("the sqlcipher shell is not installed (.ci/run installs it)")
            return
        }
        try withTemporaryDirectory { dir in
            let path = dir.path("secret.db")
            try Self.makeDatabase(path)
            // The key goes through stdin, never argv.
            let script = "PRAGMA key = \"x'\(String(repeating: "7f3a9c01", count: 8))'\";\nSELECT body FROM t WHERE id = 1;\n"
            let withKey = try run(shell, [path], input: script)
            #expect(withKey.output.contains("\(Self.marker) row 0"))
            let withoutKey = try run(shell, [path], input: "SELECT body FROM t WHERE id = 1;\n")
            #expect(!withoutKey.output.contains(Self.marker))
        }
    }

    @Test("temp_store is MEMORY and cannot be set back to FILE; PRAGMA key/rekey in SQL is refused")
    func guardedPragmas() throws {
        let db = try Connection.inMemory()
        #expect(try db.scalar("PRAGMA temp_store", as: Int.self) == 2)
        for sql in ["PRAGMA temp_store = FILE", "PRAGMA temp_store = 1", "PRAGMA temp_store = DEFAULT",
                    "PRAGMA main.temp_store = 0", "PRAGMA key = 'x'", "PRAGMA rekey = 'x'",
                    "PRAGMA hexkey = '6162'", "PRAGMA hexrekey = '6162'"] {
            expectError(code: DatabaseError.SQLITE_AUTH) { try db.execute(sql) }
        }
        #expect(try db.scalar("PRAGMA temp_store", as: Int.self) == 2)
        try db.execute("PRAGMA temp_store = MEMORY")
    }

    @Test("a large sort on an encrypted database leaves no plaintext temporary file")
    func noPlaintextTemporaryFiles() throws {
        try withTemporaryDirectory { dir in
            let tempDir = dir.path("tmp")
            try FileManager.default.createDirectory(atPath: tempDir, withIntermediateDirectories: true)
            let path = dir.path("sort.db")
            let db = try Connection(path: path, key: TestKeys.raw)
            try db.execute("CREATE TABLE t(body TEXT)")
            try db.transaction {
                for index in 0..<3000 {
                    try db.execute("INSERT INTO t VALUES (?)", "\(Self.marker) \(index) " + String(repeating: "x", count: 200))
                }
            }
            try db.execute("PRAGMA cache_size = 10")
            try db.execute("CREATE TEMP TABLE scratch AS SELECT * FROM t")
            let sorted = try db.all("SELECT body FROM t ORDER BY body DESC", as: String.self)
            #expect(sorted.count == 3000)
            // Every file open by this process: none may contain the marker in plaintext.
            for descriptor in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"),
                      target.contains("etilqs") else { continue }
                let bytes = (try? fileBytes("/proc/self/fd/\(descriptor)")) ?? []
                #expect(!contains(bytes, Self.marker), "plaintext temp file \(target)")
            }
        }
    }
}

// MARK: - Helpers

extension Connection {
    /// Runs a PRAGMA and returns its first value as text (test helper).
    @discardableResult
    func pragmaValue(_ pragma: String) throws -> String? {
        try first("PRAGMA \(pragma)") { row in try row[0] as DatabaseValue }.map { value -> String in
            switch value {
            case .text(let text): text
            case .integer(let number): String(number)
            default: "\(value)"
            }
        }
    }
}

func which(_ command: String) -> String? {
    for folder in ["/usr/bin", "/usr/local/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: "\(folder)/\(command)") {
        return "\(folder)/\(command)"
    }
    return nil
}

/// Runs a program with an environment that does not load the SQLCipher 4 test runtime.
func run(_ executable: String, _ arguments: [String], input: String? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment["LD_LIBRARY_PATH"] = nil
    environment["LD_PRELOAD"] = nil
    process.environment = environment
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let stdin = Pipe()
    process.standardInput = stdin
    try process.run()
    if let input {
        stdin.fileHandleForWriting.write(Data(input.utf8))
    }
    try stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
