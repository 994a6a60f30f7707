import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit info`: engine versions and what a file is (``DatabaseFileInspection``).
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show the engine versions and what a database file is; with its key, its settings.",
        discussion: """
            Without a key: whether the file looks encrypted (no SQLite header), is a plaintext SQLite database, \
            has a plaintext SQLite header but does not open without a key (SQLCipher 4 with a plaintext header), \
            is empty, or is missing. With the key (or for a plaintext database): page size and count, journal \
            mode, user_version, application_id, and the cipher settings (cipher_page_size, kdf_iter, \
            cipher_use_hmac, and on SQLCipher 4 the KDF and HMAC algorithms and the plaintext header size). On \
            SQLCipher 4 a SQLCipher 3 file is recognised (its format is reported as 3). Nothing is written, and no \
            key material is printed.

            Example:
              sqlcipherkit info notes.db
              sqlcipherkit info notes.db --key-file notes.key --json
            """
    )

    @Argument(help: ArgumentHelp("The database file.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key (optional)")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings")
    var cipher: CipherOptions

    @Flag(help: "Print the report as JSON.")
    var json = false

    func run() throws {
        let key = try key.loadOptionalKey()
        var inspection = DatabaseFileInspection.inspect(path: database)
        var keyError: DatabaseError?
        if let key {
            do {
                inspection = try DatabaseFileInspection.inspect(
                    path: database, encryption: try cipher.encryption(for: key),
                    detectsSQLCipher3Format: cipher.compatibility == nil)
            } catch let error as DatabaseError {
                keyError = error
            }
        }
        if json {
            try Output.json(InfoReport(inspection, keyGiven: key != nil, keyError: keyError))
        } else {
            Output.result(Self.text(inspection, keyGiven: key != nil))
        }
        if let keyError { throw keyError }
    }

    static func text(_ inspection: DatabaseFileInspection, keyGiven: Bool) -> String {
        var lines: [(String, String)] = [
            ("engine", "SQLCipher \(SQLCipher.version), SQLite \(SQLCipher.sqliteVersion), "
                + "\(SQLCipher.cryptoProvider) \(SQLCipher.cryptoProviderVersion)"),
            ("file", inspection.path),
            ("format", inspection.format.description),
        ]
        if let size = inspection.byteCount {
            lines.append(("size", "\(size) bytes" + (inspection.walByteCount.map { ", -wal \($0) bytes" } ?? "")))
        }
        if let database = inspection.database {
            lines += [
                ("page size", "\(database.pageSize)"),
                ("page count", "\(database.pageCount)"),
                ("journal mode", database.journalMode),
                ("user_version", "\(database.userVersion)"),
                ("application_id", "\(database.applicationID)"),
                ("schema objects", "\(database.schemaObjectCount)"),
            ]
        }
        if let cipher = inspection.cipher {
            lines.append(("cipher_page_size", cipher.pageSize.map(String.init) ?? "?"))
            lines.append(("kdf_iter", cipher.kdfIterations.map(String.init) ?? "?"))
            lines.append(("cipher_use_hmac", cipher.usesHMAC.map { $0 ? "on" : "off" } ?? "?"))
            if let algorithm = cipher.kdfAlgorithm { lines.append(("kdf algorithm", algorithm)) }
            if let algorithm = cipher.hmacAlgorithm { lines.append(("hmac algorithm", algorithm)) }
            if let size = cipher.plaintextHeaderSize { lines.append(("plaintext header", "\(size) bytes")) }
            lines.append(("cipher format", cipher.formatMajorVersion.map { "SQLCipher \($0) defaults" } ?? "custom"))
        } else if inspection.format == .encrypted || inspection.format == .plaintextHeader, !keyGiven {
            lines.append(("settings", "give the key (--key-file, --key-env, --key-stdin) to read them"))
        }
        let width = lines.map(\.0.count).max() ?? 0
        return lines.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }
            .joined(separator: "\n")
    }
}

/// `info --json`.
struct InfoReport: Encodable {
    struct Engine: Encodable {
        let sqlcipherVersion: String
        let sqliteVersion: String
        let cryptoProvider: String
        let cryptoProviderVersion: String
    }

    struct Database: Encodable {
        let pageSize: Int
        let pageCount: Int
        let journalMode: String
        let userVersion: Int64
        let applicationID: Int64
        let schemaObjectCount: Int
    }

    struct Cipher: Encodable {
        let pageSize: Int?
        let kdfIterations: Int?
        let usesHMAC: Bool?
        let kdfAlgorithm: String?
        let hmacAlgorithm: String?
        let plaintextHeaderSize: Int?
        let formatMajorVersion: Int?
    }

    let engine: Engine
    let path: String
    let format: String
    let byteCount: Int?
    let walByteCount: Int?
    let keyGiven: Bool
    let database: Database?
    let cipher: Cipher?
    let error: ErrorReport?

    init(_ inspection: DatabaseFileInspection, keyGiven: Bool, keyError: DatabaseError?) {
        engine = Engine(
            sqlcipherVersion: SQLCipher.version, sqliteVersion: SQLCipher.sqliteVersion,
            cryptoProvider: SQLCipher.cryptoProvider, cryptoProviderVersion: SQLCipher.cryptoProviderVersion)
        path = inspection.path
        format = inspection.format.rawValue
        byteCount = inspection.byteCount
        walByteCount = inspection.walByteCount
        self.keyGiven = keyGiven
        database = inspection.database.map {
            Database(
                pageSize: $0.pageSize, pageCount: $0.pageCount, journalMode: $0.journalMode,
                userVersion: $0.userVersion, applicationID: $0.applicationID, schemaObjectCount: $0.schemaObjectCount)
        }
        cipher = inspection.cipher.map {
            Cipher(
                pageSize: $0.pageSize, kdfIterations: $0.kdfIterations, usesHMAC: $0.usesHMAC,
                kdfAlgorithm: $0.kdfAlgorithm, hmacAlgorithm: $0.hmacAlgorithm,
                plaintextHeaderSize: $0.plaintextHeaderSize, formatMajorVersion: $0.formatMajorVersion)
        }
        error = keyError.map(ErrorReport.init)
    }
}
