import Dispatch
import Synchronization

/// Keeps a pool's WAL read lock taken in this process while its reads come one after another: one read transaction,
/// open on a connection of its own, for at most ``holdLimit`` at a time.
///
/// Why: SQLite's Unix VFS counts, per process, how many of its connections hold each WAL read-lock slot, and calls
/// `fcntl` (inside one mutex per database) only when that count goes from 0 to 1 or back. Four threads reading in
/// turn keep it above 0 between them, so the engine almost never calls `fcntl` for them; two threads (the width of
/// Swift's cooperative pool on two CPUs) leave it at 0 between reads, and then every read takes and gives back the
/// lock with a system call under that mutex. Measured on SQLCipher 4.19, 40,000 point lookups on two threads made
/// 35,000–46,000 `fcntl` calls; with one read transaction held beside them, none, and the two threads then needed
/// half the CPU time of four threads without it (Docs/Performance.md has the figures).
///
/// The holder is a reader like any other, so what every reader sees is unchanged: each read still starts its own
/// snapshot, of the newest commit. It shares the readers' lock only while its snapshot is the newest one: a read
/// that starts after a commit the holder has not seen takes a slot of its own, as without the holder.
///
/// What it holds back, and for how long. A read transaction keeps a checkpoint from copying the frames committed
/// after its snapshot, and keeps the writer from starting the WAL over. So the holder is given back:
/// - before every access to the pool's writer (a write, a checkpoint, a rekey), and not taken again until it ends:
///   the pool's own writes and checkpoints never find it;
/// - ``holdLimit`` after it was taken, at the latest: another process's checkpoint, or a truncating checkpoint on
///   another connection, waits at most that long for it (with a busy timeout) or, without one, fails with
///   `SQLITE_BUSY` as it would against any read in flight;
/// - when the pool closes, rekeys or reopens.
///
/// It is taken by the second read after it was given back, on that read's thread, by one read at a time (the
/// others do not wait); a pool that reads once now and then never takes it. A failure only means that reads go on
/// without it (the reads' own connections report any real problem): a failure to open its connection until the next
/// rekey or reopen, a failure to start its transaction until the next writer access.
final class ReadLockHolder: Sendable {
    /// The longest a hold lasts before it is given back: long enough that taking it again costs a few microseconds
    /// in ten milliseconds of reads, short enough that another process's checkpoint hardly notices it.
    static let holdLimit = Duration.milliseconds(10)

    private let factory: ConnectionFactory
    private let timers: DispatchQueue
    private let state = Locked(State())
    /// Whether the read transaction is open: written with the mutex held, read without it at every read (one load).
    private let held = Atomic<Bool>(false)
    /// Writer accesses and barriers under way: no hold is taken meanwhile.
    private let suspensions = Atomic<Int>(0)
    /// Reads started since the hold was last given back.
    private let readsSinceRelease = Atomic<Int>(0)
    /// Set while one read takes the hold, so the others go on without waiting for it.
    private let isTaking = Atomic<Bool>(false)
    /// ``holdLimit`` in nanoseconds, unless a test set a longer one.
    private let holdLimitNanoseconds = Atomic<Int>(ReadLockHolder.nanoseconds(ReadLockHolder.holdLimit))

    private struct State {
        /// The holder's connection (its own, read-only); used only with the mutex held.
        var connection: Connection?
        /// Counts the holds, so a timer set for an earlier one does not end a later one early.
        var generation = 0
        /// Opening its connection failed (the key provider's error, a key that no longer opens the file): not tried
        /// again until ``discard()`` (a rekey or reopen), so the key provider is not asked at every other read.
        var openFailed = false
        /// Starting its read transaction failed (the WAL busy while another process recovers it, say): not tried again
        /// until the next writer access or ``discard()``.
        var startFailed = false
        /// While either is set, reads are not counted (the count is set far below zero).
        var hasFailed: Bool { openFailed || startFailed }
        var isClosed = false
        /// Told each time a hold is given back (tests wait for it instead of sleeping).
        var onRelease: (@Sendable () -> Void)?
    }

    init(factory: ConnectionFactory, label: String) {
        self.factory = factory
        self.timers = DispatchQueue(label: "\(label).read-lock-holder")
    }

    /// Whether the holder's read transaction is open now.
    var isHeld: Bool { held.load(ordering: .sequentiallyConsistent) }

    /// Called by every read before it starts its transaction: takes the hold at the second read since it was given
    /// back, unless it is held, being taken, or suspended.
    @inline(__always)
    func noteRead() {
        if held.load(ordering: .relaxed) { return }
        noteReadWithoutHold()
    }

    @inline(never)
    private func noteReadWithoutHold() {
        guard readsSinceRelease.wrappingAdd(1, ordering: .relaxed).newValue >= 2,
              suspensions.load(ordering: .sequentiallyConsistent) == 0,
              !isTaking.exchange(true, ordering: .acquiring)
        else { return }
        defer { isTaking.store(false, ordering: .releasing) }
        let generation: Int? = state.withLock { state in
            // Checked again with the mutex held: ``suspend()`` counts itself, then takes the mutex, so a hold taken
            // before that is given back there, and none is taken after.
            guard !held.load(ordering: .sequentiallyConsistent), !state.isClosed, !state.hasFailed,
                  suspensions.load(ordering: .sequentiallyConsistent) == 0
            else { return nil }
            do {
                if state.connection == nil {
                    do { state.connection = try factory.open(readOnly: true) } catch {
                        state.openFailed = true
                        throw error
                    }
                }
                let connection = state.connection!
                do {
                    try connection.beginTransaction(.deferred)
                    try connection.startRead()
                } catch {
                    if connection.isInsideTransaction { try? connection.rollback() }
                    state.startFailed = true
                    throw error
                }
            } catch {
                recount(state)
                factory.options.logger?.debug(
                    "reads go on without holding the WAL read lock between them", metadata: ["error": "\(error)"])
                return nil
            }
            state.generation += 1
            held.store(true, ordering: .sequentiallyConsistent)
            return state.generation
        }
        if let generation {
            let limit = DispatchTimeInterval.nanoseconds(holdLimitNanoseconds.load(ordering: .relaxed))
            timers.asyncAfter(deadline: .now() + limit) { [weak self] in self?.giveBack(generation: generation) }
        }
    }

    /// Gives the hold back, if there is one (with `generation`, only if it is still that one), then makes `change`,
    /// both with the mutex held; tells the observer afterwards, without it.
    private func giveBack(generation: Int? = nil, then change: (inout State) -> Void = { _ in }) {
        let observer = state.withLock { state -> (@Sendable () -> Void)? in
            var observer: (@Sendable () -> Void)?
            if held.load(ordering: .sequentiallyConsistent) && (generation == nil || generation == state.generation) {
                held.store(false, ordering: .sequentiallyConsistent)
                do { try state.connection?.commit() } catch {
                    // A read transaction's COMMIT only gives the lock back; should it fail, closing does.
                    state.connection?.close()
                    state.connection = nil
                }
                observer = state.onRelease
            }
            change(&state)
            recount(state)
            return observer
        }
        observer?()
    }

    /// Starts the count of reads again from zero, or, once closed or failed, far below zero so it never reaches 2.
    private func recount(_ state: State) {
        readsSinceRelease.store(state.isClosed || state.hasFailed ? Int.min / 2 : 0, ordering: .relaxed)
    }

    /// Gives the hold back and takes none until ``resume()``: before the writer is used. The reads after it count
    /// from zero again, so a pool that reads once after each write never takes the hold.
    func suspend() {
        suspensions.wrappingAdd(1, ordering: .sequentiallyConsistent)
        giveBack { state in state.startFailed = false }
    }

    func resume() {
        suspensions.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    /// Gives the hold back and closes the holder's connection (a rekey or reopen changes the key it must open
    /// with); the next hold opens a new one. Call between ``suspend()`` and ``resume()``.
    func discard() {
        giveBack { state in
            state.connection?.close()
            state.connection = nil
            state.openFailed = false
            state.startFailed = false
        }
    }

    /// Gives the hold back and closes the connection for good.
    func close() {
        giveBack { state in
            state.isClosed = true
            state.connection?.close()
            state.connection = nil
        }
    }

    /// Sets the function told each time a hold is given back, on the thread that gives it back (tests).
    func observeReleases(_ observer: (@Sendable () -> Void)?) {
        state.withLock { $0.onRelease = observer }
    }

    /// Sets how long the holds taken from now on last (tests: a long one, so that what they check while the lock is
    /// held does not race the timer).
    func setHoldLimit(_ limit: Duration) {
        holdLimitNanoseconds.store(Self.nanoseconds(limit), ordering: .relaxed)
    }

    private static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}
