import Foundation
import SQLCipherKit
import Testing

@Suite("EncryptionKey")
struct EncryptionKeyTests {
    static let hex64 = String(repeating: "0123456789abcdef", count: 4)
    static let hex32 = String(repeating: "a5", count: 16)

    @Test("a passphrase of any bytes is accepted, an empty one refused before it reaches C")
    func passphrases() throws {
        #expect(try EncryptionKey(passphrase: "correct horse").kind == .passphrase)
        #expect(try EncryptionKey(passphraseBytes: [0x61, 0x00, 0x62]).kind == .passphrase)
        expectError(.invalidKey) { try EncryptionKey(passphrase: "") }
        expectError(.invalidKey) { try EncryptionKey(passphraseBytes: [UInt8]()) }
    }

    @Test("x'<64 hex>' is a raw key and x'<96 hex>' a raw key with salt, in either case")
    func rawKeyText() throws {
        let raw = try EncryptionKey(sqlcipherRawKeyText: "x'\(Self.hex64)'")
        #expect(raw.kind == .raw)
        #expect(raw.salt == nil)
        let withSalt = try EncryptionKey(sqlcipherRawKeyText: "X'\(Self.hex64.uppercased())\(Self.hex32)'")
        #expect(withSalt.kind == .rawWithSalt)
        #expect(withSalt.salt == [UInt8](repeating: 0xA5, count: 16))
        let lower = try EncryptionKey(sqlcipherRawKeyText: "x'\(Self.hex64)\(Self.hex32)'")
        #expect(lower.isSameKey(as: withSalt))
    }

    @Test("hex of the wrong length or with non-hex digits is an error, not a passphrase", arguments: [
        "x'\(String(repeating: "ab", count: 40))'",   // 80 hex
        "x'\(String(repeating: "ab", count: 31))'",   // 62 hex
        "x'\(String(repeating: "zz", count: 32))'",
        "x'\(String(repeating: "ab", count: 32))",    // no closing quote
        "x''",
    ])
    func malformedRawKeyText(_ text: String) {
        let error = expectError(.invalidKey) { try EncryptionKey(sqlcipherRawKeyText: text) }
        #expect(error?.message.contains("ab") == false)
        #expect(error?.message.contains("zz") == false)
    }

    @Test("raw keys from bytes check their lengths")
    func rawKeyBytes() throws {
        #expect(try EncryptionKey(rawKey: [UInt8](repeating: 1, count: 32)).kind == .raw)
        #expect(try EncryptionKey(rawKey: [UInt8](repeating: 1, count: 32), salt: [UInt8](repeating: 2, count: 16))
            .kind == .rawWithSalt)
        expectError(.invalidKey) { try EncryptionKey(rawKey: [UInt8](repeating: 1, count: 31)) }
        expectError(.invalidKey) {
            try EncryptionKey(rawKey: [UInt8](repeating: 1, count: 32), salt: [UInt8](repeating: 2, count: 8))
        }
    }

    @Test("generated raw keys are random and of the right kind")
    func generated() throws {
        let a = try EncryptionKey.generateRaw()
        let b = try EncryptionKey.generateRaw()
        #expect(a.kind == .raw)
        #expect(!a.isSameKey(as: b))
        let salted = try EncryptionKey.generateRaw(withSalt: true)
        #expect(salted.kind == .rawWithSalt)
        #expect(salted.salt?.count == 16)
    }

    @Test("descriptions are redacted")
    func redacted() throws {
        let key = try EncryptionKey(passphrase: TestKeys.sentinel)
        for text in ["\(key)", String(reflecting: key), "\(Encryption.key(key))", "\([key])"] {
            #expect(!text.contains(TestKeys.sentinel))
        }
        let raw = try EncryptionKey(sqlcipherRawKeyText: "x'\(Self.hex64)'")
        #expect(!"\(raw)".contains(Self.hex64))
        #expect(!String(reflecting: raw).contains("0123456789"))
    }

    // MARK: - Key files

    @Test("a key file holds a raw key or a passphrase; one trailing newline is removed")
    func keyFiles() throws {
        try withTemporaryDirectory { dir in
            let rawPath = dir.path("test-raw.key")
            try writePrivate("x'\(Self.hex64)'\n", to: rawPath)
            #expect(try EncryptionKey(contentsOf: rawPath).kind == .raw)

            let saltedPath = dir.path("test-salted.key")
            try writePrivate("x'\(Self.hex64)\(Self.hex32)'\r\n", to: saltedPath)
            #expect(try EncryptionKey(contentsOf: saltedPath).kind == .rawWithSalt)

            let passphrasePath = dir.path("test-pass.key")
            try writePrivate("secret\n", to: passphrasePath)
            let fromFile = try EncryptionKey(contentsOf: passphrasePath)
            #expect(fromFile.isSameKey(as: try EncryptionKey(passphrase: "secret")))

            let twoNewlines = dir.path("test-two.key")
            try writePrivate("secret\n\n", to: twoNewlines)
            #expect(!(try EncryptionKey(contentsOf: twoNewlines)).isSameKey(as: try EncryptionKey(passphrase: "secret")))
        }
    }

    @Test("a written key file reads back as the same key; a passphrase it could not keep is refused")
    func keyFileRoundTrip() throws {
        try withTemporaryDirectory { dir in
            let keys = [
                try EncryptionKey.generateRaw(), try EncryptionKey.generateRaw(withSalt: true),
                try EncryptionKey(passphrase: "secret"), try EncryptionKey(passphrase: "ends with a newline\n"),
                try EncryptionKey(passphraseBytes: [0xA2, 0x00, 0x0A]),
            ]
            for (index, key) in keys.enumerated() {
                let path = dir.path("test-\(index).key")
                try key.write(toKeyFile: path)
                #expect(try EncryptionKey(contentsOf: path).isSameKey(as: key))
            }
            // Found by the key-text fuzzer: "\u{A2}\r" was written as "\u{A2}\r\n" and read back as "\u{A2}".
            for passphrase in ["\u{A2}\r", "carriage return\r", "x'0011'", "X'not hex'"] {
                let path = dir.path("refused.key")
                let error = expectError(.invalidKey) { try EncryptionKey(passphrase: passphrase).write(toKeyFile: path) }
                #expect(error?.message.contains("read back") == true)
                #expect(error?.message.contains(passphrase) == false)
                #expect(!FileManager.default.fileExists(atPath: path))
            }
        }
    }

    @Test("key text in a String parses exactly as a key file's content")
    func keyTextString() throws {
        let raw = try EncryptionKey(keyText: "x'\(Self.hex64)'\n")
        #expect(raw.isSameKey(as: try EncryptionKey(sqlcipherRawKeyText: "x'\(Self.hex64)'")))
        let salted = try EncryptionKey(keyText: "X'\(Self.hex64)\(Self.hex32)'\r\n")
        #expect(salted.kind == .rawWithSalt)
        #expect(try EncryptionKey(keyText: "secret\n").isSameKey(as: try EncryptionKey(passphrase: "secret")))
        #expect(try EncryptionKey(keyText: "secret\n\n").isSameKey(as: try EncryptionKey(passphrase: "secret\n")))
        #expect(try EncryptionKey(keyText: "pässphrase").isSameKey(as: try EncryptionKey(passphrase: "pässphrase")))
        expectError(.invalidKey) { try EncryptionKey(keyText: "") }
        expectError(.invalidKey) { try EncryptionKey(keyText: "\r\n") }
        let malformed = expectError(.invalidKey) { try EncryptionKey(keyText: "x'\(TestKeys.sentinel)'") }
        #expect(malformed?.message.contains(TestKeys.sentinel) == false)
    }

    @Test("bad key files give clear errors that never show the content")
    func badKeyFiles() throws {
        try withTemporaryDirectory { dir in
            let missing = expectError(.invalidKey) { try EncryptionKey(contentsOf: dir.path("missing.key")) }
            #expect(missing?.message.contains("missing.key") == true)

            let empty = dir.path("empty.key")
            try writePrivate("\n", to: empty)
            #expect(expectError(.invalidKey) { try EncryptionKey(contentsOf: empty) }?.message.contains("empty") == true)

            let loose = dir.path("loose.key")
            try writePrivate(TestKeys.sentinel, to: loose)
            chmod(loose, 0o644)
            let looseError = expectError(.invalidKey) { try EncryptionKey(contentsOf: loose) }
            #expect(looseError?.message.contains("chmod 600") == true)
            #expect(looseError?.message.contains(TestKeys.sentinel) == false)
            #expect(try EncryptionKey(contentsOf: loose, permissions: .allowGroupAndOthers).kind == .passphrase)

            let badHex = dir.path("bad-hex.key")
            try writePrivate("x'\(TestKeys.sentinel)'", to: badHex)
            let hexError = expectError(.invalidKey) { try EncryptionKey(contentsOf: badHex) }
            #expect(hexError?.message.contains(TestKeys.sentinel) == false)
            #expect(hexError?.message.contains("hex digits") == true)

            let huge = dir.path("huge.key")
            try writePrivate(String(repeating: "k", count: 5000), to: huge)
            let hugeError = expectError(.invalidKey) { try EncryptionKey(contentsOf: huge) }
            #expect(hugeError?.message.contains("at most 4096") == true)

            let folderError = expectError(.invalidKey) { try EncryptionKey(contentsOf: dir.url.path) }
            #expect(folderError?.message.contains("not a regular file") == true)
        }
    }
}

func writePrivate(_ text: String, to path: String) throws {
    _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
    chmod(path, 0o600)
}

/// The README's tour, run as a fresh clone has it: the test keys are `0644` (git keeps no modes). Before, the tour
/// created `notes.db` before it read its second key, and the crash report of the top-level `try` began with
/// "SQLite error 21" for what is a key file's mode.
@Suite("The README tour with the test keys of a fresh clone")
struct ReadmeTourKeyFileTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The tour's code block.
    static func tour() throws -> [String] {
        let readme = try String(contentsOf: repository.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "## A tour"))
        let lines = readme[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.hasPrefix("```swift") }.dropFirst().prefix { !$0.hasPrefix("```") }
        return lines.map(String.init)
    }

    @Test("every key file is read before the tour creates anything, and a loose one is named first, not SQLite")
    func looseKeyFilesFirst() throws {
        let tour = try Self.tour()
        let keyLines = tour.indices.filter { tour[$0].contains("EncryptionKey(contentsOf:") }
        let firstConnection = try #require(tour.firstIndex { $0.contains("Connection(") })
        #expect(keyLines.count == 2 && keyLines.allSatisfy { $0 < firstConnection }, "\(tour)")
        let paths = keyLines.compactMap { tour[$0].firstMatch(of: #/contentsOf: "([^"]+)"/#).map { String($0.1) } }
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir.path("Keys"), withIntermediateDirectories: true)
            for path in paths {
                try FileManager.default.copyItem(
                    atPath: Self.repository.appendingPathComponent(path).path, toPath: dir.path(path))
                chmod(dir.path(path), 0o644)
            }
            // 0644, then one key 0600, then both: each loose key file fails by name until none is left.
            for (index, path) in paths.enumerated() {
                for loose in paths[index...] {
                    let error = expectError(.invalidKey) { try EncryptionKey(contentsOf: dir.path(loose)) }
                    let described = error.map { String(describing: $0) } ?? ""
                    #expect(described.hasPrefix("invalidKey: key file \(dir.path(loose)) can be read by group or others"),
                            "\(described)")
                    #expect(described.contains("chmod 600"))
                    #expect(!described.contains("SQLite error"), "\(described)")
                }
                chmod(dir.path(path), 0o600)
            }
            let key = try EncryptionKey(contentsOf: dir.path(paths[0]))
            let backupKey = try EncryptionKey(contentsOf: dir.path(paths[1]))
            let db = try Connection(path: dir.path("notes.db"), key: key)
            try db.backup(toPath: dir.path("notes.backup.db"), encryption: .key(backupKey))
            db.close()
        }
    }
}
