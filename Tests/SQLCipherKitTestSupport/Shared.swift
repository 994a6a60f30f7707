import Foundation

/// A value shared between threads, guarded by an `NSLock`.
///
/// Tests use this rather than the standard library's `Mutex`: on Linux `Mutex` locks with raw futex system calls that
/// ThreadSanitizer does not see, so two accesses made under the same `Mutex` are reported as a race. An `NSLock` is a
/// `pthread_mutex_t`, which the sanitizer understands.
public final class Shared<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
