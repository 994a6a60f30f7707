#if Replication  // trait Replication (Package.swift)
import SQLCipherKit

/// The MACs that authenticate a replica: HMAC-SHA256 under a key derived from the database key
/// (``AuthenticationKey``), which the store never sees.
///
/// Every object that carries data or decides what a restore writes is covered, with what it is and where it
/// stands, in one chain per generation:
///
/// - `generation.json`: its MAC covers the generation's name and the SHA-256 of its JSON (sequence number, replica
///   identity, the link to the generation before it, salt, page size…). It starts the chain.
/// - segment `i`: its MAC (in its name) covers the generation, `i`, the time and log flag in its name, the SHA-256
///   of its bytes and the MAC of segment `i − 1` (of `generation.json` for segment 1). A segment replayed from an
///   older state, cut at an earlier commit, renamed, moved to another generation or index, or taken from another
///   replica does not verify.
/// - `snapshot.json` at index `k`: its MAC covers the generation, `k` and the SHA-256 of its JSON, which holds each
///   part's SHA-256 and the chain's value at `k`: segments after the snapshot chain on from it.
///
/// Why a key derived from the database key rather than a replica key of its own: there is no second secret to
/// keep, lose or rotate; whoever can restore and open the database can check its replica; a rekey starts a new
/// generation anyway. For a passphrase the key goes through the same PBKDF2 as the database's (with the salt in
/// `generation.json`), so a MAC offers no cheaper way to guess the passphrase than the encrypted pages themselves.
struct ReplicaAuthentication: Sendable {
    static let purpose = "replica authentication, format 2"

    let key: AuthenticationKey

    /// The authentication of a replica of the database `connection` has open.
    init(connection: Connection) throws {
        key = try connection.authenticationKey(purpose: Self.purpose)
    }

    /// The authentication a verification key gives for a generation with this salt.
    init(verificationKey: VerificationKey, salt: [UInt8]?) throws {
        key = try AuthenticationKey.derive(
            from: verificationKey.key, settings: verificationKey.settings, salt: salt, purpose: Self.purpose)
    }

    func generationMAC(generation: String, jsonSHA256: [UInt8]) -> String {
        mac(["generation", generation, Hex.string(jsonSHA256)])
    }

    func snapshotMAC(generation: String, index: Int, jsonSHA256: [UInt8]) -> String {
        mac(["snapshot", generation, String(index), Hex.string(jsonSHA256)])
    }

    /// The MAC of a segment named by `name` (its `mac` field is ignored) that follows `previous`.
    func segmentMAC(_ name: ReplicaLayout.SegmentName, previous: String) -> String {
        mac([
            "segment", name.generation, String(name.index), String(name.milliseconds), name.startsLog ? "n" : "c",
            name.sha256, previous,
        ])
    }

    /// The MAC of the fields, each followed by a zero byte (no field contains one), so no two lists of fields
    /// give the same input.
    private func mac(_ fields: [String]) -> String {
        var message: [UInt8] = []
        for field in fields {
            message += Array(field.utf8)
            message.append(0)
        }
        return Hex.string(key.authenticate(message))
    }
}
#endif
