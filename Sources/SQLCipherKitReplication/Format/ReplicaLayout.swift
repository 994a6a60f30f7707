#if Replication  // trait Replication (Package.swift)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The names of a replica's objects. They sort: by generation (its start time first), then by index within it.
///
/// ```
/// generations/<generation>/generation.json                       what the generation is (no secret)
/// generations/<generation>/snapshots/<index>/<part>-<sha256>.part the main file's bytes, in parts
/// generations/<generation>/snapshots/<index>/snapshot.json        written last: the snapshot is complete
/// generations/<generation>/wal/<index>-<milliseconds>-<n|c>-<sha256>.wal  raw log frames
/// ```
///
/// `<generation>` is the UTC start time and a random suffix (`20261124T100000123Z-1f2e3d4c`); `<index>` counts the
/// generation's log segments from 1 (ten digits), and a snapshot carries the index of the first restore point it
/// serves. A segment's name holds the time it was read (milliseconds since 1970), whether it starts a new log
/// (`n`, its first bytes are the log's header) or continues one (`c`), and the SHA-256 of its bytes.
enum ReplicaLayout {
    static let generationsPrefix = "generations/"
    static let generationManifestName = "generation.json"
    static let snapshotManifestName = "snapshot.json"

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

    static func segmentKey(
        _ generation: String, index: Int, milliseconds: Int64, startsLog: Bool, sha256: String
    ) -> String {
        generationPrefix(generation) + "wal/" + padded(index, 10) + "-" + padded(milliseconds, 13) + "-"
            + (startsLog ? "n" : "c") + "-" + sha256 + ".wal"
    }

    // MARK: - Parsing

    /// What a key under `generations/` is.
    enum Object: Equatable {
        case generationManifest(generation: String)
        case snapshotManifest(generation: String, index: Int)
        case snapshotPart(generation: String, index: Int, part: Int, sha256: String)
        case segment(generation: String, index: Int, milliseconds: Int64, startsLog: Bool, sha256: String)
    }

    /// Parses a key; `nil` for a key this layout does not make (listed as unknown, never deleted).
    static func parse(_ key: String) -> Object? {
        guard key.hasPrefix(generationsPrefix) else { return nil }
        let parts = key.dropFirst(generationsPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
            .map(String.init)
        guard parts.count >= 2, isGenerationName(parts[0]) else { return nil }
        let generation = parts[0]
        switch parts.count {
        case 2 where parts[1] == generationManifestName:
            return .generationManifest(generation: generation)
        case 3 where parts[1] == "wal":
            let fields = parts[2].split(separator: "-").map(String.init)
            guard fields.count == 4, let index = Int(fields[0]), fields[0].count == 10,
                  let milliseconds = Int64(fields[1]), fields[1].count == 13,
                  fields[2] == "n" || fields[2] == "c",
                  fields[3].hasSuffix(".wal"), isSHA256(String(fields[3].dropLast(4)))
            else { return nil }
            return .segment(
                generation: generation, index: index, milliseconds: milliseconds, startsLog: fields[2] == "n",
                sha256: String(fields[3].dropLast(4)))
        case 4 where parts[1] == "snapshots":
            guard parts[2].count == 10, let index = Int(parts[2]) else { return nil }
            if parts[3] == snapshotManifestName { return .snapshotManifest(generation: generation, index: index) }
            let fields = parts[3].split(separator: "-").map(String.init)
            guard fields.count == 2, fields[0].count == 6, let part = Int(fields[0]), fields[1].hasSuffix(".part"),
                  isSHA256(String(fields[1].dropLast(5)))
            else { return nil }
            return .snapshotPart(generation: generation, index: index, part: part, sha256: String(fields[1].dropLast(5)))
        default:
            return nil
        }
    }

    // MARK: - Generation names

    /// A new generation's name: the UTC time to the millisecond, then 8 random hex digits.
    static func newGenerationName(at milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let date = padded(Int(parts.tm_year) + 1900, 4) + padded(Int(parts.tm_mon) + 1, 2) + padded(Int(parts.tm_mday), 2)
        let time = padded(Int(parts.tm_hour), 2) + padded(Int(parts.tm_min), 2) + padded(Int(parts.tm_sec), 2)
            + padded(Int(milliseconds % 1000), 3)
        let random = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return date + "T" + time + "Z-" + String(repeating: "0", count: 8 - random.count) + random
    }

    /// `yyyyMMddTHHmmssSSSZ-xxxxxxxx`.
    static func isGenerationName(_ name: String) -> Bool {
        let characters = Array(name.utf8)
        guard characters.count == 28, characters[8] == UInt8(ascii: "T"), characters[18] == UInt8(ascii: "Z"),
              characters[19] == UInt8(ascii: "-")
        else { return false }
        let isDigit = { (c: UInt8) in c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
        return characters[0..<8].allSatisfy(isDigit) && characters[9..<18].allSatisfy(isDigit)
            && characters[20...].allSatisfy(isHexDigit)
    }

    private static func isSHA256(_ text: String) -> Bool {
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
