import ArgumentParser
import SQLCipherKit

@main
struct SQLCipherKitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sqlcipherkit",
        abstract: "Operator tools for SQLCipher-encrypted SQLite databases.",
        discussion: """
            Keys are never accepted as argument values: they come from key files, environment variables or \
            standard input.

            Examples:
              sqlcipherkit --version
              sqlcipherkit demo
            """,
        version: VersionReport.text,
        subcommands: [DemoCommand.self]
    )
}

enum VersionReport {
    static var text: String {
        let engine = SQLCipher.isSQLCipher ? "SQLCipher \(SQLCipher.version)" : "not SQLCipher (plain SQLite)"
        return """
            sqlcipherkit \(SQLCipherKitVersion.string)
            engine: \(engine), SQLite \(SQLCipher.sqliteVersion), \
            crypto: \(SQLCipher.cryptoProvider) \(SQLCipher.cryptoProviderVersion)
            """
    }
}
