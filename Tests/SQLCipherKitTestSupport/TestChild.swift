import Foundation

/// `sqlcipherkit-test-child`, the program a test starts when it needs library code running in another process (one
/// it can kill with SIGKILL at a moment it chooses): each role is a function of this module, run by
/// Tests/SQLCipherKitTestChild, and never a test of its own, so a test run counts no entry point that cannot fail.
public enum TestChild {
    /// The program's name; SwiftPM builds it beside the test binary.
    public static let name = "sqlcipherkit-test-child"

    /// The variable that carries the database key to the child (raw key text, `x'…'`): never argv.
    public static let keyVariable = "SQLCIPHERKIT_TEST_CHILD_KEY"

    /// Whether the tests run as a program of their own, beside which SwiftPM builds the child (Linux). On Apple
    /// platforms they run inside `xctest`, whose path says nothing of the build folder.
    #if os(Linux)
    public static let isSupported = true
    #else
    public static let isSupported = false
    #endif

    /// The built program, beside the test binary (`.build/debug/`); `nil` when it is not built there.
    public static var path: String? {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidate = folder.appendingPathComponent(name).path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    /// Starts the child in `role` with `arguments`, the test's environment (so it loads the same engine) and the
    /// key text in ``keyVariable``. Its standard output is discarded; its errors go to the test run's.
    ///
    /// - Throws: When the program is not built (build the package: `swift build --build-tests`) or cannot start.
    public static func start(_ role: String, _ arguments: [String], keyText: String) throws -> Process {
        guard let path else {
            throw CocoaError(.fileNoSuchFile, userInfo: [
                NSLocalizedDescriptionKey: "\(name) is not built beside the test binary (swift build --build-tests)",
            ])
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [role] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment[keyVariable] = keyText
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }
}
