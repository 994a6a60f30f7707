#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a key rotation rewrites the database.
public enum RotationMethod: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Copy the database into a new file under the new key, verify it, then atomically replace the original. The
    /// original is never modified; a crash at any moment leaves either the old file or the new one. The default.
    case copy
    /// SQLCipher's in-place rekey (``Connection/rekey(to:)``): one transaction, crash-atomic, no extra disk space,
    /// but cannot change cipher settings.
    case inPlace = "in-place"

    /// The name used on the command line.
    public var description: String { rawValue }
}

/// One database to rotate: where it is, its current key and settings, and the new ones.
public struct RotationRequest: Sendable {
    /// The database file.
    public var path: String
    /// The key and settings that open the database now.
    public var oldEncryption: Encryption
    /// The key (and settings) it should have afterwards. With ``RotationMethod/inPlace`` the settings must stay
    /// the same.
    public var newEncryption: Encryption
    /// The method; ``RotationMethod/copy`` by default.
    public var method: RotationMethod
    /// When set, a verified copy of the original (still under the old key) is written there first.
    public var backupDirectory: String?
    /// How long to wait for other connections' locks before refusing with `SQLITE_BUSY`.
    public var lockTimeout: Duration
    /// Accept a new passphrase shorter than ``EncryptionKey/minimumRotationPassphraseByteCount`` bytes or with a
    /// line break inside (`false` by default: such text is more likely a mistake than a key). A request whose new key
    /// is its old key (a migration to another format, other cipher settings) keeps that key whatever it is: the floor
    /// is for keys chosen now.
    public var allowsWeakPassphrase: Bool

    /// Creates a request.
    public init(
        path: String, oldEncryption: Encryption, newEncryption: Encryption, method: RotationMethod = .copy,
        backupDirectory: String? = nil, lockTimeout: Duration = .seconds(3), allowsWeakPassphrase: Bool = false
    ) {
        self.path = path
        self.oldEncryption = oldEncryption
        self.newEncryption = newEncryption
        self.method = method
        self.backupDirectory = backupDirectory
        self.lockTimeout = lockTimeout
        self.allowsWeakPassphrase = allowsWeakPassphrase
    }
}

/// The outcome of one rotation.
public struct RotationResult: Sendable, CustomStringConvertible {
    /// The database file, as the request named it.
    public let path: String
    /// The file that was rotated: ``path`` with symbolic links resolved (a symlink is followed, never replaced).
    public let resolvedPath: String
    /// The method used.
    public let method: RotationMethod
    /// `nil` when the database was rotated; the reason otherwise.
    public let error: DatabaseError?
    /// Which of the request's two keys opens the file now, from a fresh probe: ``KeyState/new`` after success;
    /// after a failure, normally ``KeyState/old``. `nil` when the rotation was refused before the file was looked at
    /// (a file named twice, a key that could not be read).
    public let keyState: KeyState?
    /// Where the copy of the original was written (``RotationRequest/backupDirectory``).
    public let backupPath: String?
    /// How long the rotation took.
    public let duration: Duration
    /// What the operator should know about a rotation that succeeded (a process that still holds the replaced file).
    public let warnings: [String]

    init(
        path: String, resolvedPath: String, method: RotationMethod, error: DatabaseError?, keyState: KeyState?,
        backupPath: String?, duration: Duration, warnings: [String] = []
    ) {
        self.path = path
        self.resolvedPath = resolvedPath
        self.method = method
        self.error = error
        self.keyState = keyState
        self.backupPath = backupPath
        self.duration = duration
        self.warnings = warnings
    }

    /// `true` when the database now has the new key.
    public var isRotated: Bool { error == nil }

    /// One line: path, outcome, key state.
    public var description: String {
        if let error {
            let state = keyState.map(\.description) ?? "the file was not looked at"
            return "\(path): FAILED (\(error.message)); \(state)"
        }
        // resolvedPath is absolute and canonical: only a path that is itself a symbolic link is worth saying.
        var status = stat()
        let isLink = lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK
        let target = isLink ? "\(path) (symlink to \(resolvedPath))" : path
        return "\(target): rotated (\(method)) in \(duration)" + (backupPath.map { "; original kept at \($0)" } ?? "")
            + warnings.map { "; warning: \($0)" }.joined()
    }
}

/// Key rotation for one database or many: the library behind `sqlcipherkit rotate`.
///
/// ```swift
/// let result = try KeyRotation.rotate(RotationRequest(
///     path: "notes.db", oldEncryption: .key(oldKey), newEncryption: .key(newKey)))
///
/// // Per-tenant databases, each with its own keys; never throws, reports per database:
/// let results = KeyRotation.rotateAll(requests)
/// ```
///
/// Safety, whatever the method:
/// - The old key is checked first, and the old key stays valid until the new file has been verified.
/// - No other connection may have the database open: this process's SQLCipherKit connections are counted, other
///   processes are found through `/proc` on Linux (elsewhere, stop them first), and an exclusive lock is taken —
///   refused with `SQLITE_BUSY` within ``RotationRequest/lockTimeout`` when another process holds one.
/// - In WAL mode the WAL is checkpointed into the main file first.
/// - Afterwards the new key must open the file (with `PRAGMA quick_check`) and the old one must not.
/// - A crash at any moment leaves the database openable with exactly one of the two keys, with all its data: the
///   copy method replaces the file with one atomic `rename` after the new file is verified and flushed; SQLCipher's
///   in-place rekey is one transaction. Leftover temporary files of an interrupted run are removed by the next.
public enum KeyRotation {
    /// Rotates one database.
    ///
    /// - Returns: The result (always rotated; failures throw).
    /// - Throws: ``DatabaseError`` — the database was left as it was (the message says which key opens it).
    @discardableResult
    public static func rotate(
        _ request: RotationRequest, progress: ((BackupProgress) throws -> Void)? = nil
    ) throws -> RotationResult {
        let result = rotateReporting(request, progress: progress)
        if let error = result.error { throw error }
        return result
    }

    /// Rotates several databases, each independently: a failure leaves that database untouched and the others go
    /// on. Never throws.
    ///
    /// A file named twice (two paths to one file, by device and inode) is not rotated at all: each of its requests
    /// fails with ``DatabaseError/invalidArgument``.
    public static func rotateAll(
        _ requests: [RotationRequest], progress: ((String, BackupProgress) throws -> Void)? = nil
    ) -> [RotationResult] {
        rotateAll(requests, enclosing: { request, rotate in
            rotate(progress.map { report in { try report(request.path, $0) } })
        })
    }

    /// ``rotateAll(_:progress:)`` with each rotation run inside `enclosing`, which is given the request and a
    /// function that rotates it with a progress handler of its own (the command-line tool draws one progress line
    /// per database this way). A file named twice is refused before `enclosing` is called for it.
    package static func rotateAll(
        _ requests: [RotationRequest],
        enclosing: (RotationRequest, _ rotate: (((BackupProgress) throws -> Void)?) -> RotationResult) -> RotationResult
    ) -> [RotationResult] {
        var pathsByFile: [OpenFiles.FileID: [String]] = [:]
        for request in requests {
            if let id = OpenFiles.fileID(path: request.path) { pathsByFile[id, default: []].append(request.path) }
        }
        return requests.map { request in
            if let id = OpenFiles.fileID(path: request.path), let paths = pathsByFile[id], paths.count > 1 {
                let error = DatabaseError(
                    .invalidArgument,
                    "rotation refused: \(paths.joined(separator: " and ")) are the same file; name each"
                        + " database once. Nothing was changed")
                return RotationResult(
                    path: request.path, resolvedPath: realPath(request.path) ?? request.path, method: request.method,
                    error: error, keyState: nil, backupPath: nil, duration: .zero)
            }
            return enclosing(request) { progress in rotateReporting(request, progress: progress) }
        }
    }

    /// Rotates every database file in a folder (one pass, not recursive), asking `keys` for each file's old and
    /// new encryption — for per-tenant databases with keys of their own.
    ///
    /// - Parameters:
    ///   - folder: The folder.
    ///   - fileExtension: Which files are databases (`db` by default); `-wal`, `-shm`, `-journal` and temporary
    ///     files are skipped.
    ///   - method: The method for every database.
    ///   - allowsWeakPassphrase: See ``RotationRequest/allowsWeakPassphrase``.
    ///   - keys: Returns (old, new) for a database path; a thrown error is reported for that database.
    public static func rotateDatabases(
        inFolder folder: String, fileExtension: String = "db", method: RotationMethod = .copy,
        allowsWeakPassphrase: Bool = false, keys: (String) throws -> (old: Encryption, new: Encryption)
    ) throws -> [RotationResult] {
        guard let entries = directoryEntries(of: folder) else {
            throw fileSystemError("cannot list the folder \(folder)")
        }
        let names = entries.filter { $0.hasSuffix("." + fileExtension) && !$0.hasPrefix(".") }
        return names.sorted().map { name in
            let path = folder + "/" + name
            do {
                let (old, new) = try keys(path)
                return rotateReporting(
                    RotationRequest(
                        path: path, oldEncryption: old, newEncryption: new, method: method,
                        allowsWeakPassphrase: allowsWeakPassphrase),
                    progress: nil)
            } catch {
                return RotationResult(
                    path: path, resolvedPath: realPath(path) ?? path, method: method, error: asDatabaseError(error),
                    keyState: nil, backupPath: nil, duration: .zero)
            }
        }
    }

    // MARK: - One database

    static func rotateReporting(
        _ request: RotationRequest, progress: ((BackupProgress) throws -> Void)?
    ) -> RotationResult {
        let clock = ContinuousClock()
        let start = clock.now
        var backupPath: String?
        // A symlink is followed on purpose: the real file is rotated, the link is left as it is.
        var request = request
        let resolvedPath = realPath(request.path) ?? request.path
        let requestedPath = request.path
        request.path = resolvedPath
        // Everything that opens the file, the probe of which key opens it after a failure included, happens within
        // the turn: a probe after the turn is released would make the next rotation see this process holding the file.
        do {
            return try withRotationTurn(request) {
                do {
                    // The floor is for a key the caller chooses now: a rotation that keeps the key it has (a
                    // migration to another format, new settings) accepts it, whatever its length.
                    if let newKey = request.newEncryption.key,
                       request.oldEncryption.key.map({ !$0.isSameKey(as: newKey) }) ?? true {
                        try newKey.checkStrongEnoughForRotation(allowsWeakPassphrase: request.allowsWeakPassphrase)
                    }
                    try refuseUnsaltedPlaintextHeaderKey(request)
                    var warnings: [String] = []
                    switch request.method {
                    case .copy:
                        let verifiedFile: OpenFiles.FileID?
                        (backupPath, warnings, verifiedFile) = try rotateByCopy(request, progress: progress)
                        try verifyRotated(request, isVerifiedFile: verifiedFile != nil
                            && OpenFiles.fileID(path: request.path) == verifiedFile)
                    case .inPlace:
                        // The rekey verified every page under the new key before it returned.
                        backupPath = try rotateInPlace(request)
                        try verifyRotated(request, isVerifiedFile: true)
                    }
                    return RotationResult(
                        path: requestedPath, resolvedPath: resolvedPath, method: request.method, error: nil,
                        keyState: .new, backupPath: backupPath, duration: clock.now - start, warnings: warnings)
                } catch {
                    return RotationResult(
                        path: requestedPath, resolvedPath: resolvedPath, method: request.method,
                        error: asDatabaseError(error), keyState: keyState(of: request), backupPath: backupPath,
                        duration: clock.now - start)
                }
            }
        } catch {
            // No turn within the lock timeout: another rotation is at work on this folder, and probing the file now
            // would disturb it.
            return RotationResult(
                path: requestedPath, resolvedPath: resolvedPath, method: request.method,
                error: asDatabaseError(error), keyState: .locked, backupPath: nil, duration: clock.now - start)
        }
    }

    /// Rotations of the databases of one folder take turns, in this process and across processes: an advisory
    /// `flock` on the folder, waited for within the request's lock timeout.
    ///
    /// Without it, two rotations of one file started together each found the other holding the file open and both
    /// refused ("open in other processes"). Taking turns, the second starts once the first is done: with the old key
    /// it then finds the file under the new key and is refused as a wrong key, so exactly one of them rotates. The
    /// folder is locked, not the database: a process waiting on the database file itself would count as holding it
    /// open. Where the folder cannot be opened (no read permission), rotation goes on without taking turns; the
    /// database's own lock and the open-file check still refuse a concurrent run.
    private static func withRotationTurn<T>(_ request: RotationRequest, _ body: () throws -> T) throws -> T {
        let folder = parentFolder(of: request.path)
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return try body() }
        defer { closeFileDescriptor(descriptor) }   // releases the turn
        let deadline = ContinuousClock.now + request.lockTimeout
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { return try body() }
            guard ContinuousClock.now < deadline else {
                throw DatabaseError(
                    .busy,
                    "another rotation of a database in \(folder) is running and did not finish within"
                        + " \(request.lockTimeout); nothing was changed")
            }
            usleep(5_000)
        }
        return try body()
    }

    /// A plaintext-header database does not store its salt: a new key without one would leave a file that only
    /// "new key + old salt" opens, a key that exists in no key file.
    private static func refuseUnsaltedPlaintextHeaderKey(_ request: RotationRequest) throws {
        let new = request.newEncryption
        guard (request.oldEncryption.settings.plaintextHeaderSize ?? 0) > 0 || (new.settings.plaintextHeaderSize ?? 0) > 0
        else { return }
        if new.key?.salt == nil && new.settings.salt == nil {
            throw refused(
                "the database has a plaintext header, which does not store the salt, and the new key has none: the"
                    + " result would open only with the new key plus the old salt. Nothing was changed",
                remedy: .giveSalt)
        }
    }

    private static func rotateByCopy(
        _ request: RotationRequest, progress: ((BackupProgress) throws -> Void)?
    ) throws -> (backupPath: String?, warnings: [String], verifiedFile: OpenFiles.FileID?) {
        guard request.newEncryption.key != nil else {
            throw refused("the new encryption has no key; decrypting is done with an export, not a rotation")
        }
        // The lock comes first: only then are leftovers of an earlier run removed and a temporary file made. It is
        // held (no other connection can start a transaction on the file) from before the copy until after the
        // rename.
        let lock = try lockDatabase(request)
        let replaced: ReplacedFile
        do {
            replaced = try ReplacedFile(path: request.path)
        } catch {
            lock.close()
            throw error
        }
        var isReplaced = false
        var verifiedFile: OpenFiles.FileID?
        defer {
            // The connection first: closing the descriptor would drop its lock. Once the file is replaced, the
            // `-wal` name is the new file's: the old connection must not remove it as it closes.
            isReplaced ? lock.closeKeepingSideFiles() : lock.close()
            replaced.close()
        }
        let backupPath = try backUpOriginal(request, from: lock)
        let target = try Connection.inMemory(encryption: request.newEncryption)
        let layoutsMatch = try lock.cipherLayout() == target.cipherLayout()
        target.close()
        // Nothing can change under the exclusive lock. A page-for-page copy is proven by its page count and by every
        // page authenticated under the new key; an export (SQL) by the row count of every table as well.
        let source = try lock.summary(countingRows: !layoutsMatch)
        let replacement = try AtomicReplacement(
            destination: request.path, policy: .replaceExisting, operation: "rotation")
        // A process that opened the file while the copy was written waits for the lock, and would write into the
        // replaced file once it is released: the rotation is abandoned while the original is still in place.
        let refuseLateOpeners = {
            let holders = OtherProcesses.holding(files: [replaced.id])
            defer { if holders.isEmpty { testHookBeforeRename.withLock { $0[request.path] }?() } }
            guard holders.isEmpty else {
                throw DatabaseError.inUse(
                    "rotation refused: \(request.path) was opened by another process while the copy was"
                        + " written (PID \(holders.map(String.init).joined(separator: ", "))); it would go on with the"
                        + " replaced file, and its writes would be lost. Nothing was changed. Stop it and run the"
                        + " rotation again, or rotate with the in-place method")
            }
        }
        do {
            if layoutsMatch {
                // The backup API keeps every byte of the file's structure (auto_vacuum, free pages, header).
                let pageCount = try lock.backUp(
                    intoNewFile: replacement.temporaryPath, encryption: request.newEncryption, pagesPerStep: 256,
                    progress: progress)
                try replacement.commit(verify: { copyPath in
                    try Connection.verifyCopy(
                        at: copyPath, encryption: request.newEncryption, expected: source, pageCount: pageCount,
                        checksFreePages: false)
                    verifiedFile = OpenFiles.fileID(path: copyPath)
                }, beforeRename: refuseLateOpeners)
            } else {
                _ = try lock.export(intoNewFile: replacement.temporaryPath, encryption: request.newEncryption)
                try replacement.commit(verify: { copyPath in
                    try Connection.verifyExport(at: copyPath, encryption: request.newEncryption, source: source)
                    verifiedFile = OpenFiles.fileID(path: copyPath)
                }, beforeRename: refuseLateOpeners)
            }
        } catch {
            replacement.abandon()
            throw error
        }
        isReplaced = true
        return (backupPath, keepLateOpenersOut(of: replaced, request: request), verifiedFile)
    }

    /// Runs between the last check for other processes and the rename, for the database at the key's path (tests
    /// open the file there, as a process would in that instant).
    static let testHookBeforeRename = Locked<[String: @Sendable () -> Void]>([:])

    /// After the rename: a process that opened the old file in the instant between the last check and the rename
    /// still has it (and waits for the lock). While it does, the lock is kept (up to the lock timeout), so it
    /// cannot start a transaction; if it still has the file then, the old file's first page is overwritten, so its
    /// next statement fails ("file is not a database") instead of writing where nobody will read. The old file has
    /// no name any more and the new one holds every row, so nothing is lost by that.
    private static func keepLateOpenersOut(of replaced: ReplacedFile, request: RotationRequest) -> [String] {
        var holders = OtherProcesses.holding(files: [replaced.id])
        guard !holders.isEmpty else { return [] }
        let deadline = ContinuousClock.now + max(request.lockTimeout, .seconds(1))
        while !holders.isEmpty && ContinuousClock.now < deadline {
            usleep(50_000)
            holders = OtherProcesses.holding(files: [replaced.id])
        }
        guard !holders.isEmpty else { return [] }
        let isOverwritten = replaced.makeUnusable()
        return [
            "process(es) \(holders.map(String.init).joined(separator: ", ")) opened \(request.path) in the instant"
                + " before the rename and still hold the replaced file; "
                + (isOverwritten
                    ? "its first page was overwritten, so their next statement fails (\"file is not a database\")"
                        + " and writes nothing. Restart them"
                    : "it still has another name, so it was left as it is. Restart them at once: their writes go to"
                        + " the old file"),
        ]
    }

    private static func rotateInPlace(_ request: RotationRequest) throws -> String? {
        guard let newKey = request.newEncryption.key else {
            throw refused("the new encryption has no key; decrypting is done with an export, not a rotation")
        }
        guard request.newEncryption.settings == request.oldEncryption.settings else {
            throw refused("in-place rotation cannot change cipher settings; use the copy method")
        }
        let lock = try lockDatabase(request)
        defer { lock.close() }
        let backupPath = try backUpOriginal(request, from: lock)
        try lock.rekey(to: newKey)
        return backupPath
    }

    /// Opens the database with the old key and takes an exclusive lock that it keeps until closed, after making
    /// sure no other connection or process has the file open.
    private static func lockDatabase(_ request: RotationRequest) throws -> Connection {
        let path = request.path
        guard regularFileSize(atPath: path).map({ $0 > 0 }) == true else {
            let format = DatabaseFileFormat.detect(atPath: path)
            let what = switch format {
            case .missing: "does not exist"
            case .empty: "is empty (0 bytes), not a database yet"
            default: "is not a regular file (a folder?)"
            }
            throw DatabaseError(.fileSystem, "\(path) \(what); nothing to rotate")
        }
        if OpenFiles.openCount(path: path) > 0 {
            throw refused("this process has other connections to \(path) open; close them first")
        }
        try refuseOtherProcesses(path)
        let lock: Connection
        do {
            var options = OpenOptions(mode: .readWrite, busyTimeout: request.lockTimeout)
            // EXCLUSIVE locking mode from before the first read: the lock is kept after COMMIT, and in WAL mode the
            // index lives in this connection's memory (no -shm shared with the file that replaces this one).
            options.holdsExclusiveLock = true
            lock = try Connection(path: path, encryption: request.oldEncryption, options: options)
        } catch let error as DatabaseError where error.kind == .busy || error.resultCode == DatabaseError.SQLITE_BUSY {
            throw busyRefusal(path, request)
        }
        do {
            do {
                try lock.execute("BEGIN EXCLUSIVE")
                try lock.execute("COMMIT")
            } catch let error as DatabaseError where error.resultCode == DatabaseError.SQLITE_BUSY {
                throw busyRefusal(path, request)
            }
            try refuseOtherProcesses(path)
            if try lock.pragmaText("journal_mode")?.caseInsensitiveEquals("wal") == true {
                try lock.checkpointTruncate()
            }
            return lock
        } catch {
            lock.close()
            throw error
        }
    }

    private static func busyRefusal(_ path: String, _ request: RotationRequest) -> DatabaseError {
        DatabaseError(
            .busy,
            "\(path) is busy: another connection holds a lock and did not release it within"
                + " \(request.lockTimeout); nothing was changed")
    }

    private static func refuseOtherProcesses(_ path: String) throws {
        let holders = OtherProcesses.holding(paths: [path, path + "-wal"])
        guard holders.isEmpty else {
            throw DatabaseError.inUse(
                "\(path) is open in other processes (PID \(holders.map(String.init).joined(separator: ", ")));"
                    + " nothing was changed", remedy: .stopOtherProcesses)
        }
    }

    private static func backUpOriginal(_ request: RotationRequest, from lock: Connection) throws -> String? {
        guard let folder = request.backupDirectory else { return nil }
        let name = request.path.split(separator: "/").last.map(String.init) ?? "database"
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        // Unique per run: backup(toPath:) replaces an existing file, and an earlier copy may be the only one under
        // an older key.
        let destination = "\(folder)/\(name).\(now.tv_sec)-\(randomSuffix()).before-rotation"
        try lock.backup(toPath: destination, encryption: request.oldEncryption)
        return destination
    }

    /// After the rename or the rekey: the new key opens the database and the old key does not.
    ///
    /// When the file is the one whose every page was verified under the new key (the renamed copy, by device and
    /// inode, or the file the rekey verified), page 1 with each key is enough: a second full `quick_check` would read
    /// every page again to learn nothing new. Otherwise (the file was replaced meanwhile by someone else) every page
    /// is checked. The old key is tried on page 1 only: when it does not open page 1 it opens nothing.
    private static func verifyRotated(_ request: RotationRequest, isVerifiedFile: Bool) throws {
        let rotated = try Connection(
            path: request.path, encryption: request.newEncryption, options: OpenOptions(mode: .readWrite))
        defer { rotated.close() }
        if !isVerifiedFile { try rotated.quickCheck() }
        var options = OpenOptions(mode: .readOnly, busyTimeout: .milliseconds(200))
        options.logger = nil
        options.namesOtherFormat = false
        if let old = try? Connection(path: request.path, encryption: request.oldEncryption, options: options) {
            old.close()
            throw DatabaseError(
                .verificationFailed,
                "the old key still opens \(request.path) after the rotation (were both keys the same?)")
        }
    }

    /// What a fresh probe finds, "locked" included: never a guess.
    private static func keyState(of request: RotationRequest) -> KeyState {
        KeyState.probe(path: request.path, old: request.oldEncryption, new: request.newEncryption)
    }


    private static func refused(_ message: String, remedy: DatabaseError.Remedy? = nil) -> DatabaseError {
        DatabaseError(.invalidState, "rotation refused: \(message)", remedy: remedy)
    }

    static func asDatabaseError(_ error: any Error) -> DatabaseError {
        (error as? DatabaseError)
            ?? DatabaseError(kind: .invalidState, code: DatabaseError.SQLITE_ERROR, message: "\(error)")
    }
}
