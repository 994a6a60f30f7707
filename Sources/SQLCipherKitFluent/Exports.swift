// `import SQLCipherKitFluent` is all a file needs to configure Fluent on an encrypted database: the library's types,
// the SQLKit integration and FluentKit's API come with it.
@_exported import FluentKit
@_exported import SQLCipherKitSQLKit
