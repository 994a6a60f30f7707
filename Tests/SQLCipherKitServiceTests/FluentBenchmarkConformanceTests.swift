#if Fluent  // trait Fluent (Package.swift)
import FluentBenchmark
import FluentKit
import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLCipherKit
import SQLCipherKitFluent
import SQLCipherKitSQLKit
import XCTest

/// fluent-kit's own conformance suite (`FluentBenchmark`) against the SQLCipher Fluent driver: every test
/// fluent-sqlite-driver runs, on encrypted files, on whichever engine the process loaded.
///
/// XCTest, not Swift Testing: the suite reports through `XCTAssert`, which records failures only inside an
/// `XCTestCase`.
final class FluentBenchmarkConformanceTests: XCTestCase {
    func testAggregate() throws { try benchmarker.testAggregate() }
    func testArray() throws { try benchmarker.testArray() }
    func testBatch() throws { try benchmarker.testBatch() }
    func testChild() throws { try benchmarker.testChild() }
    func testChildren() throws { try benchmarker.testChildren() }
    func testCodable() throws { try benchmarker.testCodable() }
    func testChunk() throws { try benchmarker.testChunk() }
    func testCompositeID() throws { try benchmarker.testCompositeID() }
    func testCRUD() throws { try benchmarker.testCRUD() }
    func testEagerLoad() throws { try benchmarker.testEagerLoad() }
    func testEnum() throws { try benchmarker.testEnum() }
    func testFilter() throws { try benchmarker.testFilter() }
    func testGroup() throws { try benchmarker.testGroup() }
    func testID() throws { try benchmarker.testID() }
    func testJoin() throws { try benchmarker.testJoin() }
    func testMiddleware() throws { try benchmarker.testMiddleware() }
    func testMigrator() throws { try benchmarker.testMigrator() }
    func testModel() throws {
        // Part of it filters on a JSON field (json_extract).
        try skip(unless: .jsonFunctions)
        try benchmarker.testModel()
    }
    func testOptionalParent() throws { try benchmarker.testOptionalParent() }
    func testPagination() throws { try benchmarker.testPagination() }
    func testParent() throws { try benchmarker.testParent() }
    func testPerformance() throws {
        // It creates 600 siblings in one INSERT (1,800 parameters); SQLite allowed 999 until 3.32.
        try skip(unless: .manyBoundParameters)
        try benchmarker.testPerformance()
    }
    func testRange() throws { try benchmarker.testRange() }
    func testSchema() throws { try benchmarker.testSchema() }
    func testSet() throws { try benchmarker.testSet() }
    func testSiblings() throws { try benchmarker.testSiblings() }
    func testSoftDelete() throws { try benchmarker.testSoftDelete() }
    func testSort() throws { try benchmarker.testSort() }
    func testSQL() throws {
        // Part of it reads a JSON path (json_extract).
        try skip(unless: .jsonFunctions)
        try benchmarker.testSQL()
    }
    func testTimestamp() throws { try benchmarker.testTimestamp() }
    func testTransaction() throws { try benchmarker.testTransaction() }
    func testUnique() throws { try benchmarker.testUnique() }

    /// Skips on an engine without `feature`, naming the feature and both versions.
    private func skip(unless feature: SQLCipherDialect.Capabilities.Feature) throws {
        if let reason = Engine.capabilities.missingReason(feature) { throw XCTSkip(reason) }
    }

    // MARK: - Set-up: two encrypted files, as fluent-sqlite-driver registers two databases

    var benchmarker: FluentBenchmarker { FluentBenchmarker(databases: databases) }
    var databases: Databases!
    var directory: TemporaryDirectory!

    override class func setUp() {
        XCTAssert(isLoggingConfigured)
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        if let expected = Engine.expectedMajor {
            XCTAssertEqual(Engine.major, expected, "the suite must run on SQLCipher \(expected)")
        }
        directory = try TemporaryDirectory()
        databases = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
        databases.use(.sqlcipher(file: directory.path("main.db"), keyProvider: .fixed(TestKeys.raw)), as: .sqlcipher)
        databases.use(
            .sqlcipher(file: directory.path("benchmark.db"), keyProvider: .fixed(TestKeys.otherRaw)),
            as: DatabaseID(string: "benchmark"))
    }

    override func tearDown() async throws {
        await databases.shutdownAsync()
        databases = nil
        // The files were encrypted all along: no SQLite header (a skipped test made none).
        for name in ["main.db", "benchmark.db"] where FileManager.default.fileExists(atPath: directory.path(name)) {
            XCTAssertFalse(contains(try fileBytes(directory.path(name)), "SQLite format 3"), name)
        }
        directory.remove()
        directory = nil
        try await super.tearDown()
    }
}
#endif
