import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Appends whole transactions of page images, as stored (encrypted), to a database's write-ahead log the way
/// SQLite's own writer does: frames written and flushed, the wal-index told, then the index header published, in
/// that order. A follower (replication's `ReplicaFollower`) copies another machine's committed pages this way.
///
/// Why the log and not the main file: readers of any process, mid-transaction or not, go on seeing the last state
/// published until the next one is; a crash before the header is published leaves frames no reader sees, and one
/// after leaves a log SQLite's recovery reads back whole. Writing the main file in place would need the readers to
/// be shut out and a journal of our own.
///
/// The pages are not decrypted: SQLCipher encrypts each page on its own (its IV and MAC in the page, the page number
/// in the MAC), so a page image of another copy of the same database (same key, same salt, same page size) is a
/// valid page here. The frames get this log's salts and running checksum.
///
/// The format is SQLite's (https://www.sqlite.org/walformat.html): the wal-index (`-shm`) begins with two copies of
/// a 48-byte header (native byte order) and the checkpoint information, then blocks of 32 KiB: page numbers of the
/// frames and a hash table from page number to frame. It has been the same since SQLite 3.7.0; both engines' SQLite
/// versions read it.
///
/// Use from one thread at a time; the connection must not be used for anything else while a transaction is open.
package final class WriteAheadLogAppender {
    private let connection: Connection
    private let file: UnsafeMutablePointer<sqlite3_file>
    private let methods: UnsafePointer<sqlite3_io_methods>
    private let walPath: String
    private let walDescriptor: CInt
    /// The page size (the frames' page size): the database's, with the reserve SQLCipher keeps in each page.
    package let pageSize: Int

    /// The open transaction: the index header as read, and how far frames were appended.
    private var header = IndexHeader()
    private var holdsWriteLock = false
    private var frame: UInt32 = 0
    private var running = WALFormat.Checksum.zero
    private var lastFrameWasCommit = false
    private var databasePageCount: UInt32 = 0

    /// What this appender published last (the log's state right after), to tell whether anyone else wrote since.
    private var lastPublished: (frame: UInt32, checksum: WALFormat.Checksum, salt: [UInt8])?

    /// An appender on `connection`'s database, which must be in WAL mode.
    ///
    /// - Throws: ``DatabaseError``: `invalidState` when the database is not in WAL mode or the engine's file has no
    ///   shared-memory methods; `fileSystem` when the log cannot be opened.
    package init(connection: Connection) throws {
        let mode = try connection.scalar("PRAGMA journal_mode", as: String.self) ?? ""
        guard mode.lowercased() == "wal" else {
            throw DatabaseError(
                .invalidState, "\(connection.filePath) is in \(mode) mode; frames are appended to a write-ahead log only")
        }
        // A read opens the log and its index (SQLite opens them with the first read transaction).
        _ = try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
        var pointer: UnsafeMutableRawPointer?
        guard let handle = connection.sqliteConnection,
              sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
              let file = pointer?.assumingMemoryBound(to: sqlite3_file.self), let methods = file.pointee.pMethods,
              methods.pointee.iVersion >= 2, methods.pointee.xShmMap != nil, methods.pointee.xShmLock != nil
        else { throw DatabaseError(.invalidState, "cannot reach the write-ahead log index of \(connection.filePath)") }
        self.connection = connection
        self.file = file
        self.methods = UnsafePointer(methods)
        pageSize = try connection.pragmaInteger("page_size") ?? 0
        walPath = connection.filePath + "-wal"
        // SQLite takes no lock on the log file itself, so this descriptor's close drops none of the process's locks
        // (those are on the main file and the index).
        walDescriptor = open(walPath, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard walDescriptor >= 0 else {
            throw DatabaseError(.fileSystem, "cannot open \(walPath) (errno \(errno))")
        }
    }

    deinit {
        if holdsWriteLock { unlock(Self.writeLock, 1) }
        close(walDescriptor)
    }

    // MARK: - Transactions

    /// Takes the log's write lock (as a writing connection does) and reads the index header; restarts the log from
    /// its first frame when every frame of it is in the main file and no reader uses it.
    ///
    /// - Parameter busyAttempts: How many times a busy lock is tried again (a millisecond apart at first, then
    ///   longer): another connection checkpointing with RESTART or TRUNCATE holds it for the checkpoint's length.
    /// - Throws: ``DatabaseError``: `busy` when the lock stays held; `invalidState` when a transaction is already open
    ///   or someone else wrote to the log since this appender's last commit; `damaged` when the index header does not
    ///   check out even after SQLite's recovery.
    package func begin(busyAttempts: Int = 6000) throws {
        try begin(busyAttempts: busyAttempts, recovering: true)
    }

    private func begin(busyAttempts: Int, recovering: Bool) throws {
        guard !holdsWriteLock else { throw DatabaseError(.invalidState, "an append transaction is already open") }
        var attempt = 0
        while true {
            let code = lock(Self.writeLock, 1)
            if code == SQLITE_OK { break }
            guard code == SQLITE_BUSY, attempt < busyAttempts else {
                throw DatabaseError(.busy, "the write lock of \(walPath) stays held by another connection")
            }
            attempt += 1
            usleep(useconds_t(min(attempt, 10) * 1000))
        }
        holdsWriteLock = true
        do {
            guard let read = try readHeader() else {
                // Not initialised or torn: SQLite's next reader recovers it from the log, which needs this lock.
                unlock(Self.writeLock, 1)
                holdsWriteLock = false
                guard recovering else {
                    throw DatabaseError(.damaged, "the write-ahead log index of \(connection.filePath) does not check out")
                }
                _ = try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
                return try begin(busyAttempts: busyAttempts, recovering: false)
            }
            header = read
            // Since this appender's last commit only a checkpoint may have changed the log: restarted it (no
            // frames), never added to it.
            if let lastPublished, header.mxFrame != 0,
               header.mxFrame != lastPublished.frame || header.frameChecksum != lastPublished.checksum
                || header.salt != lastPublished.salt {
                throw DatabaseError(
                    .invalidState,
                    "another connection wrote to \(connection.filePath) since the last append; the copy no longer"
                        + " matches what was appended to it")
            }
            try restartIfBackfilled()
            try removeIndexEntriesPastEnd()
            frame = header.mxFrame
            running = header.frameChecksum
            lastFrameWasCommit = false
            databasePageCount = header.nPage
        } catch {
            unlock(Self.writeLock, 1)
            holdsWriteLock = false
            throw error
        }
    }

    /// Appends one frame: the page image for `pageNumber`, as stored; `commitPageCount` is the database's size in
    /// pages after the transaction for its last frame, 0 for the others. Nothing is visible before ``commit()``.
    ///
    /// - Throws: ``DatabaseError``: `invalidState` (no transaction, a page of the wrong size, page number 0);
    ///   `fileSystem`, `full` from the writes.
    package func append(pageNumber: UInt32, page: UnsafeRawBufferPointer, commitPageCount: UInt32) throws {
        guard holdsWriteLock else { throw DatabaseError(.invalidState, "append outside an append transaction") }
        guard page.count == pageSize, pageNumber != 0 else {
            throw DatabaseError(.invalidState, "a frame needs a page of \(pageSize) bytes and a page number")
        }
        let bigEndian = header.bigEndianChecksum != 0
        if frame == 0 { try writeLogHeader() }
        var frameHeader = [UInt8](repeating: 0, count: WALFormat.frameHeaderSize)
        putBigEndian(&frameHeader, 0, pageNumber)
        putBigEndian(&frameHeader, 4, commitPageCount)
        frameHeader.replaceSubrange(8..<16, with: header.salt)
        running = frameHeader.withUnsafeBytes {
            running.continued(over: UnsafeRawBufferPointer(rebasing: $0[0..<8]), bigEndian: bigEndian)
        }.continued(over: page, bigEndian: bigEndian)
        putBigEndian(&frameHeader, 16, running.first)
        putBigEndian(&frameHeader, 20, running.second)
        let offset = Int64(WALFormat.headerSize) + Int64(frame) * Int64(WALFormat.frameHeaderSize + pageSize)
        try frameHeader.withUnsafeBytes { try writeFully(walDescriptor, $0, at: offset, path: walPath) }
        try writeFully(walDescriptor, page, at: offset + Int64(WALFormat.frameHeaderSize), path: walPath)
        frame += 1
        try addIndexEntry(frame: frame, pageNumber: pageNumber)
        lastFrameWasCommit = commitPageCount != 0
        if lastFrameWasCommit { databasePageCount = commitPageCount }
    }

    /// Flushes the log and publishes the frames appended (readers that start a transaction from now on see them),
    /// then gives the write lock back.
    ///
    /// - Throws: ``DatabaseError``: `invalidState` when the last frame appended is not a commit frame (nothing is
    ///   published; the transaction stays open to be rolled back); `fileSystem` when the flush fails (nothing is
    ///   published and the lock is given back).
    package func commit() throws {
        guard holdsWriteLock else { throw DatabaseError(.invalidState, "commit outside an append transaction") }
        guard frame > header.mxFrame else {
            unlock(Self.writeLock, 1)
            holdsWriteLock = false
            return
        }
        guard lastFrameWasCommit else {
            throw DatabaseError(.invalidState, "the last frame appended is not a commit frame; nothing was published")
        }
        defer {
            unlock(Self.writeLock, 1)
            holdsWriteLock = false
        }
        guard fsync(walDescriptor) == 0 else {
            throw DatabaseError(.fileSystem, "cannot flush \(walPath) (errno \(errno)); nothing was published")
        }
        header.mxFrame = frame
        header.nPage = databasePageCount
        header.frameChecksum = running
        header.iChange &+= 1
        try writeHeader(header)
        lastPublished = (frame, running, header.salt)
    }

    /// Gives the write lock back without publishing anything appended (readers never see it; the next transaction
    /// writes over it).
    package func rollback() {
        guard holdsWriteLock else { return }
        unlock(Self.writeLock, 1)
        holdsWriteLock = false
    }

    /// The number of frames in the log as last published (0 after a restart).
    package var publishedFrameCount: UInt32 { lastPublished?.frame ?? header.mxFrame }

    // MARK: - The log's header

    private func writeLogHeader() throws {
        var bytes = [UInt8](repeating: 0, count: WALFormat.headerSize)
        let bigEndianHost = 1.bigEndian == 1
        putBigEndian(&bytes, 0, bigEndianHost ? WALFormat.magicBigEndian : WALFormat.magicLittleEndian)
        putBigEndian(&bytes, 4, WALFormat.formatVersion)
        putBigEndian(&bytes, 8, UInt32(pageSize))
        // The checkpoint sequence is informative (SQLite counts restarts there); the index's change counter serves.
        putBigEndian(&bytes, 12, header.iChange)
        bytes.replaceSubrange(16..<24, with: header.salt)
        let checksum = bytes.withUnsafeBytes {
            // SQLite sums the header's words in the machine's order, which the magic just written names.
            WALFormat.Checksum.zero.continued(
                over: UnsafeRawBufferPointer(rebasing: $0[0..<24]), bigEndian: bigEndianHost)
        }
        putBigEndian(&bytes, 24, checksum.first)
        putBigEndian(&bytes, 28, checksum.second)
        try bytes.withUnsafeBytes { try writeFully(walDescriptor, $0, at: 0, path: walPath) }
        header.bigEndianChecksum = bigEndianHost ? 1 : 0
        header.szPage = UInt16(truncatingIfNeeded: (pageSize & 0xff00) | (pageSize >> 16))
        running = checksum
    }

    /// Starts the log again from its first slot when the main file has every frame of it and no reader reads it
    /// (what SQLite's writer does at the start of a transaction): new salts, so that old frames no longer count.
    private func restartIfBackfilled() throws {
        guard header.mxFrame == 0 || backfilledFrameCount == header.mxFrame else { return }
        let wasEmpty = header.mxFrame == 0
        // Readers 1…4 read the log; an exclusive lock on their slots proves none does.
        if !wasEmpty && lock(Self.readLock(1), Self.readerCount - 1) != SQLITE_OK { return }
        defer { if !wasEmpty { unlock(Self.readLock(1), Self.readerCount - 1) } }
        var salt = header.salt
        let salt1 = (UInt32(salt[0]) << 24 | UInt32(salt[1]) << 16 | UInt32(salt[2]) << 8 | UInt32(salt[3])) &+ 1
        salt.replaceSubrange(0..<4, with: [
            UInt8(truncatingIfNeeded: salt1 >> 24), UInt8(truncatingIfNeeded: salt1 >> 16),
            UInt8(truncatingIfNeeded: salt1 >> 8), UInt8(truncatingIfNeeded: salt1)])
        salt.replaceSubrange(4..<8, with: (0..<4).map { _ in UInt8.random(in: 0...255) })
        header.salt = salt
        header.mxFrame = 0
        if !wasEmpty {
            header.iChange &+= 1
            try writeHeader(header)
            let info = try region(0).advanced(by: Self.checkpointInfoOffset)
            info.storeBytes(of: UInt32(0), toByteOffset: 0, as: UInt32.self)  // nBackfill
            info.storeBytes(of: UInt32(0), toByteOffset: 4 + 4, as: UInt32.self)  // aReadMark[1]
            for reader in 2..<Int(Self.readerCount) {
                info.storeBytes(of: UInt32.max, toByteOffset: 4 + 4 * reader, as: UInt32.self)
            }
            info.storeBytes(of: UInt32(0), toByteOffset: 32, as: UInt32.self)  // nBackfillAttempted
        }
        // With a fresh header, whatever the slots of the old log hold no longer counts (its salts differ).
        lastPublished = nil
    }

    private var backfilledFrameCount: UInt32 {
        (try? region(0).advanced(by: Self.checkpointInfoOffset).load(as: UInt32.self)) ?? 0
    }

    // MARK: - The wal-index

    private static let regionSize = 32768
    private static let headerSize = 48
    private static let checkpointInfoOffset = 96
    private static let indexHeaderSize = 136
    private static let pagesPerBlock = 4096
    private static let pagesInFirstBlock = 4096 - 136 / 4
    private static let hashSlots = 8192
    private static let writeLock: CInt = 0
    private static let readerCount: CInt = 5
    private static func readLock(_ n: CInt) -> CInt { 3 + n }

    /// The index header as SQLite keeps it (native byte order; the salts as the log stores them).
    private struct IndexHeader: Equatable {
        var iChange: UInt32 = 0
        var isInit: UInt8 = 0
        var bigEndianChecksum: UInt8 = 0
        var szPage: UInt16 = 0
        var mxFrame: UInt32 = 0
        var nPage: UInt32 = 0
        var frameChecksum = WALFormat.Checksum.zero
        var salt = [UInt8](repeating: 0, count: 8)
    }

    private func region(_ number: Int) throws -> UnsafeMutableRawPointer {
        var pointer: UnsafeMutableRawPointer?
        let code = methods.pointee.xShmMap!(file, CInt(number), CInt(Self.regionSize), 1, &pointer)
        guard code == SQLITE_OK, let pointer else {
            throw DatabaseError(.fileSystem, "cannot map block \(number) of \(connection.filePath)-shm (code \(code))")
        }
        return pointer
    }

    private func lock(_ offset: CInt, _ count: CInt) -> CInt {
        methods.pointee.xShmLock!(file, offset, count, SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE)
    }

    private func unlock(_ offset: CInt, _ count: CInt) {
        _ = methods.pointee.xShmLock!(file, offset, count, SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE)
    }

    private func barrier() {
        methods.pointee.xShmBarrier?(file)
    }

    /// Both copies of the index header, when they agree and check out.
    private func readHeader() throws -> IndexHeader? {
        let base = try region(0)
        let first = [UInt8](UnsafeRawBufferPointer(start: base, count: Self.headerSize))
        barrier()
        let second = [UInt8](UnsafeRawBufferPointer(start: base + Self.headerSize, count: Self.headerSize))
        guard first == second, first[12] != 0 else { return nil }
        let stored = first.withUnsafeBytes {
            WALFormat.Checksum(first: $0.loadUnaligned(fromByteOffset: 40, as: UInt32.self),
                               second: $0.loadUnaligned(fromByteOffset: 44, as: UInt32.self))
        }
        guard Self.headerChecksum(first) == stored else { return nil }
        return first.withUnsafeBytes { bytes in
            IndexHeader(
                iChange: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self), isInit: bytes[12],
                bigEndianChecksum: bytes[13], szPage: bytes.loadUnaligned(fromByteOffset: 14, as: UInt16.self),
                mxFrame: bytes.loadUnaligned(fromByteOffset: 16, as: UInt32.self),
                nPage: bytes.loadUnaligned(fromByteOffset: 20, as: UInt32.self),
                frameChecksum: WALFormat.Checksum(
                    first: bytes.loadUnaligned(fromByteOffset: 24, as: UInt32.self),
                    second: bytes.loadUnaligned(fromByteOffset: 28, as: UInt32.self)),
                salt: Array(bytes[32..<40]))
        }
    }

    /// SQLite's checksum of the header's first 40 bytes, read as native words.
    private static func headerChecksum(_ bytes: [UInt8]) -> WALFormat.Checksum {
        bytes.withUnsafeBytes {
            WALFormat.Checksum.zero.continued(
                over: UnsafeRawBufferPointer(rebasing: $0[0..<40]), bigEndian: 1.bigEndian == 1)
        }
    }

    /// Writes the header as SQLite's writer does: the second copy, a barrier, then the first (a reader that sees
    /// them differ reads again).
    private func writeHeader(_ header: IndexHeader) throws {
        var bytes = [UInt8](repeating: 0, count: Self.headerSize)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: WALFormat.formatVersion, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: header.iChange, toByteOffset: 8, as: UInt32.self)
            raw[12] = 1
            raw[13] = header.bigEndianChecksum
            raw.storeBytes(of: header.szPage, toByteOffset: 14, as: UInt16.self)
            raw.storeBytes(of: header.mxFrame, toByteOffset: 16, as: UInt32.self)
            raw.storeBytes(of: header.nPage, toByteOffset: 20, as: UInt32.self)
            raw.storeBytes(of: header.frameChecksum.first, toByteOffset: 24, as: UInt32.self)
            raw.storeBytes(of: header.frameChecksum.second, toByteOffset: 28, as: UInt32.self)
            for index in 0..<8 { raw[32 + index] = header.salt[index] }
        }
        let checksum = Self.headerChecksum(bytes)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: checksum.first, toByteOffset: 40, as: UInt32.self)
            raw.storeBytes(of: checksum.second, toByteOffset: 44, as: UInt32.self)
        }
        let base = try region(0)
        bytes.withUnsafeBytes { (base + Self.headerSize).copyMemory(from: $0.baseAddress!, byteCount: Self.headerSize) }
        barrier()
        bytes.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: Self.headerSize) }
    }

    /// The block holding frame `frame`'s entry: its page-number array (entry `frame - zero - 1`), its hash table,
    /// and the frame number before its first entry.
    private func block(of frame: UInt32) throws -> (pages: UnsafeMutablePointer<UInt32>, hash: UnsafeMutablePointer<UInt16>, zero: UInt32, capacity: Int) {
        let number = (Int(frame) + Self.pagesPerBlock - Self.pagesInFirstBlock - 1) / Self.pagesPerBlock
        let base = try region(number)
        let hash = (base + Self.pagesPerBlock * 4).assumingMemoryBound(to: UInt16.self)
        if number == 0 {
            return ((base + Self.indexHeaderSize).assumingMemoryBound(to: UInt32.self), hash, 0, Self.pagesInFirstBlock)
        }
        let zero = UInt32(Self.pagesInFirstBlock + (number - 1) * Self.pagesPerBlock)
        return (base.assumingMemoryBound(to: UInt32.self), hash, zero, Self.pagesPerBlock)
    }

    /// Removes what an append that was never published left in the index past the published end, as SQLite does
    /// after a rolled-back transaction: lookups must not find those frames once new ones take their numbers.
    private func removeIndexEntriesPastEnd() throws {
        guard header.mxFrame > 0 else { return }
        let (pages, hash, zero, capacity) = try block(of: header.mxFrame)
        let limit = Int(header.mxFrame - zero)
        for slot in 0..<Self.hashSlots where Int(hash[slot]) > limit { hash[slot] = 0 }
        for entry in limit..<capacity { pages[entry] = 0 }
    }

    private func addIndexEntry(frame: UInt32, pageNumber: UInt32) throws {
        let (pages, hash, zero, capacity) = try block(of: frame)
        let entry = Int(frame - zero)
        if entry == 1 {
            // The first frame of a block: whatever the block held belongs to an old log.
            for index in 0..<capacity { pages[index] = 0 }
            for slot in 0..<Self.hashSlots { hash[slot] = 0 }
        }
        pages[entry - 1] = pageNumber
        var slot = Int((UInt64(pageNumber) &* 383) & UInt64(Self.hashSlots - 1))
        var probes = 0
        while hash[slot] != 0 {
            probes += 1
            guard probes < Self.hashSlots else {
                throw DatabaseError(.damaged, "the write-ahead log index of \(connection.filePath) is full")
            }
            slot = (slot + 1) & (Self.hashSlots - 1)
        }
        hash[slot] = UInt16(entry)
    }
}

private func putBigEndian(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt32) {
    bytes[offset] = UInt8(truncatingIfNeeded: value >> 24)
    bytes[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
    bytes[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
    bytes[offset + 3] = UInt8(truncatingIfNeeded: value)
}
