// swift-tools-version: 6.0
// libFuzzer targets for SQLCipherKit (see Docs/Fuzzing.md). A package of its own, so the main package's
// `swift build` and `swift test` never see code that only links with `-sanitize=fuzzer` (libFuzzer supplies `main`).
// Built and run by .ci/fuzz.
import PackageDescription

// A path dependency is identified by its folder's name, which differs between clones and worktrees.
let rootPath = "../.."
let rootIdentity = Context.packageDirectory.split(separator: "/").dropLast(2).last.map(String.init)!.lowercased()

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let sqlcipherKit: Target.Dependency = .product(name: "SQLCipherKit", package: rootIdentity)

let package = Package(
    name: "SQLCipherKitFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: rootPath),
    ],
    targets: [
        .target(name: "CFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CFuzzer", sqlcipherKit], swiftSettings: strictSwift),
        .executableTarget(
            name: "KeyTextFuzzer", dependencies: ["FuzzSupport", sqlcipherKit], swiftSettings: strictSwift),
        .executableTarget(
            name: "OpenDatabaseFuzzer", dependencies: ["FuzzSupport", sqlcipherKit], swiftSettings: strictSwift),
        .executableTarget(
            name: "PlaintextHeaderFuzzer", dependencies: ["FuzzSupport", sqlcipherKit], swiftSettings: strictSwift),
    ]
)
