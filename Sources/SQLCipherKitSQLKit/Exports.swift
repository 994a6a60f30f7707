// `import SQLCipherKitSQLKit` is all a file needs to use SQLKit on an encrypted database: the library's types
// (DatabasePool, EncryptionKey, …) and SQLKit's query builders come with it, as the docs' examples assume.
@_exported import SQLCipherKit
@_exported import SQLKit
