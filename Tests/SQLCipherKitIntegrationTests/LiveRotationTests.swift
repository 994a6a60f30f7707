#if Examples  // trait Examples (Package.swift)
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SQLCipherKit
import SQLCipherKitTestSupport
import Synchronization
import Testing

/// Key rotation of a database a running Hummingbird service holds, under load from this (another) process.
@Suite("Live key rotation under load")
struct LiveRotationTests {
    static let oldKeyText = "x'" + String(repeating: "a1b2c3d4", count: 8) + "'"
    static let newKeyText = "x'" + String(repeating: "0f1e2d3c", count: 8) + "'"

    @Test("the key is rotated while requests keep coming: no request fails, every acknowledged write is there")
    func rotatesUnderLoad() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let databasePath = directory.path("notes.db")
        let keyFile = directory.path("notes.key")
        try writeKeyFile(Self.oldKeyText, to: keyFile)

        let (service, port) = try await ServiceProcess.notesExample(
            database: databasePath, keyFile: keyFile, in: directory)
        let base = "http://127.0.0.1:\(port)"
        let client = HTTPClient(eventLoopGroupProvider: .singleton)

        let workerCount = 8
        let minimumRequestsPerWorker = 150
        // Each worker goes on until the rotation has ended (done, or given up after the hang limit) and it has sent
        // this many requests since: counted, not timed, so requests surely come after the rotation however slowly
        // the machine runs.
        let requestsAfterRotation = 20
        let load = LoadState()

        let rotation = Task {
            defer { load.rotationEnded.store(true, ordering: .relaxed) }
            // Rotate once the load is running.
            _ = await suspendingWait { load.requestsSent.load(ordering: .relaxed) >= workerCount * 40 }
            try writeKeyFile(Self.newKeyText, to: keyFile + ".next")
            let picked = await suspendingWait(within: .seconds(300)) {
                !FileManager.default.fileExists(atPath: keyFile + ".next")
            }
            load.rotationDone.store(picked, ordering: .relaxed)
            return load.requestsSent.load(ordering: .relaxed)
        }
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workerCount {
                group.addTask {
                    var index = 0
                    var sentAfterRotation = 0
                    while index < minimumRequestsPerWorker || sentAfterRotation < requestsAfterRotation {
                        if load.rotationEnded.load(ordering: .relaxed) { sentAfterRotation += 1 }
                        let body = "note \(worker)-\(index)"
                        load.requestsSent.add(1, ordering: .relaxed)
                        do {
                            let response = try await http(client, .POST, "\(base)/notes", body: body)
                            if response.status == 200, let id = Int(response.body) {
                                load.acknowledged.withLock { $0[id] = body }
                            } else {
                                load.failures.withLock { $0.append("\(response.status): \(response.body)") }
                            }
                        } catch {
                            load.failures.withLock { $0.append("\(error)") }
                        }
                        index += 1
                    }
                }
            }
        }
        let sentWhenRotated = try await rotation.value
        let health = try await http(client, .GET, "\(base)/health")
        try await client.shutdown()
        let status = try await service.terminate()

        let didRotate = load.rotationDone.load(ordering: .relaxed)
        #expect(didRotate, "the service never picked up the pending key")
        let sentCount = load.requestsSent.load(ordering: .relaxed)
        let failed = load.failures.withLock { $0 }
        #expect(sentWhenRotated < sentCount, "requests kept coming after the rotation")
        #expect(failed.isEmpty, "\(failed.count) failed requests, the first: \(failed.prefix(5))")
        #expect(health.status == 200, "health after rotation: \(health.body)")
        #expect(status == 0, "service output:\n\(service.output)")
        #expect(!service.output.contains(Self.newKeyText) && !service.output.contains(Self.oldKeyText))

        // Every acknowledged write is in the file, read with a fresh connection and the new key only.
        let written = load.acknowledged.withLock { $0 }
        let newKey = try EncryptionKey(sqlcipherRawKeyText: Self.newKeyText)
        let db = try Connection(path: databasePath, encryption: .key(newKey), options: OpenOptions(mode: .readOnly))
        defer { db.close() }
        #expect(try db.scalar("SELECT count(*) FROM note", as: Int.self) == written.count)
        var missing = 0
        for (id, body) in written where try db.scalar("SELECT body FROM note WHERE id = ?", id, as: String.self) != body {
            missing += 1
        }
        #expect(missing == 0)
        #expect(written.count == sentCount)

        let oldKey = try EncryptionKey(sqlcipherRawKeyText: Self.oldKeyText)
        #expect(throws: DatabaseError.self) {
            let stale = try Connection(path: databasePath, encryption: .key(oldKey), options: OpenOptions(mode: .readOnly))
            stale.close()
        }
        #expect(try String(contentsOfFile: keyFile, encoding: .utf8) == Self.newKeyText + "\n")
        #expect(!FileManager.default.fileExists(atPath: keyFile + ".next"))
        #expect(!contains(try fileBytes(databasePath), "note 0-0"))
    }
}

/// What the load generator observed, shared by its tasks.
final class LoadState: Sendable {
    let rotationDone = Atomic<Bool>(false)
    let rotationEnded = Atomic<Bool>(false)
    let requestsSent = Atomic<Int>(0)
    let acknowledged = Mutex<[Int: String]>([:])
    let failures = Mutex<[String]>([])
}
#endif
