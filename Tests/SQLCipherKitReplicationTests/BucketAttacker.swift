#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// Someone who can write to the replica's store but has no key: reads, writes, copies and removes objects with a
/// client of their own (file operations for a folder; boto3 for the S3 store, never the code under test).
struct BucketAttacker: Sendable {
    enum Place: Sendable {
        case folder(String)
        case bucket(name: String, prefix: String)
    }

    let place: Place
    let scratch: String

    /// Every key under the replica's root.
    func keys() async throws -> [String] {
        switch place {
        case .folder(let root):
            let enumerator = FileManager.default.enumerator(atPath: root)
            var keys: [String] = []
            while let relative = enumerator?.nextObject() as? String {
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isFolder),
                      !isFolder.boolValue, !(relative.split(separator: "/").last ?? "").hasPrefix(".tmp-")
                else { continue }
                keys.append(relative)
            }
            return keys.sorted()
        case .bucket(let name, let prefix):
            let result = try await ObjectStore.check(["list", name, prefix + "/"])
            try #require(result.status == 0, "list: \(result.output)")
            let json = result.output.split(separator: "\n").first { $0.hasPrefix("[") } ?? "[]"
            return try JSONDecoder().decode([String].self, from: Data(json.utf8)).sorted()
        }
    }

    func read(_ key: String) async throws -> [UInt8] {
        switch place {
        case .folder(let root):
            return try fileBytes(root + "/" + key)
        case .bucket(let name, let prefix):
            let file = scratch + "/" + UUID().uuidString
            defer { try? FileManager.default.removeItem(atPath: file) }
            let result = try await ObjectStore.check(["get", name, prefix + "/" + key, file])
            try #require(result.status == 0, "get: \(result.output)")
            return try fileBytes(file)
        }
    }

    func write(_ key: String, _ bytes: [UInt8]) async throws {
        switch place {
        case .folder(let root):
            let path = root + "/" + key
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        case .bucket(let name, let prefix):
            let file = scratch + "/" + UUID().uuidString
            defer { try? FileManager.default.removeItem(atPath: file) }
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            let result = try await ObjectStore.check(["put", name, prefix + "/" + key, file])
            try #require(result.status == 0, "put: \(result.output)")
        }
    }

    func delete(_ key: String) async throws {
        switch place {
        case .folder(let root):
            try FileManager.default.removeItem(atPath: root + "/" + key)
        case .bucket(let name, let prefix):
            let result = try await ObjectStore.check(["delete", name, prefix + "/" + key])
            try #require(result.status == 0, "delete: \(result.output)")
        }
    }

    func rename(_ key: String, to newKey: String) async throws {
        try await write(newKey, try await read(key))
        try await delete(key)
    }

    /// Flips the low bit of one byte of an object.
    func flip(_ key: String, at offset: Int) async throws {
        var bytes = try await read(key)
        bytes[offset] ^= 0x01
        try await write(key, bytes)
    }

    /// The keys of the segments of `generation`, by index.
    func segments(of generation: String) async throws -> [Int: String] {
        var found: [Int: String] = [:]
        for key in try await keys() {
            guard case .segment(let name)? = ReplicaLayout.parse(key), name.generation == generation else { continue }
            found[name.index] = key
        }
        return found
    }

    /// The generations, by sequence number.
    func generations() async throws -> [String] {
        Set(try await keys().compactMap { key -> String? in
            guard key.hasPrefix("generations/") else { return nil }
            return key.split(separator: "/").dropFirst().first.map(String.init)
        }).sorted()
    }
}

/// Where the authenticity tests run: a folder store, and the real object store when it is installed.
enum AttackedStore: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case folder
    case s3

    var testDescription: String { rawValue }

    /// Runs `body` with a replication fixture whose replica is in this kind of store and the attacker of that store;
    /// the fixture is closed on every way out (``withReplicationFixture(settings:key:configure:target:_:)``).
    @discardableResult
    func withFixture<T>(
        key: EncryptionKey? = nil, _ body: (ReplicationFixture, BucketAttacker) async throws -> T
    ) async throws -> T {
        switch self {
        case .folder:
            return try await withReplicationFixture(key: key) { fixture in
                try await body(
                    fixture, BucketAttacker(place: .folder(fixture.store.root), scratch: fixture.directory.path("")))
            }
        case .s3:
            let bucket = try await ObjectStore.makeBucket()
            return try await withReplicationFixture(key: key, target: { _ in try ObjectStore.store(bucket: bucket) }) {
                fixture in
                try await body(fixture, BucketAttacker(
                    place: .bucket(name: bucket, prefix: "notes"), scratch: fixture.directory.path("")))
            }
        }
    }

    static var available: [AttackedStore] { ObjectStore.isInstalled ? allCases : [.folder] }
}

extension WALFormat.Checksum {
    /// The running checksum a frame's header stores (bytes 16–23).
    static func stored(in frame: ArraySlice<UInt8>) -> WALFormat.Checksum {
        let start = frame.startIndex
        func word(_ offset: Int) -> UInt32 {
            UInt32(frame[start + offset]) << 24 | UInt32(frame[start + offset + 1]) << 16
                | UInt32(frame[start + offset + 2]) << 8 | UInt32(frame[start + offset + 3])
        }
        return WALFormat.Checksum(first: word(16), second: word(20))
    }
}

/// Rewrites the running checksums of a continuing segment's frames (no log header) from `start` on, as anyone can:
/// the checksum is unkeyed.
func rechecksummed(_ segment: [UInt8], pageSize: Int, from start: WALFormat.Checksum, bigEndian: Bool) -> [UInt8] {
    var bytes = segment
    let frameSize = 24 + pageSize
    var running = start
    var offset = 0
    while offset + frameSize <= bytes.count {
        running = bytes.withUnsafeBytes { buffer in
            running.continued(over: UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + 8)]), bigEndian: bigEndian)
                .continued(
                    over: UnsafeRawBufferPointer(rebasing: buffer[(offset + 24)..<(offset + frameSize)]),
                    bigEndian: bigEndian)
        }
        for (index, word) in [running.first, running.second].enumerated() {
            for byte in 0..<4 { bytes[offset + 16 + index * 4 + byte] = UInt8(truncatingIfNeeded: word >> (24 - 8 * byte)) }
        }
        offset += frameSize
    }
    return bytes
}
#endif
