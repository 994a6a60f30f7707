import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pool's free readers, each in a slot of its own that any thread takes or fills with one atomic operation.
///
/// Why: every pool read took the coordinator's mutex twice, to take a reader and to give it back. With two or more
/// threads reading, they met in that mutex (a plain pthread mutex sleeps at once when it is held), and sleeping in it
/// and its bookkeeping were a large part of what a pool read costs beyond the engine's own read (the figures are in
/// Docs/Performance.md, "Speed II").
/// A free reader now waits in a slot; a read takes one with an atomic exchange and gives it back with a
/// compare-and-swap, starting at the slot its thread used last time (a hash of the thread), so a thread that reads
/// again and again finds the connection whose statement and page caches it warmed.
///
/// There are as many slots as the pool may open readers, so a reader being given back always finds an empty slot
/// (each reader fills at most one). What waits, opens or closes readers still goes through the coordinator's mutex
/// (``AccessCoordinator``); see there for how a reader given back reaches a caller that waits for one.
///
/// `@unchecked Sendable`: a slot holds a retained reference as bits in an `Atomic<UInt>`; the reference is published
/// by the compare-and-swap that fills the slot and taken by the exchange that empties it, so one thread owns it at
/// a time.
final class ReaderParking: @unchecked Sendable {
    let capacity: Int
    private let slots: UnsafeMutablePointer<Atomic<UInt>>

    init(capacity: Int) {
        self.capacity = capacity
        slots = .allocate(capacity: max(capacity, 1))
        for index in 0..<max(capacity, 1) { (slots + index).initialize(to: Atomic<UInt>(0)) }
    }

    deinit {
        for reader in takeAll() { _ = reader }
        slots.deinitialize(count: max(capacity, 1))
        slots.deallocate()
    }

    /// The slot the calling thread starts from: the same thread always gets the same one.
    @inline(__always)
    private func preferredSlot() -> Int {
        #if canImport(Glibc)
        let thread = UInt(pthread_self())
        #else
        let thread = UInt(bitPattern: pthread_self())
        #endif
        // Thread handles are addresses a stack apart: mix the bits before taking the remainder.
        return Int((thread &* 0x9E37_79B9_7F4A_7C15) >> 40) % capacity
    }

    /// Takes a free reader, the calling thread's usual one first; `nil` when every slot is empty.
    @inline(__always)
    func take() -> SerializedConnection? {
        guard capacity > 0 else { return nil }
        let start = preferredSlot()
        var index = start
        repeat {
            if slots[index].load(ordering: .relaxed) != 0 {
                let bits = slots[index].exchange(0, ordering: .sequentiallyConsistent)
                if let pointer = UnsafeRawPointer(bitPattern: bits) {
                    return Unmanaged<SerializedConnection>.fromOpaque(pointer).takeRetainedValue()
                }
            }
            index = index + 1 == capacity ? 0 : index + 1
        } while index != start
        return nil
    }

    /// Gives a reader back into an empty slot, the calling thread's usual one first. There is always one: the pool
    /// has at most `capacity` readers and this one is in none of the slots.
    @inline(__always)
    func park(_ reader: SerializedConnection) {
        let bits = UInt(bitPattern: Unmanaged.passRetained(reader).toOpaque())
        var index = preferredSlot()
        while true {
            if slots[index].load(ordering: .relaxed) == 0
                && slots[index].compareExchange(
                    expected: 0, desired: bits, ordering: .sequentiallyConsistent).exchanged
            {
                return
            }
            // A slot passed over may have been emptied meanwhile; go round again until one is found.
            index = index + 1 == capacity ? 0 : index + 1
        }
    }

    /// Takes every free reader (to close them: the pool is behind a barrier or closing, nothing else parks then).
    func takeAll() -> [SerializedConnection] {
        var readers: [SerializedConnection] = []
        for index in 0..<capacity {
            let bits = slots[index].exchange(0, ordering: .sequentiallyConsistent)
            if let pointer = UnsafeRawPointer(bitPattern: bits) {
                readers.append(Unmanaged<SerializedConnection>.fromOpaque(pointer).takeRetainedValue())
            }
        }
        return readers
    }
}
