#if Replication  // trait Replication (Package.swift)
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing
@testable import sqlcipherkit

/// The S3 store against a real object store (OpenStack Swift's S3 API on 127.0.0.1, started by `.ci/object-store`),
/// the bucket checked with boto3.
@Suite("An S3 replica store on a real object store", .enabled(if: ObjectStore.isInstalled, ObjectStore.notInstalled))
struct S3ReplicaStoreTests {
    @Test("stores, lists (page by page), reads back and deletes objects; boto3 sees the same")
    func roundTrip() async throws {
        let bucket = try await ObjectStore.makeBucket()
        let store = try ObjectStore.store(bucket: bucket) { $0.listPageSize = 2 }
        let names = (1...5).map { "generations/g1/wal/000000000\($0)-segment.wal" }
        for (index, name) in names.enumerated() {
            try await store.put(name, bytes: Array(repeating: UInt8(index), count: 1000 + index))
        }
        try await store.put("generations/g1/generation.json", bytes: Array("{\"a\": 1}".utf8))
        let listed = try await store.list(prefix: "generations/g1/wal/")
        #expect(listed.map(\.key) == names)
        #expect(listed.map(\.size) == [1000, 1001, 1002, 1003, 1004])
        #expect(try await store.list(prefix: "").count == 6)
        #expect(try await store.get(names[2]) == Array(repeating: 2, count: 1002))

        let directory = try TemporaryDirectory()

        let independent = try await download(bucket: bucket, prefix: "notes/", into: directory.path("boto3"))
        #expect(independent.map(\.key).sorted() == (names + ["generations/g1/generation.json"]).map { "notes/" + $0 }.sorted())

        try await store.delete([names[0], "generations/g1/wal/missing.wal"])
        #expect(try await store.list(prefix: "generations/g1/wal/").map(\.key) == Array(names.dropFirst()))
        let missing = await #expect(throws: ReplicationError.self) { _ = try await store.get(names[0]) }
        #expect(missing?.kind == .notFound)
    }

    @Test("a file range larger than the part size goes as a multipart upload, read back byte for byte")
    func multipart() async throws {
        let bucket = try await ObjectStore.makeBucket()
        let store = try ObjectStore.store(bucket: bucket) { $0.partSize = 64 * 1024 }
        let directory = try TemporaryDirectory()
        let source = directory.path("source")
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let progress = ProgressRecorder()
        try await store.put("big.part", file: source, offset: 1234, length: 250_000, progress: { progress.record($0) })
        #expect(progress.values == [65_536, 131_072, 196_608, 250_000])
        #expect(try await store.get("big.part") == Array(bytes[1234..<251_234]))
        let objects = try await download(bucket: bucket, prefix: "notes/", into: directory.path("boto3"))
        // A multipart object's ETag is the digest of the parts' digests and their count: "…-4".
        #expect(objects.first?.etag.hasSuffix("-4\"") == true, "\(objects)")
        #expect(try fileBytes(directory.path("boto3/notes/big.part")) == Array(bytes[1234..<251_234]))

        // A file shorter than announced: the upload is abandoned and no object appears.
        let short = await #expect(throws: ReplicationError.self) {
            try await store.put("short.part", file: source, offset: 100_000, length: 250_000, progress: nil)
        }
        #expect(short?.kind == .sourceChanged)
        #expect(try await store.list(prefix: "short").isEmpty)
    }

    @Test("virtual-host addressing: the bucket in the host name (BUCKET.localhost), signed and accepted")
    func virtualHost() async throws {
        let bucket = try await ObjectStore.makeBucket()
        let port = try #require(URLComponents(string: try ObjectStore.endpoint)?.port)
        // *.localhost does not resolve here: connect to 127.0.0.1, send and sign the virtual host's name.
        let store = try ObjectStore.store(bucket: bucket) {
            $0.endpoint = "http://localhost:\(port)"
            $0.addressing = .virtualHost
            $0.connectionHost = "127.0.0.1"
        }
        try await store.put("virtual.json", bytes: [1, 2, 3])
        #expect(try await store.get("virtual.json") == [1, 2, 3])
        #expect(try await store.list(prefix: "").map(\.key) == ["virtual.json"])
        let directory = try TemporaryDirectory()
        #expect(try await download(bucket: bucket, prefix: "notes/", into: directory.path("boto3")).map(\.key) == ["notes/virtual.json"])
    }

    @Test("wrong credentials, a missing bucket, a skewed clock and an unreachable endpoint: each named, no secret shown or logged")
    func errors() async throws {
        let bucket = try await ObjectStore.makeBucket()
        let log = LogLines()
        let secret = "wrong-secret-4e1d9a"
        let real = try ObjectStore.credentials
        let wrongSecret = try ObjectStore.store(
            bucket: bucket, credentials: S3Credentials(accessKeyID: real.accessKeyID, secretAccessKey: secret)
        ) { $0.logger = log.logger("s3") }
        let unknownKey = try ObjectStore.store(
            bucket: bucket, credentials: S3Credentials(accessKeyID: "nobody:nothing", secretAccessKey: secret)
        ) { $0.logger = log.logger("s3") }
        var errors: [ReplicationError] = []
        for store in [wrongSecret, unknownKey] {
            let error = await #expect(throws: ReplicationError.self) { try await store.put("x", bytes: [1]) }
            #expect(error?.kind == .accessDenied, "\(String(describing: error))")
            #expect(error?.message.contains("refused the credentials") == true)
            errors += error.map { [$0] } ?? []
            let listing = await #expect(throws: ReplicationError.self) { _ = try await store.list(prefix: "") }
            #expect(listing?.kind == .accessDenied)
            errors += listing.map { [$0] } ?? []
        }

        let noBucket = try ObjectStore.store(bucket: bucket + "-missing") { $0.logger = log.logger("s3") }
        let missing = await #expect(throws: ReplicationError.self) { _ = try await noBucket.list(prefix: "") }
        #expect(missing?.kind == .noSuchBucket)
        #expect(missing?.message.contains("\(bucket)-missing does not exist") == true)
        errors += missing.map { [$0] } ?? []

        let skewed = try ObjectStore.store(bucket: bucket) {
            $0.now = { Date().addingTimeInterval(-3600) }
            $0.logger = log.logger("s3")
        }
        let skew = await #expect(throws: ReplicationError.self) { try await skewed.put("x", bytes: [1]) }
        #expect(skew?.kind == .clockSkew, "\(String(describing: skew))")
        #expect(skew?.message.contains("clock") == true)
        errors += skew.map { [$0] } ?? []

        let closedPort = try unusedPort()
        let nowhere = try S3ReplicaStore(
            bucket: bucket, prefix: "notes", credentials: real,
            configuration: .init(endpoint: "http://127.0.0.1:\(closedPort)", logger: log.logger("s3")))
        let unreachable = await #expect(throws: ReplicationError.self) { _ = try await nowhere.list(prefix: "") }
        #expect(unreachable?.kind == .unreachable, "\(String(describing: unreachable))")
        #expect(unreachable?.message.contains("127.0.0.1:\(closedPort)") == true)
        errors += unreachable.map { [$0] } ?? []

        let logged = log.text
        #expect(!logged.isEmpty)
        for text in errors.map(\.description) + [logged] {
            #expect(!text.contains(secret), "\(text)")
            #expect(!text.contains(real.secretAccessKey), "\(text)")
            #expect(!text.contains("Signature="), "\(text)")
        }
    }

    @Test("replicates to the bucket and restores byte for byte at several points; boto3 reads back every object, none readable")
    func replicateAndRestore() async throws {
        try await replicateAndRestore(settings: .engineDefault)
    }

    @Test("the same with a plaintext-header database",
          .enabled(if: Engine.isVersion4, "a plaintext header needs SQLCipher 4; SQLCipher 3.4.1 has none"))
    func replicateAndRestorePlaintextHeader() async throws {
        try await replicateAndRestore(settings: .plaintextHeader(size: 32, salt: (0..<16).map { UInt8($0 * 5 + 1) }))
    }

    private func replicateAndRestore(settings: CipherSettings) async throws {
        let bucket = try await ObjectStore.makeBucket()
        let log = LogLines()
        let key = try EncryptionKey.generateRaw()
        try await withReplicationFixture(settings: settings, key: key,
            configure: { configuration in
                configuration.checkpointFrameCount = 6
                configuration.logger = log.logger("replicator")
            },
            target: { _ in
                // Parts of 1,000 bytes: every log segment (a frame is a page and more) goes as a multipart upload.
                try ObjectStore.store(bucket: bucket) {
                    $0.partSize = 1000
                    $0.logger = log.logger("s3")
                }
            }) { fixture in
            try await fixture.sync()
            var copies: [(RestoreTarget, [UInt8])] = [(try await fixture.lastPoint(), try fixture.checkpointedCopy())]
            for round in 1...4 {
                try await fixture.insert(5 * round)
                try await fixture.sync()
                copies.append((try await fixture.lastPoint(), try fixture.checkpointedCopy()))
            }
            for (point, expected) in copies {
                #expect(try await fixture.restoredBytes(point) == expected, "\(point)")
            }
            #expect(try await fixture.restoredBytes(.latest) == copies.last?.1)

            // The bucket through another client: every object listed and read back whole, none holding a row's text,
            // the schema's text, the key's bytes or its hex text.
            let listed = try await fixture.target.list(prefix: "")
            let downloads = fixture.directory.path("boto3")
            let objects = try await download(bucket: bucket, prefix: "notes/", into: downloads)
            #expect(objects.map(\.key).sorted() == listed.map { "notes/" + $0.key }.sorted())
            // Log segments are streamed from the log file: those above the part size went as multipart uploads.
            #expect(objects.contains { $0.key.hasSuffix(".wal") && $0.etag.contains("-") }, "no multipart log segment")
            let keyText = try key.withRawKeyText { Array($0) }
            let keyHex = String(decoding: keyText.dropFirst(2).prefix(64), as: UTF8.self)
            let keyBytes = try #require(Hex.bytes(keyHex))
            for object in objects {
                #expect(object.read == object.size)
                let bytes = try fileBytes(downloads + "/" + object.key)
                #expect(bytes.count == object.size)
                #expect(!contains(bytes, plaintextMarker), "\(object.key) holds the rows' text")
                #expect(!contains(bytes, "CREATE TABLE"), "\(object.key) holds the schema's text")
                #expect(!containsBytes(bytes, keyBytes), "\(object.key) holds the key's bytes")
                #expect(!contains(bytes, keyHex), "\(object.key) holds the key's hex text")
            }
            let logged = log.text
            #expect(logged.contains("S3 request"))
            #expect(!logged.contains(try ObjectStore.credentials.secretAccessKey))
            #expect(!logged.contains(keyHex))
        }
    }

    @Test("a byte flipped in the bucket (by boto3) stops the restore, naming the object and the last good point")
    func damagedObject() async throws {
        let bucket = try await ObjectStore.makeBucket()
        try await withReplicationFixture(target: { _ in try ObjectStore.store(bucket: bucket) }) { fixture in
            try await fixture.sync()
            var copies: [Int: [UInt8]] = [:]
            for _ in 1...3 {
                try await fixture.insert(3)
                let status = try await fixture.sync()
                copies[try #require(status.lastIndex)] = try fixture.checkpointedCopy()
            }
            let generation = try #require(await fixture.replicator.status.generation)
            let segment = try #require(try await fixture.replica.catalog().generations.first?.segment(at: 2)).key
            let flipped = try await ObjectStore.check(["flip", bucket, "notes/" + segment, "100"])
            try #require(flipped.status == 0, "\(flipped.output)")
            let destination = fixture.directory.path("restored.db")
            let error = await #expect(throws: ReplicationError.self) {
                _ = try await fixture.replica.restore(to: destination, at: .latest)
            }
            #expect(error?.kind == .damaged)
            #expect(error?.message.contains(segment) == true, "\(String(describing: error))")
            #expect(error?.message.contains("last good restore point is \(generation)/1") == true)
            #expect(!FileManager.default.fileExists(atPath: destination))
            #expect(try await fixture.restoredBytes(.point(generation: generation, index: 1)) == copies[1])
        }
    }

    @Test("s3:// URLs: bucket, prefix, region and addressing; credentials from the environment; bad URLs refused")
    func urls() throws {
        let environment = ["AWS_ACCESS_KEY_ID": "AKIDURL", "AWS_SECRET_ACCESS_KEY": "secret-url-1"]
        let store = try #require(
            try s3ReplicaStore(
                for: "s3://my-bucket/backups/notes?region=eu-west-1&addressing=virtual",
                endpoint: "http://127.0.0.1:9", environment: environment) as? S3ReplicaStore)
        #expect(store.bucket == "my-bucket")
        #expect(store.prefix == "backups/notes/")
        #expect(store.configuration.region == "eu-west-1")
        #expect(store.configuration.addressing == .virtualHost)
        #expect(!store.description.contains("secret-url-1"))
        let aws = try #require(try s3ReplicaStore(for: "s3://bucket", endpoint: nil, environment: environment) as? S3ReplicaStore)
        #expect(aws.description == "s3://bucket/ (https://s3.us-east-1.amazonaws.com)")
        for url in ["s3:///prefix", "s3://bucket/x?colour=blue", "s3://bucket/x?addressing=sideways"] {
            let error = #expect(throws: DatabaseError.self) {
                _ = try s3ReplicaStore(for: url, endpoint: nil, environment: environment)
            }
            #expect(error?.kind == .invalidArgument)
        }
        // Plain http off this machine is warned about (signatures could be replayed); loopback and https are not.
        for (endpoint, warns) in [
            ("http://10.1.2.3:8080", true), ("http://0.0.0.0:1", true), ("http://127.0.0.1:9", false),
            ("http://localhost:9", false), ("http://[::1]:9", false), ("https://10.1.2.3", false),
        ] {
            let store = try #require(
                try s3ReplicaStore(for: "s3://bucket/x", endpoint: endpoint, environment: environment) as? S3ReplicaStore)
            #expect((store.transportWarning != nil) == warns, "\(endpoint)")
        }
        let noCredentials = #expect(throws: DatabaseError.self) {
            _ = try s3ReplicaStore(for: "s3://bucket/x", endpoint: nil, environment: ["HOME": "/nonexistent"])
        }
        #expect(noCredentials?.message.contains("AWS_ACCESS_KEY_ID") == true)
    }
}

/// One object as boto3 listed and read it.
struct DownloadedObject: Sendable {
    let key: String
    let size: Int
    let etag: String
    let read: Int
}

/// Every object under `prefix`, listed and read back by boto3 into `folder`.
func download(bucket: String, prefix: String, into folder: String) async throws -> [DownloadedObject] {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let result = try await ObjectStore.check(["download", bucket, prefix, folder])
    try #require(result.status == 0, "\(result.output)")
    let items = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: Any]])
    return try items.map {
        DownloadedObject(
            key: try #require($0["key"] as? String), size: try #require($0["size"] as? Int),
            etag: try #require($0["etag"] as? String), read: try #require($0["read"] as? Int))
    }
}

/// Progress values reported, in order.
final class ProgressRecorder: Sendable {
    private let recorded = Locked<[Int64]>([])
    func record(_ value: Int64) { recorded.withLock { $0.append(value) } }
    var values: [Int64] { recorded.withLock { $0 } }
    var last: Int64? { values.last }
}

/// A TCP port nothing listens on (bound, then closed).
func unusedPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(descriptor >= 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
        }
    }
    try #require(bound)
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Runs `sqlcipherkit` in this process on a thread of its own, capturing its output (as ReplicationCommandTests).
private func runS3Command(_ arguments: [String]) async -> (status: Int32, output: String, error: String) {
    await withCheckedContinuation { continuation in
        Thread {
            let capture = OutputCapture()
            let status = Output.$capture.withValue(capture) { SQLCipherKitCommand.run(arguments: arguments) }
            continuation.resume(returning: (status.rawValue, capture.standardOutput, capture.standardError))
        }.start()
    }
}

@Suite("The replication commands on a real S3 store", .enabled(if: ObjectStore.isInstalled, ObjectStore.notInstalled))
struct S3CommandTests {
    @Test("replicate --to s3:// runs until SIGTERM; snapshots --json lists its generation; restore s3:// gives the source's bytes")
    func endToEnd() async throws {
        let endpoint = try ObjectStore.endpoint
        let secret = try ObjectStore.credentials.secretAccessKey
        let bucket = try await ObjectStore.makeBucket()
        let url = "s3://\(bucket)/service"
        try await withTemporaryDirectory { folder in
            let path = folder.path("service.db")
            let key = try EncryptionKey.generateRaw()
            let keyFile = folder.path("service.key")
            try key.write(toKeyFile: keyFile)
            let pool = try DatabasePool(path: path, keyProvider: .fixed(key))
            try await pool.write { db in try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT)") }
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("sqlcipherkit").path
            let errorPath = folder.path("replicate.err")
            let outputPath = folder.path("replicate.out")
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = [
                "replicate", path, "--key-file", keyFile, "--to", url, "--endpoint", endpoint, "--sync-interval", "50ms",
            ]
            // The credentials as an operator's shell gives them: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
            process.environment = ProcessInfo.processInfo.environment.merging(try ObjectStore.start()) { $1 }
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            try process.run()
            // Synchronised on the line it prints once its first sync is done.
            try await waitForText("replicating", inFile: errorPath, of: process)
            #expect(try String(contentsOfFile: errorPath, encoding: .utf8).contains("replicating"))
            try await pool.write { db in
                for id in 1...40 { try db.execute("INSERT INTO note(id, body) VALUES (?, ?)", id, plaintextMarker) }
            }
            process.terminate()
            process.waitUntilExit()
            let errors = try String(contentsOfFile: errorPath, encoding: .utf8)
            let output = try String(contentsOfFile: outputPath, encoding: .utf8)
            #expect(process.terminationStatus == 0, "\(errors)")
            #expect(output.contains("stopped:"))
            #expect(!errors.contains(secret) && !output.contains(secret))
            let expected = try checkpointedCopy(of: path, key: key, in: folder)
            pool.close()

            let listing = await runS3Command(["snapshots", url, "--endpoint", endpoint, "--json"])
            #expect(listing.status == 0, "\(listing)")
            let envelope = try #require(try JSONSerialization.jsonObject(with: Data(listing.output.utf8)) as? [String: Any])
            let result = try #require(envelope["result"] as? [String: Any])
            let generations = try #require(result["generations"] as? [[String: Any]])
            #expect(generations.count == 1)
            #expect(generations.first?["latestRestorePoint"] is [String: Any])

            let destination = folder.path("restored.db")
            let restore = await runS3Command(
                ["restore", url, destination, "--endpoint", endpoint, "--key-file", keyFile, "--json"])
            #expect(restore.status == 0, "\(restore)")
            let restored = try #require(
                (try JSONSerialization.jsonObject(with: Data(restore.output.utf8)) as? [String: Any])?["result"]
                    as? [String: Any])
            #expect(restored["isVerified"] as? Bool == true)
            #expect(try fileBytes(destination) == expected)
            let connection = try Connection(path: destination, key: key)
            #expect(try connection.scalar("SELECT count(*) FROM note", as: Int.self) == 40)
            connection.close()

            let missing = await runS3Command(["snapshots", "s3://\(bucket)-missing/service", "--endpoint", endpoint])
            #expect(missing.status != 0)
            #expect(missing.error.contains("\(bucket)-missing does not exist"), "\(missing)")
            for text in [listing.output, listing.error, restore.output, restore.error, missing.output, missing.error] {
                #expect(!text.contains(secret))
            }
        }
    }
}
#endif
