#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value protected by a `pthread_mutex_t`.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes but not the futex-based
/// `Mutex` on Linux (it reports every access under it as a race), and the project's concurrency tests must run clean
/// under `--sanitize=thread`.
///
/// `@unchecked Sendable`: `value` is only read or written between `pthread_mutex_lock` and `pthread_mutex_unlock`.
package final class Locked<Value>: @unchecked Sendable {
    // The mutex already makes every access exclusive; the runtime's dynamic exclusivity check on top of it is a
    // call into the runtime per `withLock`, twice in every pool read, and guards nothing.
    @exclusivity(unchecked)
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held.
    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
