import Foundation
import SQLCipherKit
import Testing

@Suite("sqlcipherkit --version")
struct VersionTests {
    @Test("prints the library, SQLite and SQLCipher versions")
    func version() throws {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("sqlcipherkit").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--version"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(text.contains(SQLCipherKitVersion.string))
        #expect(text.contains(SQLCipher.version))
        #expect(text.contains(SQLCipher.sqliteVersion))
    }
}
