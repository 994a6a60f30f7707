import Dispatch
import Synchronization

/// One connection and the serial dispatch queue that is the only place it is used.
///
/// `@unchecked Sendable` is sound because `connection` is read and replaced only by blocks running on `queue`, which
/// is serial: at most one thread touches the connection at a time, and the queue orders those accesses. Async work
/// runs on the queue too, so SQLite never blocks a thread of Swift's cooperative pool.
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

    /// Whether the current thread is running a block of this owner (any of its connections).
    static func isRunningInside(_ owner: ObjectIdentifier) -> Bool {
        DispatchQueue.getSpecific(key: ownerKey) == owner
    }

    /// Runs `body` with the connection, blocking the calling thread until it is done.
    func sync<T>(_ body: (Connection) throws -> T) throws -> T {
        try queue.sync { try body(connection) }
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
