// swift-tools-version: 6.1
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

// The core (library SQLCipherKit and the CLI) depends on swift-log and swift-argument-parser only. The service
// integrations (SQLKit, Fluent, swift-service-lifecycle, swift-metrics) and their examples are separate products:
// a package that uses only `SQLCipherKit` builds none of NIO, SQLKit, Fluent, Vapor or Hummingbird.
//
// SQLCIPHERKIT_CORE_ONLY=1 leaves the integrations out of the package graph altogether; CI uses it for the
// ThreadSanitizer build of the core so that Vapor, Fluent and Hummingbird are not built a second time.
let isCoreOnly = Context.environment["SQLCIPHERKIT_CORE_ONLY"] == "1"

var products: [Product] = [
    .library(name: "SQLCipherKit", targets: ["SQLCipherKit"]),
    .executable(name: "sqlcipherkit", targets: ["sqlcipherkit"]),
]

var dependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
]

// The CLI's `replicate`, `restore` and `snapshots` commands come with the replication product (left out, with it, in
// a core-only build).
var commandLineDependencies: [Target.Dependency] = [
    "SQLCipherKit",
    .product(name: "ArgumentParser", package: "swift-argument-parser"),
]
if !isCoreOnly {
    commandLineDependencies.append("SQLCipherKitReplication")
}

var targets: [Target] = [
    .systemLibrary(
        name: "CSQLCipher",
        pkgConfig: "sqlcipher",
        providers: [.apt(["libsqlcipher-dev", "libssl-dev"]), .brew(["sqlcipher"])]
    ),
    .systemLibrary(
        name: "COpenSSL",
        pkgConfig: "libcrypto",
        providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
    ),
    // Async-signal-safe removal of temporary database files (a C signal handler cannot be written in Swift), and the
    // read-only overlay VFS of the library's checks (a VFS is a table of C callbacks).
    .target(name: "CSQLCipherKitSupport", dependencies: ["CSQLCipher"]),
    .target(
        name: "SQLCipherKit",
        dependencies: [
            "CSQLCipher", "COpenSSL", "CSQLCipherKitSupport", .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: strictSwift
    ),
    .executableTarget(
        name: "sqlcipherkit",
        dependencies: commandLineDependencies,
        swiftSettings: strictSwift
    ),
    // Release-build benchmark against the raw C API (see Docs/Performance.md); not a test.
    .executableTarget(
        name: "sqlcipherkit-benchmarks",
        dependencies: ["SQLCipherKit", "CSQLCipher"],
        swiftSettings: strictSwift
    ),
    // What every test target needs: temporary directories, file bytes, the engine in use, another process.
    .target(
        name: "SQLCipherKitTestSupport",
        dependencies: ["SQLCipherKit"],
        path: "Tests/SQLCipherKitTestSupport",
        swiftSettings: strictSwift
    ),
    .testTarget(
        name: "SQLCipherKitTests",
        dependencies: [
            "SQLCipherKit", "SQLCipherKitTestSupport", "CSQLCipher", .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: strictSwift
    ),
    .testTarget(
        name: "sqlcipherkitTests",
        dependencies: ["sqlcipherkit", "SQLCipherKit", "SQLCipherKitTestSupport"],
        swiftSettings: strictSwift
    ),
]

// MARK: - Service integrations (separate products)

if !isCoreOnly {
    products += [
        .library(name: "SQLCipherKitSQLKit", targets: ["SQLCipherKitSQLKit"]),
        .library(name: "SQLCipherKitFluent", targets: ["SQLCipherKitFluent"]),
        .library(name: "SQLCipherKitServices", targets: ["SQLCipherKitServices"]),
        .library(name: "SQLCipherKitReplication", targets: ["SQLCipherKitReplication"]),
    ]
    dependencies += [
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-metrics", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/vapor/sql-kit", exact: "3.36.0"),
        .package(url: "https://github.com/vapor/fluent-kit", exact: "1.57.0"),
        .package(url: "https://github.com/vapor/fluent-sqlite-driver", exact: "4.9.0"),
        .package(url: "https://github.com/vapor/fluent", exact: "4.13.0"),
        .package(url: "https://github.com/vapor/vapor", exact: "4.122.3"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.24.0"),
    ]
    targets += [
        // An SQLKit `SQLDatabase` over `DatabasePool`, with a dialect decided from the linked engine's version.
        .target(
            name: "SQLCipherKitSQLKit",
            dependencies: [
                "SQLCipherKit",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift
        ),
        // A Fluent driver over the SQLKit driver: `.sqlcipher(file:keyProvider:)`.
        .target(
            name: "SQLCipherKitFluent",
            dependencies: [
                "SQLCipherKitSQLKit",
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "FluentSQL", package: "fluent-kit"),
            ],
            swiftSettings: strictSwift
        ),
        // The pool as a swift-service-lifecycle Service, metrics, health check, live key rotation and replication.
        // It depends on SQLCipherKitReplication (not the other way round): the service must pause replication
        // around its rekey, report its lag in the health check and ship what is left before the pool closes, which
        // a wrapper outside it could not do (Docs/Services.md, "Replication"). Core-only users build neither.
        .target(
            name: "SQLCipherKitServices",
            dependencies: [
                "SQLCipherKit", "SQLCipherKitReplication",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        // Continuous replication of the encrypted pages and WAL frames to an object store or a folder, and
        // point-in-time restore (Docs/Replication.md). SigV4 is signed with OpenSSL's libcrypto (no S3 SDK).
        .target(
            name: "SQLCipherKitReplication",
            dependencies: [
                "SQLCipherKit", "CSQLCipher", "COpenSSL",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SQLCipherKitReplicationTests",
            dependencies: [
                "SQLCipherKitReplication", "SQLCipherKitTestSupport", "sqlcipherkit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift
        ),
        // Example services (Docs/Services.md), built and exercised by the integration tests.
        .executableTarget(
            name: "sqlcipherkit-hummingbird-example",
            dependencies: [
                "SQLCipherKitSQLKit", "SQLCipherKitServices",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "sqlcipherkit-vapor-example",
            dependencies: [
                "SQLCipherKitFluent", "SQLCipherKitServices",
                .product(name: "Fluent", package: "fluent"),
                .product(name: "Vapor", package: "vapor"),
            ],
            swiftSettings: strictSwift
        ),
        // Release-build benchmark: the Fluent driver on an encrypted file against fluent-sqlite-driver on a
        // plaintext file (Docs/Performance.md); not a test.
        .executableTarget(
            name: "sqlcipherkit-fluent-benchmarks",
            dependencies: [
                "SQLCipherKitFluent",
                .product(name: "FluentSQLiteDriver", package: "fluent-sqlite-driver"),
            ],
            swiftSettings: strictSwift
        ),
        // Release-build benchmark of replication (Docs/Replication.md): throughput with replication on and off, lag
        // at a steady write rate, restore speed, memory during a large snapshot upload; and the writer process of
        // .ci/replication-crash-campaign. Not a test.
        .executableTarget(
            name: "sqlcipherkit-replication-benchmarks",
            dependencies: [
                "SQLCipherKitServices", "SQLCipherKitReplication",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SQLCipherKitIntegrationTests",
            dependencies: [
                "SQLCipherKitSQLKit", "SQLCipherKitFluent", "SQLCipherKitServices", "SQLCipherKitReplication",
                "SQLCipherKitTestSupport", "sqlcipherkit", "sqlcipherkit-hummingbird-example",
                "sqlcipherkit-vapor-example",
                .product(name: "SQLKitBenchmark", package: "sql-kit"),
                .product(name: "FluentBenchmark", package: "fluent-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift
        ),
    ]
}

let package = Package(
    name: "SQLCipherKit",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: products,
    dependencies: dependencies,
    targets: targets
)
