#if Services  // trait Services (Package.swift)
import Dispatch
import Foundation
import Logging
import MetricsTestKit
import SQLCipherKit
import SQLCipherKitServices
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

@Suite("Lifecycle, health, metrics and live rotation of DatabaseService")
struct DatabaseServiceTests {
    static let keyText = "x'" + String(repeating: "1234abcd", count: 8) + "'"
    static let newKeyText = "x'" + String(repeating: "9876fedc", count: 8) + "'"

    @Test("graceful shutdown lets the write in flight commit, then refuses new work")
    func poolClosesAfterWorkInFlight() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pool = try DatabasePool(path: directory.path("a.db"), keyProvider: .fixed(TestKeys.raw))
        try await pool.write { db in try db.execute("CREATE TABLE t(x)") }
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        /// Shared by the service's task and the test (an `Atomic` alone cannot be captured: it is not copyable).
        final class Flag: Sendable { let isSet = Atomic(false) }
        let serviceEnded = Flag()
        try await testGracefulShutdown { trigger in
            let service = Task {
                try await pool.run()
                serviceEnded.isSet.store(true, ordering: .sequentiallyConsistent)
            }
            let write = Task {
                try await pool.write { db in
                    entered.signal()
                    release.wait()
                    try db.execute("INSERT INTO t VALUES (1)")
                }
            }
            #expect(await awaitSignal(entered), "the write never started")
            trigger.triggerGracefulShutdown()
            // The service is closing (the pool refuses new work from the moment close() begins) but waits for the
            // write in flight, which cannot end before `release`.
            #expect(await suspendingWait { pool.isClosed }, "graceful shutdown never closed the pool")
            let endedEarly = serviceEnded.isSet.load(ordering: .sequentiallyConsistent)
            #expect(!endedEarly, "the service ended before the write in flight")
            release.signal()
            try await write.value
            try await service.value
        }
        #expect(pool.isClosed)
        await #expect(throws: DatabaseError.self) { try await pool.read { db in try db.scalar("SELECT 1", as: Int.self) } }
        let check = try Connection(path: directory.path("a.db"), encryption: .key(TestKeys.raw))
        defer { check.close() }
        #expect(try check.scalar("SELECT count(*) FROM t", as: Int.self) == 1)
    }

    @Test("a DatabaseQueue is a Service too")
    func queueIsAService() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let queue = try DatabaseQueue(path: directory.path("q.db"), keyProvider: .fixed(TestKeys.raw))
        try await testGracefulShutdown { trigger in
            let service = Task { try await queue.run() }
            try await queue.write { db in try db.execute("CREATE TABLE t(x)") }
            trigger.triggerGracefulShutdown()
            try await service.value
        }
        #expect(queue.isClosed)
    }

    @Test("the health check proves the key opens the file, and fails once it does not")
    func healthCheck() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.path("db.key")
        try writeKeyFile(Self.keyText, to: keyFile)
        let metrics = TestMetrics()
        let service = try DatabaseService(
            path: directory.path("h.db"), keyFile: keyFile,
            configuration: .init(keyFileCheckInterval: nil, metricsName: "h", metricsFactory: metrics))
        defer { service.pool.close() }
        try await service.pool.write { db in try db.execute("CREATE TABLE t(x)") }
        let report = try await service.checkHealth()
        #expect(report.schemaObjectCount == 1)
        #expect(!report.description.contains("1234abcd"))

        // The key file now holds another key: the check must fail (the pool itself still serves).
        try writeKeyFile(Self.newKeyText, to: keyFile)
        await #expect(throws: DatabaseError.self) { try await service.checkHealth() }
        #expect(try metrics.expectCounter("sqlcipherkit_health_checks_total", [("database", "h"), ("result", "success")])
            .totalValue == 1)
        #expect(try metrics.expectCounter("sqlcipherkit_health_checks_total", [("database", "h"), ("result", "failure")])
            .totalValue == 1)
    }

    @Test("a pending key is rotated in while writes go on; the old key file is retired only after verification")
    func rotatesInProcess() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("r.db")
        let keyFile = directory.path("db.key")
        try writeKeyFile(Self.keyText, to: keyFile)
        let metrics = TestMetrics()
        let service = try DatabaseService(
            path: path, keyFile: keyFile,
            configuration: .init(keyFileCheckInterval: nil, metricsName: "r", metricsFactory: metrics))
        try await service.pool.write { db in try db.execute("CREATE TABLE t(x)") }

        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<100 {
                        try await service.pool.write { db in try db.execute("INSERT INTO t VALUES (1)") }
                        _ = try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) }
                    }
                }
            }
            group.addTask {
                try writeKeyFile(Self.newKeyText, to: service.pendingKeyFile)
                #expect(try await service.rotateIfPending())
            }
            try await group.waitForAll()
        }
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 400)
        service.pool.close()

        #expect(try String(contentsOfFile: keyFile, encoding: .utf8) == Self.newKeyText + "\n")
        #expect(!FileManager.default.fileExists(atPath: service.pendingKeyFile))
        let newKey = try EncryptionKey(sqlcipherRawKeyText: Self.newKeyText)
        let oldKey = try EncryptionKey(sqlcipherRawKeyText: Self.keyText)
        let check = try Connection(path: path, encryption: .key(newKey), options: OpenOptions(mode: .readOnly))
        #expect(try check.scalar("SELECT count(*) FROM t", as: Int.self) == 400)
        check.close()
        #expect(throws: DatabaseError.self) { try Connection(path: path, encryption: .key(oldKey)).close() }
        #expect(try metrics.expectCounter("sqlcipherkit_key_rotations_total", [("database", "r"), ("result", "success")])
            .totalValue == 1)
        for counter in metrics.counters {
            #expect(!counter.dimensions.contains { $0.1.contains("1234abcd") || $0.1.contains("9876fedc") })
        }
    }

    @Test("an unusable pending key is set aside and the database keeps its key")
    func rejectsABadPendingKey() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyFile = directory.path("db.key")
        try writeKeyFile(Self.keyText, to: keyFile)
        let service = try DatabaseService(
            path: directory.path("b.db"), keyFile: keyFile, configuration: .init(keyFileCheckInterval: nil))
        defer { service.pool.close() }
        try await service.pool.write { db in try db.execute("CREATE TABLE t(x)") }
        try writeKeyFile("x'not hex at all'", to: service.pendingKeyFile)
        await #expect(throws: DatabaseError.self) { try await service.rotateIfPending() }
        #expect(FileManager.default.fileExists(atPath: service.pendingKeyFile + ".rejected"))
        #expect(try await service.pool.write { db in try db.execute("INSERT INTO t VALUES (1)") } == ())
        _ = try await service.checkHealth()
    }

    @Test("a rotation interrupted after the rekey is finished at the next start")
    func finishesAnInterruptedRotation() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("i.db")
        let keyFile = directory.path("db.key")
        try writeKeyFile(Self.keyText, to: keyFile)
        // The state a crash between rekey and rename leaves: the file on the new key, the new key still pending.
        let newKey = try EncryptionKey(sqlcipherRawKeyText: Self.newKeyText)
        let db = try Connection(path: path, encryption: .key(newKey))
        try db.execute("CREATE TABLE t(x)")
        db.close()
        try writeKeyFile(Self.newKeyText, to: keyFile + ".next")

        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: .init(keyFileCheckInterval: nil))
        defer { service.pool.close() }
        #expect(try String(contentsOfFile: keyFile, encoding: .utf8) == Self.newKeyText + "\n")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next"))
        _ = try await service.checkHealth()
    }
}
#endif
