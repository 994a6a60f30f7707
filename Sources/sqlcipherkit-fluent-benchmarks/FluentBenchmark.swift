// The Fluent driver on an encrypted file against fluent-sqlite-driver on a plaintext file, in one process:
// create 10,000 models, fetch them all, fetch 1,000 by id. Release build only:
//
//   swift run -c release --traits Examples sqlcipherkit-fluent-benchmarks [--rounds N]
//   bash .ci/sqlcipher4 .build/release/sqlcipherkit-fluent-benchmarks      (SQLCipher 4.19)
//
// Each round runs both drivers, alternating which goes first; the figures are medians. Docs/Performance.md has
// the results. Not a test: nothing here asserts a time.
#if Examples  // trait Examples (Package.swift); otherwise Fallback.swift
import FluentKit
import FluentSQLiteDriver
import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLCipherKit
import SQLCipherKitFluent

final class Item: Model, @unchecked Sendable {
    static let schema = "items"
    @ID(custom: .id, generatedBy: .database) var id: Int?
    @Field(key: "name") var name: String
    @Field(key: "count") var count: Int
    @Field(key: "score") var score: Double
    @Field(key: "created_at") var createdAt: Date

    init() {}

    init(number: Int) {
        name = "item number \(number) with a little text to store"
        count = number
        score = Double(number) / 7
        createdAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(number))
    }
}

struct CreateItems: AsyncMigration {
    func prepare(on database: any Database) async throws {
        try await database.schema(Item.schema)
            .field(.id, .int, .identifier(auto: true))
            .field("name", .string, .required)
            .field("count", .int, .required)
            .field("score", .double, .required)
            .field("created_at", .datetime, .required)
            .create()
    }

    func revert(on database: any Database) async throws {
        try await database.schema(Item.schema).delete()
    }
}

let modelCount = 10_000
let lookupCount = 1_000

struct Timings {
    var create: [Double] = []
    var fetchAll: [Double] = []
    var fetchByID: [Double] = []
}

func seconds(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// One round on a fresh file: the three workloads, timed.
func round(_ configuration: DatabaseConfigurationFactory, into timings: inout Timings) async throws {
    let databases = Databases(threadPool: NIOThreadPool.singleton, on: MultiThreadedEventLoopGroup.singleton)
    databases.use(configuration, as: .sqlite)
    let database = databases.database(
        logger: Logger(label: "benchmark"), on: MultiThreadedEventLoopGroup.singleton.any())!
    try await CreateItems().prepare(on: database)

    // 10,000 creates, one model at a time, in one transaction (one commit: the disk's sync speed stays out).
    timings.create.append(try await seconds {
        try await database.transaction { db in
            for number in 0..<modelCount { try await Item(number: number).create(on: db) }
        }
    })
    timings.fetchAll.append(try await seconds {
        let items = try await Item.query(on: database).all()
        precondition(items.count == modelCount)
    })
    var generator = SystemRandomNumberGenerator()
    let ids = (0..<lookupCount).map { _ in Int.random(in: 1...modelCount, using: &generator) }
    timings.fetchByID.append(try await seconds {
        for id in ids {
            let item = try await Item.find(id, on: database)
            precondition(item != nil)
        }
    })
    await databases.shutdownAsync()
}

@main
enum FluentBenchmark {
    static func main() async throws {
        let arguments = CommandLine.arguments
        let rounds = arguments.firstIndex(of: "--rounds").flatMap { Int(arguments[$0 + 1]) } ?? 5
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlcipherkit-fluent-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = try EncryptionKey.generateRaw()

        var encrypted = Timings()
        var plaintext = Timings()
        for index in 0..<(rounds + 1) {
            var roundEncrypted = Timings()
            var roundPlaintext = Timings()
            let encryptedPath = folder.appendingPathComponent("encrypted-\(index).db").path
            let plaintextPath = folder.appendingPathComponent("plaintext-\(index).db").path
            let runEncrypted = { (timings: inout Timings) in
                try await round(.sqlcipher(file: encryptedPath, keyProvider: .fixed(key), sqlLogLevel: nil),
                                into: &timings)
            }
            if index % 2 == 0 {
                try await runEncrypted(&roundEncrypted)
                try await round(.sqlite(.file(plaintextPath), sqlLogLevel: nil), into: &roundPlaintext)
            } else {
                try await round(.sqlite(.file(plaintextPath), sqlLogLevel: nil), into: &roundPlaintext)
                try await runEncrypted(&roundEncrypted)
            }
            guard index > 0 else { continue }  // the first round warms up
            encrypted.create += roundEncrypted.create
            encrypted.fetchAll += roundEncrypted.fetchAll
            encrypted.fetchByID += roundEncrypted.fetchByID
            plaintext.create += roundPlaintext.create
            plaintext.fetchAll += roundPlaintext.fetchAll
            plaintext.fetchByID += roundPlaintext.fetchByID
        }

        print("SQLCipher \(SQLCipher.version) (SQLite \(SQLCipher.sqliteVersion)), raw key; \(rounds) rounds, medians")
        print("| Workload | fluent-sqlite-driver, plaintext (ms) | SQLCipherKitFluent, encrypted (ms) | Ratio |")
        print("|---|---:|---:|---:|")
        for (name, plain, enc) in [
            ("Create \(modelCount) models (one transaction)", plaintext.create, encrypted.create),
            ("Fetch all \(modelCount)", plaintext.fetchAll, encrypted.fetchAll),
            ("Fetch \(lookupCount) by id", plaintext.fetchByID, encrypted.fetchByID),
        ] {
            let (p, e) = (median(plain) * 1000, median(enc) * 1000)
            print("| \(name) | \(String(format: "%.1f", p)) | \(String(format: "%.1f", e)) | "
                + "\(String(format: "%.2f", e / p))× |")
        }
    }
}
#endif
