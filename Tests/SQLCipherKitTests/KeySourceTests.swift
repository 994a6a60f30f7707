import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key sources the command-line tool builds its ``KeyProvider``s from: key files, environment variables and file
/// descriptors, each read once into a wiped buffer.
@Suite("Key sources")
struct KeySourceTests {
    @Test("a key provider refuses a key file the group can read, unless told to accept it")
    func groupReadableKeyFile() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("group.key")
            try writePrivate(TestKeys.sentinel, to: path)
            chmod(path, 0o640)
            let refused = expectError(.invalidKey) { try KeyProvider.file(path).key() }
            #expect(refused?.message.contains("chmod 600") == true)
            #expect(refused?.message.contains(TestKeys.sentinel) == false)
            // Nothing is created when the provider refuses.
            expectError(.invalidKey) { try DatabaseQueue(path: dir.path("a.db"), keyProvider: .file(path)) }
            #expect(!FileManager.default.fileExists(atPath: dir.path("a.db")))
            let accepted = try KeyProvider.file(path, permissions: .allowGroupAndOthers).key()
            #expect(accepted.isSameKey(as: try EncryptionKey(passphrase: TestKeys.sentinel)))
        }
    }

    @Test("the salt of a raw key with salt from a key file reaches the database: it is the file's first 16 bytes")
    func saltReachesTheFile() throws {
        try withTemporaryDirectory { dir in
            let salt: [UInt8] = (0..<16).map { UInt8(0xA0 + $0) }
            let keyPath = dir.path("salted.key")
            try EncryptionKey(rawKey: [UInt8](repeating: 0x5C, count: 32), salt: salt).write(toKeyFile: keyPath)
            let path = dir.path("salted.db")
            let queue = try DatabaseQueue(path: path, keyProvider: .file(keyPath))
            try queue.write { db in
                try db.execute("CREATE TABLE t(x)")
                try db.execute("INSERT INTO t VALUES (1), (2), (3)")
            }
            queue.close()
            #expect(Array(try fileBytes(path).prefix(16)) == salt)
            let fresh = try Connection(path: path, key: try EncryptionKey(contentsOf: keyPath))
            #expect(try fresh.scalar("SELECT count(*) FROM t", as: Int.self) == 3)
            #expect(try fresh.cipherSalt == salt)
        }
    }

    @Test("an environment variable holds key-file text; unset, empty or malformed is an error without the value")
    func environmentVariable() throws {
        let name = "SQLCIPHERKIT_TEST_KEY_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        defer { unsetenv(name) }
        setenv(name, TestKeys.sentinel + "\n", 1)
        #expect(try EncryptionKey(environmentVariable: name).isSameKey(as: try EncryptionKey(passphrase: TestKeys.sentinel)))
        setenv(name, "", 1)
        #expect(expectError(.invalidKey) { try EncryptionKey(environmentVariable: name) }?.message
            == "the key from environment variable \(name) is empty")
        setenv(name, "x'\(TestKeys.sentinel)'", 1)
        let malformed = expectError(.invalidKey) { try EncryptionKey(environmentVariable: name) }
        #expect(malformed?.message.contains(name) == true)
        #expect(malformed?.message.contains(TestKeys.sentinel) == false)
        unsetenv(name)
        #expect(expectError(.invalidKey) { try EncryptionKey(environmentVariable: name) }?.message
            == "the environment variable \(name) is not set")
        // A key typed where the name belongs is not repeated in the message.
        let typedKey = "x'" + String(repeating: "ab", count: 32) + "'"
        let misplaced = expectError(.invalidKey) { try EncryptionKey(environmentVariable: typedKey) }
        #expect(misplaced?.message.contains("ababab") == false)
        #expect(misplaced?.message.contains("not shown") == true)
    }

    @Test("a file descriptor is read to its end; a line read stops at its newline and leaves the rest unread")
    func fileDescriptors() throws {
        var ends: [CInt] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let written = Array("\(TestKeys.sentinel)\nrest".utf8)
        #expect(written.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) } == written.count)
        close(ends[1])
        let line = try EncryptionKey(readingLineFrom: ends[0], source: "the test pipe")
        #expect(line.isSameKey(as: try EncryptionKey(passphrase: TestKeys.sentinel)))
        let rest = try EncryptionKey(readingFileDescriptor: ends[0], source: "the test pipe")
        #expect(rest.isSameKey(as: try EncryptionKey(passphrase: "rest")))
        let empty = expectError(.invalidKey) { try EncryptionKey(readingFileDescriptor: ends[0], source: "the test pipe") }
        #expect(empty?.message == "the key from the test pipe is empty")
    }
}
