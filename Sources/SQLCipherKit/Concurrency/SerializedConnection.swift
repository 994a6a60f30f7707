import CSQLCipherKitSupport
import Dispatch
import Synchronization

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

    init(_ connection: Connection, label: String, owner: ObjectIdentifier) {
        self.connection = connection
        self.owner = owner
        self.queue = DispatchQueue(label: label)
    }

    /// Runs `body` with the connection, blocking the calling thread until it is done.
    func sync<T>(_ body: (Connection) throws -> T) throws -> T {
        try queue.sync { try RunningOwner.running(owner) { try body(connection) } }
    }

    /// Runs `body` with the connection on the calling thread, without going through the queue.
    ///
    /// Only for a caller that holds the connection alone (a reader taken from the coordinator): nothing else can
    /// then use it, so the queue would only add a hand-off. The thread is marked as running for the owner meanwhile,
    /// so re-entrant use is still refused.
    @inline(__always)
    func withExclusiveAccess<T>(_ body: (Connection) throws -> T) rethrows -> T {
        try RunningOwner.running(owner) { try body(connection) }
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
                    continuation.resume(with: Result { try RunningOwner.running(owner) { try body(connection) } })
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

/// The owners (pools or queues) whose connections the current thread is running blocks for, on one of their queues
/// or in place (``SerializedConnection/withExclusiveAccess(_:)``), kept in C thread-locals. A block of one pool may
/// use another, whose block may then try the first again: every enclosing owner is refused, not only the innermost
/// (the 32 outermost of a thread are kept: deeper nesting of distinct pools is not checked). Read on every read and
/// write; the dispatch queue's specific plus a pthread key that did this before were a visible share of each
/// pool read.
enum RunningOwner {
    /// Whether the current thread is running a block of `owner` (any of its connections), on a queue or in place,
    /// at any depth.
    static func isRunning(_ owner: ObjectIdentifier) -> Bool {
        CSQLCipherKitSupport_isMarkedForOwner(pointer(owner)) != 0
    }

    /// Runs `body` with the thread marked as running for `owner`, then removes the mark.
    @inline(__always)
    static func running<T>(_ owner: ObjectIdentifier, _ body: () throws -> T) rethrows -> T {
        CSQLCipherKitSupport_pushOwner(pointer(owner))
        defer { CSQLCipherKitSupport_popOwner() }
        return try body()
    }

    @inline(__always)
    private static func pointer(_ owner: ObjectIdentifier) -> UnsafeRawPointer? {
        UnsafeRawPointer(bitPattern: UInt(bitPattern: owner))
    }
}
