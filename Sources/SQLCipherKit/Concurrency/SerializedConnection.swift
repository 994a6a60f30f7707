import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One connection and the serial dispatch queue that is the only place it is used, unless a caller holds it alone.
///
/// `@unchecked Sendable` is sound because `connection` is read and replaced only by blocks running on `queue`, which
/// is serial, or through ``withExclusiveAccess(_:)`` by the one caller that holds the connection (a pool's reader,
/// taken from and given back to ``AccessCoordinator`` under its mutex, which orders those accesses with every other
/// one): at most one thread touches the connection at a time.
final class SerializedConnection: @unchecked Sendable {
    private let queue: DispatchQueue
    private var connection: Connection
    /// Identifies the pool or queue a block runs for, to refuse re-entrant use (which would deadlock).
    private let owner: ObjectIdentifier

    static let ownerKey = DispatchSpecificKey<ObjectIdentifier>()

    init(_ connection: Connection, label: String, owner: ObjectIdentifier) {
        self.connection = connection
        self.owner = owner
        self.queue = DispatchQueue(label: label)
        queue.setSpecific(key: Self.ownerKey, value: owner)
    }

    /// Whether the current thread is running a block of this owner (any of its connections), on a queue or in place.
    static func isRunningInside(_ owner: ObjectIdentifier) -> Bool {
        DispatchQueue.getSpecific(key: ownerKey) == owner || InPlaceOwner.contains(owner)
    }

    /// Runs `body` with the connection, blocking the calling thread until it is done.
    func sync<T>(_ body: (Connection) throws -> T) throws -> T {
        try queue.sync { try body(connection) }
    }

    /// Runs `body` with the connection on the calling thread, without going through the queue.
    ///
    /// Only for a caller that holds the connection alone (a reader taken from the coordinator): nothing else can
    /// then use it, so the queue would only add a hand-off. The thread is marked as running for the owner meanwhile,
    /// so re-entrant use is still refused.
    func withExclusiveAccess<T>(_ body: (Connection) throws -> T) rethrows -> T {
        let previous = InPlaceOwner.enter(owner)
        defer { InPlaceOwner.leave(restoring: previous) }
        return try body(connection)
    }

    /// Runs `body` with the connection on the queue and suspends until it is done. A task cancelled before the
    /// block starts gets `CancellationError` and the block does not run.
    func async<T: Sendable>(_ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        let isCancelled = Atomic<Bool>(false)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
                queue.async { [self] in
                    if isCancelled.load(ordering: .relaxed) {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    continuation.resume(with: Result { try body(connection) })
                }
            }
        } onCancel: {
            isCancelled.store(true, ordering: .relaxed)
        }
    }

    /// Closes the connection (on its queue).
    func close() {
        queue.sync { connection.close() }
    }
}

/// The owner whose connection the current thread is using in place (``SerializedConnection/withExclusiveAccess(_:)``),
/// kept in a thread-specific slot: the dispatch queue's own marker is not set when no queue runs the block.
enum InPlaceOwner {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let code = pthread_key_create(&key, nil)
        precondition(code == 0, "pthread_key_create failed (\(code))")
        return key
    }()

    static func contains(_ owner: ObjectIdentifier) -> Bool {
        pthread_getspecific(key) == pointer(owner)
    }

    /// Marks the thread as running for `owner`; returns the previous mark (in-place runs of other pools nest).
    static func enter(_ owner: ObjectIdentifier) -> UnsafeMutableRawPointer? {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, pointer(owner))
        return previous
    }

    static func leave(restoring previous: UnsafeMutableRawPointer?) {
        pthread_setspecific(key, previous)
    }

    private static func pointer(_ owner: ObjectIdentifier) -> UnsafeMutableRawPointer? {
        UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: owner))
    }
}
