import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `sqlcipherkit rotate` killed with SIGKILL at random moments: the database must always open with exactly one of
/// the two keys, pass quick_check, and hold all its rows.
@Suite("sqlcipherkit rotate survives SIGKILL", .serialized)
struct RotateCrashTests {
    static let rowCount = 25_000
    static let killsPerCombination = 20

    struct Combination: CustomTestStringConvertible, Sendable {
        let method: String
        let journalMode: String
        var testDescription: String { "\(method), \(journalMode)" }
    }

    static let combinations = [
        Combination(method: "copy", journalMode: "DELETE"), Combination(method: "copy", journalMode: "WAL"),
        Combination(method: "in-place", journalMode: "DELETE"), Combination(method: "in-place", journalMode: "WAL"),
    ]

    /// Row count and a checksum over every row.
    private static func fingerprint(_ db: Connection) throws -> [Int64] {
        try db.first("SELECT count(*), sum(id), sum(length(body)), sum(unicode(substr(body, 1 + id % 60, 1)) * id) FROM item") {
            row in [try row[0] as Int64, try row[1] as Int64, try row[2] as Int64, try row[3] as Int64]
        } ?? []
    }

    private static func startRotation(
        _ db: String, from current: String, to next: String, method: String, scratch: Scratch
    ) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binaryPath)
        process.arguments = ["rotate", db, "--key-file", current, "--new-key-file", next, "--method", method]
        process.currentDirectoryURL = scratch.url
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    @Test("the database opens with exactly one key, intact, after every kill", arguments: combinations)
    func killedAtRandomMoments(combination: Combination) throws {
        let scratch = try Scratch()
        var keys = [try scratch.rawKeyFile("a.key"), try scratch.rawKeyFile("b.key")]
        let db = try scratch.database(
            "crash.db", key: keys[0].key, rowCount: Self.rowCount, journalMode: combination.journalMode)
        let expected = try {
            let connection = try Connection(path: db, key: keys[0].key)
            defer { connection.close() }
            return try Self.fingerprint(connection)
        }()

        // The typical duration of a whole run (process start included): the median of three uninterrupted runs.
        var durations: [Duration] = []
        for _ in 0..<3 {
            let start = ContinuousClock.now
            let run = try Self.startRotation(
                db, from: keys[0].path, to: keys[1].path, method: combination.method, scratch: scratch)
            run.waitUntilExit()
            durations.append(ContinuousClock.now - start)
            #expect(run.terminationStatus == 0)
            keys.swapAt(0, 1)
        }
        let typical = durations.sorted()[1]
        let typicalMicroseconds = Int(seconds(typical) * 1_000_000)

        var outcomes: [String: Int] = [:]
        for iteration in 0..<Self.killsPerCombination {
            let delay = Int.random(in: 0...typicalMicroseconds)
            let process = try Self.startRotation(
                db, from: keys[0].path, to: keys[1].path, method: combination.method, scratch: scratch)
            usleep(UInt32(delay))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let wasKilled = process.terminationReason == .uncaughtSignal

            let opensOld = opens(db, with: keys[0].key)
            let opensNew = opens(db, with: keys[1].key)
            #expect(opensOld != opensNew, "iteration \(iteration), delay \(delay) µs: old \(opensOld), new \(opensNew)")
            guard opensOld != opensNew else { break }
            if opensNew { keys.swapAt(0, 1) }
            let connection = try Connection(path: db, key: keys[0].key)
            try connection.quickCheck()
            #expect(try Self.fingerprint(connection) == expected, "iteration \(iteration)")
            #expect(try connection.scalar("PRAGMA journal_mode", as: String.self)?.uppercased() == combination.journalMode)
            connection.close()
            let outcome = (wasKilled ? "killed" : "finished") + ", " + (opensNew ? "new key" : "old key")
            outcomes[outcome, default: 0] += 1
        }

        // A last, complete run removes the temporary files interrupted runs left behind.
        let final = try Self.startRotation(db, from: keys[0].path, to: keys[1].path, method: combination.method, scratch: scratch)
        final.waitUntilExit()
        #expect(final.terminationStatus == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
            .filter { $0.contains(".sqlcipherkit-") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        print("crash test \(combination.testDescription) on SQLCipher \(SQLCipher.version): typical run"
            + " \(Int(seconds(typical) * 1000)) ms; \(Self.killsPerCombination) kills: "
            + outcomes.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
    }
}

private func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
