import CFuzzer
import Glibc  // libFuzzer targets are built on Linux only (see .ci/fuzz).
import SQLCipherKit

/// What the fuzz targets share: a scratch folder, the test-only key, file helpers and the database exercise.
///
/// libFuzzer calls a target from one thread, so the process-wide state here is never touched concurrently.
public enum Fuzz {
    /// A test-only raw key (bytes 0, 1, …, 31), the key of every seed database. Not a secret.
    public static let testOnlyKey: EncryptionKey = try! EncryptionKey(rawKey: (0..<32).map { UInt8($0) })

    /// A test-only salt for plaintext-header databases (bytes 0xA0 … 0xAF).
    public static let testOnlySalt: [UInt8] = (0..<16).map { 0xA0 + UInt8($0) }

    /// The settings of the plaintext-header target: a 32-byte header and ``testOnlySalt`` (SQLCipher 4).
    public static let plaintextHeader = CipherSettings.plaintextHeader(size: 32, salt: testOnlySalt)

    /// Hands the process's arguments to libFuzzer's driver, which calls `testOneInput` for every input, and exits
    /// with its status.
    ///
    /// Each target also exports `LLVMFuzzerTestOneInput`: SwiftPM gives an executable its own `main`, which calls
    /// this, but the link may pull in libFuzzer's `main` as well, which needs that symbol. Either way the same code
    /// runs.
    public static func runDriver(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
    }

    /// The process's scratch folder, created on first use and removed at exit: under `FUZZ_SCRATCH`, else
    /// `/dev/shm` (memory: the key-file round trip and SQLite call `fsync` on every input), else `/tmp`.
    public static var scratchDirectory: String {
        if let existing = scratch { return existing }
        let parent = getenv("FUZZ_SCRATCH").map { String(cString: $0) } ?? (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp")
        var template = Array("\(parent)/sqlcipherkit-fuzz-XXXXXX".utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            fatalError("cannot create a scratch folder: \(String(cString: strerror(errno)))")
        }
        let path = String(cString: created)
        scratch = path
        atexit { Fuzz.removeScratch() }
        return path
    }

    nonisolated(unsafe) private static var scratch: String?

    private static func removeScratch() {
        guard let scratch, let directory = opendir(scratch) else { return }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { unlink(scratch + "/" + name) }
        }
        closedir(directory)
        rmdir(scratch)
    }

    /// Writes a line to standard error.
    public static func printError(_ message: String) {
        var line = Array((message + "\n").utf8)
        line.withUnsafeMutableBytes { _ = Glibc.write(2, $0.baseAddress!, $0.count) }
    }

    /// Replaces the file at `path` with `bytes` (mode 0600).
    public static func write(_ bytes: UnsafeRawBufferPointer, to path: String) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        precondition(descriptor >= 0, "cannot write \(path): \(String(cString: strerror(errno)))")
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            precondition(written > 0 || errno == EINTR, "cannot write \(path)")
            if written > 0 { offset += written }
        }
        close(descriptor)
    }

    /// The whole content of a file.
    public static func read(_ path: String) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        precondition(descriptor >= 0, "cannot read \(path)")
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            precondition(count >= 0, "cannot read \(path)")
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
        }
    }

    /// Removes a database and its side files.
    public static func removeDatabase(at path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    /// The cipher settings a fuzz input selects with its first byte: bit 0 turns HMAC off (so damaged pages reach
    /// SQLite's page parser instead of failing authentication).
    public static func settings(selector: UInt8, base: CipherSettings) -> CipherSettings {
        var settings = base
        if selector & 1 == 1 { settings.usesHMAC = false }
        return settings
    }

    /// Opens `bytes` as a database keyed with ``testOnlyKey``, reads what it can, runs `quick_check`, closes.
    /// Errors are expected and ignored: only crashes, sanitizer reports and hangs are findings.
    public static func openAndRead(_ bytes: UnsafeRawBufferPointer, settings: CipherSettings) {
        let path = scratchDirectory + "/input.db"
        removeDatabase(at: path)
        write(bytes, to: path)
        defer { removeDatabase(at: path) }
        guard let db = try? Connection(path: path, key: testOnlyKey, settings: settings) else { return }
        defer { db.close() }
        _ = try? db.scalar("PRAGMA user_version", as: Int.self)
        _ = try? db.scalar("PRAGMA page_count", as: Int.self)
        let tables = (try? db.all("SELECT name FROM sqlite_master WHERE type = 'table'", as: String.self)) ?? []
        for table in tables.prefix(8) {
            guard let cursor = try? db.cursor("SELECT * FROM \(quotedIdentifier(table)) LIMIT 50") else { continue }
            while let row = try? cursor.next() {
                _ = try? row.databaseValues
            }
        }
        _ = try? db.quickCheck()
    }

    /// `name` as an SQL identifier in double quotes.
    public static func quotedIdentifier(_ name: String) -> String {
        var quoted = "\""
        for character in name {
            quoted.append(character)
            if character == "\"" { quoted.append("\"") }
        }
        return quoted + "\""
    }

    // MARK: - Seeds

    /// With `FUZZ_MAKE_SEEDS=<folder>` in the environment, writes the seed databases there and exits.
    public static func makeSeedsIfAsked(base: CipherSettings, prefix: String, headerOnly: Bool = false) {
        guard let directory = getenv("FUZZ_MAKE_SEEDS") else { return }
        do {
            try writeDatabaseSeeds(to: String(cString: directory), base: base, prefix: prefix, headerOnly: headerOnly)
        } catch {
            printError("cannot make seeds: \(error)")
            exit(1)
        }
        exit(0)
    }

    /// A small database made with ``testOnlyKey`` and `settings`: a table with an index and three rows.
    public static func makeDatabase(settings: CipherSettings) throws -> [UInt8] {
        let path = scratchDirectory + "/seed.db"
        removeDatabase(at: path)
        defer { removeDatabase(at: path) }
        let db = try Connection(path: path, key: testOnlyKey, settings: settings)
        try db.execute("""
            PRAGMA user_version = 7;
            CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL, data BLOB);
            CREATE INDEX note_body ON note(body);
            INSERT INTO note(body, data) VALUES ('one', x'00ff'), ('two', NULL), ('three', zeroblob(40));
            """)
        db.close()
        return read(path)
    }

    /// Writes ``makeDatabase(settings:)``'s databases into `directory`, each prefixed with its selector byte and named
    /// after the engine that made it; with `headerOnly`, only the selector and the first 32 bytes (an overlay, see
    /// the plaintext-header target). Used by `.ci/fuzz seeds`.
    public static func writeDatabaseSeeds(
        to directory: String, base: CipherSettings, prefix: String, headerOnly: Bool = false
    ) throws {
        let engine = "sqlcipher\(SQLCipher.version.split(separator: ".").first ?? "x")"
        for selector: UInt8 in [0, 1] {
            let database = try makeDatabase(settings: settings(selector: selector, base: base))
            let file = [selector] + (headerOnly ? Array(database.prefix(32)) : database)
            let name = "\(directory)/\(prefix)-\(engine)-\(selector & 1 == 1 ? "no-hmac" : "hmac")"
            file.withUnsafeBytes { write($0, to: name) }
        }
        // Just the selector: an empty file, which the engine treats as a new database.
        [UInt8(0)].withUnsafeBytes { write($0, to: "\(directory)/\(prefix)-empty") }
    }
}
