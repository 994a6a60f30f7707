#if Replication  // trait Replication (Package.swift)
import Dispatch
import Foundation
import SQLCipherKit

/// The database a ``Replicator`` ships, and the three things it does to it besides reading bytes:
///
/// - **pin**: a read transaction on the replicator's own connection. While it is open no checkpoint, by any
///   connection of any process, copies frames past it into the main file, and SQLite cannot restart the log (both
///   need every reader to be done with the frames), so no frame is lost before it is shipped;
/// - **checkpoint**: a PASSIVE checkpoint run by the replicator itself, once what it copies has been shipped;
/// - **pause writes**: the short moment in which the replicator reads the last frames, moves its pin and
///   checkpoints: through the pool's writer in process, through `BEGIN IMMEDIATE` on a second connection as a
///   sidecar.
///
/// The connections need the key only because SQLite reads (and SQLCipher decrypts) page 1 to start a transaction;
/// nothing the replicator ships is ever decrypted.
///
/// `@unchecked Sendable`: the connections and the pin's state are used only with `lock` held (the pool runs the
/// paused-writes closure on its writer's thread, the replicator its own work on `queue`).
final class ReplicatedDatabase: @unchecked Sendable {
    /// The main file's path as SQLite names it; the log is beside it.
    let path: String
    var walPath: String { path + "-wal" }
    /// The main file's identity at start: a file renamed over the path is another database.
    let identity: OpenFiles.FileID
    let pageSize: Int
    let plaintextHeaderSize: Int
    /// Kept in the replica only for a database with a plaintext header (the file does not store it there).
    let plaintextHeaderSalt: [UInt8]?

    private let lock = Locked(())
    private let pinConnection: Connection
    /// In process: the pool whose writer pauses the writes.
    private let pool: DatabasePool?
    /// As a sidecar: the connection that takes the write lock.
    private let writerConnection: Connection?
    private let restoresAutomaticCheckpoint: Int?
    private var isPinnedValue = false
    private var isClosedValue = false
    /// Where blocking work runs, off Swift's cooperative threads.
    let queue = DispatchQueue(label: "sqlcipherkit.replicator")

    private init(
        pinConnection: Connection, pool: DatabasePool?, writerConnection: Connection?, restoresAutomaticCheckpoint: Int?
    ) throws {
        self.pinConnection = pinConnection
        self.pool = pool
        self.writerConnection = writerConnection
        self.restoresAutomaticCheckpoint = restoresAutomaticCheckpoint
        path = pinConnection.filePath
        guard pinConnection.isEncrypted else {
            throw DatabaseError(
                .invalidArgument,
                "\(path) is not encrypted: a replica holds the file's bytes as they are, so replication refuses a"
                    + " plaintext database")
        }
        guard try pinConnection.scalar("PRAGMA journal_mode", as: String.self)?.lowercased() == "wal" else {
            throw DatabaseError(
                .invalidArgument,
                "\(path) is not in WAL mode: replication ships the write-ahead log (DatabasePool opens databases in"
                    + " WAL mode; PRAGMA journal_mode = WAL does it once for a file)")
        }
        guard let identity = OpenFiles.fileID(path: path) else {
            throw fileSystemFailure("cannot read \(path)")
        }
        self.identity = identity
        pageSize = try Self.pageSize(of: pinConnection)
        plaintextHeaderSize = pinConnection.cipherSettings.plaintextHeaderSize ?? 0
        plaintextHeaderSalt = plaintextHeaderSize > 0 ? try pinConnection.cipherSalt : nil
    }

    /// `PRAGMA page_size`: an integer on SQLCipher 3, text (it answers as `cipher_page_size`) on SQLCipher 4.
    static func pageSize(of connection: Connection) throws -> Int {
        switch try connection.scalar("PRAGMA page_size", as: DatabaseValue.self) {
        case .integer(let value)?: Int(value)
        case .text(let text)?: Int(text) ?? 0
        default: 0
        }
    }

    /// The database of a pool in this process: the replicator opens its own connection with the pool's key and
    /// turns the writer's automatic checkpoints off (it runs them itself) until ``close()``.
    static func open(pool: DatabasePool) async throws -> ReplicatedDatabase {
        let connection = try pool.openUnpooledConnection()
        do {
            let previous = try await pool.writeWithoutTransaction { db -> Int in
                let previous = try db.scalar("PRAGMA wal_autocheckpoint", as: Int.self) ?? 1000
                try db.execute("PRAGMA wal_autocheckpoint = 0")
                return previous
            }
            do {
                return try ReplicatedDatabase(
                    pinConnection: connection, pool: pool, writerConnection: nil, restoresAutomaticCheckpoint: previous)
            } catch {
                _ = try? await pool.writeWithoutTransaction { db in
                    try db.execute("PRAGMA wal_autocheckpoint = \(previous)")
                }
                throw error
            }
        } catch {
            connection.close()
            throw error
        }
    }

    /// A database another process writes (the sidecar): two connections of its own, one to pin and checkpoint, one
    /// to hold the write lock for a moment. The other process's automatic checkpoints stay on; the pin keeps them
    /// from copying past what was shipped.
    static func open(path: String, encryption: Encryption, busyTimeout: Duration) throws -> ReplicatedDatabase {
        guard FileManager.default.fileExists(atPath: path) else {
            throw DatabaseError(.fileSystem, "\(path) does not exist; nothing to replicate")
        }
        let options = OpenOptions(mode: .readWrite, busyTimeout: busyTimeout)
        let pin = try Connection(path: path, encryption: encryption, options: options)
        do {
            let writer = try Connection(path: path, encryption: encryption, options: options)
            do {
                try pin.execute("PRAGMA wal_autocheckpoint = 0")
                try writer.execute("PRAGMA wal_autocheckpoint = 0")
                return try ReplicatedDatabase(
                    pinConnection: pin, pool: nil, writerConnection: writer, restoresAutomaticCheckpoint: nil)
            } catch {
                writer.close()
                throw error
            }
        } catch {
            pin.close()
            throw error
        }
    }

    /// Runs `body` with the connections to itself.
    private func exclusively<T>(_ body: () throws -> T) rethrows -> T {
        try lock.withLock { _ in try body() }
    }

    // MARK: - Pin and checkpoint (call with the lock held: inside `locked` or `withWritesPaused`)

    var isPinned: Bool { exclusively { isPinnedValue } }

    /// Starts the read transaction that holds back checkpoints.
    func pinLocked() throws {
        guard !isPinnedValue else { return }
        try pinConnection.execute("BEGIN")
        do {
            _ = try pinConnection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
        } catch {
            try? pinConnection.execute("ROLLBACK")
            throw error
        }
        isPinnedValue = true
    }

    /// Ends the read transaction.
    func unpinLocked() {
        guard isPinnedValue else { return }
        try? pinConnection.execute("ROLLBACK")
        isPinnedValue = false
    }

    /// A PASSIVE checkpoint (unpinned): copies what no reader still needs, never waits.
    func checkpointLocked() throws -> CheckpointResult {
        precondition(!isPinnedValue, "a checkpoint runs outside the pin's read transaction")
        return try pinConnection.checkpoint(.passive)
    }

    /// A PASSIVE checkpoint with the pin released for its length, and taken again whether the checkpoint succeeded
    /// or threw: a pin left released (a checkpoint that found another connection's checkpoint under way, `busy`) lets
    /// the writing process's own checkpoint copy frames not shipped yet and restart the log over them, which ends the
    /// generation.
    func checkpointReleasingPinLocked() throws -> CheckpointResult {
        unpinLocked()
        let result = Result { try checkpointLocked() }
        try pinLocked()
        return try result.get()
    }

    /// Runs `body` with the connections locked, on the replicator's queue.
    func locked<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await offCooperativePool(on: queue) { try self.exclusively { try body() } }
    }

    /// Runs `body` while no connection can commit: on the pool's writer, or under `BEGIN IMMEDIATE` (which waits
    /// up to the busy timeout for the other process's writer). Keep `body` short: writers wait meanwhile.
    func withWritesPaused<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        if let pool {
            return try await pool.writeWithoutTransaction { _ in try self.exclusively { try body() } }
        }
        return try await locked {
            guard let connection = self.writerConnection else { return try body() }
            try connection.execute("BEGIN IMMEDIATE")
            defer { try? connection.execute("ROLLBACK") }
            return try body()
        }
    }

    // MARK: - Reading the main file

    /// Reads the main file's bytes (as stored: encrypted) through SQLite's own file handle
    /// (``Connection/readMainFile(count:at:)``: the file is never opened a second time).
    ///
    /// - Returns: The bytes read (fewer than `count` only at the end of the file).
    func readMainFileLocked(count: Int, at offset: Int64) throws -> [UInt8] {
        do {
            return try pinConnection.readMainFile(count: count, at: offset)
        } catch let error as DatabaseError {
            throw ReplicationError(.sourceChanged, error.message)
        }
    }

    /// The database's salt (`nil` before its first write).
    func salt() throws -> [UInt8]? {
        try pinConnection.cipherSalt
    }

    /// The MAC key of this database's replica (derived from its key).
    func authentication() throws -> ReplicaAuthentication {
        try ReplicaAuthentication(connection: pinConnection)
    }

    /// Whether the path still names the file the replicator opened.
    var isSameFile: Bool { OpenFiles.fileID(path: path) == identity }

    // MARK: - Closing

    /// Ends the pin, gives the pool its automatic checkpoints back, and closes the replicator's connections. Being
    /// last to close, SQLite may then checkpoint the log into the main file: only after everything was shipped.
    func close() async {
        let alreadyClosed = exclusively { () -> Bool in
            defer { isClosedValue = true }
            return isClosedValue
        }
        guard !alreadyClosed else { return }
        if let pool, let previous = restoresAutomaticCheckpoint, !pool.isClosed {
            _ = try? await pool.writeWithoutTransaction { db in
                try db.execute("PRAGMA wal_autocheckpoint = \(previous)")
            }
        }
        exclusively {
            unpinLocked()
            pinConnection.close()
            writerConnection?.close()
        }
    }
}
#endif
