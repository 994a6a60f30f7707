#if !LiveRotation  // trait LiveRotation (Package.swift)
// With the trait off this module is empty; this stand-in turns "cannot find 'LiveKeyRotation' in scope" into an error
// that names the trait and the line that turns it on (Docs/Services.md, "A trait that is off").

/// Not in this build: the package trait LiveRotation is off.
@available(*, unavailable, message: "the package trait LiveRotation is off: add traits: [\"LiveRotation\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"LiveRotation\"])")
public final class LiveKeyRotation {}
#endif
