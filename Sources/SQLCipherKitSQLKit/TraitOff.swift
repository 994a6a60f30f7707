#if !SQLKit  // trait SQLKit (Package.swift)
// With the trait off this module has no SQLKit code; these stand-ins turn "cannot find 'SQLCipherSQLDatabase' in
// scope" into an error that names the trait and the line that turns it on (Docs/Services.md, "A trait that is off").
// The message must be a string literal, so it is repeated; .ci/consumers checks it against the package's version.

/// Not in this build: the package trait SQLKit is off.
@available(*, unavailable, message: "the package trait SQLKit is off: add traits: [\"SQLKit\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"SQLKit\"])")
public struct SQLCipherSQLDatabase {}

/// Not in this build: the package trait SQLKit is off.
@available(*, unavailable, message: "the package trait SQLKit is off: add traits: [\"SQLKit\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"SQLKit\"])")
public struct SQLCipherDialect {}

/// Not in this build: the package trait SQLKit is off.
@available(*, unavailable, message: "the package trait SQLKit is off: add traits: [\"SQLKit\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"SQLKit\"])")
public struct SQLCipherSQLMetrics {}

/// Not in this build: the package trait SQLKit is off.
@available(*, unavailable, message: "the package trait SQLKit is off: add traits: [\"SQLKit\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"SQLKit\"])")
public struct SQLCipherDataEncoder {}

/// Not in this build: the package trait SQLKit is off.
@available(*, unavailable, message: "the package trait SQLKit is off: add traits: [\"SQLKit\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"SQLKit\"])")
public struct SQLCipherDataDecoder {}
#endif
