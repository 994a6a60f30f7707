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

    /// Creates a request.
    public init(
        path: String, oldEncryption: Encryption, newEncryption: Encryption, method: RotationMethod = .copy,
        backupDirectory: String? = nil, lockTimeout: Duration = .seconds(3)
    ) {
        self.path = path
        self.oldEncryption = oldEncryption
        self.newEncryption = newEncryption
        self.method = method
        self.backupDirectory = backupDirectory
        self.lockTimeout = lockTimeout
    }
}

/// The outcome of one rotation.
public struct RotationResult: Sendable, CustomStringConvertible {
    /// Which of the two keys given in the request opens the database after the attempt.
    public enum KeyState: String, Sendable {
        /// The old key (the database is as it was).
        case old
        /// The new key.
        case new
        /// Neither key given (for example, the given old key was wrong to begin with).
        case neither
        /// Not known: the check itself failed, or both keys open it.
        case unknown
    }

    /// The database file.
    public let path: String
    /// The method used.
    public let method: RotationMethod
    /// `nil` when the database was rotated; the reason otherwise.
    public let error: DatabaseError?
    /// Which key opens the file now: ``KeyState/new`` after success; after a failure, normally ``KeyState/old``.
    public let keyState: KeyState
    /// Where the copy of the original was written (``RotationRequest/backupDirectory``).
    public let backupPath: String?
    /// How long the rotation took.
    public let duration: Duration

    /// `true` when the database now has the new key.
    public var isRotated: Bool { error == nil }

    /// One line: path, outcome, key state.
    public var description: String {
        if let error {
            let state = switch keyState {
            case .old: "it still opens with the old key"
            case .new: "it opens with the new key"
            case .neither: "it opens with neither of the keys given"
            case .unknown: "which key opens it is unknown"
            }
            return "\(path): FAILED (\(error.message)); \(state)"
        }
        return "\(path): rotated (\(method)) in \(duration)" + (backupPath.map { "; original kept at \($0)" } ?? "")
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
    public static func rotateAll(
        _ requests: [RotationRequest], progress: ((String, BackupProgress) throws -> Void)? = nil
    ) -> [RotationResult] {
        requests.map { request in
            rotateReporting(request, progress: progress.map { report in { try report(request.path, $0) } })
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
    ///   - keys: Returns (old, new) for a database path; a thrown error is reported for that database.
    public static func rotateDatabases(
        inFolder folder: String, fileExtension: String = "db", method: RotationMethod = .copy,
        keys: (String) throws -> (old: Encryption, new: Encryption)
    ) throws -> [RotationResult] {
        guard let directory = opendir(folder) else {
            throw fileSystemError("cannot list the folder \(folder)")
        }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix("." + fileExtension) && !name.hasPrefix(".") { names.append(name) }
        }
        closedir(directory)
        return names.sorted().map { name in
            let path = folder + "/" + name
            do {
                let (old, new) = try keys(path)
                return rotateReporting(
                    RotationRequest(path: path, oldEncryption: old, newEncryption: new, method: method), progress: nil)
            } catch {
                return RotationResult(
                    path: path, method: method, error: asDatabaseError(error), keyState: .unknown, backupPath: nil,
                    duration: .zero)
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
        do {
            removeStaleTemporaryFiles(of: request.path)
            switch request.method {
            case .copy:
                backupPath = try rotateByCopy(request, progress: progress)
            case .inPlace:
                backupPath = try rotateInPlace(request)
            }
            try verifyRotated(request)
            return RotationResult(
                path: request.path, method: request.method, error: nil, keyState: .new, backupPath: backupPath,
                duration: clock.now - start)
        } catch {
            let state = keyState(of: request)
            return RotationResult(
                path: request.path, method: request.method, error: asDatabaseError(error), keyState: state,
                backupPath: backupPath, duration: clock.now - start)
        }
    }

    private static func rotateByCopy(
        _ request: RotationRequest, progress: ((BackupProgress) throws -> Void)?
    ) throws -> String? {
        guard let newKey = request.newEncryption.key else {
            throw refused("the new encryption has no key; decrypting is done with an export, not a rotation")
        }
        let lock = try lockDatabase(request)
        defer { lock.close() }
        let backupPath = try backUpOriginal(request, from: lock)

        let temporaryPath = request.path + rotationTemporaryMarker + randomSuffix()
        do {
            let target = try Connection.inMemory(encryption: request.newEncryption)
            let layoutsMatch = try lock.cipherLayout() == target.cipherLayout()
            target.close()
            if layoutsMatch {
                // The backup API keeps every byte of the file's structure (auto_vacuum, free pages, header).
                try lock.backup(toPath: temporaryPath, encryption: request.newEncryption, progress: progress)
            } else {
                try lock.exportEncrypted(to: temporaryPath, key: newKey, settings: request.newEncryption.settings)
            }
            // Both verified the copy with the new key and flushed it; the rename is the one moment of change.
            try atomicRename(from: temporaryPath, to: request.path)
        } catch {
            removeDatabaseFiles(atPath: temporaryPath)
            throw error
        }
        return backupPath
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
            throw DatabaseError(
                kind: .fileSystem, code: DatabaseError.SQLITE_CANTOPEN,
                message: "\(path) does not exist or is empty; nothing to rotate")
        }
        if OpenFiles.openCount(path: path) > 0 {
            throw refused("this process has other connections to \(path) open; close them first")
        }
        try refuseOtherProcesses(path)
        let lock = try Connection(
            path: path, encryption: request.oldEncryption,
            options: OpenOptions(mode: .readWrite, busyTimeout: request.lockTimeout))
        do {
            // EXCLUSIVE locking mode keeps the lock after COMMIT, and in WAL mode avoids the shared-memory index.
            try lock.execute("PRAGMA locking_mode = EXCLUSIVE")
            do {
                try lock.execute("BEGIN EXCLUSIVE")
                try lock.execute("COMMIT")
            } catch let error as DatabaseError where error.resultCode == DatabaseError.SQLITE_BUSY {
                throw DatabaseError(
                    kind: .invalidState, code: DatabaseError.SQLITE_BUSY,
                    message: "\(path) is busy: another connection holds a lock and did not release it within"
                        + " \(request.lockTimeout); nothing was changed")
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

    private static func refuseOtherProcesses(_ path: String) throws {
        let holders = OtherProcesses.holding(paths: [path, path + "-wal"])
        guard holders.isEmpty else {
            throw DatabaseError(
                kind: .invalidState, code: DatabaseError.SQLITE_BUSY,
                message: "\(path) is open in other processes (PID \(holders.map(String.init).joined(separator: ", ")));"
                    + " stop them first: they would keep using the old file; nothing was changed")
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

    /// The new key opens the database and passes `quick_check`; the old key does not open it.
    private static func verifyRotated(_ request: RotationRequest) throws {
        let rotated = try Connection(path: request.path, encryption: request.newEncryption)
        try rotated.quickCheck()
        rotated.close()
        if Connection.keyOpens(path: request.path, options: OpenOptions(), encryption: request.oldEncryption) {
            throw DatabaseError(
                kind: .verificationFailed, code: DatabaseError.SQLITE_ERROR,
                message: "the old key still opens \(request.path) after the rotation (were both keys the same?)")
        }
        // Stale shared-memory index of the old file; rebuilt by the next opener.
        if regularFileSize(atPath: request.path + "-wal") == 0 {
            unlink(request.path + "-wal")
            unlink(request.path + "-shm")
        }
    }

    private static func keyState(of request: RotationRequest) -> RotationResult.KeyState {
        var options = OpenOptions()
        options.busyTimeout = .milliseconds(100)
        let opensOld = Connection.keyOpens(path: request.path, options: options, encryption: request.oldEncryption)
        let opensNew = Connection.keyOpens(path: request.path, options: options, encryption: request.newEncryption)
        switch (opensOld, opensNew) {
        case (true, false): return .old
        case (false, true): return .new
        case (false, false): return .neither
        case (true, true): return .unknown
        }
    }

    static let rotationTemporaryMarker = ".sqlcipherkit-rotate-"

    /// Temporary files of an interrupted rotation of this database (never the only copy of anything: until the
    /// rename the original exists, after it the temporary name does not).
    private static func removeStaleTemporaryFiles(of path: String) {
        let folder = parentFolder(of: path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let directory = opendir(folder) else { return }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if entryName.hasPrefix(name + rotationTemporaryMarker) {
                unlink(folder + "/" + entryName)
            }
        }
    }

    private static func refused(_ message: String) -> DatabaseError {
        DatabaseError(kind: .invalidState, code: DatabaseError.SQLITE_MISUSE, message: "rotation refused: \(message)")
    }

    static func asDatabaseError(_ error: any Error) -> DatabaseError {
        (error as? DatabaseError)
            ?? DatabaseError(kind: .invalidState, code: DatabaseError.SQLITE_ERROR, message: "\(error)")
    }
}
