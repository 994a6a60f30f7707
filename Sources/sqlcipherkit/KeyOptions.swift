import ArgumentParser
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
            guard let value = getenv(name) else {
                throw ValidationError("the environment variable \(name) (\(Self.keyName)) is not set")
            }
            guard value.pointee != 0 else {
                throw ValidationError("the environment variable \(name) (\(Self.keyName)) is empty")
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

/// Cipher settings other than the engine's defaults, for databases that need them.
struct CipherOptions: ParsableArguments {
    @Option(
        name: .customLong("cipher-compatibility"),
        help: ArgumentHelp(
            "Open with SQLCipher 3's or 4's default settings (3 opens SQLCipher 3 files on SQLCipher 4).",
            valueName: "3|4"))
    var compatibility: Int?

    @Option(
        help: ArgumentHelp(
            "Plaintext header size in bytes (SQLCipher 4; usually 32). Needs a raw key with salt (x'<96 hex>').",
            valueName: "bytes"))
    var plaintextHeaderSize: Int?

    func validate() throws {
        if let compatibility, compatibility != 3 && compatibility != 4 {
            throw ValidationError("--cipher-compatibility must be 3 or 4, not \(compatibility)")
        }
        if let size = plaintextHeaderSize, size < 0 || size % 16 != 0 {
            throw ValidationError("--plaintext-header-size must be a multiple of 16 (usually 32), not \(size)")
        }
    }

    /// The settings for a database keyed with `key`.
    func settings(for key: EncryptionKey) throws -> CipherSettings {
        var settings: CipherSettings = switch compatibility {
        case 3: .sqlcipher3
        case 4: .sqlcipher4
        default: .engineDefault
        }
        if let size = plaintextHeaderSize, size > 0 {
            // The salt of a plaintext-header database is not in the file (SQLCIPHER-FACTS §7).
            guard let salt = key.salt else {
                throw CommandFailure(
                    "--plaintext-header-size needs the database salt, which such a file does not store: use a raw"
                        + " key with salt (x'<96 hex>', made by `sqlcipherkit keygen --with-salt`)",
                    status: .usage)
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
}

// MARK: - Loading

enum KeyLoader {
    static func load(_ source: KeySource, keyName: String, confirm: Bool) throws -> EncryptionKey {
        switch source {
        case .file(let path):
            return try EncryptionKey(contentsOf: path)
        case .environment(let name):
            // Read in place from the environment block: no Swift String copy of the key.
            guard let value = getenv(name), value.pointee != 0 else {
                throw CommandFailure("the environment variable \(name) is not set or empty", status: .usage)
            }
            return try EncryptionKey(
                keyText: UnsafeRawBufferPointer(start: value, count: strlen(value)),
                source: "environment variable \(name)")
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
