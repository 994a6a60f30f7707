#if Replication  // trait Replication (Package.swift)
import Foundation

/// `generation.json`: what a generation is. Nothing in it is secret: the engine, the page layout, and for a
/// database with a plaintext header its salt (which such a file does not store, and which is not secret).
struct GenerationManifest: Codable, Sendable, Equatable {
    /// The layout's version: a reader refuses a replica newer than it knows.
    var format: Int
    var generation: String
    var createdAtMilliseconds: Int64
    /// Why the generation started (the first one, a log restarted by another connection, a gap after an outage…).
    var reason: String
    /// The generation this one follows, when the replicator knew it.
    var previousGeneration: String?
    /// The database's file name (no folder).
    var databaseName: String
    var pageSize: Int
    /// 0 for a fully encrypted file; 32 (usually) for a database with a plaintext header.
    var plaintextHeaderSize: Int
    /// Hex; only for a plaintext-header database.
    var plaintextHeaderSalt: String?
    /// `SQLCipher <version>, SQLite <version>` of the replicating process.
    var engine: String
    var replicator: String

    static let currentFormat = 1
}

/// `snapshot.json`: a complete snapshot (written after its parts).
struct SnapshotManifest: Codable, Sendable, Equatable {
    struct Part: Codable, Sendable, Equatable {
        var byteCount: Int64
        var sha256: String
    }

    var format: Int
    /// The first restore point the snapshot serves.
    var index: Int
    /// The first log segment to apply on top of it (`index + 1` for an exact snapshot; the segment that starts the
    /// log for one taken while other connections could still checkpoint).
    var replayFromIndex: Int
    var createdAtMilliseconds: Int64
    var byteCount: Int64
    /// Whether the main file was exactly the database at ``index`` (taken right after a complete checkpoint, with
    /// every checkpoint held back until it was copied). Otherwise it may hold some pages of later frames of the log
    /// it replays from, and serves restore points from ``index`` on only.
    var isExact: Bool
    var parts: [Part]
    /// For an exact snapshot, where in the log the database was: the next segment continues this log after it, or
    /// starts a new one. `nil` when there was no log.
    var logPosition: WALPosition?
}

/// Manifests are JSON followed by a last line `sha256:<hex of the JSON bytes>`, so a damaged manifest is found like
/// any other damaged object, not read as other values.
enum ManifestCoding {
    private static let trailerPrefix = Array("\nsha256:".utf8)

    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let json = Array(try encoder.encode(value))
        return json + trailerPrefix + Array(SHA256.hex(json).utf8) + [UInt8(ascii: "\n")]
    }

    /// - Throws: ``ReplicationError`` (`damaged`, naming `key`) when the checksum or the JSON does not check out.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], key: String) throws -> T {
        let trailerLength = trailerPrefix.count + 64 + 1
        guard bytes.count > trailerLength,
              Array(bytes[(bytes.count - trailerLength)..<(bytes.count - 65)]) == trailerPrefix,
              bytes.last == UInt8(ascii: "\n")
        else { throw ReplicationError(.damaged, "\(key) has no checksum line; the object is damaged or not a manifest") }
        let json = Array(bytes[..<(bytes.count - trailerLength)])
        let stored = String(decoding: bytes[(bytes.count - 65)..<(bytes.count - 1)], as: UTF8.self)
        guard SHA256.hex(json) == stored else {
            throw ReplicationError(.damaged, "\(key) does not match its SHA-256; the object is damaged")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(json))
        } catch {
            throw ReplicationError(.damaged, "\(key) cannot be read (\(error)); the object is damaged")
        }
    }
}
#endif
