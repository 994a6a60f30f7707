#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("A replica holds no readable byte")
struct ReplicaSecrecyTests {
    @Test("no object holds the rows' text, the key, its hex text or a passphrase, while the database itself has the rows")
    func nothingReadable() async throws {
        let passphrase = "correct horse battery staple 7f3e"
        try await withReplicationFixture(key: try EncryptionKey(passphrase: passphrase), configure: { configuration in
            configuration.checkpointFrameCount = 5
            configuration.snapshotInterval = .seconds(10)
        }) { fixture in
            for _ in 1...4 {
                try await fixture.insert(6)
                fixture.clock.advance(seconds: 20)
                try await fixture.sync()
            }
            let count = try await fixture.pool.read { db in try db.scalar("SELECT count(*) FROM note", as: Int.self) }
            #expect(count == 24)
            let objects = try fixture.objectFiles()
            #expect(objects.keys.contains { $0.hasSuffix(".part") })
            #expect(objects.keys.contains { $0.hasSuffix(".wal") })
            for (key, bytes) in objects {
                #expect(!contains(bytes, plaintextMarker), "\(key) holds the rows' text")
                #expect(!contains(bytes, passphrase), "\(key) holds the passphrase")
                #expect(!contains(bytes, "CREATE TABLE"), "\(key) holds the schema's text")
                if key.hasSuffix(".part") {
                    // Not a plaintext SQLite file: the first bytes are the salt, not the header.
                    #expect(Array(bytes.prefix(16)) != Array("SQLite format 3\0".utf8), "\(key) starts like a plaintext file")
                }
            }
        }
    }

    @Test("a raw key's bytes and its x'…' text appear in no object")
    func rawKeyNowhere() async throws {
        let key = try EncryptionKey.generateRaw()
        try await withReplicationFixture(key: key, configure: { $0.checkpointFrameCount = 4 }) { fixture in
            try await fixture.insert(12)
            try await fixture.sync()
            try await fixture.insert(12)
            try await fixture.sync()
            let keyText = try key.withRawKeyText { Array($0) }
            let rawBytes = try #require(Hex.bytes(String(decoding: keyText.dropFirst(2).prefix(64), as: UTF8.self)))
            for (name, bytes) in try fixture.objectFiles() {
                #expect(!contains(bytes, String(decoding: keyText, as: UTF8.self)), "\(name) holds the key's text")
                #expect(!contains(bytes, String(decoding: keyText.dropFirst(2).prefix(64), as: UTF8.self)), "\(name) holds the key's hex")
                #expect(!containsBytes(bytes, rawBytes), "\(name) holds the key's bytes")
            }
        }
    }
}

/// Whether `haystack` contains `needle` as a byte sequence.
func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { start in
        haystack[start] == needle[0] && Array(haystack[start..<(start + needle.count)]) == needle
    }
}
#endif
