import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Takes turns, among a pool's short async reads, at the two moments SQLite takes and gives back a read's WAL read
/// lock: the start of the read transaction and its COMMIT.
///
/// Why: SQLite's Unix VFS keeps one count per WAL read-lock slot for the whole process, under one mutex per database
/// (`unixShmLock`, the `pShmMutex`), and calls `fcntl` inside that mutex whenever the count goes from 0 to 1 or back.
/// That mutex is a plain pthread mutex: a thread that finds it held goes to sleep at once, and is woken only after a
/// `futex` round trip, tens of microseconds on a VM, while a point read takes 3–5 µs. Two cooperative threads doing
/// point reads in place meet there at every few reads: `perf record -e sched:sched_switch` put 98% of their blocking
/// waits in that mutex (`walLockShared` in `walTryBeginRead`), and two of them made fewer reads per second than one.
///
/// The gate is a mutex that a waiting thread spins on for a few microseconds before it sleeps, held across those two
/// short steps only, so the reads of one pool never meet inside the engine's mutex: one that comes second spins for the
/// microsecond the other needs instead of sleeping. The closure itself runs outside the gate, in parallel with the
/// others.
///
/// While the pool's ``ReadLockHolder`` holds the read lock, the count never reaches 0, the engine makes no system
/// call there, and the reads skip the gate: it serves the reads that come while the hold is not taken (around the
/// pool's writes, or with ``DatabasePool/Configuration/holdsReadLockBetweenReads`` off).
///
/// It cannot deadlock: while it holds the gate, a read only starts or ends its read transaction, and neither waits
/// for another reader (readers take the WAL read locks shared; the exclusive attempts are non-blocking tries). What
/// they may wait for is the writer or a checkpoint, which never takes the gate.
///
/// `@unchecked Sendable`: the mutex is only used through `pthread_mutex_lock`/`unlock`.
final class ReadLockGate: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if os(Linux)
        // PTHREAD_MUTEX_ADAPTIVE_NP (glibc): spins a bounded number of times before it sleeps. Swift does not import
        // the constant (it needs _GNU_SOURCE); its value is part of glibc's ABI.
        pthread_mutexattr_settype(&attributes, 3)
        #endif
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Whether the mutex is held, as far as a spinning thread can tell without writing to it (set just after it is
    /// taken, cleared just before it is given back).
    private let isHeld = Atomic<Bool>(false)

    /// How many times a thread that finds the gate held checks it again before it sleeps on the mutex: a few
    /// microseconds, longer than a read needs to start or commit, far shorter than a sleep and a wake-up. glibc's
    /// adaptive mutex alone gives up sooner (about 100 pauses): with it, 4 tasks on SQLCipher 4.19 still slept at
    /// 0.04 reads in 1 and gained 1.2× over one task.
    static let spinLimit = 10_000

    func lock() {
        var spins = 0
        while pthread_mutex_trylock(mutex) != 0 {
            // Read-only checks while it is held, so the holder's cache line is not fought over.
            while isHeld.load(ordering: .relaxed) && spins < Self.spinLimit { spins += 1 }
            spins += 1
            if spins >= Self.spinLimit {
                // The holder is slow (preempted, or its read waits for the WAL): sleep until it is done.
                pthread_mutex_lock(mutex)
                break
            }
        }
        isHeld.store(true, ordering: .relaxed)
    }

    func unlock() {
        isHeld.store(false, ordering: .relaxed)
        pthread_mutex_unlock(mutex)
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Runs `body` in a deferred transaction whose start (the read lock) and COMMIT happen with the gate held.
    ///
    /// The snapshot is taken at the start of the read, before `body` runs (without the gate, SQLite takes it at
    /// `body`'s first statement); errors, rollback and misuse checks are those of ``Connection/transaction(_:_:)``.
    func readTransaction<T>(_ db: Connection, _ body: (Connection) throws -> T) throws -> T {
        var holdsGate = false
        defer { if holdsGate { unlock() } }
        return try db.transaction(.deferred) {
            try withLock { try db.startRead() }
            let result = try body(db)
            // `transaction` runs COMMIT (or, if COMMIT fails, ROLLBACK) right after this returns.
            lock()
            holdsGate = true
            return result
        }
    }
}
