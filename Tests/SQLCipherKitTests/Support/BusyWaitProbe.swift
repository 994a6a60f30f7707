import CSQLCipher
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Tells a test that a thread has started waiting for a lock in SQLite's busy handler, so the test can release the
/// lock *then*, instead of after a guessed time (which on a loaded machine may come before the other side even
/// tried, and the test would pass without testing anything).
///
/// SQLite's busy timeout sleeps through the VFS's `xSleep` between attempts. The probe is a VFS identical to the
/// default one (the same functions and data) except that its `xSleep` first notes which thread sleeps; it is
/// registered once, as the default, and never removed, so every connection opened afterwards in this process uses
/// it, including those the library opens inside a call (the key check's overlay builds on the default VFS).
final class BusyWaitProbe: Sendable {
    private let hasSlept = Atomic(false)

    /// A probe for one thread (see ``watchCurrentThread()``); `nil` when the probe VFS could not be registered.
    init?() {
        guard Self.isInstalled else { return nil }
    }

    private static let watched = Shared<[UInt: BusyWaitProbe]>([:])

    private static var currentThread: UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }

    private nonisolated(unsafe) static var base: UnsafeMutablePointer<sqlite3_vfs>?

    private static let isInstalled: Bool = {
        guard let found = sqlite3_vfs_find(nil) else { return false }
        base = found
        let probe = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        probe.initialize(to: found.pointee)
        probe.pointee.zName = UnsafePointer(strdup("sqlcipherkit-test-busy-probe"))
        probe.pointee.pNext = nil
        probe.pointee.xSleep = { _, microseconds in
            BusyWaitProbe.watched.withLock { $0[BusyWaitProbe.currentThread] }?
                .hasSlept.store(true, ordering: .sequentiallyConsistent)
            guard let base = BusyWaitProbe.base else { return 0 }
            return base.pointee.xSleep?(base, microseconds) ?? 0
        }
        return sqlite3_vfs_register(probe, 1) == SQLITE_OK
    }()

    /// Watches the calling thread: call it on the thread that will wait, before it opens anything.
    func watchCurrentThread() {
        Self.watched.withLock { $0[Self.currentThread] = self }
    }

    /// Stops watching the calling thread.
    func stopWatchingCurrentThread() {
        _ = Self.watched.withLock { $0.removeValue(forKey: Self.currentThread) }
    }

    /// Whether the watched thread has slept in a busy handler (waited for a lock) since it was watched.
    var hasWaitedForALock: Bool { hasSlept.load(ordering: .sequentiallyConsistent) }
}
