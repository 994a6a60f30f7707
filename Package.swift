// swift-tools-version: 6.0
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "SQLCipherKit",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "SQLCipherKit", targets: ["SQLCipherKit"]),
        .executable(name: "sqlcipherkit", targets: ["sqlcipherkit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
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
        .target(
            name: "SQLCipherKit",
            dependencies: ["CSQLCipher", "COpenSSL", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "sqlcipherkit",
            dependencies: [
                "SQLCipherKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift
        ),
        // Release-build benchmark against the raw C API (see Docs/Performance.md); not a test.
        .executableTarget(
            name: "sqlcipherkit-benchmarks",
            dependencies: ["SQLCipherKit", "CSQLCipher"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SQLCipherKitTests",
            dependencies: ["SQLCipherKit", "CSQLCipher", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "sqlcipherkitTests",
            dependencies: ["sqlcipherkit", "SQLCipherKit"],
            swiftSettings: strictSwift
        ),
    ]
)
