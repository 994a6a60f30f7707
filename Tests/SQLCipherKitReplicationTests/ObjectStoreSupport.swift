#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import Testing

/// The real object store of the S3 tests: OpenStack Swift on 127.0.0.1, set up and started by the project's
/// `.ci/object-store` (the tests start it when it is installed and not running), checked with boto3 through
/// `Tests/ObjectStore/s3check.py`.
enum ObjectStore {
    /// The repository's root (this file is Tests/SQLCipherKitReplicationTests/ObjectStoreSupport.swift).
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// Whether Swift's servers, memcached, curl and boto3 are installed (`bash .ci/object-store install`, which
    /// `.ci/run` runs).
    static let isInstalled: Bool = {
        let programs = [
            "/usr/bin/swift-proxy-server", "/usr/bin/swift-object-server", "/usr/bin/swift-container-server",
            "/usr/bin/swift-account-server", "/usr/bin/swift-ring-builder", "/usr/bin/memcached", "/usr/bin/curl",
        ]
        guard programs.allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }) else { return false }
        return (try? run(["python3", "-c", "import boto3"]).status) == 0
    }()

    /// Why S3 tests are skipped when they are.
    static let notInstalled: Comment =
        "the object store is not installed: bash .ci/object-store install (OpenStack Swift, memcached, boto3)"

    /// The endpoint and credentials `.ci/object-store env` prints, once the store answers. Also set in this
    /// process's environment (the CLI's commands and their child processes read AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY, as an operator's shell would give them).
    static func start() throws -> [String: String] {
        try started.withLock { cached in
            if let cached { return cached }
            let start = try run(["bash", repositoryRoot + "/.ci/object-store", "start"])
            guard start.status == 0 else {
                throw ReplicationError(.unreachable, "the object store did not start: \(start.output)")
            }
            let printed = try run(["bash", repositoryRoot + "/.ci/object-store", "env"])
            var values: [String: String] = [:]
            for line in printed.output.split(separator: "\n") where line.hasPrefix("export ") {
                let pair = line.dropFirst("export ".count).split(separator: "=", maxSplits: 1)
                if pair.count == 2 { values[String(pair[0])] = String(pair[1]) }
            }
            for (name, value) in values { setenv(name, value, 1) }
            cached = values
            return values
        }
    }

    private static let started = Locked<[String: String]?>(nil)

    static var endpoint: String { get throws { try #require(try start()["SQLCIPHERKIT_S3_ENDPOINT"]) } }

    static var credentials: S3Credentials {
        get throws {
            let values = try start()
            return S3Credentials(
                accessKeyID: try #require(values["AWS_ACCESS_KEY_ID"]),
                secretAccessKey: try #require(values["AWS_SECRET_ACCESS_KEY"]))
        }
    }

    /// A new bucket with a unique name (created with boto3).
    static func makeBucket() throws -> String {
        let name = "replica-" + UUID().uuidString.lowercased().prefix(13).replacingOccurrences(of: "-", with: "")
        let result = try check(["create-bucket", name])
        guard result.status == 0 else { throw ReplicationError(.storeError, "create-bucket: \(result.output)") }
        return name
    }

    /// A store on the local object store (path-style unless said otherwise).
    static func store(
        bucket: String, prefix: String = "notes", credentials: S3Credentials? = nil,
        configure: (inout S3ReplicaStore.Configuration) -> Void = { _ in }
    ) throws -> S3ReplicaStore {
        var configuration = S3ReplicaStore.Configuration(endpoint: try endpoint)
        configure(&configuration)
        return try S3ReplicaStore(
            bucket: bucket, prefix: prefix, credentials: try credentials ?? self.credentials,
            configuration: configuration)
    }

    /// A store of its own (its own folder, and five free ports `.ci/object-store` chooses), for a test that stops and
    /// starts it while the shared one serves the other tests. Made by ``started(folder:)``, stopped for good with
    /// ``shutDown()`` in a `defer` right after; a guard process stops it when the test process dies without getting
    /// there (killed).
    ///
    /// From async tests, the async overloads: they run the script on a thread of their own. Starting a store under
    /// load takes tens of seconds, and a cooperative thread blocked that long (there are two on this machine) starves
    /// every other suite's tasks, whose waits then end in failures that are not theirs.
    final class Instance: Sendable {
        let folder: String
        /// The endpoint `.ci/object-store` serves for this instance (its port chosen free at the first start).
        let endpoint: String
        /// `.ci/object-store guard`: stops the store when its standard input ends.
        private let guardProcess: Process
        /// The other end of the guard's standard input (a socket pair), open only in this process (close-on-exec: no
        /// child inherits it, so the kernel closes it when this process ends, however it ends).
        private let guardInput: FileHandle

        private var variables: [String] {
            ["SQLCIPHERKIT_OBJECT_STORE_DIR=\(folder)", "SQLCIPHERKIT_OBJECT_STORE_PORT=auto"]
        }

        private init(folder: String) throws {
            self.folder = folder
            // A socket pair made close-on-exec in the same call (a pipe made first and marked after could reach a
            // child another test spawns in between, and the guard would wait for that child too).
            var ends: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                throw ReplicationError(.storeError, "socketpair: " + String(cString: strerror(errno)))
            }
            let guardOutput = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
            guardInput = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
            guardProcess = Process()
            guardProcess.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // In a session of its own (setsid): a signal to the test's process group does not end it; -w: this
            // process's wait for it ends when the guard does.
            guardProcess.arguments = [
                "SQLCIPHERKIT_OBJECT_STORE_DIR=\(folder)", "SQLCIPHERKIT_OBJECT_STORE_PORT=auto",
                "setsid", "-w", "bash", repositoryRoot + "/.ci/object-store", "guard",
            ]
            guardProcess.standardInput = guardOutput
            guardProcess.standardOutput = FileHandle.nullDevice
            guardProcess.standardError = FileHandle.nullDevice
            try guardProcess.run()
            try guardOutput.close()
            // The ports are chosen (and written into the folder) by the first command; `env` names the endpoint.
            let printed = try ObjectStore.run([
                "SQLCIPHERKIT_OBJECT_STORE_DIR=\(folder)", "SQLCIPHERKIT_OBJECT_STORE_PORT=auto",
                "bash", repositoryRoot + "/.ci/object-store", "env",
            ])
            let line = printed.output.split(separator: "\n").first { $0.hasPrefix("export SQLCIPHERKIT_S3_ENDPOINT=") }
            guard printed.status == 0, let line else {
                try? guardInput.close()
                guardProcess.waitUntilExit()
                throw ReplicationError(.storeError, "the object store named no endpoint: \(printed.output)")
            }
            endpoint = String(line.dropFirst("export SQLCIPHERKIT_S3_ENDPOINT=".count))
        }

        /// A store of its own in `folder`, started. The caller stops it for good with ``shutDown()`` in a `defer`
        /// right after; if the process dies first, the guard stops it.
        static func started(folder: String) throws -> Instance {
            let instance = try Instance(folder: folder)
            do {
                try instance.start()
            } catch {
                instance.shutDown()
                throw error
            }
            return instance
        }

        /// Stops the store for good: closes the guard's pipe, and waits for the guard, which stops every process of
        /// the store (idempotent).
        func shutDown() {
            try? guardInput.close()
            guardProcess.waitUntilExit()
        }

        /// ``started(folder:)`` off the cooperative pool.
        static func started(folder: String) async throws -> Instance {
            try await offCooperativePool { try started(folder: folder) }
        }

        /// ``start()`` off the cooperative pool.
        func start() async throws {
            try await offCooperativePool { try self.start() }
        }

        /// ``stop()`` off the cooperative pool.
        func stop() async throws {
            try await offCooperativePool { try self.stop() }
        }

        /// ``isUp()`` off the cooperative pool.
        func isUp() async throws -> Bool {
            try await offCooperativePool { try self.isUp() }
        }

        /// ``makeBucket()`` off the cooperative pool.
        func makeBucket() async throws -> String {
            try await offCooperativePool { try self.makeBucket() }
        }

        /// Whether the guard is still waiting (the store has not been stopped for good).
        var isGuarded: Bool { guardProcess.isRunning }

        /// Starts it and waits until it answers (`.ci/object-store start`).
        func start() throws {
            let result = try ObjectStore.run(variables + ["bash", repositoryRoot + "/.ci/object-store", "start"])
            guard result.status == 0 else {
                throw ReplicationError(.unreachable, "the object store did not start: \(result.output)")
            }
        }

        /// Stops every process of it (`.ci/object-store stop`).
        func stop() throws {
            let result = try ObjectStore.run(variables + ["bash", repositoryRoot + "/.ci/object-store", "stop"])
            guard result.status == 0 else {
                throw ReplicationError(.storeError, "the object store did not stop: \(result.output)")
            }
        }

        /// Whether it answers (`.ci/object-store status`).
        func isUp() throws -> Bool {
            try ObjectStore.run(variables + ["bash", repositoryRoot + "/.ci/object-store", "status"]).status == 0
        }

        /// A new bucket in it (created with boto3).
        func makeBucket() throws -> String {
            let name = "outage-" + UUID().uuidString.lowercased().prefix(13).replacingOccurrences(of: "-", with: "")
            let credentials = try ObjectStore.credentials
            let result = try ObjectStore.run([
                "SQLCIPHERKIT_S3_ENDPOINT=\(endpoint)", "AWS_ACCESS_KEY_ID=\(credentials.accessKeyID)",
                "AWS_SECRET_ACCESS_KEY=\(credentials.secretAccessKey)",
                "python3", repositoryRoot + "/Tests/ObjectStore/s3check.py", "create-bucket", name,
            ])
            guard result.status == 0 else { throw ReplicationError(.storeError, "create-bucket: \(result.output)") }
            return name
        }

        /// A replica store in `bucket` of this instance.
        func store(bucket: String) throws -> S3ReplicaStore {
            try S3ReplicaStore(
                bucket: bucket, prefix: "notes", credentials: try ObjectStore.credentials,
                configuration: S3ReplicaStore.Configuration(endpoint: endpoint))
        }
    }

    /// ``check(_:input:)`` off the cooperative pool: a boto3 process takes a second or more on a loaded machine, and
    /// two tests blocking Swift's two cooperative threads that long stall every other test.
    static func check(_ arguments: [String], input: String? = nil) async throws -> (status: Int32, output: String) {
        try await offCooperativePool { try check(arguments, input: input) }
    }

    /// ``makeBucket()`` off the cooperative pool.
    static func makeBucket() async throws -> String {
        try await offCooperativePool { try makeBucket() }
    }

    /// Runs `Tests/ObjectStore/s3check.py` (boto3) with the store's environment.
    static func check(_ arguments: [String], input: String? = nil) throws -> (status: Int32, output: String) {
        _ = try start()
        return try run(["python3", repositoryRoot + "/Tests/ObjectStore/s3check.py"] + arguments, input: input)
    }

    /// Runs a program to its end; its standard output (and standard error after it).
    static func run(_ arguments: [String], input: String? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        let standardInput = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = standardInput
        try process.run()
        if let input { standardInput.fileHandleForWriting.write(Data(input.utf8)) }
        try standardInput.fileHandleForWriting.close()
        // Read both pipes to their ends before waiting (a full pipe would block the child).
        let errorData = Locked(Data())
        let errorsRead = DispatchSemaphore(value: 0)
        Thread {
            errorData.withLock { $0 = errors.fileHandleForReading.readDataToEndOfFile() }
            errorsRead.signal()
        }.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        errorsRead.wait()
        process.waitUntilExit()
        let text = String(decoding: outputData, as: UTF8.self) + errorData.withLock { String(decoding: $0, as: UTF8.self) }
        return (process.terminationStatus, text)
    }
}
#endif
