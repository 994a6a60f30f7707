import ArgumentParser
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Key sources

/// The options that give one key: `--<prefix>-file`, `--<prefix>-env`, `--<prefix>-stdin`. Each key a command needs
/// has its own option group conforming to this protocol; the group produces the library's ``KeyProvider``, asked once
/// per run. A key is never an argument value: argv is visible to every user of the machine.
protocol KeySourceOptions: ParsableArguments {
    /// `key`, `new-key` or `dest-key`: the options' prefix.
    static var optionPrefix: String { get }
    /// Whether an environment variable holding the path of an existing file is refused (a key being set: the path
    /// would become a key nobody means). The current key is not refused: a wrong-key error names the mistake.
    static var refusesFilePathInEnvironment: Bool { get }
    /// What the key is, for messages and prompts (`the database key`).
    static var keyName: String { get }

    /// Every `--<prefix>-file` given (an array, so that one given twice is noticed).
    var files: [String] { get }
    /// Every `--<prefix>-env` given.
    var environmentVariables: [String] { get }
    var readsStandardInput: Bool { get }
}

extension KeySourceOptions {
    static var refusesFilePathInEnvironment: Bool { false }

    /// The provider of the source given on the command line, `nil` when none was: a key file (mode 0600), an
    /// environment variable or standard input, each in the key-file format. Nothing is read until it is asked.
    var provider: KeyProvider? {
        if let path = files.first { return .file(path) }
        if let name = environmentVariables.first {
            return .environment(name)
        }
        if readsStandardInput {
            return .custom("standard input") {
                try EncryptionKey(readingFileDescriptor: STDIN_FILENO, source: "standard input")
            }
        }
        return nil
    }

    /// Whether an option of the group was given.
    var isGiven: Bool { givenSourceCount > 0 }

    private var givenSourceCount: Int {
        files.count + environmentVariables.count + (readsStandardInput ? 1 : 0)
    }

    private static var optionList: String {
        "--\(optionPrefix)-file, --\(optionPrefix)-env or --\(optionPrefix)-stdin"
    }

    /// At most one source, and a named environment variable must be set and not empty.
    func validateSources() throws {
        guard givenSourceCount <= 1 else {
            throw ValidationError("give \(Self.keyName) once, with one of \(Self.optionList)")
        }
        if files.first?.isEmpty == true {
            throw ValidationError("--\(Self.optionPrefix)-file needs a path")
        }
        if let name = environmentVariables.first {
            guard !name.isEmpty, !name.contains("=") else {
                throw ValidationError("--\(Self.optionPrefix)-env needs the NAME of an environment variable")
            }
            let shownName = KeyMaterialRedaction.shownVariableName(name)
            guard let value = getenv(name) else {
                throw ValidationError("the environment variable \(shownName) (\(Self.keyName)) is not set")
            }
            guard value.pointee != 0 else {
                throw ValidationError("the environment variable \(shownName) (\(Self.keyName)) is empty")
            }
            if Self.refusesFilePathInEnvironment && EncryptionKey.namesExistingFile(value) {
                throw ValidationError(
                    "the environment variable \(shownName) (\(Self.keyName)) holds the path of an existing file, but"
                        + " --\(Self.optionPrefix)-env takes the key itself: give the file with --\(Self.optionPrefix)-file")
            }
        }
    }

    /// For a key the command cannot do without: a usage error when no option gives it and standard input is not a
    /// terminal to ask on.
    func requireSource() throws {
        guard !isGiven, !Terminal.isStandardInputTerminal else { return }
        throw ValidationError("\(Self.keyName) is missing: give it with \(Self.optionList)")
    }

    /// Loads a required key: from the given source, or asked at the terminal when none was given.
    ///
    /// - Parameter confirm: Ask twice when prompting (for a key that is about to be set).
    func loadKey(confirm: Bool = false) throws -> EncryptionKey {
        if let provider { return try provider.key() }
        try requireSource()
        return try Terminal.askKey(named: Self.keyName, confirm: confirm)
    }

    /// Loads an optional key: `nil` when no source was given (never prompts).
    func loadOptionalKey() throws -> EncryptionKey? {
        try provider?.key()
    }
}

/// `--allow-weak-passphrase`, on the commands that set a key chosen now (`rotate`, `encrypt`, `backup` with a
/// destination key). A key a database already has is never judged (`migrate` keeps it).
struct WeakPassphraseOption: ParsableArguments {
    @Flag(
        help: ArgumentHelp(
            "Accept a new passphrase shorter than \(EncryptionKey.minimumRotationPassphraseByteCount) bytes or with a"
                + " line break inside (refused by default: such text is more likely a mistake than a key)."))
    var allowWeakPassphrase = false

    /// Refuses `key` as a new key when it is more likely a mistake than a key (exit 2), unless the option was given.
    func check(newKey key: EncryptionKey) throws {
        guard !allowWeakPassphrase, let reason = key.weakRotationKeyReason else { return }
        throw CommandFailure(
            "\(reason). Use a raw key (sqlcipherkit keygen --out NEW.key) or a longer passphrase, or give"
                + " --allow-weak-passphrase to accept it. Nothing was changed", status: .usage)
    }
}

/// Standard input can feed one key only: it is read to its end.
func validateOneStandardInputKey(_ groups: any KeySourceOptions...) throws {
    guard groups.filter(\.readsStandardInput).count <= 1 else {
        throw ValidationError("only one key can come from standard input")
    }
}

// MARK: - Option groups

/// `--key-file` and `--key-env`, the key sources of ``KeyOptions`` and ``ShellKeyOptions``.
struct KeyFileAndEnvironmentOptions: ParsableArguments {
    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp(
            "Key file (mode 0600): x'<64 hex>' raw key, x'<96 hex>' raw key with salt, or a passphrase.",
            valueName: "path"))
    var files: [String] = []

    @Option(
        name: .customLong("key-env"),
        help: ArgumentHelp("Environment variable holding the key (key-file format).", valueName: "name"))
    var environmentVariables: [String] = []
}

/// The key that opens the database now.
struct KeyOptions: KeySourceOptions {
    static let optionPrefix = "key"
    static let keyName = "the database key"

    @OptionGroup var sources: KeyFileAndEnvironmentOptions

    @Flag(name: .customLong("key-stdin"), help: "Read the key from standard input (key-file format).")
    var readsStandardInput = false

    var files: [String] { sources.files }
    var environmentVariables: [String] { sources.environmentVariables }

    func validate() throws { try validateSources() }
}

/// The key of the database the shell opens: `--key-file` and `--key-env`. The shell reads its statements from
/// standard input, so `--key-stdin` is not in its help; given anyway, it is parsed only to be refused with advice
/// (``ShellCommand/validate()``) instead of an unknown-option error.
struct ShellKeyOptions: KeySourceOptions {
    static let optionPrefix = KeyOptions.optionPrefix
    static let keyName = KeyOptions.keyName

    @OptionGroup var sources: KeyFileAndEnvironmentOptions

    @Flag(name: .customLong("key-stdin"), help: ArgumentHelp(visibility: .hidden))
    var readsStandardInput = false

    var files: [String] { sources.files }
    var environmentVariables: [String] { sources.environmentVariables }

    func validate() throws { try validateSources() }
}

/// The key a database gets.
struct NewKeyOptions: KeySourceOptions {
    static let optionPrefix = "new-key"
    static let refusesFilePathInEnvironment = true
    static let keyName = "the new key"

    @Option(
        name: .customLong("new-key-file"),
        help: ArgumentHelp("Key file holding the new key (mode 0600; key-file format).", valueName: "path"))
    var files: [String] = []

    @Option(
        name: .customLong("new-key-env"),
        help: ArgumentHelp("Environment variable holding the new key.", valueName: "name"))
    var environmentVariables: [String] = []

    @Flag(name: .customLong("new-key-stdin"), help: "Read the new key from standard input.")
    var readsStandardInput = false

    func validate() throws { try validateSources() }
}

/// The key of a backup copy, when it differs from the source's.
struct DestinationKeyOptions: KeySourceOptions {
    static let optionPrefix = "dest-key"
    static let refusesFilePathInEnvironment = true
    static let keyName = "the destination key"

    @Option(
        name: .customLong("dest-key-file"),
        help: ArgumentHelp(
            "Key file for the destination (mode 0600); the source's key when not given.", valueName: "path"))
    var files: [String] = []

    @Option(
        name: .customLong("dest-key-env"),
        help: ArgumentHelp("Environment variable holding the destination key.", valueName: "name"))
    var environmentVariables: [String] = []

    @Flag(name: .customLong("dest-key-stdin"), help: "Read the destination key from standard input.")
    var readsStandardInput = false

    func validate() throws { try validateSources() }
}

/// Cipher settings other than the engine's defaults, for databases that need them: the same group on every
/// subcommand that opens a file. Each option maps to one ``CipherSettings`` field, applied right after the key and
/// read back (a setting the engine ignores is an error, not a silent default).
struct CipherOptions: ParsableArguments {
    @Option(
        name: .customLong("cipher-compatibility"),
        help: ArgumentHelp(
            "Start from SQLCipher 1, 2, 3 or 4's default settings (e.g. 3 opens SQLCipher 3 files on SQLCipher 4);"
                + " the options below override single settings.",
            valueName: "1|2|3|4"))
    var compatibility: Int?

    @Option(help: ArgumentHelp("cipher_page_size: 512 to 65536, a power of two.", valueName: "bytes"))
    var pageSize: Int?

    @Option(help: ArgumentHelp("kdf_iter: PBKDF2 iterations for a passphrase (e.g. 64000, 256000).", valueName: "n"))
    var kdfIterations: Int?

    @Flag(
        inversion: .prefixedNo,
        help: "cipher_use_hmac: whether every page carries an HMAC (--no-hmac for SQLCipher 1.1 files).")
    var hmac: Bool?

    @Option(help: ArgumentHelp("cipher_kdf_algorithm (SQLCipher 4; SQLCipher 3 has sha1 only).", valueName: "algorithm"))
    var kdfAlgorithm: CipherSettings.KDFAlgorithm?

    @Option(help: ArgumentHelp("cipher_hmac_algorithm (SQLCipher 4; SQLCipher 3 has sha1 only).", valueName: "algorithm"))
    var hmacAlgorithm: CipherSettings.HMACAlgorithm?

    @Option(
        help: ArgumentHelp(
            "Plaintext header size in bytes (SQLCipher 4; usually 32). The salt then comes from --salt-file or a"
                + " key file holding x'<96 hex>'.",
            valueName: "bytes"))
    var plaintextHeaderSize: Int?

    @Option(
        name: .customLong("salt-file"),
        help: ArgumentHelp(
            "File holding the 16-byte database salt as 32 hex digits (or x'<32 hex>'), for a plaintext-header"
                + " database keyed with a passphrase. Not secret.",
            valueName: "path"))
    var saltFile: String?

    @Option(
        name: .customLong("hmac-pgno"),
        help: ArgumentHelp("cipher_hmac_pgno: le is the default; be for SQLCipher 2.0 big-endian files.",
                           valueName: "le|be|native"))
    var hmacPageNumberEncoding: CipherSettings.HMACPageNumberEncoding?

    @Option(
        name: .customLong("fast-kdf-iterations"),
        help: ArgumentHelp("fast_kdf_iter: iterations deriving the HMAC key (default 2; SQLCipher 2.0 beta: 4000).",
                           valueName: "n"))
    var fastKDFIterations: Int?

    @Option(
        name: .customLong("hmac-salt-mask"),
        help: ArgumentHelp(
            "cipher_hmac_salt_mask as a hex byte (default 3a; SQLCipher 2.0 beta: 00). SQLCipher applies it to the"
                + " whole process; the command holds it for its run and restores the default.",
            valueName: "hex"))
    var hmacSaltMask: String?

    func validate() throws {
        // The library's one check of the ranges, named by option.
        let ranged = CipherSettings(
            compatibility: compatibility, pageSize: pageSize, kdfIterations: kdfIterations,
            plaintextHeaderSize: plaintextHeaderSize, fastKDFIterations: fastKDFIterations)
        if let violation = ranged.rangeViolation {
            let option = switch violation.setting {
            case .compatibility: "--cipher-compatibility"
            case .pageSize: "--page-size"
            case .kdfIterations: "--kdf-iterations"
            case .plaintextHeaderSize: "--plaintext-header-size"
            case .salt: "--salt-file"
            case .fastKDFIterations: "--fast-kdf-iterations"
            }
            throw ValidationError(violation.message(naming: option))
        }
        if hmacSaltMask != nil, hmacSaltMaskValue == nil {
            throw ValidationError("--hmac-salt-mask must be one byte in hex, such as 3a or 00")
        }
    }

    /// What a subcommand whose cipher options are folded (`@OptionGroup(…, visibility: .hidden)`) says in its
    /// `--help`, before its examples: they are there, and `--help-hidden` lists them.
    static let foldedNote = """
        Files made with other cipher settings than the engine's defaults (a SQLCipher 3 file on SQLCipher 4: \
        --cipher-compatibility 3) take the 11 cipher options, listed by --help-hidden.
        """

    /// `discussion` with ``foldedNote`` as its last paragraph before the examples.
    static func withFoldedNote(_ discussion: String) -> String {
        guard let examples = discussion.range(of: "\n\nExample") else { return discussion + "\n\n" + foldedNote }
        return discussion[..<examples.lowerBound] + "\n\n" + foldedNote + discussion[examples.lowerBound...]
    }

    /// `--hmac-salt-mask` as a byte.
    var hmacSaltMaskValue: UInt8? {
        guard var text = hmacSaltMask?.lowercased() else { return nil }
        if text.hasPrefix("0x") { text.removeFirst(2) }
        guard (1...2).contains(text.count) else { return nil }
        return UInt8(text, radix: 16)
    }

    /// Whether any option of the group was given.
    var isEmpty: Bool {
        compatibility == nil && pageSize == nil && kdfIterations == nil && hmac == nil && kdfAlgorithm == nil
            && hmacAlgorithm == nil && plaintextHeaderSize == nil && saltFile == nil && hmacPageNumberEncoding == nil
            && fastKDFIterations == nil && hmacSaltMask == nil
    }

    /// The page size the database uses with these options (for progress estimates).
    var effectivePageSize: Int {
        pageSize ?? compatibility.flatMap { CipherSettings.defaults(ofMajorVersion: $0)?.pageSize }
            ?? (SQLCipher.supports(.version4Format) ? 4096 : 1024)
    }

    /// The settings for a database keyed with `key` (which is only asked whether it carries a salt).
    func settings(for key: EncryptionKey) throws -> CipherSettings {
        var settings = compatibility.flatMap { CipherSettings.defaults(ofMajorVersion: $0) } ?? .engineDefault
        if compatibility == 4 && !SQLCipher.supports(.version4Format) {
            try SQLCipher.require(.version4Format)
        }
        if let pageSize { settings.pageSize = pageSize }
        if let kdfIterations { settings.kdfIterations = kdfIterations }
        if let hmac { settings.usesHMAC = hmac }
        if let kdfAlgorithm { settings.kdfAlgorithm = kdfAlgorithm }
        if let hmacAlgorithm { settings.hmacAlgorithm = hmacAlgorithm }
        if let hmacPageNumberEncoding { settings.hmacPageNumberEncoding = hmacPageNumberEncoding }
        if let fastKDFIterations { settings.fastKDFIterations = fastKDFIterations }
        if let mask = hmacSaltMaskValue { settings.hmacSaltMask = mask }
        if let saltFile { settings.salt = try SaltFile.read(saltFile) }
        if let size = plaintextHeaderSize, size > 0 {
            // The salt of a plaintext-header database is not in the file (Docs/EngineNotes.md#plaintext-header). It
            // stays where it was given: in the key (x'<96 hex>') or, from --salt-file, in the settings.
            guard settings.salt != nil || key.salt != nil else {
                throw CommandFailure(
                    "--plaintext-header-size needs the database salt, which such a file does not store: give it with"
                        + " --salt-file, or use a raw key with salt (x'<96 hex>', made by `sqlcipherkit keygen"
                        + " --with-salt`)",
                    status: .usage, kind: "usage")
            }
            settings.plaintextHeaderSize = size
        }
        return settings
    }

    /// `.key(key, settings:)` with these settings.
    func encryption(for key: EncryptionKey) throws -> Encryption {
        .key(key, settings: try settings(for: key))
    }

    /// The options that select `settings` (for `info`'s suggestions).
    static func flags(for settings: CipherSettings) -> [String] {
        var flags: [String] = []
        if let compatibility = settings.compatibility { flags += ["--cipher-compatibility", "\(compatibility)"] }
        if let pageSize = settings.pageSize { flags += ["--page-size", "\(pageSize)"] }
        if let iterations = settings.kdfIterations { flags += ["--kdf-iterations", "\(iterations)"] }
        if let usesHMAC = settings.usesHMAC { flags.append(usesHMAC ? "--hmac" : "--no-hmac") }
        if let algorithm = settings.kdfAlgorithm { flags += ["--kdf-algorithm", algorithm.argumentName] }
        if let algorithm = settings.hmacAlgorithm {
            flags += ["--hmac-algorithm", algorithm.argumentName]
        }
        if let size = settings.plaintextHeaderSize { flags += ["--plaintext-header-size", "\(size)"] }
        return flags
    }
}

// MARK: - The library's cipher settings as arguments

/// An algorithm option's value: the hash's name (`sha1`, `sha256`, `sha512`), or the engine's own name for it
/// (`pbkdf2_hmac_sha256`, `hmac_sha256`), in either case.
protocol AlgorithmArgument: CaseIterable, RawRepresentable<String> {
    /// What the engine's name adds before the hash's name (`PBKDF2_HMAC_`).
    static var enginePrefix: String { get }
}

extension AlgorithmArgument {
    /// The hash's name, as the options take it and `info` suggests it.
    var argumentName: String { String(rawValue.dropFirst(Self.enginePrefix.count)).lowercased() }

    init?(argumentName text: String) {
        let text = text.uppercased()
        guard let value = Self.allCases.first(where: { text == $0.rawValue || Self.enginePrefix + text == $0.rawValue })
        else { return nil }
        self = value
    }
}

/// `--kdf-algorithm`.
extension CipherSettings.KDFAlgorithm: AlgorithmArgument, ExpressibleByArgument {
    static let enginePrefix = "PBKDF2_HMAC_"
    public init?(argument: String) { self.init(argumentName: argument) }
    public static var allValueStrings: [String] { allCases.map(\.argumentName) }
}

/// `--hmac-algorithm`.
extension CipherSettings.HMACAlgorithm: AlgorithmArgument, ExpressibleByArgument {
    static let enginePrefix = "HMAC_"
    public init?(argument: String) { self.init(argumentName: argument) }
    public static var allValueStrings: [String] { allCases.map(\.argumentName) }
}

/// `--hmac-pgno`: `le`, `be` or `native`, the setting's own values.
extension CipherSettings.HMACPageNumberEncoding: ExpressibleByArgument {}

/// `--salt-file`: the library's salt-file reader (32 hex digits or `x'<32 hex>'`), its failures reported as
/// `invalidSalt`.
enum SaltFile {
    static func read(_ path: String) throws -> [UInt8] {
        do {
            return try CipherSettings.salt(contentsOfFile: path)
        } catch let error as DatabaseError {
            throw CommandFailure(error.message, kind: "invalidSalt")
        }
    }
}

/// Reading a passphrase at the terminal without echo.
enum Terminal {
    static var isStandardInputTerminal: Bool {
        Output.capture == nil && isatty(STDIN_FILENO) == 1
    }

    /// Asks for a key without echo; twice when `confirm` is set, and the two entries must be the same.
    static func askKey(named keyName: String, confirm: Bool) throws -> EncryptionKey {
        let key = try readSecretLine(prompt: "Enter \(keyName): ", keyName: keyName)
        if confirm {
            let again = try readSecretLine(prompt: "Enter \(keyName) again: ", keyName: keyName)
            guard key.isSameKey(as: again) else {
                throw CommandFailure("the two entries of \(keyName) differ; nothing was done", status: .usage)
            }
        }
        return key
    }

    /// Turns echo off, prints `prompt` on standard error, reads one line straight into a wiped buffer.
    private static func readSecretLine(prompt: String, keyName: String) throws -> EncryptionKey {
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else {
            throw CommandFailure("cannot read \(keyName) from the terminal: \(String(cString: strerror(errno)))")
        }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        guard tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent) == 0 else {
            throw CommandFailure("cannot turn off echo on the terminal: \(String(cString: strerror(errno)))")
        }
        // The prompt only once echo is off: a key typed as soon as it shows is neither echoed nor flushed away.
        Output.write(prompt, toStandardError: true)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            Output.write("\n", toStandardError: true)
        }
        return try EncryptionKey(readingLineFrom: STDIN_FILENO, source: "the terminal")
    }
}
