#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// The replica format this version writes and reads. Format 1 (generations named by the writing host's clock, no
/// MACs) is listed but not restored: its order and its objects cannot be trusted.
let replicaFormat = 2

/// Why a generation started: what ended the one before it, or that there was none.
///
/// Stored in `generation.json` by its case name (with a sentence of detail), which is also how it prints; given to
/// the metric
/// `sqlcipherkit_replication_generations_total` as its `reason` dimension, and logged.
public enum GenerationReason: String, Codable, Hashable, Sendable, CaseIterable {
    /// The replica had no generation this replicator could continue: the first one, or a replicator started
    /// where the newest generation does not continue the log on disk.
    case firstGeneration
    /// A checkpoint the replicator did not run restarted the write-ahead log before its frames were shipped.
    case logRestarted
    /// Another connection emptied the write-ahead log before the replicator shipped it.
    case logEmptied
    /// Another file now has the database's path (a restore, a rotation by copy).
    case fileReplaced
    /// The replicator started again and the log on disk no longer continues the replica.
    case notContinuous
    /// The store failed for so long that the log outgrew its limit: frames were checkpointed without being shipped.
    case gap
    /// Replication was paused (for a rekey) and the log on disk no longer continues the replica.
    case paused
    /// The generation before it could not be completed (its first snapshot failed).
    case previousIncomplete
    /// The replica's newest generation does not verify with the database's key (written with another key, or
    /// not by a replicator holding the key).
    case previousNotAuthentic
    /// A follower of the replica became the primary (a promotion): the replica goes on from its state.
    case promoted
}

/// Where a generation comes from: the restore point of the generation before it that it follows, and that point's
/// MAC, so the replica's generations form one chain a reader can check.
struct GenerationLink: Codable, Sendable, Hashable {
    var generation: String
    var sequence: Int
    /// The last restore point of that generation the new one follows.
    var index: Int
    /// The MAC chain's value at that point (hex), as that generation's objects carry it.
    var chain: String
}

/// `generation.json`: what a generation is. Nothing in it is secret: the engine, the page layout, the database's
/// salt (stored in the file's first bytes anyway, unless it has a plaintext header), the replica's random identity.
/// Not the database's file name: anyone who can list the bucket reads this.
struct GenerationManifest: Codable, Sendable, Equatable {
    /// The layout's version: a reader refuses a replica newer than it knows.
    var format: Int
    var generation: String
    /// One more than the replica's newest generation when it started: the order of generations.
    var sequence: Int
    /// The replica's identity (random, 32 hex digits), the same in every generation of one replica.
    var replica: String
    /// When it started, by the writing host's clock (informative; never an order).
    var createdAtMilliseconds: Int64
    var reason: GenerationReason
    /// A sentence on the reason (how large the log was at a gap, which checkpoint restarted it, …).
    var reasonDetail: String
    /// The generation it follows, when there was one.
    var previous: GenerationLink?
    var pageSize: Int
    /// 0 for a fully encrypted file; 32 (usually) for a database with a plaintext header.
    var plaintextHeaderSize: Int
    /// The database's salt (hex), when it has one: a passphrase's authentication key is derived with it, and a
    /// plaintext-header database needs it to open (such a file does not store it).
    var salt: String?
    /// `SQLCipher <version>, SQLite <version>` of the replicating process.
    var engine: String
    var replicator: String
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
    /// The MAC chain's value at ``index`` (hex): segments after the snapshot chain on from it, so a replica whose
    /// older segments retention removed is still checked from here.
    var chain: String
}

/// A manifest as stored: JSON, then a line `sha256:<hex of the JSON bytes>` (a damaged manifest is found like any
/// other damaged object, not read as other values), then a line `mac:<hex>` (``ReplicaAuthentication``).
struct StoredManifest<Value: Codable & Sendable>: Sendable {
    let value: Value
    /// The SHA-256 of the JSON bytes (what the MAC covers).
    let sha256: [UInt8]
    /// The MAC, hex.
    let mac: String

    private static var sha256Prefix: [UInt8] { Array("\nsha256:".utf8) }
    private static var macPrefix: [UInt8] { Array("\nmac:".utf8) }

    /// The bytes to store: `value` as JSON, its SHA-256, and the MAC `authenticate` gives for that SHA-256.
    static func encode(_ value: Value, authenticate: ([UInt8]) -> String) throws -> (bytes: [UInt8], mac: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let json = Array(try encoder.encode(value))
        let digest = SHA256.digest(json)
        let mac = authenticate(digest)
        return (json + sha256Prefix + Array(Hex.string(digest).utf8) + macPrefix + Array(mac.utf8) + [0x0A], mac)
    }

    /// - Throws: ``ReplicationError`` (`damaged`, naming `key`) when the checksum or the JSON does not check out, or
    ///   the manifest is of a format this version does not read.
    static func decode(_ bytes: [UInt8], key: String) throws -> StoredManifest {
        // JSON, "\nsha256:" 64 hex, "\nmac:" 64 hex, "\n".
        let trailerLength = sha256Prefix.count + 64 + macPrefix.count + 64 + 1
        guard bytes.count > trailerLength, bytes.last == 0x0A else { throw missingTrailer(key) }
        let jsonEnd = bytes.count - trailerLength
        let shaStart = jsonEnd + sha256Prefix.count
        let macStart = shaStart + 64 + macPrefix.count
        guard Array(bytes[jsonEnd..<shaStart]) == sha256Prefix,
              Array(bytes[(shaStart + 64)..<macStart]) == macPrefix,
              let stored = Hex.bytes(String(decoding: bytes[shaStart..<(shaStart + 64)], as: UTF8.self))
        else { throw missingTrailer(key) }
        let json = Array(bytes[..<jsonEnd])
        let digest = SHA256.digest(json)
        guard digest == stored else {
            throw ReplicationError(.damaged, "\(key) does not match its SHA-256; the object is damaged")
        }
        let mac = String(decoding: bytes[macStart..<(macStart + 64)], as: UTF8.self)
        do {
            let format = try JSONDecoder().decode(FormatOnly.self, from: Data(json)).format
            guard format == replicaFormat else {
                throw ReplicationError(
                    .damaged,
                    "\(key) is of replica format \(format); this version reads format \(replicaFormat) only")
            }
            return StoredManifest(value: try JSONDecoder().decode(Value.self, from: Data(json)), sha256: digest, mac: mac)
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(.damaged, "\(key) cannot be read (\(error)); the object is damaged")
        }
    }

    private struct FormatOnly: Decodable {
        let format: Int
    }

    private static func missingTrailer(_ key: String) -> ReplicationError {
        ReplicationError(
            .damaged, "\(key) has no checksum and MAC lines; the object is damaged, or not a manifest of format 2")
    }
}
#endif
