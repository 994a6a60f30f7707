import ArgumentParser
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Key sources

/// Where one key comes from. A key is never an argument value: argv is visible to every user of the machine.
enum KeySource: Equatable {
    /// A key file (mode 0600): `x'<64 hex>'`, `x'<96 hex>'` or a passphrase.
    case file(String)
    /// An environment variable holding the same text as a key file.
    case environment(String)
    /// Standard input, read to its end, holding the same text as a key file.
    case standardInput
    /// A passphrase typed at the terminal without echo.
    case prompt
}

/// The options that give one key: `--<prefix>-file`, `--<prefix>-env`, `--<prefix>-stdin`. Each key a command needs
/// has its own option group conforming to this protocol.
protocol KeySourceOptions: ParsableArguments {
    /// `key`, `new-key` or `dest-key`: the options' prefix.
    static var optionPrefix: String { get }
    /// What the key is, for messages and prompts (`the database key`).
    static var keyName: String { get }

    /// Every `--<prefix>-file` given (an array, so that one given twice is noticed).
    var files: [String] { get }
    /// Every `--<prefix>-env` given.
    var environmentVariables: [String] { get }
    var readsStandardInput: Bool { get }
}

extension KeySourceOptions {
    var file: String? { files.first }
    var environmentVariable: String? { environmentVariables.first }

    /// The source given on the command line, `nil` when none was.
    var givenSource: KeySource? {
        if let file { return .file(file) }
        if let environmentVariable { return .environment(environmentVariable) }
        if readsStandardInput { return .standardInput }
        return nil
    }

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
        if file?.isEmpty == true {
            throw ValidationError("--\(Self.optionPrefix)-file needs a path")
        }
        if let name = environmentVariable {
            guard !name.isEmpty, !name.contains("=") else {
                throw ValidationError("--\(Self.optionPrefix)-env needs the NAME of an environment variable")
            }
            let shownName = EnvironmentName.shown(name)
            guard let value = getenv(name) else {
                throw ValidationError("the environment variable \(shownName) (\(Self.keyName)) is not set")
            }
            guard value.pointee != 0 else {
                throw ValidationError("the environment variable \(shownName) (\(Self.keyName)) is empty")
            }
        }
    }

    /// For a key the command cannot do without: the given source, or a prompt when standard input is a terminal.
    func requiredSource() throws -> KeySource {
        if let givenSource { return givenSource }
        guard Terminal.isStandardInputTerminal else {
            throw ValidationError("\(Self.keyName) is missing: give it with \(Self.optionList)")
        }
        return .prompt
    }

    /// Loads a required key (prompting when no source was given and standard input is a terminal).
    ///
    /// - Parameter confirm: Ask twice when prompting (for a key that is about to be set).
    func loadKey(confirm: Bool = false) throws -> EncryptionKey {
        try KeyLoader.load(try requiredSource(), keyName: Self.keyName, confirm: confirm)
    }

    /// Loads an optional key: `nil` when no source was given (never prompts).
    func loadOptionalKey() throws -> EncryptionKey? {
        try givenSource.map { try KeyLoader.load($0, keyName: Self.keyName, confirm: false) }
    }
}

/// Standard input can feed one key only: it is read to its end.
func validateOneStandardInputKey(_ groups: any KeySourceOptions...) throws {
    guard groups.filter(\.readsStandardInput).count <= 1 else {
        throw ValidationError("only one key can come from standard input")
    }
}

// MARK: - Option groups

/// The key that opens the database now.
struct KeyOptions: KeySourceOptions {
    static let optionPrefix = "key"
    static let keyName = "the database key"

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

    @Flag(name: .customLong("key-stdin"), help: "Read the key from standard input (key-file format).")
    var readsStandardInput = false

    func validate() throws { try validateSources() }
}

/// The key a database gets.
struct NewKeyOptions: KeySourceOptions {
    static let optionPrefix = "new-key"
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
    var kdfAlgorithm: KDFAlgorithmArgument?

    @Option(help: ArgumentHelp("cipher_hmac_algorithm (SQLCipher 4; SQLCipher 3 has sha1 only).", valueName: "algorithm"))
    var hmacAlgorithm: HMACAlgorithmArgument?

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
    var hmacPageNumberEncoding: HMACPageNumberArgument?

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
        if let compatibility, !(1...4).contains(compatibility) {
            throw ValidationError("--cipher-compatibility must be 1, 2, 3 or 4, not \(compatibility)")
        }
        if let size = plaintextHeaderSize, size < 0 || size % 16 != 0 {
            throw ValidationError("--plaintext-header-size must be a multiple of 16 (usually 32), not \(size)")
        }
        if let pageSize, pageSize < 512 || pageSize > 65536 || pageSize & (pageSize - 1) != 0 {
            throw ValidationError("--page-size must be a power of two from 512 to 65536, not \(pageSize)")
        }
        if let kdfIterations, kdfIterations < 1 {
            throw ValidationError("--kdf-iterations must be at least 1, not \(kdfIterations)")
        }
        if let fastKDFIterations, fastKDFIterations < 1 {
            throw ValidationError("--fast-kdf-iterations must be at least 1, not \(fastKDFIterations)")
        }
        if hmacSaltMask != nil, hmacSaltMaskValue == nil {
            throw ValidationError("--hmac-salt-mask must be one byte in hex, such as 3a or 00")
        }
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

    /// The settings for a database keyed with `key`.
    func settings(for key: EncryptionKey) throws -> CipherSettings {
        var settings = compatibility.flatMap { CipherSettings.defaults(ofMajorVersion: $0) } ?? .engineDefault
        if compatibility == 4 && !SQLCipher.supports(.version4Format) {
            try SQLCipher.require(.version4Format)
        }
        if let pageSize { settings.pageSize = pageSize }
        if let kdfIterations { settings.kdfIterations = kdfIterations }
        if let hmac { settings.usesHMAC = hmac }
        if let kdfAlgorithm { settings.kdfAlgorithm = kdfAlgorithm.algorithm }
        if let hmacAlgorithm { settings.hmacAlgorithm = hmacAlgorithm.algorithm }
        if let hmacPageNumberEncoding { settings.hmacPageNumberEncoding = hmacPageNumberEncoding.encoding }
        if let fastKDFIterations { settings.fastKDFIterations = fastKDFIterations }
        if let mask = hmacSaltMaskValue { settings.hmacSaltMask = mask }
        if let saltFile { settings.salt = try SaltFile.read(saltFile) }
        if let size = plaintextHeaderSize, size > 0 {
            // The salt of a plaintext-header database is not in the file (Docs/EngineNotes.md#plaintext-header).
            guard let salt = settings.salt ?? key.salt else {
                throw CommandFailure(
                    "--plaintext-header-size needs the database salt, which such a file does not store: give it with"
                        + " --salt-file, or use a raw key with salt (x'<96 hex>', made by `sqlcipherkit keygen"
                        + " --with-salt`)",
                    status: .usage, kind: "usage")
            }
            settings.plaintextHeaderSize = size
            settings.salt = salt
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
        if let algorithm = settings.kdfAlgorithm { flags += ["--kdf-algorithm", KDFAlgorithmArgument(algorithm).rawValue] }
        if let algorithm = settings.hmacAlgorithm {
            flags += ["--hmac-algorithm", HMACAlgorithmArgument(algorithm).rawValue]
        }
        if let size = settings.plaintextHeaderSize { flags += ["--plaintext-header-size", "\(size)"] }
        return flags
    }
}

/// `--kdf-algorithm`.
enum KDFAlgorithmArgument: String, ExpressibleByArgument, CaseIterable {
    case sha1, sha256, sha512

    init(_ algorithm: CipherSettings.KDFAlgorithm) {
        switch algorithm {
        case .pbkdf2HMACSHA1: self = .sha1
        case .pbkdf2HMACSHA256: self = .sha256
        case .pbkdf2HMACSHA512: self = .sha512
        }
    }

    init?(argument: String) {
        let text = argument.lowercased()
        guard let value = Self.allCases.first(where: { text == $0.rawValue || text == "pbkdf2_hmac_\($0.rawValue)" })
        else { return nil }
        self = value
    }

    var algorithm: CipherSettings.KDFAlgorithm {
        switch self {
        case .sha1: .pbkdf2HMACSHA1
        case .sha256: .pbkdf2HMACSHA256
        case .sha512: .pbkdf2HMACSHA512
        }
    }
}

/// `--hmac-algorithm`.
enum HMACAlgorithmArgument: String, ExpressibleByArgument, CaseIterable {
    case sha1, sha256, sha512

    init(_ algorithm: CipherSettings.HMACAlgorithm) {
        switch algorithm {
        case .hmacSHA1: self = .sha1
        case .hmacSHA256: self = .sha256
        case .hmacSHA512: self = .sha512
        }
    }

    init?(argument: String) {
        let text = argument.lowercased()
        guard let value = Self.allCases.first(where: { text == $0.rawValue || text == "hmac_\($0.rawValue)" })
        else { return nil }
        self = value
    }

    var algorithm: CipherSettings.HMACAlgorithm {
        switch self {
        case .sha1: .hmacSHA1
        case .sha256: .hmacSHA256
        case .sha512: .hmacSHA512
        }
    }
}

/// `--hmac-pgno`.
enum HMACPageNumberArgument: String, ExpressibleByArgument, CaseIterable {
    case le, be, native

    var encoding: CipherSettings.HMACPageNumberEncoding {
        switch self {
        case .le: .littleEndian
        case .be: .bigEndian
        case .native: .native
        }
    }
}

/// `--salt-file`: 32 hex digits (or `x'<32 hex>'`), one trailing newline allowed. The salt is not secret (a normal
/// SQLCipher file stores it in its first 16 bytes), but the content is still never printed.
enum SaltFile {
    static func read(_ path: String) throws -> [UInt8] {
        let shownPath = KeyMaterialRedaction.shown(path, as: "salt file path")
        // Non-blocking and fstat-checked like a key file: a FIFO must fail, not wait for a writer.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            throw CommandFailure(
                "cannot read the salt file \(shownPath): \(String(cString: strerror(errno)))", kind: "invalidSalt")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size <= 256 else {
            throw CommandFailure(
                "the salt file \(shownPath) is not a regular file of at most 256 bytes", kind: "invalidSalt")
        }
        var bytes = [UInt8](repeating: 0, count: 257)
        let count = bytes.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress!, $0.count) }
        guard count >= 0, count <= 256 else {
            throw CommandFailure("cannot read the salt file \(shownPath)", kind: "invalidSalt")
        }
        var text = String(decoding: bytes[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if (text.hasPrefix("x'") || text.hasPrefix("X'")) && text.hasSuffix("'") && text.count >= 3 {
            text = String(text.dropFirst(2).dropLast())
        }
        let digits = Array(text.utf8)
        guard digits.count == 32 else {
            throw CommandFailure(
                "the salt file \(shownPath) must hold 32 hex digits (16 bytes), optionally as x'<32 hex>'",
                kind: "invalidSalt")
        }
        var salt: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                throw CommandFailure(
                    "the salt file \(shownPath) must hold 32 hex digits (16 bytes)", kind: "invalidSalt")
            }
            salt.append(byte)
        }
        return salt
    }
}

// MARK: - Loading

enum KeyLoader {
    static func load(_ source: KeySource, keyName: String, confirm: Bool) throws -> EncryptionKey {
        switch source {
        case .file(let path):
            return try EncryptionKey(contentsOf: path)
        case .environment(let name):
            // Read in place from the environment block: no Swift String copy of the key.
            let shownName = EnvironmentName.shown(name)
            guard let value = getenv(name), value.pointee != 0 else {
                throw CommandFailure("the environment variable \(shownName) is not set or empty", status: .usage)
            }
            return try EncryptionKey(
                keyText: UnsafeRawBufferPointer(start: value, count: strlen(value)),
                source: "environment variable \(shownName)")
        case .standardInput:
            return try EncryptionKey(readingFileDescriptor: STDIN_FILENO, source: "standard input")
        case .prompt:
            let key = try Terminal.readSecretLine(prompt: "Enter \(keyName): ", keyName: keyName)
            if confirm {
                let again = try Terminal.readSecretLine(prompt: "Enter \(keyName) again: ", keyName: keyName)
                guard key.isSameKey(as: again) else {
                    throw CommandFailure("the two entries of \(keyName) differ; nothing was done", status: .usage)
                }
            }
            return key
        }
    }
}

/// An environment variable's name as messages show it: only a well-formed name (letters, digits, `_`, not starting
/// with a digit) that does not look like key material; anything else is probably a key typed where the name belongs.
enum EnvironmentName {
    static func isWellFormed(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(48...57).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
        }
    }

    static func shown(_ name: String) -> String {
        isWellFormed(name) && !KeyMaterialRedaction.looksLikeKey(name)
            ? name : "(the name given is not shown: it is not a variable name and may be key material)"
    }
}

/// Reading a passphrase at the terminal without echo.
enum Terminal {
    static var isStandardInputTerminal: Bool {
        Output.capture == nil && isatty(STDIN_FILENO) == 1
    }

    /// Prints `prompt` on standard error, turns echo off, reads one line into a wiped buffer.
    static func readSecretLine(prompt: String, keyName: String) throws -> EncryptionKey {
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else {
            throw CommandFailure("cannot read \(keyName) from the terminal: \(String(cString: strerror(errno)))")
        }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        Output.write(prompt, toStandardError: true)
        guard tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent) == 0 else {
            throw CommandFailure("cannot turn off echo on the terminal: \(String(cString: strerror(errno)))")
        }
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            Output.write("\n", toStandardError: true)
        }
        let capacity = EncryptionKey.maximumKeyFileByteCount
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer {
            wipe(buffer)
            buffer.deallocate()
        }
        var count = 0
        while count < capacity {
            let result = read(STDIN_FILENO, buffer.baseAddress! + count, 1)
            if result < 0 && errno == EINTR { continue }
            if result <= 0 || buffer[count] == UInt8(ascii: "\n") { break }
            count += 1
        }
        return try EncryptionKey(
            keyText: UnsafeRawBufferPointer(rebasing: buffer[0..<count]), source: "the terminal")
    }

    private static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        #if canImport(Glibc)
        explicit_bzero(base, buffer.count)
        #else
        _ = memset_s(base, buffer.count, 0, buffer.count)
        #endif
    }
}
