#if Examples  // trait Examples (Package.swift)
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import SQLCipherKitTestSupport

/// An example service binary run as a separate process on 127.0.0.1, for tests that drive it over HTTP.
final class ServiceProcess: @unchecked Sendable {
    let process = Process()
    let outputPath: String
    private(set) var port = 0

    /// The example binaries sit beside the test bundle.
    static func binary(_ name: String) -> String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Starts `name` with `arguments`; its output goes to a file in `directory`.
    init(_ name: String, arguments: [String], environment: [String: String] = [:], in directory: TemporaryDirectory)
        throws
    {
        outputPath = directory.path("\(name).out")
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.executableURL = URL(fileURLWithPath: Self.binary(name))
        process.arguments = arguments
        process.currentDirectoryURL = directory.url
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try output.close()
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// The Hummingbird notes example on `databasePath` with the key in `keyFile`, on a free port, once it listens:
    /// the process and its port. `options` go before the file names.
    static func notesExample(
        _ options: [String] = [], database databasePath: String, keyFile: String, in directory: TemporaryDirectory
    ) async throws -> (ServiceProcess, port: Int) {
        let service = try ServiceProcess(
            "sqlcipherkit-hummingbird-example", arguments: options + [databasePath, keyFile, "0"], in: directory)
        let listening = try await service.waitForOutput("listening on 127.0.0.1:")
        guard let port = listening.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw ServiceProcessError("no port in \(listening)")
        }
        return (service, port)
    }

    /// Waits for a line that matches `marker` (at most 120 s: only to turn a hang into a failure).
    func waitForOutput(_ marker: String) async throws -> String {
        var line: Substring?
        _ = await suspendingWait {
            line = output.split(separator: "\n").first { $0.contains(marker) }
            return line != nil || !process.isRunning
        }
        guard let line else { throw ServiceProcessError("\(marker) never appeared; output:\n\(output)") }
        return String(line)
    }

    /// Waits for a process that ends on its own (a refusal) without signalling it; `nil` when it exited on a
    /// signal. At most 120 s, only to turn a hang into a failure (then it is killed and this throws).
    func waitForExit() async throws -> Int32? {
        try await exited(orKilledWith: "the process did not exit on its own within 120 s; output:\n\(output)")
        return process.terminationReason == .exit ? process.terminationStatus : nil
    }

    /// Sends SIGTERM (graceful shutdown) and waits for the exit (at most 120 s).
    func terminate() async throws -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        try await exited(orKilledWith: "the service did not stop within 120 s of SIGTERM")
        return process.terminationStatus
    }

    /// Suspends until the process has exited (``suspendingWait(within:_:)``, 120 s); a hang is killed and becomes
    /// `message`.
    private func exited(orKilledWith message: @autoclosure () -> String) async throws {
        if await suspendingWait({ !process.isRunning }) { return }
        kill(process.processIdentifier, SIGKILL)
        throw ServiceProcessError(message())
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct ServiceProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A free TCP port on 127.0.0.1 (bound and released; the service binds it right after).
func freeLocalPort() throws -> Int {
    let socket = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).wait()
    let port = socket.localAddress?.port ?? 0
    try socket.close().wait()
    return port
}

/// One HTTP request to the service; returns the status code and the body text.
func http(
    _ client: HTTPClient, _ method: HTTPMethod, _ url: String, body: String? = nil, json: Bool = false
) async throws -> (status: Int, body: String) {
    var request = HTTPClientRequest(url: url)
    request.method = method
    if let body {
        request.body = .bytes(ByteBuffer(string: body))
        if json { request.headers.add(name: "Content-Type", value: "application/json") }
    }
    let response = try await client.execute(request, timeout: .seconds(120))  // a hang guard only
    let text = String(buffer: try await response.body.collect(upTo: 1 << 22))
    return (Int(response.status.code), text)
}

/// The body of a JSON response as a dictionary.
func jsonObject(_ text: String) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
}
#endif
