@testable import SQLCipherKit
import Testing

/// The adaptive mode's running averages (`ReadTiming`), one per kind of read, tested with recorded durations: no
/// read is timed, so nothing here depends on the machine's speed or load.
@Suite("Read timing per kind")
struct ReadTimingTests {
    /// Two keys whose averages are separate slots (found, not assumed: the slot is a hash).
    static func keysInTwoSlots() -> (Int, Int) {
        let first = 1
        let second = (2...).first { ReadTiming.slot(of: $0) != ReadTiming.slot(of: first) }!
        return (first, second)
    }

    @Test("a kind never seen is short; one long read makes only its own kind long")
    func kindsAreSeparate() {
        let timing = ReadTiming()
        let (scan, lookup) = Self.keysInTwoSlots()
        #expect(timing.isShort(scan) && timing.isShort(lookup))
        timing.record(scan, nanoseconds: 5_000_000)
        #expect(!timing.isShort(scan))
        #expect(timing.isShort(lookup))
        // Reads of the other kind, however many, do not bring the long kind back in place.
        for _ in 0..<100 { timing.record(lookup, nanoseconds: 10_000) }
        #expect(!timing.isShort(scan))
        #expect(timing.isShort(lookup))
    }

    @Test("the average moves by an eighth: a kind that became short again runs in place again")
    func averageMovesBack() {
        let timing = ReadTiming()
        let key = 7
        // 1 ms once: the average is 125 µs, over the 100 µs limit.
        timing.record(key, nanoseconds: 1_000_000)
        #expect(!timing.isShort(key))
        // 125 → 109.4 µs after one instant read, still over; 95.7 µs after the second.
        timing.record(key, nanoseconds: 0)
        #expect(!timing.isShort(key))
        timing.record(key, nanoseconds: 0)
        #expect(timing.isShort(key))
    }

    @Test("a statement's key is the same in every process and spreads over the slots")
    func statementKeys() {
        // FNV-1a of the text: fixed values, unlike `hashValue`, which changes from process to process.
        #expect(ReadTiming.key(of: "") == Int(truncatingIfNeeded: UInt64(0xCBF2_9CE4_8422_2325)))
        #expect(ReadTiming.key(of: "a") == Int(truncatingIfNeeded: UInt64(0xAF63_DC4C_8601_EC8C)))
        #expect(ReadTiming.key(of: "SELECT 1") == ReadTiming.key(of: "SELECT 1"))
        let slots = Set((0..<1000).map { ReadTiming.slot(of: ReadTiming.key(of: "SELECT \($0)")) })
        #expect(slots.count == ReadTiming.slotCount)
        #expect(slots.allSatisfy { (0..<ReadTiming.slotCount).contains($0) })
    }
}
