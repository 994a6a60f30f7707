import Foundation
import SQLCipherKit
import SQLCipherKitTestSupport
import Testing

/// A follower's copy takes another copy's committed transactions as frames appended to its own write-ahead log
/// (``WriteAheadLogAppender``): readers of any process see one whole transaction or none, a crash before the publish
/// leaves nothing half-done, and SQLite's own checkpoint, restart and recovery read what was appended.
@Suite("Appending another copy's frames to a write-ahead log")
struct WriteAheadLogAppenderTests {
    struct Frame {
        let page: UInt32
        let commit: UInt32
        let bytes: [UInt8]
    }

    static let marker = "APPENDER-PLAINTEXT-MARKER"
    /// What changes with every transaction of the primary (a transfer moves balance between ids).
    static let fingerprintSQL = "SELECT sum(balance * id) || '/' || count(*) FROM account"
    static let contentSQL = "SELECT group_concat(id || ':' || balance || ':' || note, ',') FROM account"

    /// The committed transactions of the log at `path`, in order, as the frames a replica ships.
    static func transactions(ofLog path: String) throws -> [[Frame]] {
        guard let file = try ReadOnlyFile(path: path), let header = try WALFormat.header(of: file) else { return [] }
        var position = WALPosition(start: header)
        var result: [[Frame]] = []
        var current: [Frame] = []
        try WALFormat.forEachFrame(in: file, pageSize: header.pageSize, from: 1) { _, frame in
            guard let (frameHeader, checksum) = WALFormat.validate(frame: frame, at: position) else { return false }
            position.frame += 1
            position.checksum = checksum
            current.append(Frame(
                page: frameHeader.pageNumber, commit: frameHeader.databasePageCountAfterCommit,
                bytes: Array(frame[WALFormat.frameHeaderSize...])))
            if frameHeader.isCommit {
                result.append(current)
                current = []
            }
            return true
        }
        return result
    }

    struct Primary {
        /// The follower's copy: the primary's main file before the transactions.
        let follower: String
        let transactions: [[Frame]]
        /// The fingerprint before the first transaction, then after each.
        let fingerprints: [String]
        let finalContent: String
    }

    /// A primary in WAL mode whose main file is copied to a follower, then `transfers` transactions (transfers, bulk
    /// inserts, a new table) that stay in its log, read back as frames.
    static func primary(
        in dir: TemporaryDirectory, transfers: Int = 30, bulkRows: Int = 40, bulkNoteSize: Int = 300
    ) throws -> Primary {
        let path = dir.path("primary.db")
        let db = try Connection(path: path, key: TestKeys.raw)
        _ = try db.pragmaValue("journal_mode = WAL")
        try db.execute("PRAGMA wal_autocheckpoint = 0")
        try db.execute("CREATE TABLE account(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, note TEXT)")
        try db.transaction {
            for id in 1...200 {
                try db.execute("INSERT INTO account(balance, note) VALUES (10, ?)", "\(marker) \(id)")
            }
        }
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let size = try fileBytes(path).count
        let follower = dir.path("follower.db")
        let image = try db.readMainFile(count: size, at: 0)
        #expect(FileManager.default.createFile(atPath: follower, contents: Data(image)))
        var fingerprints = [try db.scalar(fingerprintSQL, as: String.self) ?? ""]
        for index in 0..<transfers {
            try db.transaction {
                let from = index % 200 + 1
                let to = (index * 7) % 200 + 1
                try db.execute("UPDATE account SET balance = balance - 1 WHERE id = ?", from)
                try db.execute("UPDATE account SET balance = balance + 1 WHERE id = ?", to)
                if index % 10 == 3 {
                    for row in 0..<bulkRows {
                        try db.execute(
                            "INSERT INTO account(balance, note) VALUES (0, ?)",
                            "\(marker) bulk \(index) \(row) " + String(repeating: "x", count: bulkNoteSize))
                    }
                }
                if index == 17 { try db.execute("CREATE TABLE extra(x)") }
            }
            fingerprints.append(try db.scalar(fingerprintSQL, as: String.self) ?? "")
        }
        let transactions = try Self.transactions(ofLog: path + "-wal")
        let content = try db.scalar(contentSQL, as: String.self) ?? ""
        db.close()
        return Primary(follower: follower, transactions: transactions, fingerprints: fingerprints, finalContent: content)
    }

    static func append(_ transaction: [Frame], to appender: WriteAheadLogAppender, count: Int? = nil) throws {
        for frame in transaction.prefix(count ?? transaction.count) {
            try frame.bytes.withUnsafeBytes {
                try appender.append(pageNumber: frame.page, page: $0, commitPageCount: frame.commit)
            }
        }
    }

    static func fresh(_ path: String, _ sql: String) throws -> String {
        let db = try Connection(path: path, key: TestKeys.raw)
        defer { db.close() }
        return try db.scalar(sql, as: String.self) ?? ""
    }

    @Test(
        "another process reads the state before a transaction until it is published, then the state after; the copy ends equal to the primary")
    func readersSeeWholeTransactions() throws {
        guard PeerProcess.isAvailable else { try Test.cancel("skipped: \(PeerProcess.unavailableReason)") }
        try withTemporaryDirectory { dir in
            let primary = try Self.primary(in: dir)
            #expect(primary.transactions.count == primary.fingerprints.count - 1)
            #expect(primary.transactions.contains { $0.count > 5 }, "some transactions span many pages")
            let follower = try Connection(path: primary.follower, key: TestKeys.raw)
            let appender = try WriteAheadLogAppender(connection: follower)
            let peer = try PeerProcess(database: primary.follower, rawKeyText: TestKeys.rawText)
            defer { peer.stop() }
            #expect(try peer.value(Self.fingerprintSQL).get() == primary.fingerprints[0])
            for (index, transaction) in primary.transactions.enumerated() {
                try appender.begin()
                try Self.append(transaction, to: appender)
                // Every frame is in the log, the commit frame too: still the state before, for a new reader.
                #expect(try peer.value(Self.fingerprintSQL).get() == primary.fingerprints[index])
                try appender.commit()
                #expect(try peer.value(Self.fingerprintSQL).get() == primary.fingerprints[index + 1])
            }
            #expect(try peer.value("SELECT count(*) FROM extra").get() == "0")
            peer.stop()
            // In this process too, from a connection opened before the appends.
            #expect(try follower.scalar(Self.contentSQL, as: String.self) == primary.finalContent)
            #expect(try follower.scalar("PRAGMA integrity_check", as: String.self) == "ok")
            follower.close()
            // The last close checkpointed the log into the main file through the index written here, and removed
            // the log: the main file alone is the primary's state.
            #expect(!FileManager.default.fileExists(atPath: primary.follower + "-wal"))
            #expect(try Self.fresh(primary.follower, Self.contentSQL) == primary.finalContent)
            #expect(try Self.fresh(primary.follower, "PRAGMA integrity_check") == "ok")
            #expect(!contains(try fileBytes(primary.follower), Self.marker))
        }
    }

    @Test("a crash in the middle of an append leaves the state before; a crash after the commit frame, the state after")
    func crashBeforePublish() throws {
        try withTemporaryDirectory { dir in
            let primary = try Self.primary(in: dir)
            guard let big = primary.transactions.firstIndex(where: { $0.count > 5 }) else {
                Issue.record("no transaction spans many pages")
                return
            }
            let follower = try Connection(path: primary.follower, key: TestKeys.raw)
            defer { follower.close() }
            let appender = try WriteAheadLogAppender(connection: follower)
            for transaction in primary.transactions[..<big] {
                try appender.begin()
                try Self.append(transaction, to: appender)
                try appender.commit()
            }
            /// The follower's files as a crash at this moment leaves them (the index is not kept: a process that
            /// starts after a crash rebuilds it from the log).
            func crashedCopy(_ name: String) throws -> String {
                let copy = dir.path(name)
                let size = try fileBytes(primary.follower).count
                let main = try follower.readMainFile(count: size, at: 0)
                #expect(FileManager.default.createFile(atPath: copy, contents: Data(main)))
                #expect(FileManager.default.createFile(
                    atPath: copy + "-wal", contents: Data(try fileBytes(primary.follower + "-wal"))))
                return copy
            }
            try appender.begin()
            try Self.append(primary.transactions[big], to: appender, count: primary.transactions[big].count / 2)
            let half = try crashedCopy("half.db")
            try Self.append(
                Array(primary.transactions[big].dropFirst(primary.transactions[big].count / 2)), to: appender)
            let whole = try crashedCopy("whole.db")
            appender.rollback()
            #expect(try Self.fresh(half, Self.fingerprintSQL) == primary.fingerprints[big])
            #expect(try Self.fresh(half, "PRAGMA integrity_check") == "ok")
            // Every frame and the commit frame were flushed before the crash: SQLite's recovery reads the
            // transaction back whole (a state of the primary, never a mix).
            #expect(try Self.fresh(whole, Self.fingerprintSQL) == primary.fingerprints[big + 1])
            // The rolled-back append is invisible here, and the next one writes over it.
            #expect(try follower.scalar(Self.fingerprintSQL, as: String.self) == primary.fingerprints[big])
            for transaction in primary.transactions[big...] {
                try appender.begin()
                try Self.append(transaction, to: appender)
                try appender.commit()
            }
            #expect(try Self.fresh(primary.follower, Self.contentSQL) == primary.finalContent)
        }
    }

    @Test("a log checkpointed by another connection restarts with new salts, and a transaction of thousands of frames crosses the index's blocks")
    func restartAndLargeTransactions() throws {
        try withTemporaryDirectory { dir in
            // 4,500 rows of 3,500 bytes: more frames than the index's first block holds (4,062).
            let primary = try Self.primary(in: dir, transfers: 5, bulkRows: 4500, bulkNoteSize: 3500)
            #expect(primary.transactions.reduce(0) { $0 + $1.count } > 4062)
            let follower = try Connection(path: primary.follower, key: TestKeys.raw)
            let appender = try WriteAheadLogAppender(connection: follower)
            let checkpointer = try Connection(path: primary.follower, key: TestKeys.raw)
            var salts: Set<[UInt8]> = []
            for (index, transaction) in primary.transactions.enumerated() {
                try appender.begin()
                try Self.append(transaction, to: appender)
                try appender.commit()
                salts.insert(Array(try fileBytes(primary.follower + "-wal")[16..<24]))
                #expect(try Self.fresh(primary.follower, Self.fingerprintSQL) == primary.fingerprints[index + 1])
                // Every frame so far into the main file: the next append starts the log again.
                _ = try checkpointer.scalar("PRAGMA wal_checkpoint(PASSIVE)", as: Int.self)
            }
            #expect(salts.count == primary.transactions.count, "each append after a complete checkpoint restarted the log")
            checkpointer.close()
            #expect(try follower.scalar(Self.contentSQL, as: String.self) == primary.finalContent)
            follower.close()
            #expect(try Self.fresh(primary.follower, Self.contentSQL) == primary.finalContent)
            #expect(try Self.fresh(primary.follower, "PRAGMA integrity_check") == "ok")
        }
    }

    @Test("a write by another connection between appends stops the next append: the copy no longer matches the primary")
    func anotherWriterIsRefused() throws {
        try withTemporaryDirectory { dir in
            let primary = try Self.primary(in: dir, transfers: 3)
            let follower = try Connection(path: primary.follower, key: TestKeys.raw)
            defer { follower.close() }
            let appender = try WriteAheadLogAppender(connection: follower)
            try appender.begin()
            try Self.append(primary.transactions[0], to: appender)
            try appender.commit()
            let other = try Connection(path: primary.follower, key: TestKeys.raw)
            try other.execute("UPDATE account SET balance = 99 WHERE id = 1")
            other.close()
            expectError(.invalidState) { try appender.begin() }
        }
    }

    @Test("a database in rollback-journal mode is refused, and a transaction must end with a commit frame")
    func misuse() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("journal.db")
            try EncryptionTests.makeDatabase(path, journalMode: "DELETE")
            let db = try Connection(path: path, key: TestKeys.raw)
            defer { db.close() }
            expectError(.invalidState) { try WriteAheadLogAppender(connection: db) }

            let primary = try Self.primary(in: dir, transfers: 1)
            let follower = try Connection(path: primary.follower, key: TestKeys.raw)
            defer { follower.close() }
            let appender = try WriteAheadLogAppender(connection: follower)
            let frame = primary.transactions[0][0]
            expectError(.invalidState) {
                try frame.bytes.withUnsafeBytes { try appender.append(pageNumber: frame.page, page: $0, commitPageCount: 0) }
            }
            try appender.begin()
            expectError(.invalidState) { try appender.begin() }
            try frame.bytes.withUnsafeBytes { try appender.append(pageNumber: frame.page, page: $0, commitPageCount: 0) }
            expectError(.invalidState) { try appender.commit() }
            appender.rollback()
            #expect(try Self.fresh(primary.follower, Self.fingerprintSQL) == primary.fingerprints[0])
        }
    }
}
