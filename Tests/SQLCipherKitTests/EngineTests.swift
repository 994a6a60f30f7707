import CSQLCipher
import SQLCipherKit
import Testing

@Suite("Engine")
struct EngineTests {
    @Test("the linked library is SQLCipher and its versions are reported")
    func reportsVersions() {
        #expect(SQLCipher.isSQLCipher)
        #expect(SQLCipher.parsedVersion != nil)
        #expect(SQLCipher.sqliteVersion.hasPrefix("3."))
        #expect(SQLCipher.sqliteVersionNumber >= 3_015_000)
        #expect(SQLCipher.cryptoProvider == "openssl")
    }

    // Only the test scripts say which engine a run must be on (.ci/test, .ci/sqlcipher4); a plain `swift test` may
    // run on either, and then there is nothing to compare.
    @Test("the run is on the engine the test script asked for", .enabled(if: Engine.expectedMajor != nil,
        "SQLCIPHERKIT_EXPECTED_ENGINE is not set: only .ci/test and .ci/sqlcipher4 say which engine to expect"))
    func runsOnExpectedEngine() throws {
        let expected = try #require(Engine.expectedMajor)
        #expect(
            Engine.major == expected,
            "SQLCIPHERKIT_EXPECTED_ENGINE=\(expected) but the loaded engine is SQLCipher \(SQLCipher.version)")
    }

    @Test("SQLCipher's own header is the one compiled against: sqlite3_key is visible")
    func keyFunctionIsVisible() {
        // Compiles only when SQLITE_HAS_CODEC was defined before SQLCipher's sqlite3.h.
        let function: (OpaquePointer?, UnsafeRawPointer?, CInt) -> CInt = sqlite3_key
        _ = function
        #expect(SQLCipher.compiledSQLiteVersion.hasPrefix("3."))
    }

    @Test("features follow the engine version")
    func featuresFollowVersion() throws {
        #expect(SQLCipher.supports(.plaintextHeader) == Engine.isVersion4)
        if !Engine.isVersion4 {
            let error = #expect(throws: DatabaseError.self) { try SQLCipher.require(.plaintextHeader) }
            #expect(error?.kind == .unsupportedByEngine)
            #expect(error?.message.contains("4.0.0") == true)
            #expect(error?.message.contains(SQLCipher.version) == true)
        }
    }
}
