import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A caller waiting for something the coordinator hands over: admission, a reader, the end of in-flight work.
///
/// `@unchecked Sendable`: `continuation` and `result` are only touched with the coordinator's mutex held, except that
/// a synchronous waiter reads `result` after `semaphore.wait()` returns, which happens after the write that preceded
/// `signal()` (the semaphore orders them).
final class Waiter<Value: Sendable>: @unchecked Sendable {
    private var continuation: CheckedContinuation<Value, Error>?
    private var result: Result<Value, Error>?
    private let semaphore: DispatchSemaphore?
    private(set) var isFinished = false

    init(synchronous: Bool) {
        semaphore = synchronous ? DispatchSemaphore(value: 0) : nil
    }

    /// Called with the mutex held.
    func resume(_ outcome: Result<Value, Error>) {
        guard !isFinished else { return }
        isFinished = true
        if let continuation {
            self.continuation = nil
            continuation.resume(with: outcome)
        } else {
            result = outcome
            semaphore?.signal()
        }
    }

    /// Called with the mutex held: attaches the async continuation (resumed at once if already finished).
    func attach(_ continuation: CheckedContinuation<Value, Error>) {
        if isFinished, let result {
            continuation.resume(with: result)
        } else {
            self.continuation = continuation
        }
    }

    /// Blocks until resumed (synchronous waiters only; called without the mutex).
    func wait() throws -> Value {
        semaphore!.wait()
        return try result!.get()
    }
}

/// The admission and reader bookkeeping shared by ``DatabaseQueue`` and ``DatabasePool``.
///
/// - Work is admitted through a gate. ``close()`` shuts it; a rekey raises a barrier: new work waits until the
///   barrier is lowered, and the rekey waits until the work in flight has drained.
/// - Readers (pool only) are opened on demand up to a maximum, then reused; callers wait for a free one.
/// - A read whose pool is open, not behind a barrier, and has a free reader is admitted and given one without the
///   mutex (``ReaderParking``, `fastReads`); the mutex is for everything that waits, opens or closes.
final class AccessCoordinator: Sendable {
    let factory: ConnectionFactory
    let writer: SerializedConnection
    let maximumReaderCount: Int
    let label: String
    /// Where async reads run (pool only).
    let asyncReadExecution: DatabasePool.AsyncReadExecution
    /// How long the pool's recent reads of each kind took, to choose where the next async read runs.
    let readTiming = ReadTiming()
    /// Where the async reads that run in place take turns to start and end their read transactions.
    let readLockGate = ReadLockGate()
    /// Keeps the readers' WAL read lock taken between their reads (pool only; `nil` when turned off).
    let readLockHolder: ReadLockHolder?
    private let state: Locked<State>
    /// The free readers (pool only).
    private let parking: ReaderParking
    /// How many reads admitted without the mutex are in flight, plus ``blockedFlag`` while the coordinator is closed
    /// or behind a barrier: such a read then leaves at once and takes the mutex path, and the last one out while the
    /// flag is set wakes whoever waits for the work in flight to drain.
    private let fastReads = Atomic<Int>(0)
    private static let blockedFlag = 1 << 48
    /// Whether `readerWaiters` has a waiter: written with the mutex held, read without it by a read that gave its
    /// reader back into a slot (see ``exitReadingFast(_:)``).
    private let hasReaderWaiters = Atomic<Bool>(false)

    private struct State {
        var isClosed = false
        var areConnectionsClosed = false
        var isBarrierUp = false
        var inFlightCount = 0
        var admissionWaiters: [Waiter<Void>] = []
        var drainWaiters: [Waiter<Void>] = []
        var readerCount = 0
        var readerWaiters: [Waiter<SerializedConnection>] = []
    }

    init(
        factory: ConnectionFactory, writer: Connection, maximumReaderCount: Int, label: String,
        asyncReadExecution: DatabasePool.AsyncReadExecution = .adaptive, holdsReadLockBetweenReads: Bool = false
    ) {
        self.factory = factory
        self.readLockHolder =
            holdsReadLockBetweenReads && maximumReaderCount > 0 ? ReadLockHolder(factory: factory, label: label) : nil
        self.maximumReaderCount = maximumReaderCount
        self.asyncReadExecution = asyncReadExecution
        self.label = label
        self.state = Locked(State())
        self.parking = ReaderParking(capacity: maximumReaderCount)
        // The writer's queue identifies this coordinator; its readers' queues use the same owner.
        self.writer = SerializedConnection(writer, label: "\(label).writer", owner: ObjectIdentifier(factory))
    }

    var owner: ObjectIdentifier { ObjectIdentifier(factory) }

    func refuseReentrance() throws {
        if RunningOwner.isRunning(owner) {
            throw DatabaseError(
                .invalidState,
                "\(label) was used from inside one of its own read or write closures; that would deadlock."
                    + " Use the Connection the closure receives")
        }
    }

    private static func closedError() -> DatabaseError {
        DatabaseError(.connectionClosed, "the database was closed")
    }

    // MARK: - Admission

    func enter() throws {
        try refuseReentrance()
        try admit(synchronous: true)?.wait()
    }

    func enter() async throws {
        try refuseReentrance()
        guard let waiter = try admit(synchronous: false) else { return }
        try await wait(for: waiter) { state in state.admissionWaiters.removeAll { $0 === waiter } }
    }

    /// The locked part of ``enter()``: admits the caller (`nil`), or queues and returns a waiter while a barrier
    /// (rekey, close) is up. The waiter is made only on the path that waits: admission is on every call.
    private func admit(synchronous: Bool) throws -> Waiter<Void>? {
        try state.withLock { state in
            if state.isClosed { throw Self.closedError() }
            if state.isBarrierUp {
                let waiter = Waiter<Void>(synchronous: synchronous)
                state.admissionWaiters.append(waiter)
                return waiter
            }
            state.inFlightCount += 1
            return nil
        }
    }

    func exit() {
        let toClose = state.withLock { state in
            state.inFlightCount -= 1
            return afterLeaving(&state)
        }
        for connection in toClose { connection.close() }
    }

    /// How many reads admitted without the mutex are in flight.
    private var fastReadCount: Int { fastReads.load(ordering: .sequentiallyConsistent) & (Self.blockedFlag - 1) }

    /// With the mutex held, after work left: when nothing is in flight any more, wakes whoever waits for that, or
    /// returns the connections the caller must close.
    private func afterLeaving(_ state: inout State) -> [SerializedConnection] {
        guard state.inFlightCount == 0, fastReadCount == 0 else { return [] }
        if !state.drainWaiters.isEmpty {
            // A close() or a rekey waits for this moment and takes over (close() must return only once the
            // connections are closed, so it closes them itself).
            for waiter in state.drainWaiters { waiter.resume(.success(())) }
            state.drainWaiters.removeAll()
            return []
        }
        // close() was called from inside a closure and did not wait: the last one out closes.
        return takeConnectionsIfClosing(&state)
    }

    /// Suspends until `waiter` is resumed; on task cancellation removes it (with `remove`) and throws.
    private func wait<Value: Sendable>(
        for waiter: Waiter<Value>, remove: @escaping @Sendable (inout State) -> Void
    ) async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { _ in waiter.attach(continuation) }
            }
        } onCancel: {
            state.withLock { state in
                guard !waiter.isFinished else { return }
                remove(&state)
                waiter.resume(.failure(CancellationError()))
            }
        }
    }

    /// Told when work fails with `SQLITE_NOTADB` (see ``DatabasePool/observeKeyRejections(_:)``).
    let keyRejectionObserver = Locked<(@Sendable () -> Void)?>(nil)

    /// Passes a failure that says the key no longer opens the file to the observer.
    func noteFailure(_ error: any Error) {
        guard let error = error as? DatabaseError, error.resultCode == DatabaseError.SQLITE_NOTADB,
              let observer = keyRejectionObserver.withLock({ $0 })
        else { return }
        observer()
    }

    // MARK: - Running work on the writer

    /// Admits the caller, then runs `body` on the writer, blocking. The writer is lent to `body`: closing it (or
    /// rekeying it) there is refused with ``DatabaseError/callbackMisuse``, which would leave the pool without one.
    func onWriter<T>(_ body: (Connection) throws -> T) throws -> T {
        try enter()
        defer { exit() }
        readLockHolder?.suspend()
        defer { readLockHolder?.resume() }
        return try writer.sync { db in try db.runLent(.writerClosure) { try body(db) } }
    }

    /// Admits the caller, then runs `body` on the writer's queue, suspending (the writer lent as above).
    func onWriter<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        try await enter()
        defer { exit() }
        readLockHolder?.suspend()
        defer { readLockHolder?.resume() }
        return try await writer.async { db in try db.runLent(.writerClosure) { try body(db) } }
    }

    // MARK: - Readers

    private enum ReaderSlot {
        case ready(SerializedConnection)
        case open
        case wait(Waiter<SerializedConnection>)
    }

    func acquireReader() throws -> SerializedConnection {
        switch try reserveReader(synchronous: true) {
        case .ready(let reader): return reader
        case .open: return try openReader()
        case .wait(let waiter): return try waiter.wait()
        }
    }

    func acquireReader() async throws -> SerializedConnection {
        switch try reserveReader(synchronous: false) {
        case .ready(let reader): return reader
        case .open: return try openReader()
        case .wait(let waiter):
            return try await wait(for: waiter) { [self] state in removeReaderWaiter(waiter, &state) }
        }
    }

    /// Takes a free reader, or the right to open one, or a place in the queue (the waiter is made only then).
    private func reserveReader(synchronous: Bool) throws -> ReaderSlot {
        try state.withLock { state in
            if state.isClosed { throw Self.closedError() }
            return reserveReader(&state, synchronous: synchronous)
        }
    }

    /// The locked part of ``reserveReader(synchronous:)``.
    private func reserveReader(_ state: inout State, synchronous: Bool) -> ReaderSlot {
        if let reader = parking.take() { return .ready(reader) }
        if state.readerCount < maximumReaderCount {
            state.readerCount += 1
            return .open
        }
        let waiter = Waiter<SerializedConnection>(synchronous: synchronous)
        state.readerWaiters.append(waiter)
        hasReaderWaiters.store(true, ordering: .sequentiallyConsistent)
        // A read that gave its reader back without the mutex after the take above, and before the flag was set,
        // did not see this waiter: look once more (it looks for waiters after parking, so one of the two sees it).
        if let reader = parking.take() {
            state.readerWaiters.removeLast()
            updateHasReaderWaiters(state)
            return .ready(reader)
        }
        return .wait(waiter)
    }

    private func updateHasReaderWaiters(_ state: State) {
        hasReaderWaiters.store(!state.readerWaiters.isEmpty, ordering: .sequentiallyConsistent)
    }

    /// Removes a waiter for a reader (its task was cancelled).
    private func removeReaderWaiter(_ waiter: Waiter<SerializedConnection>, _ state: inout State) {
        state.readerWaiters.removeAll { $0 === waiter }
        updateHasReaderWaiters(state)
    }

    private func openReader() throws -> SerializedConnection {
        do {
            let connection = try factory.open(readOnly: true)
            return SerializedConnection(connection, label: "\(label).reader", owner: owner)
        } catch {
            state.withLock { state in
                state.readerCount -= 1
                // A waiter counted on this reader: pass the failure on rather than leave it waiting.
                if !state.readerWaiters.isEmpty {
                    state.readerWaiters.removeFirst().resume(.failure(error))
                    updateHasReaderWaiters(state)
                }
            }
            throw error
        }
    }

    // MARK: - Reads (admission and a reader together)

    /// How a read is admitted: at once with a reader (or the right to open one, or a place in the readers' queue),
    /// or behind a rekey's barrier.
    private enum ReadSlot {
        case admitted(ReaderSlot)
        case waitForAdmission(Waiter<Void>)
    }

    /// Admission and a reader in one critical section: a read takes the mutex twice (here and in
    /// ``exitReading(_:)``) instead of four times.
    private func reserveRead(synchronous: Bool) throws -> ReadSlot {
        try refuseReentrance()
        return try state.withLock { state in
            if state.isClosed { throw Self.closedError() }
            if state.isBarrierUp {
                let waiter = Waiter<Void>(synchronous: synchronous)
                state.admissionWaiters.append(waiter)
                return .waitForAdmission(waiter)
            }
            state.inFlightCount += 1
            return .admitted(reserveReader(&state, synchronous: synchronous))
        }
    }

    /// Admits the caller and gives it a reader, blocking; pair with ``exitReading(_:)``.
    func enterForReading() throws -> SerializedConnection {
        let slot: ReaderSlot
        switch try reserveRead(synchronous: true) {
        case .admitted(let admitted):
            slot = admitted
        case .waitForAdmission(let waiter):
            try waiter.wait()
            do { return try acquireReader() } catch {
                exit()
                throw error
            }
        }
        do {
            switch slot {
            case .ready(let reader): return reader
            case .open: return try openReader()
            case .wait(let waiter): return try waiter.wait()
            }
        } catch {
            exit()
            throw error
        }
    }

    /// The async counterpart of ``enterForReading()`` once the read is reserved (``read(_:)`` reserves it itself):
    /// returns the reader at once, or opens one, or waits for admission or for a reader, suspending; pair with
    /// ``exitReading(_:)``. A task cancelled while it waits stops waiting and throws `CancellationError`.
    private func enterForReading(_ reserved: ReadSlot) async throws -> SerializedConnection {
        let slot: ReaderSlot
        switch reserved {
        case .admitted(let admitted):
            slot = admitted
        case .waitForAdmission(let waiter):
            try await wait(for: waiter) { state in state.admissionWaiters.removeAll { $0 === waiter } }
            do { return try await acquireReader() } catch {
                exit()
                throw error
            }
        }
        do {
            switch slot {
            case .ready(let reader): return reader
            case .open: return try openReader()
            case .wait(let waiter):
                return try await wait(for: waiter) { [self] state in removeReaderWaiter(waiter, &state) }
            }
        } catch {
            exit()
            throw error
        }
    }

    /// Gives the reader back and leaves, in one critical section (two when the reader must be closed first: a
    /// rekey or close() waiting for the work in flight must find it closed).
    func exitReading(_ reader: SerializedConnection) {
        let closeReader: Bool = state.withLock { state in
            if state.isClosed || state.isBarrierUp {
                state.readerCount -= 1
                return true
            }
            if !state.readerWaiters.isEmpty {
                state.readerWaiters.removeFirst().resume(.success(reader))
                updateHasReaderWaiters(state)
            } else {
                parking.park(reader)
            }
            // Neither closed nor behind a barrier, so nobody waits for the work in flight to drain (close() and a
            // rekey raise their flag before they wait) and nothing is left to close: leaving is the count alone.
            // Checked here rather than in `leave` on every read (its result array was an allocation per read).
            assert(state.drainWaiters.isEmpty)
            state.inFlightCount -= 1
            return false
        }
        if closeReader {
            reader.close()
            exit()
        }
    }

    // MARK: - Reads admitted without the mutex

    /// Admits a read and gives it a free reader without taking the mutex: `nil` when the coordinator is closed or
    /// behind a barrier, or no reader is free (the caller then goes the mutex's way, which opens a reader or waits).
    /// Pair a reader it returns with ``exitReadingFast(_:)``.
    @inline(__always)
    private func enterForReadingFast() -> SerializedConnection? {
        let before = fastReads.wrappingAdd(1, ordering: .sequentiallyConsistent).oldValue
        if before & Self.blockedFlag == 0, let reader = parking.take() { return reader }
        leaveFast()
        return nil
    }

    /// Gives back a reader that ``enterForReadingFast()`` gave, and leaves.
    @inline(__always)
    private func exitReadingFast(_ reader: SerializedConnection) {
        if fastReads.load(ordering: .sequentiallyConsistent) & Self.blockedFlag != 0 {
            exitReadingFastBlocked(reader)
            return
        }
        // Parked before leaving: a barrier raised meanwhile waits for this read to leave, then finds the reader
        // in its slot and closes it.
        parking.park(reader)
        // A caller that queued for a reader under the mutex before this reader was parked: hand it over. (The
        // caller sets the flag, then looks in the slots; this parks, then reads the flag: one of them sees the
        // other, all four steps being sequentially consistent.)
        if hasReaderWaiters.load(ordering: .sequentiallyConsistent) { handParkedReadersToWaiters() }
        leaveFast()
    }

    /// The pool closed or raised a barrier during the read: the reader is closed, not kept (a rekey or close()
    /// waiting for the work in flight must find it closed), as ``exitReading(_:)`` does.
    @inline(never)
    private func exitReadingFastBlocked(_ reader: SerializedConnection) {
        state.withLock { state in state.readerCount -= 1 }
        reader.close()
        leaveFast()
    }

    @inline(never)
    private func handParkedReadersToWaiters() {
        state.withLock { state in
            while !state.readerWaiters.isEmpty, let reader = parking.take() {
                state.readerWaiters.removeFirst().resume(.success(reader))
            }
            updateHasReaderWaiters(state)
        }
    }

    @inline(__always)
    private func leaveFast() {
        let after = fastReads.wrappingSubtract(1, ordering: .sequentiallyConsistent).newValue
        if after == Self.blockedFlag { lastFastReadLeft() }
    }

    /// The last read admitted without the mutex left while the coordinator is closed or behind a barrier: wake
    /// whoever waits for the work in flight, or close the connections (a close() from inside a closure).
    @inline(never)
    private func lastFastReadLeft() {
        let toClose = state.withLock { state in afterLeaving(&state) }
        for connection in toClose { connection.close() }
    }

    /// Runs `body` in a read transaction on a reader, on the calling thread (the reader is the caller's alone).
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try refuseReentrance()
        if let reader = enterForReadingFast() {
            defer { exitReadingFast(reader) }
            readLockHolder?.noteRead()
            return try reader.withExclusiveAccess { db in try db.transaction(.deferred) { try body(db) } }
        }
        let reader = try enterForReading()
        defer { exitReading(reader) }
        readLockHolder?.noteRead()
        return try reader.withExclusiveAccess { db in try db.transaction(.deferred) { try body(db) } }
    }

    /// Runs `body` in a read transaction on a reader: in place on the task's thread while the pool's reads of kind
    /// `timingKey` are short (see ``DatabasePool/AsyncReadExecution`` and ``ReadTiming``), on the reader's queue
    /// otherwise. In place, unless ``readLockHolder`` holds the WAL read lock, the transaction starts and ends
    /// through ``readLockGate``: those reads run on Swift's cooperative threads, as many as there are CPUs, and would
    /// otherwise meet in the engine's WAL lock mutex (see ``ReadLockGate``).
    @inline(__always)
    func read<T: Sendable>(
        timingKey: Int, _ body: @escaping @Sendable (Connection) throws -> T
    ) async throws -> T {
        // A free reader, the usual case, is taken without the mutex and without calling an async function: each
        // call of one allocates its frame on the task and may switch executors.
        try refuseReentrance()
        let reader: SerializedConnection
        let isFast: Bool
        if let fast = enterForReadingFast() {
            reader = fast
            isFast = true
        } else {
            let reserved = try reserveRead(synchronous: false)
            if case .admitted(.ready(let ready)) = reserved {
                reader = ready
            } else {
                reader = try await enterForReading(reserved)
            }
            isFast = false
        }
        defer { if isFast { exitReadingFast(reader) } else { exitReading(reader) } }
        readLockHolder?.noteRead()
        let timing = readTiming
        if asyncReadExecution == .adaptive && timing.isShort(timingKey) {
            // Same contract as the queue: a task cancelled before the closure starts does not run it.
            if Task.isCancelled { throw CancellationError() }
            // While the holder holds the WAL read lock, starting and ending a read makes no system call inside the
            // engine's mutex, so the reads need not take turns at the gate.
            let takesTurns = readLockHolder?.isHeld != true
            return try timing.measure(timingKey) {
                try reader.withExclusiveAccess { db in
                    takesTurns
                        ? try readLockGate.readTransaction(db, body) : try db.transaction(.deferred) { try body(db) }
                }
            }
        }
        return try await reader.async { db in
            try timing.measure(timingKey) { try db.transaction(.deferred) { try body(db) } }
        }
    }

    // MARK: - Barrier (rekey) and close

    /// Stops admitting work, waits for the work in flight, closes the readers, runs `body`, then admits again.
    func withBarrier<T>(_ body: () throws -> T) throws -> T {
        try refuseReentrance()
        let waiter = Waiter<Void>(synchronous: true)
        let mustWait: Bool = try state.withLock { state in
            if state.isClosed { throw Self.closedError() }
            if state.isBarrierUp {
                throw DatabaseError(
                    .invalidState, "a rekey is already running")
            }
            state.isBarrierUp = true
            fastReads.bitwiseOr(Self.blockedFlag, ordering: .sequentiallyConsistent)
            if state.inFlightCount == 0 && fastReadCount == 0 { return false }
            state.drainWaiters.append(waiter)
            return true
        }
        if mustWait { try waiter.wait() }
        // The holder is a reader too: given back, and its connection (opened with the key that is about to change)
        // closed.
        readLockHolder?.suspend()
        readLockHolder?.discard()
        defer {
            readLockHolder?.resume()
            state.withLock { state in
                state.isBarrierUp = false
                fastReads.bitwiseAnd(~Self.blockedFlag, ordering: .sequentiallyConsistent)
                for waiter in state.admissionWaiters {
                    state.inFlightCount += 1
                    waiter.resume(.success(()))
                }
                state.admissionWaiters.removeAll()
            }
        }
        let readers: [SerializedConnection] = state.withLock { state in
            let readers = parking.takeAll()
            state.readerCount -= readers.count
            return readers
        }
        for reader in readers { reader.close() }
        return try body()
    }

    /// Rekeys through the writer behind a barrier; see ``DatabasePool/rekey(to:)``.
    ///
    /// After a failure, which key opens the file is decided by a fresh probe, never assumed: when the new key took
    /// (the failure came after it), the pool goes on with the new key and the rekey counts as done; when the old one
    /// still opens it, the writer reopens with the old key and the error is thrown; when neither can be shown to,
    /// the pool keeps whichever key opens a fresh connection, and closes only when none does.
    func rekey(to newKeyProvider: KeyProvider) throws -> Connection.RekeyOutcome {
        try withBarrier {
            let newKey = try newKeyProvider.key()
            let oldEncryption = try factory.encryption()
            let newEncryption = try factory.derivedEncryption(for: newKey)
            let derived = newKey.kind == .passphrase ? (newKey, newEncryption.key!) : nil
            let outcome: Connection.RekeyOutcome
            do {
                outcome = try writer.sync { db in try db.rekey(to: newEncryption.key!) }
            } catch {
                let opening = KeyState.probe(path: factory.path, old: oldEncryption, new: newEncryption)
                let logger = factory.options.logger
                if opening == .new, (try? writer.sync { db in try db.open(encryption: newEncryption) }) != nil {
                    factory.replaceKeyProvider(newKeyProvider, derived: derived)
                    logger?.warning(
                        "the rekey reported an error, but the file opens with the new key only: the pool goes on with it",
                        metadata: ["label": "\(label)", "error": "\(error)"])
                    return Connection.RekeyOutcome(isWALTruncated: false)
                }
                if (try? writer.sync { db in try db.open(encryption: oldEncryption) }) != nil {
                    logger?.error("rekey failed; the pool keeps the old key", metadata: [
                        "label": "\(label)", "error": "\(error)", "opens": "\(opening)",
                    ])
                } else if opening != .old, (try? writer.sync { db in try db.open(encryption: newEncryption) }) != nil {
                    factory.replaceKeyProvider(newKeyProvider, derived: derived)
                    logger?.error(
                        "rekey failed; the file opens with the new key, and the pool goes on with it", metadata: ["label": "\(label)", "error": "\(error)", "opens": "\(opening)"])
                } else {
                    logger?.error("rekey failed and neither key opens the file; the pool is closed", metadata: [
                        "label": "\(label)", "error": "\(error)", "opens": "\(opening)",
                    ])
                    close()
                }
                throw error
            }
            factory.replaceKeyProvider(newKeyProvider, derived: derived)
            factory.options.logger?.info("rekeyed", metadata: ["label": "\(label)"])
            return outcome
        }
    }

    /// Reopens every connection with `newKeyProvider`'s key, after checking on a fresh connection that it opens the
    /// file; see ``DatabasePool/reopen(keyProvider:)``.
    func reopen(keyProvider newKeyProvider: KeyProvider) throws {
        try withBarrier {
            let newKey = try newKeyProvider.key()
            let newEncryption = try factory.derivedEncryption(for: newKey)
            // Checked before the writer lets go of the key that works now.
            let probe = try Connection(
                path: factory.path, encryption: newEncryption,
                options: OpenOptions(mode: .readOnly, busyTimeout: factory.options.busyTimeout))
            probe.close()
            try writer.sync { db in
                db.close()
                try db.open(encryption: newEncryption)
            }
            factory.replaceKeyProvider(newKeyProvider, derived: newKey.kind == .passphrase ? (newKey, newEncryption.key!) : nil)
            factory.options.logger?.notice("reopened with a new key", metadata: ["label": "\(label)"])
        }
    }

    /// Refuses new work, fails waiting callers, waits for the work in flight (unless called from inside it), then
    /// closes every connection.
    func close() {
        readLockHolder?.close()
        let inside = RunningOwner.isRunning(owner)
        let waiter = Waiter<Void>(synchronous: true)
        let (mustWait, toClose): (Bool, [SerializedConnection]) = state.withLock { state in
            if !state.isClosed {
                state.isClosed = true
                fastReads.bitwiseOr(Self.blockedFlag, ordering: .sequentiallyConsistent)
                for waiter in state.admissionWaiters { waiter.resume(.failure(Self.closedError())) }
                state.admissionWaiters.removeAll()
                for waiter in state.readerWaiters { waiter.resume(.failure(Self.closedError())) }
                state.readerWaiters.removeAll()
                updateHasReaderWaiters(state)
            }
            if state.inFlightCount > 0 || fastReadCount > 0 {
                // From inside a closure the last exit() closes the connections.
                if !inside { state.drainWaiters.append(waiter) }
                return (!inside, [])
            }
            return (false, takeConnectionsIfClosing(&state))
        }
        for connection in toClose { connection.close() }
        if mustWait {
            try? waiter.wait()
            let toClose = state.withLock { takeConnectionsIfClosing(&$0) }
            for connection in toClose { connection.close() }
        }
    }

    private func takeConnectionsIfClosing(_ state: inout State) -> [SerializedConnection] {
        guard state.isClosed, state.inFlightCount == 0, fastReadCount == 0, !state.areConnectionsClosed else {
            return []
        }
        state.areConnectionsClosed = true
        let connections = parking.takeAll() + [writer]
        state.readerCount = 0
        return connections
    }

    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// How many reader connections are open (for tests and metrics).
    var openReaderCount: Int { state.withLock { $0.readerCount } }

    /// Whether a rekey's barrier is up (tests wait for it instead of sleeping).
    var isBarrierUp: Bool { state.withLock { $0.isBarrierUp } }

    /// How many callers wait for a reader now (tests wait for their waiters to be queued instead of sleeping).
    var readerWaiterCount: Int { state.withLock { $0.readerWaiters.count } }
}

/// Running averages of how long a pool's reads take, one per kind of read, shared by the pool's threads.
///
/// An async read runs in place on the task's thread only while the average of its kind is short: a read of a few
/// microseconds then costs no thread hand-off, and a kind of read that takes long (a scan, a report, a wait for a
/// lock) goes back to the readers' queues, so it does not hold Swift's cooperative threads.
///
/// A kind is a key the caller passes: the SQL drivers pass a key of the statement's text (``key(of:)``), so a
/// service's point lookups keep running in place while its `count(*)` scans go to the queues. With one average for the whole pool, the scans
/// pushed it over the limit and sent the lookups to the queues too. Reads through the pool's public `read` share
/// key 0. Keys are spread over a fixed table of ``slotCount`` averages; two kinds that land in one slot share one
/// average, as the whole pool did before: a scan sharing a lookup's slot sends that lookup to the queues. A
/// statement whose text changes from call to call (values written into it, `IN` lists of varying length) is a new
/// kind each time, and runs in place whenever its slot's average is short.
///
/// An average moves by 1/8 of the difference at each read; updates from two threads may race and lose one sample,
/// which only makes it a little less exact (they are atomic, so there is no data race).
///
/// `@unchecked Sendable`: `slots` is set once in `init`, and each of its elements is an `Atomic`.
final class ReadTiming: @unchecked Sendable {
    /// Reads whose kind's recent average is under this run in place.
    static let inPlaceLimitNanoseconds = 100_000
    /// How many averages the table holds: a power of two (``slot(of:)`` keeps the top bits of a hash).
    static let slotCount = 64
    private static let slotShift = UInt64(64 - slotCount.trailingZeroBitCount)

    private let slots: UnsafeMutablePointer<Atomic<Int>>

    init() {
        precondition(Self.slotCount.nonzeroBitCount == 1, "slotCount must be a power of two")
        slots = .allocate(capacity: Self.slotCount)
        for index in 0..<Self.slotCount { (slots + index).initialize(to: Atomic(0)) }
    }

    deinit {
        slots.deinitialize(count: Self.slotCount)
        slots.deallocate()
    }

    /// The key of a statement's reads: FNV-1a of its text. Unlike `hashValue` the same text gives the same key in
    /// every process, so which statements share a slot does not change from run to run.
    static func key(of sql: String) -> Int {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in sql.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        return Int(truncatingIfNeeded: hash)
    }

    /// The slot of `key`: the top bits of a multiplicative hash, so that nearby keys spread out.
    @inline(__always)
    static func slot(of key: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(truncatingIfNeeded: key) &* 0x9E37_79B9_7F4A_7C15) >> slotShift)
    }

    /// Whether reads of kind `key` have been short lately (also for a kind never seen: it runs in place once).
    @inline(__always)
    func isShort(_ key: Int) -> Bool {
        slots[Self.slot(of: key)].load(ordering: .relaxed) < Self.inPlaceLimitNanoseconds
    }

    /// Adds one read of kind `key` that took `elapsed` nanoseconds to its average.
    @inline(__always)
    func record(_ key: Int, nanoseconds elapsed: Int) {
        let slot = Self.slot(of: key)
        let average = slots[slot].load(ordering: .relaxed)
        slots[slot].store(average + (elapsed - average) / 8, ordering: .relaxed)
    }

    /// Runs `body` and adds its duration to the average of `key` (also when it throws).
    @inline(__always)
    func measure<T>(_ key: Int, _ body: () throws -> T) rethrows -> T {
        let start = Self.nowNanoseconds()
        defer { record(key, nanoseconds: Self.nowNanoseconds() &- start) }
        return try body()
    }

    /// The monotonic clock, read straight from `clock_gettime`: `DispatchTime.now()` converts through
    /// `dispatch_time` on top of it, twice in every async read.
    @inline(__always)
    static func nowNanoseconds() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return time.tv_sec &* 1_000_000_000 &+ time.tv_nsec
    }
}
