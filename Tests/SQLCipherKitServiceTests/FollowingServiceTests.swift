#if Services  // trait Services (Package.swift), which turns on Replication
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitReplication
import SQLCipherKitServices
import SQLCipherKitTestSupport
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

/// A service in follower mode serves the primary's shipped commits, refuses writes, and becomes the primary on
/// `promote()` or on an operator's `sqlcipherkit promote`, without a restart of its process.
@Suite("DatabaseService in follower mode")
struct FollowingServiceTests {
    /// A follower service on `copy` following `store`, with its own key file (a copy of the primary's) in its own
    /// folder, so that the two services' key hand-overs never share files.
    static func follower(
        in directory: TemporaryDirectory, store: any ReplicaStore, logs: LogLines, copy: String? = nil
    ) async throws -> DatabaseService {
        let folder = directory.path("follower")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let keyFile = folder + "/db.key"
        if !FileManager.default.fileExists(atPath: keyFile) {
            try writeKeyFile(ReplicatedServiceTests.keyText, to: keyFile)
        }
        let configuration = DatabaseService.Configuration(
            keyFileCheckInterval: .milliseconds(20), metricsName: "follower", logger: logs.logger(),
            replication: .init(
                store: store, syncInterval: .milliseconds(20), lagThreshold: .seconds(3600),
                replicator: ReplicatorConfiguration(snapshotInterval: nil, retention: nil),
                pollInterval: .milliseconds(10)))
        return try await DatabaseService(
            followingReplicaInto: copy ?? folder + "/notes.db", keyFile: keyFile, configuration: configuration)
    }

    /// A primary service in `directory` replicating to `store`, with rows 1...`rows` written and shipped.
    static func shippingPrimary(
        in directory: TemporaryDirectory, store: any ReplicaStore, logs: LogLines, rows: Int
    ) async throws -> (service: DatabaseService, replicator: Replicator, shipped: ReplicationStatus) {
        let primary = try ReplicatedServiceTests.service(in: directory, store: store, logs: logs)
        let replicator = try #require(primary.replicator)
        try await ReplicatedServiceTests.insert(primary, 1...rows)
        return (primary, replicator, try await replicator.syncNow())
    }

    /// The rows of `note` the service's pool reads.
    static func count(_ service: DatabaseService) async throws -> Int {
        try await service.pool.read { db in try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? -1 }
    }

    /// Waits until the service's pool reads `expected` rows (a bounded poll: the bound only turns a hang into a
    /// failure).
    static func waitForRows(_ service: DatabaseService, _ expected: Int) async throws {
        guard try await suspendingWait({ try await count(service) == expected }) else {
            Issue.record("the follower never read \(expected) rows (it reads \(try await count(service)))")
            return
        }
    }

    /// Whether a write through the service's pool is refused as a write to a read-only database.
    static func writeIsRefused(_ service: DatabaseService) async -> Bool {
        do {
            try await service.pool.write { db in try db.execute("INSERT INTO note VALUES (100000, 'refused')") }
            return false
        } catch let error as DatabaseError {
            return error.resultCode == DatabaseError.SQLITE_READONLY
        } catch {
            return false
        }
    }

    @Test("a follower serves the primary's commits and refuses writes; promote() makes it the primary without a restart: it writes, replicates a generation of reason promoted, and a restore has every row")
    func promotedByAPI() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let (primary, primaryReplicator, shipped) = try await Self.shippingPrimary(
            in: directory, store: store, logs: logs, rows: 20)

        let follower = try await Self.follower(in: directory, store: store, logs: logs)
        #expect(follower.isFollowing && follower.replicator == nil)
        #expect(try await Self.count(follower) == 20)
        #expect(await Self.writeIsRefused(follower))
        await #expect(throws: DatabaseError.self) { try await follower.rotateIfPending() }

        try await testGracefulShutdown { trigger in
            let running = Task { try await follower.run() }
            try await ReplicatedServiceTests.insert(primary, 21...30)
            _ = try await primaryReplicator.syncNow()
            try await Self.waitForRows(follower, 30)
            let health = try await follower.checkHealth()
            let following = try #require(health.following)
            #expect(health.isHealthy && following.status.point?.generation == shipped.generation, "\(health)")
            #expect(health.description.contains("following: current"), "\(health)")
            #expect(await Self.writeIsRefused(follower))

            // The primary dies (no last ship), and the follower is promoted while it keeps running.
            try await primaryReplicator.stop()
            primary.pool.close()
            let point = try await follower.promote()
            #expect(point?.generation == shipped.generation)
            #expect(!follower.isFollowing && follower.follower == nil)
            await #expect(throws: DatabaseError.self) { try await follower.promote() }
            try await ReplicatedServiceTests.insert(follower, 31...40)
            let replicator = try #require(follower.replicator)
            let after = try await replicator.syncNow()
            #expect(after.generation != shipped.generation)
            let catalog = try await Replica(store: store).catalog()
            #expect(catalog.generations.last?.reason == .promoted)
            #expect(!FileManager.default.fileExists(atPath: follower.path + ".follower"))
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        #expect(follower.pool.isClosed)
        let restored = directory.path("restored.db")
        _ = try await Replica(store: store).restore(
            to: restored,
            options: RestoreOptions(verificationKeys: [
                VerificationKey(name: "the test key", key: try EncryptionKey(sqlcipherRawKeyText: ReplicatedServiceTests.keyText))
            ]))
        #expect(try ReplicatedServiceTests.rowCount(restored) == 40)
        for line in logs.all { #expect(!line.contains("0badcafe")) }
    }

    @Test("an operator's `sqlcipherkit promote` on a running follower service's copy promotes the service: exit 0, the JSON names the new generation, and the service writes")
    func promotedByOperator() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let (primary, primaryReplicator, _) = try await Self.shippingPrimary(
            in: directory, store: store, logs: logs, rows: 10)
        let follower = try await Self.follower(in: directory, store: store, logs: logs)
        try await primaryReplicator.stop()
        primary.pool.close()

        try await testGracefulShutdown { trigger in
            let running = Task { try await follower.run() }
            let path = follower.path
            let keyFile = follower.keyFile
            let root = store.root
            let promoted = try await runCLI(["promote", "file://" + root, path, "--key-file", keyFile, "--json"])
            #expect(promoted.status == 0, "\(promoted.output)")
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(promoted.output.utf8)) as? [String: Any],
                "\(promoted.output)")
            let result = try #require(json["result"] as? [String: Any], "\(promoted.output)")
            #expect(json["ok"] as? Bool == true)
            let generation = try #require(result["generation"] as? String)
            #expect(!follower.isFollowing)
            #expect(await follower.replicator?.status.generation == generation)
            for suffix in [".promote-request", ".promote-request.taken", ".promote-answer"] {
                #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) is left")
            }
            try await ReplicatedServiceTests.insert(follower, 11...15)
            #expect(try await Self.count(follower) == 15)
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        // Shut down, it shipped its writes: a restore has them.
        let restored = directory.path("restored.db")
        _ = try await Replica(store: store).restore(to: restored)
        #expect(try ReplicatedServiceTests.rowCount(restored) == 15)
    }

    @Test("`sqlcipherkit promote` on a copy whose follower takes no request (not a service) withdraws its request after --wait, exits 1, and changes nothing")
    func requestNotTaken() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let (primary, primaryReplicator, _) = try await Self.shippingPrimary(
            in: directory, store: store, logs: logs, rows: 10)
        // A follower service that is not running: it holds the copy, but nobody looks for requests.
        let follower = try await Self.follower(in: directory, store: store, logs: logs)
        let path = follower.path
        let keyFile = follower.keyFile
        let root = store.root
        let refused = try await runCLI([
            "promote", "file://" + root, path, "--key-file", keyFile, "--wait", "0.5", "--json",
        ])
        // A key file that does not open the copy: exit 3 before any request, as when promote does the promotion.
        let wrongKeyFile = directory.path("wrong.key")
        try writeKeyFile(ReplicatedServiceTests.newKeyText, to: wrongKeyFile)
        let wrongKey = try await runCLI(["promote", "file://" + root, path, "--key-file", wrongKeyFile, "--json"])
        #expect(wrongKey.status == 3, "\(wrongKey.output)")
        #expect(!FileManager.default.fileExists(atPath: path + ".promote-request"))
        #expect(refused.status == 1, "\(refused.output)")
        // Standard error's line, then the JSON object on standard output.
        let object = refused.output.range(of: "\n{").map { String(refused.output[$0.lowerBound...]) } ?? refused.output
        let json = try? JSONSerialization.jsonObject(with: Data(object.utf8)) as? [String: Any]
        #expect((json?["error"] as? [String: Any])?["kind"] as? String == "notTaken", "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: path + ".promote-request"))
        #expect(follower.isFollowing && FileManager.default.fileExists(atPath: path + ".follower"))
        let catalog = try await Replica(store: store).catalog()
        #expect(catalog.generations.count == 1)
        #expect(await Self.writeIsRefused(follower))
        try await primaryReplicator.stop()
        primary.pool.close()
        await follower.follower?.stop()
        follower.pool.close()
    }

    /// Runs `sqlcipherkit promote` on a copy a plain follower holds (it takes no request), and lets `answer` play
    /// the following process once the request is there.
    static func promoteAnsweredBy(
        _ answer: @escaping @Sendable (TakenPromotionRequest) throws -> Void
    ) async throws -> (status: Int32, output: String) {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let (primary, primaryReplicator, _) = try await Self.shippingPrimary(
            in: directory, store: store, logs: logs, rows: 3)
        let keyFile = directory.path("db.key")
        let follower = ReplicaFollower(
            replica: Replica(store: store), path: directory.path("copy.db"),
            key: VerificationKey(name: "the test key", key: try EncryptionKey(contentsOf: keyFile)))
        try await follower.start()
        let path = follower.path
        let root = store.root
        let command = Task {
            try await runCLI(["promote", "file://" + root, path, "--key-file", keyFile, "--json"])
        }
        var taken: TakenPromotionRequest?
        _ = try await suspendingWait {
            taken = try PromotionRequest.take(for: path)
            return taken != nil
        }
        try answer(try #require(taken, "the command placed no request"))
        taken = nil  // its lock goes, as with a process that ended
        let result = try await command.value
        #expect(!FileManager.default.fileExists(atPath: path + ".promote-request"))
        #expect(!FileManager.default.fileExists(atPath: path + ".promote-answer"))
        await follower.stop()
        try await primaryReplicator.stop()
        primary.pool.close()
        return result
    }

    /// The `error.kind` of a command's JSON output (standard error's line comes first).
    static func errorKind(_ output: String) -> String? {
        let object = output.range(of: "\n{").map { String(output[$0.lowerBound...]) } ?? output
        let json = try? JSONSerialization.jsonObject(with: Data(object.utf8)) as? [String: Any]
        return (json?["error"] as? [String: Any])?["kind"] as? String
    }

    @Test("`sqlcipherkit promote` reports the following process's refusal (exit 1, promotionFailed) and a process that took the request and died without answering (exit 1, noAnswer), never a success")
    func promotionAnswers() async throws {
        let refused = try await Self.promoteAnsweredBy { taken in
            try taken.answer(PromotionAnswer(
                request: taken.request.id, promoted: false, promotedFrom: nil, generation: nil,
                error: "the store is down"))
        }
        #expect(refused.status == 1, "\(refused.output)")
        #expect(Self.errorKind(refused.output) == "promotionFailed", "\(refused.output)")
        #expect(refused.output.contains("the store is down"), "\(refused.output)")
        // Taken, then its process is gone: the lock goes with the descriptor, no answer is written.
        let abandoned = try await Self.promoteAnsweredBy { _ in }
        #expect(abandoned.status == 1, "\(abandoned.output)")
        #expect(Self.errorKind(abandoned.output) == "noAnswer", "\(abandoned.output)")
    }

    @Test("a promotion request that is not one (garbage in the request file) is refused as damaged and left for the operator; the service goes on following, writes refused")
    func damagedRequest() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let (primary, primaryReplicator, _) = try await Self.shippingPrimary(
            in: directory, store: store, logs: logs, rows: 4)
        let follower = try await Self.follower(in: directory, store: store, logs: logs)
        let garbage = Array("not a request\u{0}\u{ff}".utf8)
        try await testGracefulShutdown { trigger in
            let running = Task { try await follower.run() }
            try Data(garbage).write(to: URL(fileURLWithPath: PromotionRequest.requestPath(for: follower.path)))
            // The service takes it at a poll (a bounded wait for the rename: 120 s only turns a hang into a failure).
            let taken = follower.path + ".promote-request.taken"
            _ = await suspendingWait { FileManager.default.fileExists(atPath: taken) }
            // Left as it was for the operator, nothing answered, nothing promoted; the service goes on following.
            #expect(try fileBytes(taken) == garbage)
            #expect(!FileManager.default.fileExists(atPath: PromotionRequest.answerPath(for: follower.path)))
            #expect(follower.isFollowing)
            #expect(await Self.writeIsRefused(follower))
            try await ReplicatedServiceTests.insert(primary, 5...9)
            _ = try await primaryReplicator.syncNow()
            try await Self.waitForRows(follower, 9)
            #expect(logs.all.contains { $0.contains("a promotion request cannot be read") && $0.contains("damaged") })
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        try await primaryReplicator.stop()
        primary.pool.close()
    }

    @Test("a promotion that fails (the store is down) leaves the service following with writes refused; promoted once the store is back")
    func failedPromotion() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let switched = SwitchedStore(try FolderReplicaStore(root: directory.path("replica")))
        let (primary, primaryReplicator, _) = try await Self.shippingPrimary(
            in: directory, store: switched, logs: logs, rows: 10)
        try await primaryReplicator.stop()
        primary.pool.close()
        let follower = try await Self.follower(in: directory, store: switched, logs: logs)
        switched.mode = .down
        await #expect(throws: ReplicationError.self) { try await follower.promote() }
        #expect(follower.isFollowing && follower.replicator == nil)
        #expect(await Self.writeIsRefused(follower))
        #expect(try await Self.count(follower) == 10)
        switched.mode = .up
        try await follower.promote()
        try await ReplicatedServiceTests.insert(follower, 11...12)
        #expect(try await Self.count(follower) == 12)
        try await follower.replicator?.stop()
        follower.pool.close()
    }

    @Test("misuse is refused: follower mode without replication, a database that is not a follower's copy (left unchanged), promote() on a primary")
    func misuse() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let logs = LogLines()
        let store = try FolderReplicaStore(root: directory.path("replica"))
        let keyFile = directory.path("db.key")
        try writeKeyFile(ReplicatedServiceTests.keyText, to: keyFile)
        await #expect(throws: DatabaseError.self) {
            _ = try await DatabaseService(
                followingReplicaInto: directory.path("none.db"), keyFile: keyFile,
                configuration: DatabaseService.Configuration(keyFileCheckInterval: nil))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("none.db")))
        let (primary, primaryReplicator, _) = try await Self.shippingPrimary(
            in: directory, store: store, logs: logs, rows: 3)
        await #expect(throws: DatabaseError.self) { try await primary.promote() }
        try await primaryReplicator.stop()
        primary.pool.close()
        let before = try fileBytes(primary.path)
        do {
            _ = try await DatabaseService(
                followingReplicaInto: primary.path, keyFile: keyFile,
                configuration: DatabaseService.Configuration(
                    keyFileCheckInterval: nil, replication: .init(store: store)))
            Issue.record("a database that is not a follower's copy was followed")
        } catch let error as ReplicationError {
            #expect(error.kind == .destinationExists)
            #expect("\(error)".contains("DatabaseService(path:keyFile:configuration:)"), "\(error)")
        }
        #expect(try fileBytes(primary.path) == before)
        #expect(!FileManager.default.fileExists(atPath: primary.path + ".follower"))
    }
}
#endif
