#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The small JSON files a follower keeps beside its copy (its state file, promotion requests and answers): written
/// whole or not at all, read back as `nil` when absent and as damage when they are not what they should be.
enum SideFile {
    /// `value` as the bytes of a side file (sorted keys, indented: an operator reads them).
    static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array(try encoder.encode(value))
    }

    /// Writes `value` to `path` atomically (``writeFileAtomically(atPath:_:permissions:)``, mode 0600).
    static func write<T: Encodable>(_ value: T, to path: String) throws {
        try writeFileAtomically(atPath: path, try encode(value))
    }

    /// The side file at `path`, or `nil` when there is none.
    ///
    /// - Parameters:
    ///   - expected: What the file should be, for the error (`a follower's state file`).
    ///   - left: What was done about it, for the error (`nothing was changed`).
    /// - Throws: ``DatabaseError`` `damaged` when it is not a `T`; `fileSystem` when it exists but cannot be read.
    static func read<T: Decodable>(_ type: T.Type, at path: String, expected: String, left: String) throws -> T? {
        guard let data = FileManager.default.contents(atPath: path) else {
            if access(path, F_OK) == 0 { throw fileSystemFailure("cannot read \(path)") }
            return nil
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw DatabaseError(.damaged, "\(path) is not \(expected) (\(error)); \(left)")
        }
    }
}
#endif
