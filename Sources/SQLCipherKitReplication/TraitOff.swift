#if !Replication  // trait Replication (Package.swift)
// With the trait off this module has no replication code; these stand-ins turn "cannot find 'Replicator' in scope"
// into an error that names the trait and the line that turns it on (Docs/Replication.md). The message must be a string
// literal, so it is repeated; .ci/consumers checks it against the package's version.

/// Not in this build: the package trait Replication is off.
@available(*, unavailable, message: "the package trait Replication is off: add traits: [\"Replication\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Replication\"])")
public enum Replicator {}

/// Not in this build: the package trait Replication is off.
@available(*, unavailable, message: "the package trait Replication is off: add traits: [\"Replication\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Replication\"])")
public enum ReplicatorConfiguration {}

/// Not in this build: the package trait Replication is off.
@available(*, unavailable, message: "the package trait Replication is off: add traits: [\"Replication\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Replication\"])")
public enum Replica {}

/// Not in this build: the package trait Replication is off.
@available(*, unavailable, message: "the package trait Replication is off: add traits: [\"Replication\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Replication\"])")
public enum S3Credentials {}

/// Not in this build: the package trait Replication is off.
@available(*, unavailable, message: "the package trait Replication is off: add traits: [\"Replication\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Replication\"])")
public enum ReplicaFollower {}

/// Not in this build: the package trait Replication is off.
@available(*, unavailable, message: "the package trait Replication is off: add traits: [\"Replication\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Replication\"])")
public func replicaStore(for url: String, endpoint: String? = nil, credentials: S3Credentials? = nil) -> Never { fatalError("unavailable") }
#endif
