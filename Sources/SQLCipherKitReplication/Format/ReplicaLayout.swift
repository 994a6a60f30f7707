#if Replication  // trait Replication (Package.swift)
/// The names of a replica's objects (format 2). They sort: by generation (its sequence number first), then by index
/// within it.
///
/// ```
/// lease.json                                                       who writes the replica (one replicator)
/// generations/<generation>/generation.json                         what the generation is (no secret)
/// generations/<generation>/snapshots/<index>/<part>-<sha256>.part  the main file's bytes, in parts
/// generations/<generation>/snapshots/<index>/snapshot.json         written last: the snapshot is complete
/// generations/<generation>/wal/<index>-<milliseconds>-<n|c>-<sha256>-<mac>.wal  raw log frames
/// ```
///
/// `<generation>` is the generation's sequence number (ten digits: one more than the replica's newest when it
/// started, never a time) and a random suffix (`0000000007-1f2e3d4c`); `<index>` counts its log segments from 1
/// (ten digits), and a snapshot carries the index of the first restore point it serves. A segment's name holds
/// the time it was read (milliseconds since 1970, by the writing host's clock: informative, never an order),
/// whether it starts a new log (`n`, its first bytes are the log's header) or continues one (`c`), the SHA-256 of
/// its bytes, and its MAC (``ReplicaAuthentication``), which chains it to the segment before it.
enum ReplicaLayout {
    static let generationsPrefix = "generations/"
    static let generationManifestName = "generation.json"
    static let snapshotManifestName = "snapshot.json"
    static let leaseKey = "lease.json"

    static func generationPrefix(_ generation: String) -> String {
        generationsPrefix + generation + "/"
    }

    static func generationManifestKey(_ generation: String) -> String {
        generationPrefix(generation) + generationManifestName
    }

    static func snapshotPrefix(_ generation: String, index: Int) -> String {
        generationPrefix(generation) + "snapshots/" + padded(index, 10) + "/"
    }

    static func snapshotManifestKey(_ generation: String, index: Int) -> String {
        snapshotPrefix(generation, index: index) + snapshotManifestName
    }

    static func snapshotPartKey(_ generation: String, index: Int, part: Int, sha256: String) -> String {
        snapshotPrefix(generation, index: index) + padded(part, 6) + "-" + sha256 + ".part"
    }

    static func segmentKey(_ segment: SegmentName) -> String {
        generationPrefix(segment.generation) + "wal/" + padded(segment.index, 10) + "-"
            + padded(segment.milliseconds, 13) + "-" + (segment.startsLog ? "n" : "c") + "-" + segment.sha256 + "-"
            + segment.mac + ".wal"
    }

    /// What a segment's name says.
    struct SegmentName: Hashable, Sendable {
        let generation: String
        let index: Int
        let milliseconds: Int64
        let startsLog: Bool
        let sha256: String
        let mac: String
    }

    // MARK: - Parsing

    /// What a key under `generations/` is.
    enum Object: Equatable {
        case generationManifest(generation: String)
        case snapshotManifest(generation: String, index: Int)
        case snapshotPart(generation: String, index: Int, part: Int, sha256: String)
        case segment(SegmentName)
    }

    /// Parses a key; `nil` for a key this layout does not make (listed as unknown, never deleted).
    static func parse(_ key: String) -> Object? {
        guard key.hasPrefix(generationsPrefix) else { return nil }
        let parts = key.dropFirst(generationsPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
            .map(String.init)
        guard parts.count >= 2, sequence(ofGeneration: parts[0]) != nil else { return nil }
        let generation = parts[0]
        switch parts.count {
        case 2 where parts[1] == generationManifestName:
            return .generationManifest(generation: generation)
        case 3 where parts[1] == "wal":
            let fields = parts[2].split(separator: "-").map(String.init)
            guard fields.count == 5, let index = Int(fields[0]), fields[0].count == 10,
                  let milliseconds = Int64(fields[1]), fields[1].count == 13,
                  fields[2] == "n" || fields[2] == "c", isHex64(fields[3]),
                  fields[4].hasSuffix(".wal"), isHex64(String(fields[4].dropLast(4)))
            else { return nil }
            return .segment(SegmentName(
                generation: generation, index: index, milliseconds: milliseconds, startsLog: fields[2] == "n",
                sha256: fields[3], mac: String(fields[4].dropLast(4))))
        case 4 where parts[1] == "snapshots":
            guard parts[2].count == 10, let index = Int(parts[2]) else { return nil }
            if parts[3] == snapshotManifestName { return .snapshotManifest(generation: generation, index: index) }
            let fields = parts[3].split(separator: "-").map(String.init)
            guard fields.count == 2, fields[0].count == 6, let part = Int(fields[0]), fields[1].hasSuffix(".part"),
                  isHex64(String(fields[1].dropLast(5)))
            else { return nil }
            return .snapshotPart(generation: generation, index: index, part: part, sha256: String(fields[1].dropLast(5)))
        default:
            return nil
        }
    }

    // MARK: - Generation names

    /// A new generation's name: its sequence number, then 8 random hex digits.
    static func newGenerationName(sequence: Int) -> String {
        let random = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return padded(sequence, 10) + "-" + String(repeating: "0", count: 8 - random.count) + random
    }

    /// The sequence number of a generation name (`0000000007-1f2e3d4c`), `nil` for anything else.
    static func sequence(ofGeneration name: String) -> Int? {
        let characters = Array(name.utf8)
        guard characters.count == 19, characters[10] == UInt8(ascii: "-"),
              characters[0..<10].allSatisfy(isDigit), characters[11...].allSatisfy(isHexDigit)
        else { return nil }
        return Int(String(decoding: characters[0..<10], as: UTF8.self))
    }

    /// A generation name of format 1 (`20261124T100000123Z-1f2e3d4c`, before generations were numbered and
    /// authenticated): listed so a reader can say what it is, never restored by this version.
    static func isFormat1GenerationName(_ name: String) -> Bool {
        let characters = Array(name.utf8)
        guard characters.count == 28, characters[8] == UInt8(ascii: "T"), characters[18] == UInt8(ascii: "Z"),
              characters[19] == UInt8(ascii: "-")
        else { return false }
        return characters[0..<8].allSatisfy(isDigit) && characters[9..<18].allSatisfy(isDigit)
            && characters[20...].allSatisfy(isHexDigit)
    }

    private static func isDigit(_ c: UInt8) -> Bool {
        c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")
    }

    private static func isHex64(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy(isHexDigit)
    }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))
    }

    static func padded(_ value: some BinaryInteger, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
#endif
