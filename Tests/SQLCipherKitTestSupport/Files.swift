import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh temporary directory for one test, removed when released (or by ``remove()``).
public final class TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates `<tmp>/SQLCipherKitTests-<UUID>`.
    public init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("SQLCipherKitTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    /// Removes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    deinit {
        remove()
    }
}

/// Runs `body` with a temporary directory that is removed afterwards, whatever happens.
@discardableResult
public func withTemporaryDirectory<T>(_ body: (TemporaryDirectory) throws -> T) throws -> T {
    let directory = try TemporaryDirectory()
    return try body(directory)
}

/// Runs async `body` with a temporary directory that is removed afterwards, whatever happens.
@discardableResult
public func withTemporaryDirectory<T>(_ body: (TemporaryDirectory) async throws -> T) async throws -> T {
    let directory = try TemporaryDirectory()
    return try await body(directory)
}

/// Writes a key file with mode 0600 (the library refuses key files others can read), atomically: written under a
/// temporary name, then renamed, so a reader never sees half a key.
public func writeKeyFile(_ text: String, to path: String) throws {
    let temporary = path + ".writing"
    _ = FileManager.default.createFile(
        atPath: temporary, contents: Data((text + "\n").utf8), attributes: [.posixPermissions: 0o600])
    guard rename(temporary, path) == 0 else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "rename failed for \(path)"])
    }
}

/// Reads a whole file's bytes.
public func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Where `needle` first occurs in `haystack` as a byte sequence (`nil`: nowhere, or an empty needle): the one byte
/// search of the test targets (plaintext in a file, a line in a terminal's output).
public func firstRange(of needle: some Collection<UInt8>, in haystack: some Collection<UInt8>) -> Range<Int>? {
    let needle = Array(needle)
    let haystack = Array(haystack)
    guard let first = needle.first, haystack.count >= needle.count else { return nil }
    for start in 0...(haystack.count - needle.count)
    where haystack[start] == first && haystack[start..<(start + needle.count)].elementsEqual(needle) {
        return start..<(start + needle.count)
    }
    return nil
}

/// Whether `haystack` contains `needle` as a byte sequence.
public func contains(_ haystack: some Collection<UInt8>, _ needle: some Collection<UInt8>) -> Bool {
    firstRange(of: needle, in: haystack) != nil
}

/// Whether `haystack` contains the UTF-8 bytes of `needle`.
public func contains(_ haystack: some Collection<UInt8>, _ needle: String) -> Bool {
    contains(haystack, Array(needle.utf8))
}

/// The permission bits of `path` itself (a symbolic link is not followed), with the set-user-ID, set-group-ID and
/// sticky bits: `0o600`, and `0o4600` shows as such.
///
/// - Throws: A `POSIXError` when the path cannot be looked at (`lstat` fails).
public func fileMode(_ path: String) throws -> Int {
    var status = stat()
    guard lstat(path, &status) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return Int(status.st_mode) & 0o7777
}

/// The engine this run is on, and the one the test scripts say it must be on (`SQLCIPHERKIT_EXPECTED_ENGINE`, set
/// by .ci/test and .ci/sqlcipher4).
public enum Engine {
    /// The linked SQLCipher's major version (0 when it cannot be read).
    public static var major: Int { SQLCipher.parsedVersion?.major ?? 0 }
    /// Whether the linked engine is SQLCipher 4 or later.
    public static var isVersion4: Bool { major >= 4 }
    /// The major version the test scripts expect, when they say.
    public static let expectedMajor: Int? = ProcessInfo.processInfo.environment["SQLCIPHERKIT_EXPECTED_ENGINE"]
        .flatMap { Int($0) }
}

/// Every entry of a folder with its permission bits (`name: 0o600`): a test compares it before and after, so a file
/// left behind, or a mode changed, shows.
public func folderListing(_ folder: String) throws -> [String: Int] {
    var listing: [String: Int] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
        listing[name] = try fileMode(folder + "/" + name)
    }
    return listing
}
