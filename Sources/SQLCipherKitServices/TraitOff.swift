#if !Services  // trait Services (Package.swift)
// With the trait off this module has no swift-service-lifecycle code; this stand-in turns "cannot find
// 'DatabaseService' in scope" into an error that names the trait and the line that turns it on (Docs/Services.md,
// "A trait that is off"). .ci/consumers checks the message against the package's version.

/// Not in this build: the package trait Services is off.
@available(*, unavailable, message: "the package trait Services is off: add traits: [\"Services\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Services\"])")
public final class DatabaseService {}
#endif
