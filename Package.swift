// swift-tools-version: 6.1
import CompilerPluginSupport
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

// The core (library SQLCipherKit and the CLI) depends on swift-log and swift-argument-parser only. The service
// integrations (SQLKit, Fluent, swift-service-lifecycle, swift-metrics, replication) and the examples are behind
// package traits that are off by default: SwiftPM neither fetches nor pins a dependency that only a disabled trait
// uses, so a package that depends on `SQLCipherKit` alone resolves two packages (measured in Docs/GettingStarted.md).
// Turn an integration on where the package is declared:
//     .package(url: "https://github.com/<owner>/SQLCipherKit", from: "0.1.0", traits: ["Fluent"])
// and here with `swift build --traits Fluent,Services` or `swift build --enable-all-traits` (what .ci/test does).
// A target whose trait is off compiles empty (its sources are wrapped in `#if Trait`); an example executable whose
// trait is off prints how to turn it on.
let traits: Set<Trait> = [
    .default(enabledTraits: []),
    .trait(name: "SQLKit", description: "SQLCipherKitSQLKit: SQLKit's SQLDatabase over DatabasePool (SQLKit, NIO)."),
    .trait(
        name: "Fluent", description: "SQLCipherKitFluent: the Fluent driver, .sqlcipher(file:keyProvider:).",
        enabledTraits: ["SQLKit"]),
    .trait(
        name: "Services",
        description: "SQLCipherKitServices: DatabaseService (swift-service-lifecycle), metrics, health check, its"
            + " live key rotation and replication (so it turns on LiveRotation and Replication).",
        enabledTraits: ["LiveRotation", "Replication"]),
    .trait(
        name: "LiveRotation",
        description: "SQLCipherKitLiveRotation: LiveKeyRotation, key rotation while the database serves, for an app"
            + " with a lifecycle of its own (Vapor, a plain program); swift-metrics, no swift-service-lifecycle."),
    .trait(
        name: "Replication",
        description: "SQLCipherKitReplication and the CLI's replicate, restore and snapshots (AsyncHTTPClient, NIO)."),
    .trait(
        name: "RecordMacro",
        description: "SQLCipherKitRecordMacro: @RowDecodable, a generated init(row:) for Decodable structs"
            + " (swift-syntax)."),
    .trait(
        name: "Examples",
        description: "The Hummingbird and Vapor example services and the Fluent benchmark (Hummingbird, Vapor).",
        enabledTraits: ["SQLKit", "Fluent", "Services"]),
]

let products: [Product] = [
    .library(name: "SQLCipherKit", targets: ["SQLCipherKit"]),
    .executable(name: "sqlcipherkit", targets: ["sqlcipherkit"]),
    .library(name: "SQLCipherKitSQLKit", targets: ["SQLCipherKitSQLKit"]),
    .library(name: "SQLCipherKitFluent", targets: ["SQLCipherKitFluent"]),
    .library(name: "SQLCipherKitServices", targets: ["SQLCipherKitServices"]),
    .library(name: "SQLCipherKitLiveRotation", targets: ["SQLCipherKitLiveRotation"]),
    .library(name: "SQLCipherKitReplication", targets: ["SQLCipherKitReplication"]),
    .library(name: "SQLCipherKitRecordMacro", targets: ["SQLCipherKitRecordMacro"]),
]

// Every requirement is a range a real application can share: `from:` the lowest version this package is known to build
// with, up to the next major version (a range for swift-syntax, whose major version follows the compiler's). The
// versions CI builds and tests are pinned in .ci/pins, not here; .ci/consumers builds a consumer package against the
// lowest and the highest version of each range that resolve. Docs/Compatibility.md, "Dependency versions", says which
// lower bounds were built (swift-argument-parser 1.6.0 and swift-log 1.4.3: the versions below them fail or warn) and
// which are only the one version this project could build with.
let dependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.6.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.4.3"),
    // Used only by the traits above; not fetched while they are off.
    .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/vapor/sql-kit", from: "3.36.0"),
    .package(url: "https://github.com/vapor/fluent-kit", from: "1.57.0"),
    .package(url: "https://github.com/vapor/fluent-sqlite-driver", from: "4.9.0"),
    .package(url: "https://github.com/vapor/fluent", from: "4.13.0"),
    .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.1"..<"604.0.0"),
]

/// A product of another package, used only while one of `traits` is on.
func product(_ name: String, _ package: String, when traits: Set<String>) -> Target.Dependency {
    .product(name: name, package: package, condition: .when(traits: traits))
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
        dependencies: [
            "SQLCipherKit",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            // replicate, restore and snapshots (Sources/sqlcipherkit/*Replicat*, Restore, Snapshots: `#if Replication`)
            .target(name: "SQLCipherKitReplication", condition: .when(traits: ["Replication"])),
        ],
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
        dependencies: ["SQLCipherKit", .product(name: "Logging", package: "swift-log")],
        path: "Tests/SQLCipherKitTestSupport",
        swiftSettings: strictSwift
    ),
    // Library code in a process of its own, for the tests that kill one (SIGKILL in the middle of a migration): each
    // role run by the test that needs it, never a test of its own. Built with the tests, beside their binary.
    .executableTarget(
        name: "sqlcipherkit-test-child",
        dependencies: ["SQLCipherKit", "SQLCipherKitTestSupport"],
        path: "Tests/SQLCipherKitTestChild",
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

// MARK: - @RowDecodable (trait RecordMacro: swift-syntax is built only for it)

targets += [
    // The compiler plugin; with the trait off, an empty program nothing uses.
    .macro(
        name: "SQLCipherKitMacros",
        dependencies: [
            product("SwiftSyntax", "swift-syntax", when: ["RecordMacro"]),
            product("SwiftSyntaxMacros", "swift-syntax", when: ["RecordMacro"]),
            product("SwiftSyntaxBuilder", "swift-syntax", when: ["RecordMacro"]),
            product("SwiftDiagnostics", "swift-syntax", when: ["RecordMacro"]),
            product("SwiftCompilerPlugin", "swift-syntax", when: ["RecordMacro"]),
        ],
        swiftSettings: strictSwift
    ),
    // The macro's declaration, beside the library it generates code for.
    .target(
        name: "SQLCipherKitRecordMacro",
        dependencies: [
            "SQLCipherKit", .target(name: "SQLCipherKitMacros", condition: .when(traits: ["RecordMacro"])),
        ],
        swiftSettings: strictSwift
    ),
    .testTarget(
        name: "SQLCipherKitRecordMacroTests",
        dependencies: [
            // Not the plugin itself: on Linux every test target links into one test program, and a test target that
            // depends on a macro target makes SwiftPM build that program for the host, where the `sqlcipherkit`
            // executable's module (sqlcipherkitTests imports it) is not built. The tests use the macro as users do,
            // and run the compiler on the cases it must refuse.
            "SQLCipherKitRecordMacro", "SQLCipherKitTestSupport",
        ],
        swiftSettings: strictSwift
    ),
]

// MARK: - Service integrations (separate products, each behind its trait)

targets += [
    // An SQLKit `SQLDatabase` over `DatabasePool`, with a dialect decided from the linked engine's version.
    .target(
        name: "SQLCipherKitSQLKit",
        dependencies: [
            "SQLCipherKit",
            .product(name: "Logging", package: "swift-log"),
            product("SQLKit", "sql-kit", when: ["SQLKit"]),
            product("NIOCore", "swift-nio", when: ["SQLKit"]),
            product("NIOPosix", "swift-nio", when: ["SQLKit"]),
            product("CoreMetrics", "swift-metrics", when: ["SQLKit"]),
        ],
        swiftSettings: strictSwift
    ),
    // A Fluent driver over the SQLKit driver: `.sqlcipher(file:keyProvider:)`.
    .target(
        name: "SQLCipherKitFluent",
        dependencies: [
            "SQLCipherKitSQLKit",
            product("FluentKit", "fluent-kit", when: ["Fluent"]),
            product("FluentSQL", "fluent-kit", when: ["Fluent"]),
        ],
        swiftSettings: strictSwift
    ),
    // Live key rotation on its own: the key-file watch, the hand-over and its crash recovery. No
    // swift-service-lifecycle, so an app with a lifecycle of its own (Vapor) does not link it; .ci/check-layers
    // fails if this target reaches it through any dependency.
    .target(
        name: "SQLCipherKitLiveRotation",
        dependencies: [
            "SQLCipherKit",
            .product(name: "Logging", package: "swift-log"),
            product("CoreMetrics", "swift-metrics", when: ["LiveRotation"]),
            // `pausesReplication(_:)`: a replicator on the same pool pauses around every key change.
            .target(name: "SQLCipherKitReplication", condition: .when(traits: ["Replication"])),
        ],
        swiftSettings: strictSwift
    ),
    // The pool as a swift-service-lifecycle Service; DatabaseService: lifecycle, metrics, health check, backups,
    // over a LiveKeyRotation (re-exported) and a Replicator.
    .target(
        name: "SQLCipherKitServices",
        dependencies: [
            // Replication: the service replicates, pauses replication around a live rotation, reports its lag in
            // the health check and ships what is left at shutdown (Docs/Services.md, "Replication").
            "SQLCipherKit", "SQLCipherKitReplication", "SQLCipherKitLiveRotation",
            .product(name: "Logging", package: "swift-log"),
            product("ServiceLifecycle", "swift-service-lifecycle", when: ["Services"]),
            product("CoreMetrics", "swift-metrics", when: ["Services"]),
        ],
        swiftSettings: strictSwift
    ),
    // Continuous replication of the encrypted pages and WAL frames to an object store or a folder, and
    // point-in-time restore (Docs/Replication.md). SigV4 is signed with OpenSSL's libcrypto (no S3 SDK).
    .target(
        name: "SQLCipherKitReplication",
        dependencies: [
            "SQLCipherKit", "CSQLCipher", "COpenSSL",
            .product(name: "Logging", package: "swift-log"),
            product("AsyncHTTPClient", "async-http-client", when: ["Replication"]),
            product("NIOCore", "swift-nio", when: ["Replication"]),
            product("CoreMetrics", "swift-metrics", when: ["Replication"]),
        ],
        swiftSettings: strictSwift
    ),
    .testTarget(
        name: "SQLCipherKitReplicationTests",
        dependencies: [
            "SQLCipherKitReplication", "SQLCipherKitTestSupport", "sqlcipherkit",
            product("NIOCore", "swift-nio", when: ["Replication"]),
            product("MetricsTestKit", "swift-metrics", when: ["Replication"]),
        ],
        swiftSettings: strictSwift
    ),
    // The message the examples and benchmark programs give when their trait is off.
    .target(name: "TraitFallback", swiftSettings: strictSwift),
    // Example services (Docs/Services.md), built and exercised by the integration tests.
    .executableTarget(
        name: "sqlcipherkit-hummingbird-example",
        dependencies: [
            "TraitFallback", "SQLCipherKitSQLKit", "SQLCipherKitServices",
            product("Hummingbird", "hummingbird", when: ["Examples"]),
            product("SQLKit", "sql-kit", when: ["Examples"]),
            product("ServiceLifecycle", "swift-service-lifecycle", when: ["Examples"]),
        ],
        swiftSettings: strictSwift
    ),
    .executableTarget(
        name: "sqlcipherkit-vapor-example",
        dependencies: [
            // NOTES_LIVE_ROTATION=bare: live rotation through SQLCipherKitLiveRotation alone (BareLiveRotation.swift).
            "TraitFallback", "SQLCipherKitFluent", "SQLCipherKitServices", "SQLCipherKitLiveRotation",
            product("Fluent", "fluent", when: ["Examples"]),
            product("Vapor", "vapor", when: ["Examples"]),
        ],
        swiftSettings: strictSwift
    ),
    // Release-build benchmark: the Fluent driver on an encrypted file against fluent-sqlite-driver on a
    // plaintext file (Docs/Performance.md); not a test.
    .executableTarget(
        name: "sqlcipherkit-fluent-benchmarks",
        dependencies: [
            "TraitFallback", "SQLCipherKitFluent",
            product("FluentSQLiteDriver", "fluent-sqlite-driver", when: ["Examples"]),
        ],
        swiftSettings: strictSwift
    ),
    // Release-build benchmark of replication (Docs/Replication.md): throughput with replication on and off, lag at a
    // steady write rate, restore speed, memory during a large snapshot upload; and the writer process of
    // .ci/replication-crash-campaign. Not a test.
    .executableTarget(
        name: "sqlcipherkit-replication-benchmarks",
        dependencies: [
            "TraitFallback", "SQLCipherKitServices", "SQLCipherKitReplication",
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: strictSwift
    ),
    // The integrations' libraries in this process: the SQLKit and Fluent drivers, DatabaseService, live key rotation
    // and its hand-over, the replicated service. Not the example apps, so that a sanitizer build of these tests
    // (.ci/test) builds neither Vapor nor Hummingbird. Each file is wrapped in `#if` of the trait it tests; with
    // every trait off the target is empty.
    .testTarget(
        name: "SQLCipherKitServiceTests",
        dependencies: [
            "SQLCipherKitSQLKit", "SQLCipherKitFluent", "SQLCipherKitServices", "SQLCipherKitLiveRotation",
            "SQLCipherKitReplication", "SQLCipherKitTestSupport",
            // The CLI, run beside the tests on the service's replica (`restore`).
            "sqlcipherkit",
            product("SQLKitBenchmark", "sql-kit", when: ["SQLKit"]),
            product("FluentBenchmark", "fluent-kit", when: ["Fluent"]),
            product("NIOCore", "swift-nio", when: ["SQLKit"]),
            product("NIOPosix", "swift-nio", when: ["SQLKit"]),
            product("ServiceLifecycle", "swift-service-lifecycle", when: ["Services"]),
            product("ServiceLifecycleTestKit", "swift-service-lifecycle", when: ["Services"]),
            product("MetricsTestKit", "swift-metrics", when: ["Services"]),
        ],
        swiftSettings: strictSwift
    ),
    // The example apps end to end: each run as a process of its own and driven over HTTP (trait Examples).
    .testTarget(
        name: "SQLCipherKitIntegrationTests",
        dependencies: [
            "SQLCipherKit", "SQLCipherKitTestSupport", "sqlcipherkit-hummingbird-example", "sqlcipherkit-vapor-example",
            product("AsyncHTTPClient", "async-http-client", when: ["Examples"]),
            product("NIOCore", "swift-nio", when: ["Examples"]),
            product("NIOPosix", "swift-nio", when: ["Examples"]),
            product("NIOHTTP1", "swift-nio", when: ["Examples"]),
        ],
        swiftSettings: strictSwift
    ),
]

let package = Package(
    name: "SQLCipherKit",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: products,
    traits: traits,
    dependencies: dependencies,
    targets: targets
)
