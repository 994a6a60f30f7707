import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit info`: engine versions and what a file is (``DatabaseFileInspection``).
struct InfoCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show the engine versions and what a database file is; with its key, its settings.",
        discussion: CipherOptions.withFoldedNote("""
            Without a key: whether the file looks encrypted (no SQLite header), is a plaintext SQLite database, \
            has a plaintext SQLite header but does not open without a key (SQLCipher 4 with a plaintext header), \
            is empty, or is missing. With the key (or for a plaintext database): page size and count, journal \
            mode, user_version, application_id, and the cipher settings (cipher_page_size, kdf_iter, \
            cipher_use_hmac, and on SQLCipher 4 the KDF and HMAC algorithms and the plaintext header size). When \
            the engine's defaults do not open the file and no cipher option was given, the formats of SQLCipher \
            1 to 4 are tried, and the options that open it are printed ("open with: …"). A hot journal (a \
            transaction a crash left unfinished) is reported, and the details are read as its rollback will leave \
            the database. Nothing is written or created (a rollback is played in memory), and no key material is \
            printed. A wrong key exits with 3; a missing file or a folder with 1 (after the facts).

            Example:
              sqlcipherkit info notes.db
              sqlcipherkit info notes.db --key-file notes.key --json
              sqlcipherkit info legacy.db --key-file legacy.key --cipher-compatibility 3
            """)
    )

    @Argument(help: ArgumentHelp("The database file.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key (optional)")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    func run() throws {
        let key = try key.loadOptionalKey()
        var inspection = DatabaseFileInspection.inspect(path: database)
        var keyError: DatabaseError?
        var suggestion: [String] = []
        if let key {
            do {
                inspection = try DatabaseFileInspection.inspect(
                    path: database, encryption: try cipher.encryption(for: key),
                    detectsSQLCipher3Format: cipher.isEmpty)
                if cipher.isEmpty, let version = inspection.cipher?.formatMajorVersion,
                   version != (SQLCipher.supports(.version4Format) ? 4 : 3) {
                    suggestion = ["--cipher-compatibility", "\(version)"]
                }
            } catch let error as DatabaseError {
                keyError = error
                if error.kind == .wrongKey, cipher.isEmpty, let (found, flags) = Self.probe(database, key: key) {
                    inspection = found
                    suggestion = flags
                    keyError = nil
                }
            }
        } else if inspection.format == .plaintextHeader {
            suggestion = ["--plaintext-header-size", "32", "--salt-file", "FILE"]
        }
        let report = InfoReport(inspection, keyGiven: key != nil, suggestedOptions: suggestion)
        if Output.isJSON {
            Output.setJSONResult(report)
        } else {
            Output.result(Self.text(inspection, keyGiven: key != nil, suggestion: suggestion))
        }
        if let keyError {
            // A missing database has one kind in every subcommand.
            if keyError.kind == .fileSystem && inspection.format == .missing {
                throw CommandFailure(ErrorWording.message(for: keyError), kind: "missingFile")
            }
            throw keyError
        }
        // The facts are printed, but a file that is not there is not a database described: `info typo.db && …` must
        // not go on (the kinds the other subcommands give these conditions).
        switch inspection.format {
        case .missing:
            throw CommandFailure("\(database) does not exist", kind: "missingFile")
        case .notARegularFile:
            throw CommandFailure("\(database) is not a regular file (a folder or a device)", kind: "fileSystem")
        default:
            break
        }
    }

    /// Tries the formats of SQLCipher 1 to 4 (and a plaintext header when the key carries a salt), read-only.
    static func probe(_ path: String, key: EncryptionKey) -> (DatabaseFileInspection, [String])? {
        let isVersion4 = SQLCipher.supports(.version4Format)
        var candidates: [CipherSettings] = (isVersion4 ? [3, 2, 1] : [2, 1]).map { CipherSettings(compatibility: $0) }
        if isVersion4, key.salt != nil {
            candidates.append(.plaintextHeader(size: 32))   // the salt comes with the key
        }
        for settings in candidates {
            if let found = try? DatabaseFileInspection.inspect(
                path: path, encryption: .key(key, settings: settings), detectsSQLCipher3Format: false) {
                return (found, CipherOptions.flags(for: settings))
            }
        }
        return nil
    }

    static func text(_ inspection: DatabaseFileInspection, keyGiven: Bool, suggestion: [String] = []) -> String {
        var lines: [(String, String)] = [
            ("engine", "SQLCipher \(SQLCipher.version), SQLite \(SQLCipher.sqliteVersion)"),
            ("crypto", "\(SQLCipher.cryptoProvider) \(SQLCipher.cryptoProviderVersion) (as the engine reports it);"
                + " loaded: \(OpenSSLRuntime.version)"),
            ("file", inspection.path),
            ("format", formatText(inspection)),
        ]
        if let size = inspection.byteCount {
            lines.append(("size", "\(size) bytes" + (inspection.walByteCount.map { ", -wal \($0) bytes" } ?? "")))
        }
        if inspection.hasHotJournal {
            lines.append((
                "journal", "hot: a transaction did not finish (a crash or a killed process); the next read-write open"
                    + " rolls it back. Read as that rollback will leave the database (in memory; nothing was changed)"))
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
        if !suggestion.isEmpty {
            lines.append(("open with", suggestion.joined(separator: " ")))
        }
        let width = lines.map(\.0.count).max() ?? 0
        return lines.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }
            .joined(separator: "\n")
    }

    /// The file's format, in words that take into account whether the key opened it.
    static func formatText(_ inspection: DatabaseFileInspection) -> String {
        guard inspection.cipher != nil else { return inspection.format.description }
        switch inspection.format {
        case .encrypted: return "encrypted SQLCipher database (the key opens it)"
        case .plaintextHeader: return "encrypted SQLCipher database with a plaintext header (the key opens it)"
        default: return inspection.format.description
        }
    }
}

/// `info --json`'s `result` (the engine is in the envelope).
struct InfoReport: Encodable, Sendable {
    struct Database: Encodable, Sendable {
        let pageSize: Int
        let pageCount: Int
        let journalMode: String
        let userVersion: Int64
        let applicationID: Int64
        let schemaObjectCount: Int
    }

    struct Cipher: Encodable, Sendable {
        @Nullable var pageSize: Int?
        @Nullable var kdfIterations: Int?
        @Nullable var usesHMAC: Bool?
        @Nullable var kdfAlgorithm: String?
        @Nullable var hmacAlgorithm: String?
        @Nullable var plaintextHeaderSize: Int?
        @Nullable var formatMajorVersion: Int?
    }

    let path: String
    let format: String
    let formatDescription: String
    @Nullable var byteCount: Int?
    @Nullable var walByteCount: Int?
    /// A hot journal lies beside the file (see `InfoCommand`).
    let hotJournal: Bool
    let keyGiven: Bool
    let keyOpens: Bool
    @Nullable var database: Database?
    @Nullable var cipher: Cipher?
    /// Options that open the file when the engine's defaults do not (empty when none are needed or none found).
    let suggestedOptions: [String]

    init(_ inspection: DatabaseFileInspection, keyGiven: Bool, suggestedOptions: [String] = []) {
        path = inspection.path
        format = inspection.format.rawValue
        formatDescription = InfoCommand.formatText(inspection)
        byteCount = inspection.byteCount
        walByteCount = inspection.walByteCount
        hotJournal = inspection.hasHotJournal
        self.keyGiven = keyGiven
        keyOpens = keyGiven && inspection.cipher != nil
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
        self.suggestedOptions = suggestedOptions
    }
}
