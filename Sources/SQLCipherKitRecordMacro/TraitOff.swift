#if !RecordMacro  // trait RecordMacro (Package.swift)
// With the trait off this module declares no macro of its own, so `@RowDecodable` would read "unknown attribute".
// This stand-in makes it an error that names the trait and the line that turns it on (Docs/Codable.md,
// "@RowDecodable"). A macro declaration must name an implementation the compiler can find, or the declaration itself
// warns; with the trait off the package has none (swift-syntax is not built), so it names a macro type every Swift 6
// toolchain ships (the standard library's OptionSet macro). It is never expanded: an unavailable macro is refused
// before expansion. .ci/consumers checks both, and the message against the package's version.

/// Not in this build: the package trait RecordMacro is off.
@available(*, unavailable, message: "the package trait RecordMacro is off: add traits: [\"RecordMacro\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"RecordMacro\"])")
@attached(extension, names: named(init(row:)))
public macro RowDecodable() = #externalMacro(module: "SwiftMacros", type: "OptionSetMacro")
#endif
