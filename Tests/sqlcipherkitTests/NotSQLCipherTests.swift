import Foundation
import SQLCipherKit
import Testing

@Suite("Plain SQLite instead of SQLCipher")
struct NotSQLCipherTests {
    /// Where Debian keeps stock SQLite (the sqlite3 shell's library; .ci/run installs it).
    static let stockSQLite = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"

    @Test("with stock SQLite loaded in place of SQLCipher, the tool refuses to open anything and says why",
          .enabled(if: FileManager.default.fileExists(atPath: stockSQLite),
                   "needs Debian's stock libsqlite3.so.0 at \(stockSQLite) (x86_64 Debian/Ubuntu)"))
    func refusesPlainSQLite() throws {
        let scratch = try Scratch()
        let (keyPath, _) = try scratch.rawKeyFile("db.key")
        // The binary asks the dynamic linker for libsqlcipher.so.0: hand it stock SQLite under that name.
        let libraries = scratch.path("plain-sqlite")
        try FileManager.default.createDirectory(atPath: libraries, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: libraries + "/libsqlcipher.so.0", withDestinationPath: Self.stockSQLite)
        let environment: [String: String?] = ["LD_LIBRARY_PATH": libraries, "LD_PRELOAD": nil]

        let version = try runSubprocess(["--version"], environment: environment, in: scratch)
        #expect(version.status == 0)
        #expect(version.standardOutput.contains("not SQLCipher"))

        let database = scratch.path("plain.db")
        let result = try runSubprocess(
            ["exec", database, "--key-file", keyPath, "--create", "CREATE TABLE t(x)"], environment: environment, in: scratch)
        #expect(result.status == 1)
        #expect(result.standardError.contains("without SQLCipher"), "\(result.standardError)")
        #expect((try? FileManager.default.attributesOfItem(atPath: database)[.size] as? Int) ?? 0 == 0,
                "nothing may be written unencrypted")
    }
}
