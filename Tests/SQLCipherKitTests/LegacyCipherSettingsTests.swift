import Foundation
@testable import SQLCipherKit
import Testing

/// The settings SQLCipher 1.x and 2.x files need: compatibility 1 and 2, `cipher_hmac_pgno`, `fast_kdf_iter`, and the
/// process-wide `cipher_hmac_salt_mask` (only its refusal outside a scope is tested in-process: changing it would
/// break every test running in parallel; the CLI's subprocess tests cover the scope).
@Suite("Cipher settings of SQLCipher 1 and 2 files")
struct LegacyCipherSettingsTests {
    @Test("compatibility 1 and 2 mean their explicit settings and are needed to open the file again", arguments: [1, 2])
    func compatibility(version: Int) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("v\(version).db")
            let settings = CipherSettings(compatibility: version)
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
                #expect(try db.pragmaText("kdf_iter") == "4000")
                #expect(try db.pragmaText("cipher_page_size") == "1024")
                #expect(try db.pragmaText("cipher_use_hmac") == (version == 1 ? "0" : "1"))
            }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
            // The explicit settings open the file as well: compatibility is only their short name.
            let explicit = try Connection(
                path: path, key: TestKeys.passphrase, settings: CipherSettings.defaults(ofMajorVersion: version)!)
            #expect(try explicit.scalar("SELECT x FROM t", as: Int.self) == 1)
            #expect(try fileBytes(path).count % 1024 == 0)
        }
    }

    @Test("compatibility outside 1…4 is refused before anything is written", arguments: [0, 5])
    func invalidCompatibility(version: Int) throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("bad.db")
            expectError(.invalidArgument) {
                try Connection(path: path, key: TestKeys.raw, settings: CipherSettings(compatibility: version))
            }
            #expect((try? fileBytes(path))?.isEmpty ?? true)
        }
    }

    @Test("a big-endian HMAC page number is applied, read back and needed at the next open")
    func hmacPageNumber() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("be.db")
            let settings = CipherSettings(hmacPageNumberEncoding: .bigEndian)
            do {
                let db = try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
                #expect(try db.pragmaText("cipher_hmac_pgno") == "be")
            }
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
            #expect(try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                .scalar("SELECT x FROM t", as: Int.self) == 1)
        }
    }

    @Test("fast_kdf_iter is per connection: a file made with 4000 needs it, another open in between does not")
    func fastKDFIterations() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("fast.db")
            let settings = CipherSettings(fastKDFIterations: 4000)
            let writer = try Connection(path: path, key: TestKeys.passphrase, settings: settings)
            try writer.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            #expect(try writer.pragmaText("fast_kdf_iter") == "4000")
            // While that connection is open, a default one on another file is unaffected.
            let other = try Connection(path: dir.path("default.db"), key: TestKeys.passphrase)
            #expect(try other.pragmaText("fast_kdf_iter") == "2")
            try other.execute("CREATE TABLE t(x)")
            other.close()
            writer.close()
            expectError(.wrongKey) { try Connection(path: path, key: TestKeys.passphrase) }
            #expect(try Connection(path: path, key: TestKeys.passphrase, settings: settings)
                .scalar("SELECT x FROM t", as: Int.self) == 1)
            #expect(try Connection(path: dir.path("default.db"), key: TestKeys.passphrase)
                .scalar("SELECT count(*) FROM t", as: Int.self) == 0)
        }
    }

    @Test("an HMAC salt mask other than the default is refused outside SQLCipher.withHMACSaltMask, nothing written")
    func saltMaskOutsideScope() throws {
        try withTemporaryDirectory { dir in
            let path = dir.path("mask.db")
            let error = expectError(.invalidState) {
                try Connection(path: path, key: TestKeys.passphrase, settings: CipherSettings(hmacSaltMask: 0x00))
            }
            #expect(error?.message.contains("whole process") == true)
            #expect((try? fileBytes(path))?.isEmpty ?? true)
            // The default mask is accepted (and read back) anywhere.
            let db = try Connection(
                path: dir.path("default.db"), key: TestKeys.passphrase,
                settings: CipherSettings(hmacSaltMask: SQLCipher.defaultHMACSaltMask))
            #expect(try db.pragmaText("cipher_hmac_salt_mask") == "3a")
        }
    }

    @Test("inside withHMACSaltMask a 2.0-beta file is made and read; afterwards default files open again")
    func saltMaskScope() async {
        // In a child process: the mask is process-wide and would break the tests running in parallel here.
        await #expect(processExitsWith: .success) {
            let folder = FileManager.default.temporaryDirectory
                .appendingPathComponent("sqlcipherkit-mask-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let key = try EncryptionKey(passphrase: "mask-scope-test")
            let beta = CipherSettings(compatibility: 2, fastKDFIterations: 4000, hmacSaltMask: 0x00)
            try SQLCipher.withHMACSaltMask(0x00) {
                let db = try Connection(path: folder + "/beta.db", key: key, settings: beta)
                try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
                let mask = try db.pragmaText("cipher_hmac_salt_mask")
                precondition(mask == "00")
                db.close()
            }
            // The default is back: a new default file is made and read, the beta file is refused outside a scope.
            let plain = try Connection(path: folder + "/default.db", key: key)
            try plain.execute("CREATE TABLE t(x)")
            let mask = try plain.pragmaText("cipher_hmac_salt_mask")
            precondition(mask == "3a")
            plain.close()
            let count = try Connection(path: folder + "/default.db", key: key)
                .scalar("SELECT count(*) FROM t", as: Int.self)
            precondition(count == 0)
            do {
                _ = try Connection(path: folder + "/beta.db", key: key, settings: beta)
                preconditionFailure("opened outside the scope")
            } catch let error as DatabaseError {
                precondition(error.kind == .invalidState)
            }
            // Without the mask setting the beta file does not open (the default mask derives another HMAC key).
            var compatibleOnly = beta
            compatibleOnly.hmacSaltMask = nil
            precondition((try? Connection(path: folder + "/beta.db", key: key, settings: compatibleOnly)) == nil)
            let reread = try SQLCipher.withHMACSaltMask(0x00) {
                try Connection(path: folder + "/beta.db", key: key, settings: beta)
                    .scalar("SELECT x FROM t", as: Int.self)
            }
            precondition(reread == 1)
        }
    }

    @Test("the KDF parameters a pool derives with follow compatibility 1 and 2")
    func derivationParameters() {
        let parameters = KeyDerivation.Parameters(settings: CipherSettings(compatibility: 2))
        #expect(parameters.iterations == 4000)
        #expect(parameters.algorithm == .pbkdf2HMACSHA1)
        #expect(KeyDerivation.Parameters(settings: CipherSettings(compatibility: 1, kdfIterations: 10)).iterations == 10)
    }

    @Test("the OpenSSL version is the loaded library's, and its number agrees with its text")
    func openSSLRuntime() {
        let number = OpenSSLRuntime.versionNumber
        let text = "\(number >> 28).\((number >> 20) & 0xff).\((number >> 4) & 0xff)"
        #expect(OpenSSLRuntime.version.hasPrefix("OpenSSL "))
        #expect(OpenSSLRuntime.version.contains(text), "\(OpenSSLRuntime.version) vs \(text)")
    }
}
