#if LiveRotation  // trait LiveRotation (Package.swift), which Services turns on
import CoreMetrics
import Foundation
import Logging
import SQLCipherKit
#if Replication
import SQLCipherKitReplication
#endif

/// Key rotation while the database keeps serving: an encrypted ``DatabasePool`` opened from a key file, and the
/// watch on that key file that hands a new key over to the pool. It needs no swift-service-lifecycle: start ``run()``
/// in a task of your own (a Vapor app, a plain program) and cancel it to stop; or call ``checkNow()`` when you choose.
/// `DatabaseService` (SQLCipherKitServices) uses one for its live rotation; this module (product
/// `SQLCipherKitLiveRotation`, trait `LiveRotation`) links no swift-service-lifecycle.
///
/// ```swift
/// let rotation = try LiveKeyRotation(path: "app.db", keyFile: "/run/secrets/app.key")
/// let watcher = Task { await rotation.run() }       // looks for <key file>.next every second
/// // … serve requests with rotation.pool …
/// watcher.cancel()
/// await watcher.value
/// rotation.pool.close()
/// ```
///
/// **Files.** The operator writes the new key to ``pendingKeyFile`` (`<keyFile>.next`, mode 0600, the key-file
/// format; write it under another name, then `mv`). At its next check the hand-over runs, one step at a time, each
/// step one atomic file operation:
/// 1. takes the hand-over turn (an `flock` on the key folder: two processes on one database never hand over at once);
/// 2. reads the pending file **once**, by descriptor, and keeps those bytes; a file that is not a key, is the
///    current key, or is a passphrase below ``EncryptionKey/minimumRotationPassphraseByteCount`` bytes (unless
///    ``Configuration/allowsWeakPassphrase``) is renamed ``rejectedKeyFile`` and nothing else changes;
/// 3. records those bytes in ``rotatingKeyFile`` (`<keyFile>.rotating`, mode 0600, flushed) before anything changes;
/// 4. rekeys the pool behind its barrier with those bytes: new requests wait (they are not failed), requests in
///    flight finish, readers close, the writer rekeys and verifies every page;
/// 5. renames ``rotatingKeyFile`` over ``keyFile`` (the verified bytes, not whatever the pending file holds now),
///    then removes the pending file only if it is still the file that was read: a key handed over meanwhile is the
///    next hand-over.
///
/// After a failed rekey a fresh probe decides which key opens the database, and the rotation acts on that: the pool
/// stays open on the key that works, the key that opens the file is never renamed "rejected", and a rotation that
/// did not take is retried (with a growing pause) while the pending file stays. A reader in another process that
/// keeps the WAL from being truncated does not fail the rotation: the truncate is retried at every check.
///
/// **Crash recovery.** At start, and at every check, the key that opens the database is found from the files:
/// ``keyFile``, then ``rotatingKeyFile`` (a hand-over interrupted after its rekey is finished), then
/// ``pendingKeyFile``. When another process rotated the key, ``keyFile`` changes and opens the database: the pool
/// reopens with it. When ``keyFile`` changes and no longer opens the database, the pool keeps its key and writes it
/// to ``inUseKeyFile`` (mode 0600, flushed), so that a file on disk still opens the database.
///
/// **Replication.** A `Replicator` on the same pool must be paused around every key change (a rekey refuses while
/// its connection is open): pass it to `pausesReplication(_:)` (with the trait Replication on).
///
/// - Warning: The pool's key is kept in memory for the life of this object (as the pool keeps it). Every key file
///   named here is a key: protect the folder that holds them as you protect the key file.
public final class LiveKeyRotation: Sendable {
    /// How the pool is opened and the key file watched.
    public struct Configuration: Sendable {
        /// Readers, cipher settings and open options of the pool.
        public var pool: DatabasePool.Configuration
        /// How often ``LiveKeyRotation/run()`` checks the key files.
        public var checkInterval: Duration
        /// Appended to the key file's path to name the pending key file.
        public var pendingKeySuffix: String
        /// Accept a pending passphrase shorter than ``EncryptionKey/minimumRotationPassphraseByteCount`` bytes, or
        /// with a line break inside (`false` by default: such text is more likely a mistake than a key).
        public var allowsWeakPassphrase: Bool
        /// How long opening waits for another process's hand-over on the same key folder.
        public var handOverWaitTimeout: Duration
        /// The `database` dimension of the rotation metrics (`sqlcipherkit_key_rotations_total`,
        /// `sqlcipherkit_key_rotation_duration_seconds`): a name, not a path.
        public var metricsName: String
        /// Where rotations and their failures are reported (never key material).
        public var logger: Logger
        /// The metrics backend; by default the one bootstrapped with `MetricsSystem.bootstrap`.
        public var metricsFactory: any MetricsFactory
        /// What a refused weak passphrase's error tells the caller to set (the owner's option name).
        package var weakPassphraseRemedy = "to accept it anyway, set LiveKeyRotation.Configuration.allowsWeakPassphrase"

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - pool: Readers, cipher settings and open options of the pool.
        ///   - checkInterval: How often ``LiveKeyRotation/run()`` checks (1 s by default).
        ///   - pendingKeySuffix: Names the pending key file (`<keyFile>.next` by default).
        ///   - allowsWeakPassphrase: Accept a short or multi-line pending passphrase.
        ///   - handOverWaitTimeout: How long opening waits for another process's hand-over.
        ///   - metricsName: The `database` dimension of the metrics.
        ///   - logger: Where rotations are reported.
        ///   - metricsFactory: The metrics backend.
        public init(
            pool: DatabasePool.Configuration = DatabasePool.Configuration(),
            checkInterval: Duration = .seconds(1),
            pendingKeySuffix: String = ".next",
            allowsWeakPassphrase: Bool = false,
            handOverWaitTimeout: Duration = .seconds(60),
            metricsName: String = "default",
            logger: Logger = Logger(label: "sqlcipherkit.key-rotation"),
            metricsFactory: any MetricsFactory = MetricsSystem.factory
        ) {
            self.pool = pool
            self.checkInterval = checkInterval
            self.pendingKeySuffix = pendingKeySuffix
            self.allowsWeakPassphrase = allowsWeakPassphrase
            self.handOverWaitTimeout = handOverWaitTimeout
            self.metricsName = metricsName
            self.logger = logger
            self.metricsFactory = metricsFactory
        }
    }

    /// The pool, open with the key that opens the database; use it (or an SQLKit/Fluent driver over it) for all
    /// database work. Closing it is the caller's (after ``run()`` has ended).
    public let pool: DatabasePool
    /// The database path.
    public var path: String { pool.path }
    /// The file holding the current key.
    public var keyFile: String { handOver.keyFile }
    /// Where an operator puts a new key to have it rotated in (`<keyFile>` + ``Configuration/pendingKeySuffix``).
    public var pendingKeyFile: String { handOver.pendingKeyFile }
    /// Where a hand-over records the key being rotated in (`<keyFile>.rotating`), from the rekey until it is renamed
    /// over ``keyFile``.
    public var rotatingKeyFile: String { handOver.rotatingKeyFile }
    /// Where a pending key that was refused goes (`<pendingKeyFile>.rejected`); the log says why.
    public var rejectedKeyFile: String { handOver.rejectedKeyFile }
    /// Where the key in use is written when ``keyFile`` stops opening the database (`<keyFile>.in-use`):
    /// replaced by hand with another key, removed, or made unreadable. Without it, the key would be in memory only
    /// and lost with the process.
    ///
    /// The copy is created with mode 0600 and flushed (the file, then its folder) before it is logged, at error
    /// level, that it was written and what to do: move it over the key file (`mv`), or hand a new key over through
    /// ``pendingKeyFile``. Whatever already is at this name (another key, a link, anything that is not a copy of the
    /// key in use) is never replaced nor followed: the copy then goes to `<keyFile>.in-use.2`, up to `.in-use.9`,
    /// and the log names both. Once the key file opens the database again with the same key, the copy is removed;
    /// after a hand-over to another key it is kept (it opens backups taken before). Opening never reads the copy
    /// on its own: while the key file does not open the database, ``init(path:keyFile:configuration:)`` fails,
    /// naming the copy.
    ///
    /// - Warning: The copy is a key file like the others: back it up, move it or delete it with the same care.
    public var inUseKeyFile: String { handOver.inUseKeyFile }

    private let configuration: Configuration
    let handOver: KeyHandOver
    private let metrics: KeyRotationMetrics
    private let state: Locked<State>
    #if Replication
    /// Paused around every key change (``pausesReplication(_:)``).
    private let replicator = Locked<Replicator?>(nil)
    #endif

    /// What the rotation knows between checks. The key is the pool's: kept in memory (as the pool keeps it), so a
    /// connection never reads a key file that is being replaced.
    private struct State {
        var key: EncryptionKey
        var keyFileIdentity: EncryptionKey.KeyFileIdentity?
        var isChecking = false
        var isWALTruncatePending = false
        var failedAttemptCount = 0
        var nextAttempt: ContinuousClock.Instant?
        /// Set while the key file does not open the database (the pool's key is then what does).
        var keyFileIncident: KeyFileIncident?
    }

    /// The key file stopped opening the database: where the key in use was written back, or why it could not be.
    private struct KeyFileIncident {
        /// The copy of the key in use, once one is on disk; `nil`: the key is in memory only (tried at every check).
        var copy: (path: String, identity: EncryptionKey.KeyFileIdentity?)?
        /// The last reason writing the copy failed, so a failure that repeats at every check is logged once.
        var lastFailure: String?
    }

    private var logger: Logger { configuration.logger }
    private var metadata: Logger.Metadata { ["path": "\(path)", "keyFile": "\(keyFile)"] }

    /// Opens (or creates) the database with the key in `keyFile`, ready to rotate it.
    ///
    /// When the key file does not open the database, a hand-over was interrupted: the key in ``rotatingKeyFile``,
    /// then the one in ``pendingKeyFile``, is tried, and the one that opens the database is written into the key
    /// file (a hand-over another process is running on the same key folder is waited for, up to
    /// ``Configuration/handOverWaitTimeout``). This is why the rotation opens the pool itself rather than taking
    /// one: which key opens the file is decided from the key files, and the rotation must know the pool's key.
    ///
    /// Nothing is watched until ``run()`` or ``checkNow()``, except that work failing with "file is not a
    /// database" (another process rotated the key) triggers a check at once.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - keyFile: The file holding its key (`EncryptionKey(contentsOf:)` format, mode 0600).
    ///   - configuration: How to open the pool and watch the key file.
    /// - Throws: The errors of ``DatabasePool/init(path:keyProvider:configuration:)`` and of the key file;
    ///   ``DatabaseError/busy`` when another process held the hand-over turn past
    ///   ``Configuration/handOverWaitTimeout``; ``DatabaseError/wrongKey`` naming every file tried when none opens
    ///   the database, and the copy of a key in use (``inUseKeyFile``) that does, if there is one (it is never used
    ///   on its own).
    public init(path: String, keyFile: String, configuration: Configuration = Configuration()) throws {
        self.configuration = configuration
        let handOver = KeyHandOver(keyFile: keyFile, pendingSuffix: configuration.pendingKeySuffix)
        self.handOver = handOver
        metrics = KeyRotationMetrics(database: configuration.metricsName, factory: configuration.metricsFactory)
        let (pool, key) = try Self.openPool(path: path, handOver: handOver, configuration: configuration)
        self.pool = pool
        state = Locked(State(key: key, keyFileIdentity: EncryptionKey.KeyFileIdentity(path: keyFile)))
        // Work failing with "file is not a database": another process rotated the key. Look for it now rather
        // than at the next check.
        pool.observeKeyRejections { [weak self] in
            guard let self else { return }
            Task { _ = try? await self.check(attemptsHandOver: false) }
        }
    }

    #if Replication
    /// Pauses `replicator` (which must replicate ``pool``) around every key change: a rekey refuses while the
    /// replicator's connection is open, and a key another process rotated in must reach that connection too.
    /// Replication ships what it can first, and starts again on the key that then opens the database; a rotated
    /// database starts a new generation.
    ///
    /// - Parameter replicator: The replicator of ``pool``; it replaces one given before.
    public func pausesReplication(_ replicator: Replicator) {
        self.replicator.withLock { $0 = replicator }
    }
    #endif

    // MARK: - Opening

    private static func openPool(
        path: String, handOver: KeyHandOver, configuration: Configuration
    ) throws -> (DatabasePool, EncryptionKey) {
        func open(_ key: EncryptionKey) throws -> DatabasePool? {
            do {
                return try DatabasePool(path: path, keyProvider: .fixed(key), configuration: configuration.pool)
            } catch let error as DatabaseError where error.kind == .wrongKey {
                return nil
            }
        }
        let logger = configuration.logger
        let current = try handOver.currentKey()
        if let pool = try open(current) {
            // A recorded hand-over whose rekey never happened (the key file opens the database) is cleared, under
            // the turn: another replica may be between its record and its rekey.
            if (try? handOver.rotatingKey()) != nil, let turn = try handOver.takeTurn(waiting: .zero) {
                defer { turn.release() }
                if let rotating = try? handOver.rotatingKey(),
                   KeyState.probe(
                    path: path, old: .key(current, settings: configuration.pool.settings),
                    new: .key(rotating, settings: configuration.pool.settings), depth: .firstPage) == .old {
                    handOver.removeRotating()
                    logger.notice(
                        "cleared a recorded hand-over whose rekey never happened: the key file opens the database",
                        metadata: ["path": "\(path)", "rotatingKeyFile": "\(handOver.rotatingKeyFile)"])
                }
            }
            return (pool, current)
        }
        guard let turn = try handOver.takeTurn(waiting: configuration.handOverWaitTimeout) else {
            throw DatabaseError(
                .busy,
                "the key file \(handOver.keyFile) does not open \(path), and another process is handing a key over in"
                    + " \(handOver.folder) (it held the turn for \(configuration.handOverWaitTimeout)); try again")
        }
        defer { turn.release() }
        // Under the turn, from the files as they are now (another replica may have finished meanwhile).
        let settled = try handOver.currentKey()
        if let pool = try open(settled) { return (pool, settled) }
        if let rotating = try handOver.rotatingKey(), let pool = try open(rotating) {
            try handOver.retireRotating()
            logger.notice(
                "finished an interrupted hand-over: the recorded key opens the database and is now in the key file",
                metadata: ["path": "\(path)", "keyFile": "\(handOver.keyFile)"])
            return (pool, rotating)
        }
        if let pending = try? handOver.readPending(), let pool = try open(pending.key) {
            try handOver.replaceKeyFile(with: pending.key)
            handOver.removePending(ifStill: pending.identity)
            logger.notice(
                "finished an interrupted hand-over: the pending key opens the database and is now in the key file",
                metadata: ["path": "\(path)", "keyFile": "\(handOver.keyFile)"])
            return (pool, pending.key)
        }
        throw DatabaseError(
            .wrongKey,
            "none of the key files opens \(path): \(handOver.keyFile), \(handOver.rotatingKeyFile) (a hand-over in"
                + " progress) and \(handOver.pendingKeyFile) (a pending key) were tried, those that exist"
                + inUseCopiesAdvice(path: path, handOver: handOver, settings: configuration.pool.settings))
    }

    /// What the start error says about copies of a key in use (``inUseKeyFile``): which opens the database, and how to
    /// put it back. They are never used on their own: the key file is where the operator says which key the database
    /// has, and a service that quietly started on a copy would keep running on a key file that does not open its
    /// database (the next replica, backup or `sqlcipherkit verify --key-file` would fail on it instead).
    private static func inUseCopiesAdvice(path: String, handOver: KeyHandOver, settings: CipherSettings) -> String {
        let copies = handOver.existingInUseCopies
        guard !copies.isEmpty else { return "" }
        let opening = copies.first { copy in
            guard let key = try? EncryptionKey(contentsOf: copy) else { return false }
            return KeyState.probe(
                path: path, old: .key(key, settings: settings), new: .key(key, settings: settings), depth: .firstPage
            ) == .both
        }
        if let opening {
            return "; \(opening) opens it: a live key rotation (LiveKeyRotation, DatabaseService) wrote it there, with"
                + " the key it was using, when the key file stopped opening the database. It is not used on its own: if"
                + " the key file's content is a mistake, put it back with `mv \(opening) \(handOver.keyFile)`"
        }
        return "; \(copies.joined(separator: ", ")) (a copy of a key in use, written by a live key rotation) exist but do"
            + " not open it either"
    }

    // MARK: - Checking

    /// Checks the key files every ``Configuration/checkInterval`` until the task running it is cancelled, then
    /// returns (the pool stays open: closing it is the caller's). A check that fails is logged and counted where it
    /// failed; the pool goes on with the key that opens the database, and a hand-over that failed is tried again
    /// after a growing pause (1 s, 2 s, 4 s, … up to 5 minutes) while the pending file stays.
    ///
    /// ```swift
    /// let watcher = Task { await rotation.run() }
    /// // at shutdown:
    /// watcher.cancel()
    /// await watcher.value
    /// ```
    public func run() async {
        await run(every: configuration.checkInterval, onEachCheck: {})
    }

    /// ``run()`` at `interval`, calling `onEachCheck` before each check (`DatabaseService` samples its gauges).
    package func run(every interval: Duration, onEachCheck: @Sendable () -> Void) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return  // cancelled
            }
            onEachCheck()
            let isDue = state.withLock { state in state.nextAttempt.map { ContinuousClock.now >= $0 } ?? true }
            do {
                _ = try await check(attemptsHandOver: isDue)
            } catch {
                // Logged and counted where it happened; the pool goes on with the key that works.
            }
        }
    }

    /// Runs one check now: settles a recorded hand-over, reopens the pool when another process changed the key,
    /// writes the key in use back when the key file stopped opening the database, retries a WAL truncate left after
    /// a rotation, and hands the pending key over if there is one (also when an earlier attempt failed and its
    /// pause has not ended).
    ///
    /// The blocking work (key derivation, the rekey and its verification of every page) runs off Swift's
    /// cooperative thread pool.
    ///
    /// - Returns: `true` when this call rotated a key in; `false` when there was nothing to rotate, another check
    ///   is running, or another process holds the hand-over turn.
    /// - Throws: The error that stopped the hand-over; the pool then keeps the key that opens the database, and
    ///   the pending file stays for the next check (or is renamed ``rejectedKeyFile`` when it cannot be a key:
    ///   ``DatabaseError/invalidKey``).
    @discardableResult
    public func checkNow() async throws -> Bool {
        if let reason = refusesChecks.withLock({ $0 }) { throw DatabaseError(.invalidState, reason) }
        return try await check(attemptsHandOver: true)
    }

    /// While set, ``checkNow()`` refuses with this reason: a service that follows a replica must not rekey its copy
    /// (the copy's key is the primary's, and only the follower writes it).
    package let refusesChecks = Locked<String?>(nil)

    private func check(attemptsHandOver: Bool) async throws -> Bool {
        let isMine = state.withLock { state in
            defer { state.isChecking = true }
            return !state.isChecking
        }
        guard isMine else { return false }
        defer { state.withLock { $0.isChecking = false } }
        // Most checks find nothing to do: what the files say is read here, with a few `stat` calls, and only work
        // leaves the task, on a thread of its own (a hand-over queued behind the process's other dispatch work
        // would wait for all of it).
        let work = keyWork(attemptsHandOver: attemptsHandOver)
        guard work.hasAny else { return false }
        #if Replication
        if let replicator = replicator.withLock({ $0 }), work.hasKeyChange {
            // A rekey refuses while the replicator's connection is open, and a key another replica rotated in must
            // reach that connection too: replication pauses (shipping what it can first) and starts again on the
            // key that then opens the database. A rotated database starts a new generation.
            return try await replicator.withReplicationPaused(for: "a key change (live rotation)") { [self] in
                try await offCooperativePool(onThreadOfItsOwn: "sqlcipherkit-key-rotation") { [self] in
                    try checkKeys(keyWork(attemptsHandOver: attemptsHandOver))
                }
            }
        }
        #endif
        return try await offCooperativePool(onThreadOfItsOwn: "sqlcipherkit-key-rotation") { [self] in
            try checkKeys(keyWork(attemptsHandOver: attemptsHandOver))
        }
    }

    /// What a check finds to do, from the key files' names and identities and the rotation's own state.
    private struct KeyWork {
        /// A `.rotating` record of a hand-over that did not finish.
        var hasRecord: Bool
        /// The key file is not the one the pool's key was read from.
        var keyFileChanged: Bool
        /// A pending key to hand over (when this check attempts one).
        var hasPending: Bool
        /// The key file stopped opening the database and the key in use is nowhere on disk yet.
        var isKeyOnlyInMemory: Bool
        /// A WAL truncate left after a rotation.
        var isTruncatePending: Bool

        /// Work that changes which key opens the database (replication pauses for it).
        var hasKeyChange: Bool { hasRecord || keyFileChanged || hasPending }
        var hasAny: Bool { hasKeyChange || isKeyOnlyInMemory || isTruncatePending }
    }

    private func keyWork(attemptsHandOver: Bool) -> KeyWork {
        let (knownIdentity, isTruncatePending, isKeyOnlyInMemory) = state.withLock {
            ($0.keyFileIdentity, $0.isWALTruncatePending, $0.keyFileIncident.map { $0.copy == nil } ?? false)
        }
        return KeyWork(
            hasRecord: FileManager.default.fileExists(atPath: handOver.rotatingKeyFile),
            keyFileChanged: EncryptionKey.KeyFileIdentity(path: handOver.keyFile) != knownIdentity,
            hasPending: attemptsHandOver && handOver.hasPendingKey,
            isKeyOnlyInMemory: isKeyOnlyInMemory,
            isTruncatePending: isTruncatePending)
    }

    private func checkKeys(_ work: KeyWork) throws -> Bool {
        if work.isTruncatePending { retryWALTruncate() }
        guard work.hasKeyChange || work.isKeyOnlyInMemory else { return false }
        guard let turn = try handOver.takeTurn() else {
            // Another replica is handing a key over: its recorded key may already be the one that opens the file.
            adoptWithoutTurn()
            return false
        }
        defer { turn.release() }
        if work.hasRecord { try settleRecordedHandOver() }
        if work.keyFileChanged {
            try adoptChangedKeyFile()
        } else if work.isKeyOnlyInMemory {
            writeKeyInUseBack(because: "the key file does not open the database")
        }
        guard work.hasPending else { return false }
        return try handOverPendingKey()
    }

    private var settings: CipherSettings { configuration.pool.settings }

    /// A `<keyFile>.rotating` left by a hand-over that did not finish (a crash, or another replica mid-way, which
    /// cannot be: it would hold the turn).
    private func settleRecordedHandOver() throws {
        let current = state.withLock { $0.key }
        guard let recorded = try handOver.rotatingKey() else { return }
        switch KeyState.probe(
            path: path, old: .key(current, settings: settings), new: .key(recorded, settings: settings), depth: .firstPage
        ) {
        case .old:
            handOver.removeRotating()
            logger.notice("cleared a recorded hand-over whose rekey never happened", metadata: metadata)
        case .new:
            try pool.reopen(keyProvider: .fixed(recorded))
            try handOver.retireRotating()
            adopt(recorded)
            logger.notice(
                "finished an interrupted hand-over: the recorded key opens the database and is now in the key file",
                metadata: metadata)
        case let opening:
            logger.warning(
                .init(stringLiteral: "a hand-over is recorded, but which key opens the database could not be decided (\(opening)); left"
                    + " as it is until the next check"), metadata: metadata)
        }
    }

    /// While another process holds the turn: reopens the pool with the key that process recorded (or wrote into the
    /// key file) once that key opens the database and the pool's does not. Reads files, changes none.
    private func adoptWithoutTurn() {
        let current = state.withLock { $0.key }
        let candidates = [try? handOver.rotatingKey(), try? handOver.currentKey()].compactMap { $0 }
        for candidate in candidates where !candidate.isSameKey(as: current) {
            guard probe(current, candidate) == .new else { continue }
            do {
                try pool.reopen(keyProvider: .fixed(candidate))
            } catch {
                continue
            }
            state.withLock { $0.key = candidate }
            logger.notice(
                "another process rotated the key: the pool reopened with it (the process holding the hand-over turn settles the key files)",
                metadata: metadata)
            return
        }
    }

    /// Which of two keys opens the database, from page 1 (enough to tell which key the file is under).
    private func probe(_ current: EncryptionKey, _ candidate: EncryptionKey) -> KeyState {
        KeyState.probe(
            path: path, old: .key(current, settings: settings), new: .key(candidate, settings: settings),
            depth: .firstPage, busyTimeout: .seconds(1))
    }

    /// The key file was replaced by someone else: another replica that rotated the key, or an operator.
    private func adoptChangedKeyFile() throws {
        let current = state.withLock { $0.key }
        let fileKey: EncryptionKey
        let identity: EncryptionKey.KeyFileIdentity
        do {
            (fileKey, identity) = try EncryptionKey.readKeyFile(atPath: handOver.keyFile)
        } catch {
            // Removed, made readable by others, not a file: no file the rotation accepts holds the key any more.
            state.withLock { $0.keyFileIdentity = EncryptionKey.KeyFileIdentity(path: handOver.keyFile) }
            let reason = (error as? DatabaseError)?.message ?? "\(error)"
            keyFileStoppedOpening(because: "the key file changed and cannot be used (\(reason))")
            return
        }
        if fileKey.isSameKey(as: current) {
            state.withLock { $0.keyFileIdentity = identity }
            keyFileOpensAgain(with: fileKey)
            return
        }
        switch probe(current, fileKey) {
        case .new:
            try pool.reopen(keyProvider: .fixed(fileKey))
            adopt(fileKey, identity: identity)
            logger.notice(
                .init(stringLiteral: "the key file changed and its key opens the database (another replica rotated it): the pool reopened"
                    + " with it"), metadata: metadata)
        case .old:
            state.withLock { $0.keyFileIdentity = identity }
            keyFileStoppedOpening(because: "the key file changed, but its key does not open the database")
        case let opening:
            logger.warning(
                "the key file changed; which key opens the database could not be decided (\(opening)); checking again later",
                metadata: metadata)
        }
    }

    private func handOverPendingKey() throws -> Bool {
        let started = ContinuousClock.now
        let pending: KeyHandOver.Pending
        do {
            guard let read = try handOver.readPending() else { return false }
            pending = read
        } catch {
            try refuse(error.identity, error.error)
        }
        let current = state.withLock { $0.key }
        if pending.key.isSameKey(as: current) {
            handOver.removePending(ifStill: pending.identity)
            logger.notice("the pending key is the key in use; the pending key file was removed", metadata: metadata)
            return false
        }
        do {
            try pending.key.checkStrongEnoughForRotation(
                allowsWeakPassphrase: configuration.allowsWeakPassphrase,
                remedy: configuration.weakPassphraseRemedy)
        } catch let error as DatabaseError {
            try refuse(pending.identity, error)
        }
        // From here the bytes in memory are the new key: recorded first, so a crash at any later step leaves a
        // file that holds the key the database may now open with.
        do {
            try handOver.recordRotating(pending.key)
        } catch {
            failed(error, started, "could not record the hand-over; nothing changed, and the pending key stays")
            throw error
        }
        logger.debug("recorded the key being handed over; rekeying", metadata: metadata)
        let outcome: Connection.RekeyOutcome
        do {
            outcome = try pool.rekey(to: .fixed(pending.key))
        } catch {
            let opening = KeyState.probe(
                path: path, old: .key(current, settings: settings), new: .key(pending.key, settings: settings))
            switch opening {
            case .new:
                logger.warning(
                    "the rekey reported an error, but the database opens with the new key only: the hand-over goes on",
                    metadata: metadata.merging(["error": "\(error)"]) { $1 })
                outcome = Connection.RekeyOutcome(isWALTruncated: false)
            case .old:
                handOver.removeRotating()
                failed(error, started, "the database keeps its current key; the pending key stays and is tried again")
                throw error
            default:
                failed(
                    error, started,
                    "which key opens the database could not be decided (\(opening)); the hand-over stays recorded in"
                        + " \(rotatingKeyFile) and is settled at the next check")
                throw error
            }
        }
        try handOver.retireRotating()
        adopt(pending.key)
        if !handOver.removePending(ifStill: pending.identity) && handOver.hasPendingKey {
            logger.notice(
                "another key was handed over while this one was rotated in; it is handed over at the next check",
                metadata: metadata)
        }
        state.withLock { state in
            state.failedAttemptCount = 0
            state.nextAttempt = nil
            if !outcome.isWALTruncated { state.isWALTruncatePending = true }
        }
        metrics.rotation(succeeded: true, ContinuousClock.now - started)
        logger.notice("rotated the database key live", metadata: metadata)
        if !outcome.isWALTruncated {
            logger.warning(
                .init(stringLiteral: "the WAL could not be truncated yet (another connection or process is reading): until it is, the main"
                    + " file alone still holds pages under the old key; retried at every check"), metadata: metadata)
        }
        let holders = OtherProcesses.holding(paths: [path, path + "-wal"])
        if !holders.isEmpty {
            logger.warning(
                .init(stringLiteral: "other processes have the database open: their connections fail with \"file is not a database\" until"
                    + " they reopen with the new key (a DatabaseService or LiveKeyRotation does at its next check)"),
                metadata: metadata.merging(["pids": "\(holders.map(String.init).joined(separator: ","))"]) { $1 })
        }
        return true
    }

    /// Renames an unusable pending key file `<pending>.rejected` (when it is still the file that was read) and
    /// throws why.
    private func refuse(_ identity: EncryptionKey.KeyFileIdentity?, _ error: DatabaseError) throws -> Never {
        if let identity { handOver.rejectPending(ifStill: identity) }
        metrics.rotation(succeeded: false, .zero)
        logger.error(
            "refused the pending key; it was renamed \(handOver.rejectedKeyFile) and nothing changed",
            metadata: metadata.merging(["error": "\(error.message)"]) { $1 })
        throw error
    }

    /// Logs a failed attempt and pauses the next one (1 s, 2 s, 4 s, … up to 5 minutes).
    private func failed(_ error: any Error, _ started: ContinuousClock.Instant, _ what: String) {
        metrics.rotation(succeeded: false, ContinuousClock.now - started)
        let pause = state.withLock { state in
            state.failedAttemptCount += 1
            let pause = Duration.seconds(min(300, 1 << min(state.failedAttemptCount - 1, 9)))
            state.nextAttempt = ContinuousClock.now + pause
            return pause
        }
        logger.error(
            "live key rotation failed: \(what)",
            metadata: metadata.merging([
                "pendingKeyFile": "\(pendingKeyFile)", "error": "\(error)", "nextAttemptIn": "\(pause)",
            ]) { $1 })
    }

    /// The pool now uses `key`, which the key file holds (rotated in, or adopted from it).
    private func adopt(_ key: EncryptionKey, identity: EncryptionKey.KeyFileIdentity? = nil) {
        let identity = identity ?? EncryptionKey.KeyFileIdentity(path: handOver.keyFile)
        state.withLock { state in
            state.key = key
            state.keyFileIdentity = identity
        }
        keyFileOpensAgain(with: key)
    }

    // MARK: - A key file that stopped opening the database

    /// The key file no longer gives the key that opens the database: the pool keeps its key, and writes it back.
    private func keyFileStoppedOpening(because reason: String) {
        state.withLock { state in
            if state.keyFileIncident == nil { state.keyFileIncident = KeyFileIncident() }
            state.keyFileIncident?.copy = nil
        }
        writeKeyInUseBack(because: reason)
    }

    /// Writes the pool's key to ``inUseKeyFile`` (with the turn held), then logs where; or logs why it could not (at
    /// error level once per distinct reason; it is tried again at every check).
    private func writeKeyInUseBack(because reason: String) {
        let key = state.withLock { $0.key }
        let copyMetadata = metadata.merging(["inUseKeyFile": "\(inUseKeyFile)", "pendingKeyFile": "\(pendingKeyFile)"]) { $1 }
        do {
            let copy = try handOver.writeInUseCopy(of: key)
            state.withLock { state in
                state.keyFileIncident = KeyFileIncident(copy: (copy.path, copy.identity), lastFailure: nil)
            }
            let skipped = copy.skipped.isEmpty
                ? ""
                : " (\(copy.skipped.joined(separator: ", ")) left untouched: each is something other than a copy of this"
                    + " key, perhaps another key; remove it once you know what it is)"
            let written = copy.wasAlreadyThere
                ? "\(copy.path) already holds it\(skipped)"
                : "it was written to \(copy.path) (mode 0600, flushed to disk)\(skipped), and that file opens the database"
            logger.error(
                .init(stringLiteral: "\(reason); the pool keeps the key that does: \(written). Put it back with `mv \(copy.path)"
                    + " \(keyFile)` if the key file's new content was a mistake, or hand a new key over through"
                    + " \(pendingKeyFile); until then a restart fails"),
                metadata: copyMetadata.merging(["inUseKeyFile": "\(copy.path)"]) { $1 })
        } catch {
            let failure = (error as? DatabaseError)?.message ?? "\(error)"
            let isRepeated = state.withLock { state in
                defer { state.keyFileIncident?.lastFailure = failure }
                return state.keyFileIncident?.lastFailure == failure
            }
            logger.log(
                level: isRepeated ? .debug : .error,
                .init(stringLiteral: "\(reason); the pool keeps the key that does, but it is in memory only: writing it to"
                    + " \(inUseKeyFile) failed (\(failure)), and a crash now loses it. Make \(handOver.folder) writable"
                    + " or free space (it is tried again at every check), or hand a new key over through \(pendingKeyFile)"),
                metadata: copyMetadata)
        }
    }

    /// The key file holds the pool's key (`key`) again: ends an incident. The copy written back is removed when it
    /// holds the same key and is still the file written (nothing is lost: the key file has it); a copy of another key
    /// (the key file now holds a key rotated in since) is kept, because it opens backups taken before.
    private func keyFileOpensAgain(with key: EncryptionKey) {
        guard let incident = state.withLock({ state in defer { state.keyFileIncident = nil }; return state.keyFileIncident })
        else { return }
        guard let copy = incident.copy, EncryptionKey.KeyFileIdentity(path: copy.path) == copy.identity else {
            logger.notice("the key file opens the database again", metadata: metadata)
            return
        }
        if let copied = try? EncryptionKey(contentsOf: copy.path), copied.isSameKey(as: key),
           handOver.removeInUseCopy(at: copy.path, ifStill: copy.identity) {
            logger.notice(
                "the key file opens the database again; removed \(copy.path), the copy of the same key written while it did not",
                metadata: metadata)
        } else {
            logger.notice(
                .init(stringLiteral: "the key file opens the database again, with another key; \(copy.path) holds the key used before"
                    + " and is kept: it no longer opens the database, but it opens backups taken before. Remove it once"
                    + " it is kept with them"),
                metadata: metadata)
        }
    }

    private func retryWALTruncate() {
        do {
            try pool.writeWithoutTransaction { db in try db.checkpointTruncateWithoutWaiting() }
            state.withLock { $0.isWALTruncatePending = false }
            logger.notice(
                "the WAL is truncated: no page under the old key is left in the main file", metadata: metadata)
        } catch {
            logger.debug("the WAL truncate is still blocked by a reader", metadata: metadata)
        }
    }


    /// The key the pool uses now (for checks and backups).
    package var currentKey: EncryptionKey { state.withLock { $0.key } }

    /// The key a health check proves: the key file's; during a hand-over, the key recorded for it when that is the
    /// pool's key.
    package func keyForHealthCheck() throws -> EncryptionKey {
        let fileKey = try handOver.currentKey()
        let current = currentKey
        if !fileKey.isSameKey(as: current), let recorded = try? handOver.rotatingKey(), recorded.isSameKey(as: current) {
            return recorded
        }
        return fileKey
    }
}

#endif
