import Foundation
import SQLCipherKit

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

/// Reads a whole file's bytes.
public func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Whether `haystack` contains `needle` as a byte sequence.
public func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let needle = Array(needle.utf8)
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { start in
        haystack[start] == needle[0] && Array(haystack[start..<(start + needle.count)]) == needle
    }
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
        let attributes = try FileManager.default.attributesOfItem(atPath: folder + "/" + name)
        listing[name] = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }
    return listing
}
