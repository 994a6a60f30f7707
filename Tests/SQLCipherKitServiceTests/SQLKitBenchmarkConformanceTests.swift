#if SQLKit  // trait SQLKit (Package.swift)
import Logging
import SQLCipherKit
import SQLCipherKitSQLKit
import SQLKit
import SQLKitBenchmark
import XCTest

/// sql-kit's own conformance suite (`SQLKitBenchmark`) against ``SQLCipherSQLDatabase`` on an encrypted file.
///
/// Each part of `runAllTests()` is its own test, so a part the engine cannot run is skipped with the feature and
/// the versions named instead of passing silently.
final class SQLKitBenchmarkConformanceTests: XCTestCase {
    func testPlanets() async throws { try await benchmarker.testPlanets() }
    func testCodable() async throws { try await benchmarker.testCodable() }
    func testEnum() async throws { try await benchmarker.testEnum() }

    func testUpserts() async throws {
        // The suite returns early, passing, when the dialect has no upsert: make that a visible skip.
        try skip(unless: .upsert)
        XCTAssertEqual(database.dialect.upsertSyntax, .standard)
        try await benchmarker.testUpserts()
    }

    func testUnions() async throws { try await benchmarker.testUnions() }
    func testJSONPaths() async throws {
        try skip(unless: .jsonFunctions)
        try await benchmarker.testJSONPaths()
    }

    private func skip(unless feature: SQLCipherDialect.Capabilities.Feature) throws {
        if let reason = Engine.capabilities.missingReason(feature) { throw XCTSkip(reason) }
    }

    // MARK: - Set-up

    var directory: TemporaryDirectory!
    var pool: DatabasePool!
    var database: SQLCipherSQLDatabase!
    var benchmarker: SQLBenchmarker { SQLBenchmarker(on: database) }

    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = try TemporaryDirectory()
        pool = try DatabasePool(path: directory.path("sqlkit.db"), keyProvider: .fixed(TestKeys.raw))
        database = SQLCipherSQLDatabase(pool: pool, logger: Logger(label: "sqlkit.benchmark"))
    }

    override func tearDown() async throws {
        pool.close()
        XCTAssertFalse(contains(try fileBytes(directory.path("sqlkit.db")), "SQLite format 3"))
        directory.remove()
        try await super.tearDown()
    }
}
#endif
