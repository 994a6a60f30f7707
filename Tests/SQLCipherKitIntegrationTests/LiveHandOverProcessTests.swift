#if Examples  // trait Examples (Package.swift)
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SQLCipherKit
import SQLCipherKitTestSupport
import Synchronization
import Testing

/// Live hand-overs to real service processes (the Hummingbird example on `DatabaseService`) under load from this
/// process: two keys handed over close together, and two replicas of the service on one database. The outcome is
/// checked, whatever the interleaving: the key file opens the database, every acknowledged write is there.
@Suite("Live key hand-over to service processes under load")
struct LiveHandOverProcessTests {
    static let keyTexts = ["71", "82", "93"].map { "x'" + String(repeating: $0, count: 32) + "'" }

    /// Runs `workers` clients posting notes to each base URL until `stop` is set; returns what they saw.
    static func load(
        _ client: HTTPClient, bases: [String], workers: Int, into outcome: LoadOutcome
    ) -> Task<Void, Never> {
        Task {
            await withTaskGroup(of: Void.self) { group in
                for (serviceIndex, base) in bases.enumerated() {
                    for worker in 0..<workers {
                        group.addTask {
                            var index = 0
                            // At least a few requests each, then until told to stop (bounded: 20,000).
                            while index < 20_000 && (index < 20 || !outcome.isStopped.load(ordering: .relaxed)) {
                                let body = "note \(serviceIndex)-\(worker)-\(index)"
                                do {
                                    let response = try await http(client, .POST, "\(base)/notes", body: body)
                                    if response.status == 200, let id = Int(response.body) {
                                        outcome.acknowledged.withLock { $0[id] = body }
                                    } else {
                                        outcome.failures.withLock { $0[serviceIndex].append("\(response.status): \(response.body)") }
                                    }
                                } catch {
                                    outcome.failures.withLock { $0[serviceIndex].append("\(error)") }
                                }
                                index += 1
                            }
                        }
                    }
                }
            }
        }
    }

    /// Waits (bounded by 120 s, only to turn a hang into a failure) until `condition` holds.
    static func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        for _ in 0..<1200 {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ServiceProcessError("\(what) did not happen within 120 s")
    }

    static func keyFileText(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    static func checkFile(_ path: String, keyIndex: Int, acknowledged: [Int: String]) throws {
        for (index, text) in keyTexts.enumerated() where index != keyIndex {
            let key = try EncryptionKey(sqlcipherRawKeyText: text)
            #expect(throws: DatabaseError.self, "key \(index) must not open the file") {
                let db = try Connection(path: path, encryption: .key(key), options: OpenOptions(mode: .readOnly))
                db.close()
            }
        }
        let key = try EncryptionKey(sqlcipherRawKeyText: keyTexts[keyIndex])
        let db = try Connection(path: path, encryption: .key(key), options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        #expect(try db.scalar("SELECT count(*) FROM note", as: Int.self) == acknowledged.count)
        var missing = 0
        for (id, body) in acknowledged where try db.scalar("SELECT body FROM note WHERE id = ?", id, as: String.self) != body {
            missing += 1
        }
        #expect(missing == 0, "\(missing) acknowledged writes are missing")
    }

    @Test("a second key handed over 0.2–1 s after the first: both are rotated in turn, no key is lost")
    func twoHandOversCloseTogether() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let databasePath = directory.path("notes.db")
        let keyFile = directory.path("notes.key")
        try writeKeyFile(Self.keyTexts[0], to: keyFile)
        let (service, port) = try await ServiceProcess.notesExample(
            database: databasePath, keyFile: keyFile, in: directory)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let outcome = LoadOutcome(serviceCount: 1)
        let load = Self.load(client, bases: ["http://127.0.0.1:\(port)"], workers: 4, into: outcome)

        try writeKeyFile(Self.keyTexts[1], to: keyFile + ".next")
        // Any gap is valid; the outcome must not depend on it.
        try await Task.sleep(for: .milliseconds(Int.random(in: 200...1000)))
        try writeKeyFile(Self.keyTexts[2], to: keyFile + ".next")
        try await Self.waitUntil("the second hand-over") {
            Self.keyFileText(keyFile) == Self.keyTexts[2] + "\n" && !FileManager.default.fileExists(atPath: keyFile + ".next")
        }
        outcome.isStopped.store(true, ordering: .relaxed)
        await load.value
        let status = try await service.terminate()
        try await client.shutdown()

        let failures = outcome.failures.withLock { $0 }
        #expect(failures[0].isEmpty, "\(failures[0].count) failed requests, the first: \(failures[0].prefix(3))")
        #expect(status == 0, "service output:\n\(service.output)")
        #expect(!service.output.contains("failed"), "\(service.output)")
        for text in Self.keyTexts { #expect(!service.output.contains(text)) }
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".rotating"))
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next.rejected"))
        try Self.checkFile(databasePath, keyIndex: 2, acknowledged: outcome.acknowledged.withLock { $0 })
    }

    @Test("two replicas on one database: one hands the key over, the other reopens with it; neither stops serving")
    func twoReplicas() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let databasePath = directory.path("notes.db")
        let keyFile = directory.path("notes.key")
        try writeKeyFile(Self.keyTexts[0], to: keyFile)
        let (first, firstPort) = try await ServiceProcess.notesExample(
            database: databasePath, keyFile: keyFile, in: directory)
        let secondDirectory = try TemporaryDirectory()
        defer { secondDirectory.remove() }
        let (second, secondPort) = try await ServiceProcess.notesExample(
            database: databasePath, keyFile: keyFile, in: secondDirectory)
        let bases = ["http://127.0.0.1:\(firstPort)", "http://127.0.0.1:\(secondPort)"]
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let outcome = LoadOutcome(serviceCount: 2)
        let load = Self.load(client, bases: bases, workers: 3, into: outcome)

        try writeKeyFile(Self.keyTexts[1], to: keyFile + ".next")
        try await Self.waitUntil("the hand-over") {
            Self.keyFileText(keyFile) == Self.keyTexts[1] + "\n" && !FileManager.default.fileExists(atPath: keyFile + ".next")
        }
        try await Self.waitUntil("both replicas on the new key") {
            [first.output, second.output].filter { $0.contains("rotated the database key live") }.count == 1
                && [first.output, second.output].filter { $0.contains("the pool reopened with it") }.count == 1
        }
        // Both serve after the hand-over.
        for base in bases {
            let response = try await http(client, .POST, "\(base)/notes", body: "after")
            #expect(response.status == 200, "\(base): \(response.body)")
            if response.status == 200, let id = Int(response.body) {
                outcome.acknowledged.withLock { $0[id] = "after" }
            }
        }
        outcome.isStopped.store(true, ordering: .relaxed)
        await load.value
        let statuses = [try await first.terminate(), try await second.terminate()]
        try await client.shutdown()

        #expect(statuses == [0, 0], "outputs:\n\(first.output)\n---\n\(second.output)")
        let outputs = [first.output, second.output]
        #expect(outputs.filter { $0.contains("rotated the database key live") }.count == 1, "exactly one rekeyed")
        let rotating = outputs.firstIndex { $0.contains("rotated the database key live") } ?? 0
        let failures = outcome.failures.withLock { $0 }
        #expect(failures[rotating].isEmpty, "the rotating replica failed requests: \(failures[rotating].prefix(3))")
        // The other replica's requests can fail between the rekey and its next check (documented); only as
        // "not a database", never otherwise.
        let other = failures[1 - rotating]
        #expect(other.allSatisfy { $0.contains("not a database") || $0.hasPrefix("500") }, "\(other.prefix(5))")
        print("the replica that did not rotate failed \(other.count) requests before it reopened")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".rotating"))
        try Self.checkFile(databasePath, keyIndex: 1, acknowledged: outcome.acknowledged.withLock { $0 })
    }
}

/// What the load saw: acknowledged writes (id → body) and failures per service.
final class LoadOutcome: Sendable {
    let isStopped = Atomic(false)
    let acknowledged = Mutex<[Int: String]>([:])
    let failures: Mutex<[[String]]>

    init(serviceCount: Int) {
        failures = Mutex(Array(repeating: [], count: serviceCount))
    }
}
#endif
