#if !Fluent  // trait Fluent (Package.swift)
// With the trait off this module has no Fluent code. `.sqlcipher(file:keyProvider:)` is a member of FluentKit's
// DatabaseConfigurationFactory, which this module cannot name without FluentKit (and Swift has no extension of every
// type to hang a stand-in on), so that call still reads "type 'DatabaseConfigurationFactory' has no member
// 'sqlcipher'". The database ID `.sqlcipher` (`as: .sqlcipher`, `app.databases.default(to: .sqlcipher)`,
// `app.db(.sqlcipher)`) can carry the message: FluentKit's DatabaseID is Hashable, Codable and Sendable, so a member
// of those types found by implicit member lookup reaches it. Docs/Services.md, "A trait that is off", says what each
// trait's stand-ins cover; .ci/consumers checks the message against the package's version.

extension Hashable where Self: Codable & Sendable {
    /// Not in this build: the package trait Fluent is off.
    @available(*, unavailable, message: "the package trait Fluent is off: add traits: [\"Fluent\"] to SQLCipherKit in your Package.swift: .package(url: \"https://github.com/<owner>/SQLCipherKit\", from: \"0.1.0\", traits: [\"Fluent\"])")
    public static var sqlcipher: Self { fatalError("unavailable") }
}
#endif
