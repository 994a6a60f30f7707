#if Services  // trait Services (Package.swift)
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitServices
import Testing

/// The live hand-over of a new key to a `DatabaseService`, step by step: a key handed over during a hand-over, a
/// reader in another process, a pending file that is not a key, and a crash between any two steps. Every case checks
/// the key files' bytes and which key opens the database with a fresh connection.
@Suite("Live key hand-over: no key is lost, no key that works is rejected")
struct KeyHandOverTests {
    static let keyTexts = ["aa", "b1", "c2", "d3"].map { "x'" + String(repeating: $0, count: 32) + "'" }
    static func key(_ index: Int) throws -> EncryptionKey { try EncryptionKey(sqlcipherRawKeyText: keyTexts[index]) }

    /// A database with `rows` rows in `t`, keyed with key `index`, its key file written.
    static func makeDatabase(
        in directory: TemporaryDirectory, key index: Int = 0, rows: Int = 50
    ) throws -> (path: String, keyFile: String) {
        let path = directory.path("app.db")
        let keyFile = directory.path("app.key")
        let db = try Connection(path: path, encryption: .key(try key(index)))
        try db.execute("PRAGMA journal_mode = WAL")
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT)")
        try db.transaction {
            for row in 0..<rows { try db.execute("INSERT INTO t(body) VALUES (?)", "row \(row)") }
        }
        db.close()
        try writeKeyFile(keyTexts[index], to: keyFile)
        return (path, keyFile)
    }

    /// Which of the test keys open the database now, each tried on a fresh read-only connection.
    static func keysOpening(_ path: String) -> [Int] {
        (0..<keyTexts.count).filter { index in
            guard let key = try? key(index),
                  let db = try? Connection(path: path, encryption: .key(key), options: OpenOptions(mode: .readOnly))
            else { return false }
            defer { db.close() }
            return (try? db.scalar("SELECT count(*) FROM t", as: Int.self)) != nil
        }
    }

    static func rowCount(_ path: String, key index: Int) throws -> Int {
        let db = try Connection(path: path, encryption: .key(try key(index)), options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        return try db.scalar("SELECT count(*) FROM t", as: Int.self) ?? -1
    }

    static func text(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    static func configuration(_ logger: Logger? = nil, weak: Bool = false) -> DatabaseService.Configuration {
        DatabaseService.Configuration(
            keyFileCheckInterval: nil, allowsWeakPassphrase: weak,
            logger: logger ?? Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    @Test("a key handed over while another is rotated in is the next hand-over; the key file always opens the file")
    func twoHandOvers() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Self.makeDatabase(in: directory)
        let pending = keyFile + ".next"
        // The second operator's `mv` lands exactly between the read of the first key and its rekey: the service
        // says (in its log) when it recorded the key it read.
        let log = LogLines { message in
            guard message == "recorded the key being handed over; rekeying" else { return }
            try? writeKeyFile(Self.keyTexts[2], to: pending)
        }
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Self.configuration(log.logger()))
        defer { service.pool.close() }

        try writeKeyFile(Self.keyTexts[1], to: pending)
        #expect(try await service.rotateIfPending())
        #expect(Self.text(keyFile) == Self.keyTexts[1] + "\n", "the key file holds the key that was rotated in")
        #expect(Self.keysOpening(path) == [1])
        #expect(Self.text(pending) == Self.keyTexts[2] + "\n", "the second hand-over is still pending, untouched")
        #expect(!FileManager.default.fileExists(atPath: service.rotatingKeyFile))
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)

        log.onMessage = nil
        #expect(try await service.rotateIfPending())
        #expect(Self.text(keyFile) == Self.keyTexts[2] + "\n")
        #expect(Self.keysOpening(path) == [2])
        #expect(!FileManager.default.fileExists(atPath: pending))
        try await service.pool.write { db in try db.execute("INSERT INTO t(body) VALUES ('after')") }
        service.pool.close()

        let restarted = try DatabaseService(path: path, keyFile: keyFile, configuration: Self.configuration())
        defer { restarted.pool.close() }
        #expect(try await restarted.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 51)
        #expect(!log.messages.contains { $0.contains("failed") })
    }

    @Test("a reader in another process: the key is rotated in, the truncate waits for it, nothing is rejected")
    func readerInAnotherProcess() async throws {
        guard PeerProcess.isAvailable else {
            try Test.cancel("skipped: \(PeerProcess.unavailableReason)")
        }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Self.makeDatabase(in: directory)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Self.configuration(log.logger()))
        defer { service.pool.close() }
        let peer = try PeerProcess(database: path, rawKeyText: Self.keyTexts[0])
        defer { peer.stop() }
        try peer.beginRead()

        try writeKeyFile(Self.keyTexts[1], to: keyFile + ".next")
        #expect(try await service.rotateIfPending(), "a busy truncate after the rekey is not a failed rotation")
        #expect(Self.text(keyFile) == Self.keyTexts[1] + "\n")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next"))
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next.rejected"))
        #expect(!FileManager.default.fileExists(atPath: service.rotatingKeyFile))
        #expect(Self.keysOpening(path) == [1])
        #expect(!log.messages.contains { $0.contains("failed") }, "\(log.messages)")
        #expect(log.messages.contains { $0.contains("could not be truncated yet") })
        // The pool serves on the new key.
        try await service.pool.write { db in try db.execute("INSERT INTO t(body) VALUES ('during')") }
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 51)
        // Until the truncate, the main file alone still has the old key's pages.
        #expect((try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0 > 0)
        let mainOnly = directory.path("main-only.db")
        try FileManager.default.copyItem(atPath: path, toPath: mainOnly)
        #expect(Self.keysOpening(mainOnly) == [0])

        // The reader ends (its connection is on the old key: its next read fails loudly).
        try peer.endRead()
        if case .success(let count) = try peer.count("t") { Issue.record("the peer read \(count) rows with the old key") }
        peer.stop()
        #expect(try await service.rotateIfPending() == false, "nothing pending")
        #expect(log.messages.contains { $0.contains("the WAL is truncated") }, "\(log.messages)")
        #expect((try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0 == 0)
        try FileManager.default.removeItem(atPath: mainOnly)
        try FileManager.default.copyItem(atPath: path, toPath: mainOnly)
        #expect(Self.keysOpening(mainOnly) == [1], "after the truncate the main file is all under the new key")
        #expect(try Self.rowCount(path, key: 1) == 51)
    }

    @Test(
        "a pending file that is not a key, or a passphrase below the floor, is refused and nothing changes",
        arguments: ["not a key", "x'1234'", "short pass", "line one\nline two of a long passphrase"])
    func refusesWhatIsNotAKey(pendingText: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Self.makeDatabase(in: directory)
        let before = try fileBytes(path)
        let keyBefore = try fileBytes(keyFile)
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Self.configuration())
        defer { service.pool.close() }
        try writeKeyFile(pendingText, to: keyFile + ".next")

        let error = await #expect(throws: DatabaseError.self) { try await service.rotateIfPending() }
        #expect(error?.kind == .invalidKey)
        #expect(!(error?.message.contains(pendingText) ?? true), "the message never shows the key")
        #expect(try fileBytes(keyFile) == keyBefore)
        #expect(Self.text(keyFile + ".next.rejected") == pendingText + "\n")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next"))
        #expect(!FileManager.default.fileExists(atPath: service.rotatingKeyFile))
        #expect(Self.keysOpening(path) == [0])
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)
        service.pool.close()
        _ = before
    }

    @Test("a short passphrase is rotated in when the service was told to accept one")
    func weakPassphraseOptIn() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Self.makeDatabase(in: directory)
        let service = try DatabaseService(
            path: path, keyFile: keyFile, configuration: Self.configuration(weak: true))
        defer { service.pool.close() }
        try writeKeyFile("short pass", to: keyFile + ".next")
        #expect(try await service.rotateIfPending())
        let db = try Connection(
            path: path, encryption: .key(try EncryptionKey(passphrase: "short pass")),
            options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        #expect(try db.scalar("SELECT count(*) FROM t", as: Int.self) == 50)
    }

    /// The files a crash leaves between two steps of a hand-over from key 0 to key 1 (and, in one case, key 2
    /// handed over meanwhile).
    enum CrashPoint: String, CaseIterable, CustomTestStringConvertible {
        case afterRecordBeforeRekey, afterRekeyBeforeRename, afterRekeyWithAnotherKeyPending, afterRenameBeforeCleanup
        case earlierVersionAfterRekey

        var testDescription: String { rawValue }
        /// (key file, recorded, pending, key of the database)
        var files: (keyFile: Int, rotating: Int?, pending: Int?, database: Int) {
            switch self {
            case .afterRecordBeforeRekey: (0, 1, 1, 0)
            case .afterRekeyBeforeRename: (0, 1, 1, 1)
            case .afterRekeyWithAnotherKeyPending: (0, 1, 2, 1)
            case .afterRenameBeforeCleanup: (1, nil, 1, 1)
            case .earlierVersionAfterRekey: (0, nil, 1, 1)
            }
        }
    }

    @Test("after a crash between any two steps, the next start finds the key and the next check finishes the work",
          arguments: CrashPoint.allCases)
    func crashBetweenSteps(point: CrashPoint) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let files = point.files
        let (path, keyFile) = try Self.makeDatabase(in: directory, key: files.database)
        try writeKeyFile(Self.keyTexts[files.keyFile], to: keyFile)
        if let rotating = files.rotating { try writeKeyFile(Self.keyTexts[rotating], to: keyFile + ".rotating") }
        if let pending = files.pending { try writeKeyFile(Self.keyTexts[pending], to: keyFile + ".next") }

        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Self.configuration())
        defer { service.pool.close() }
        #expect(Self.text(keyFile) == Self.keyTexts[files.database] + "\n", "the key file opens the database at once")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".rotating"))
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)

        // The next check finishes whatever is left.
        _ = try await service.rotateIfPending()
        let expected = files.pending ?? files.database
        #expect(Self.text(keyFile) == Self.keyTexts[expected] + "\n")
        #expect(Self.keysOpening(path) == [expected])
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next"))
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".rotating"))
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next.rejected"))
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)
    }

    @Test("a key another replica rotated in is adopted: the pool reopens with the key file's key")
    func adoptsAKeyRotatedElsewhere() async throws {
        guard PeerProcess.isAvailable else {
            try Test.cancel("skipped: \(PeerProcess.unavailableReason)")
        }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Self.makeDatabase(in: directory)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Self.configuration(log.logger()))
        defer { service.pool.close() }
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)

        // Another replica (another process) rekeys the database and writes its key file.
        let replica = try PeerProcess(database: path, rawKeyText: Self.keyTexts[0])
        try replica.rekey(toRawKeyText: Self.keyTexts[1])
        replica.stop()
        try writeKeyFile(Self.keyTexts[1], to: keyFile)

        #expect(try await service.rotateIfPending() == false, "nothing was handed over to this replica")
        #expect(log.messages.contains { $0.contains("the pool reopened with it") }, "\(log.messages)")
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)
        try await service.pool.write { db in try db.execute("INSERT INTO t(body) VALUES ('after')") }
        #expect(Self.keysOpening(path) == [1])

        // A key file replaced by hand with a key that does not open the database changes nothing.
        try writeKeyFile(Self.keyTexts[3], to: keyFile)
        #expect(try await service.rotateIfPending() == false)
        #expect(log.messages.contains { $0.contains("does not open the database") })
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 51)
        #expect(Self.keysOpening(path) == [1])
    }
}

#endif
