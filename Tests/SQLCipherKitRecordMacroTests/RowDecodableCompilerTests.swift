#if RecordMacro
import Foundation
import Testing

/// Runs the compiler, with the plugin this build made, on code that uses `@RowDecodable`: what it generates, and the
/// errors it gives for what it cannot read (a test program cannot hold code that does not compile).
@Suite("@RowDecodable: what the compiler sees")
struct RowDecodableCompilerTests {
    /// The build folder (the test program's own), and the package's root (this file is in Tests/<target>/).
    private static let buildFolder = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent()
    private static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Type-checks `source` importing SQLCipherKitRecordMacro; returns the exit status and what the compiler printed.
    private static func typecheck(_ source: String, dumpExpansions: Bool = false) throws -> (Int32, String) {
        let plugin = buildFolder.appendingPathComponent("SQLCipherKitMacros-tool").path
        let modules = buildFolder.appendingPathComponent("Modules").path
        let supportMap = buildFolder.appendingPathComponent("CSQLCipherKitSupport.build/module.modulemap").path
        // Not a skip: without them this test checks nothing, so it fails and says what is missing.
        for needed in [plugin, modules, supportMap] where !FileManager.default.fileExists(atPath: needed) {
            Issue.record("the build has no \(needed): run the tests with `swift test --enable-all-traits`")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rowdecodable-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("snippet.swift")
        try ("import SQLCipherKitRecordMacro\n" + source).write(to: file, atomically: true, encoding: .utf8)
        let sources = packageRoot.appendingPathComponent("Sources").path
        var arguments = [
            "swiftc", "-typecheck", file.path, "-I", modules, "-load-plugin-executable", plugin + "#SQLCipherKitMacros",
            "-Xcc", "-fmodule-map-file=\(sources)/CSQLCipher/module.modulemap",
            "-Xcc", "-fmodule-map-file=\(sources)/COpenSSL/module.modulemap",
            "-Xcc", "-fmodule-map-file=\(supportMap)",
            "-Xcc", "-I", "-Xcc", "\(sources)/CSQLCipherKitSupport/include",
        ]
        if dumpExpansions { arguments += ["-Xfrontend", "-dump-macro-expansions"] }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: printed, as: UTF8.self))
    }

    @Test("generates init(row:) with one column read per stored property, public for a public struct")
    func expansion() throws {
        let (status, printed) = try Self.typecheck("""
            @RowDecodable
            public struct Player {
                var id: Int64
                var name: String?
                var `default`: [String]
                var rank: Optional<Int>
                let fixed = 1
                var computed: Int { 0 }
                static var shared: Int64 = 0
            }
            """, dumpExpansions: true)
        #expect(status == 0, "\(printed)")
        #expect(printed.contains("extension Player: SQLCipherKit.FetchableRecord {"), "\(printed)")
        #expect(printed.contains("public init(row: SQLCipherKit.Row) throws {"), "\(printed)")
        #expect(printed.contains(#"self.id = try row.decodeColumn((Int64).self, named: "id")"#), "\(printed)")
        #expect(printed.contains(#"self.name = try row.decodeColumnIfPresent((String).self, named: "name")"#))
        #expect(printed.contains(#"self.`default` = try row.decodeColumn(([String]).self, named: "default")"#))
        #expect(printed.contains(#"self.rank = try row.decodeColumnIfPresent((Int).self, named: "rank")"#))
        for skipped in ["fixed", "computed", "shared"] {
            #expect(!printed.contains("self.\(skipped) ="), "\(printed)")
        }
    }

    @Test("refuses a class and an enum, naming the reason")
    func notAStruct() throws {
        let (status, printed) = try Self.typecheck("""
            @RowDecodable
            final class Card { var id: Int64 = 0 }
            @RowDecodable
            enum Suit { case hearts }
            """)
        #expect(status != 0)
        #expect(printed.components(separatedBy: "error: @RowDecodable applies to a struct").count - 1 >= 2, "\(printed)")
    }

    @Test("refuses a stored property without a written type, a property wrapper, and a CodingKeys value it cannot read")
    func unreadableProperties() throws {
        let (status, printed) = try Self.typecheck(#"""
            @propertyWrapper struct Clamped { var wrappedValue: Int64 }
            @RowDecodable
            struct Inferred { var count = 3 }
            @RowDecodable
            struct Wrapped { @Clamped var level: Int64 }
            @RowDecodable
            struct Escaped {
                var a: Int64
                enum CodingKeys: String, CodingKey { case a = "a\\b" }
            }
            """#)
        #expect(status != 0)
        #expect(printed.contains("error: @RowDecodable needs the type of 'count' written out"), "\(printed)")
        #expect(printed.contains("error: @RowDecodable cannot read 'level'"), "\(printed)")
        #expect(printed.contains("error: @RowDecodable reads CodingKeys raw values that are plain string literals"))
    }
}
#endif
