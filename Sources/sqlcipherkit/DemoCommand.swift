import ArgumentParser
import Foundation
import SQLCipherKit

/// The README's main job: shows, step by step, what SQLCipherKit guarantees on a real file.
struct DemoCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Create an encrypted database, show it is unreadable without its key, rotate the key, verify.",
        discussion: """
            Everything happens in a new temporary folder, removed at the end unless --keep is given. No key is \
            printed: keys go to key files with mode 0600.

            Steps: generate a raw key; create an encrypted database with a secret; read its bytes (no SQLite \
            header, no secret); fail to open it without the key and with a wrong one; rotate the key with the \
            library's KeyRotation (copy method, as `sqlcipherkit rotate` does); verify every page with the new \
            key; show the old key no longer opens it. Takes about a second.

            Example:
              sqlcipherkit demo
              sqlcipherkit demo --keep
              sqlcipherkit demo --json
            """
    )

    @Flag(help: "Keep the temporary folder and print its path.")
    var keep = false

    @OptionGroup(title: "Output")
    var output: OutputOptions

    func run() throws {
        let transcript = DemoTranscript()
        defer { Output.setJSONResult(DemoReport(lines: transcript.lines)) }
        func print(_ text: String) { transcript.say(text) }
        func step(_ number: Int, _ text: String) { print("\n\(number). \(text)") }
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("sqlcipherkit-demo-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer {
            if keep {
                print("\nKept \(folder.path)")
            } else {
                try? FileManager.default.removeItem(at: folder)
            }
        }
        let path = folder.appendingPathComponent("notes.db").path
        let keyPath = folder.appendingPathComponent("notes.key").path
        let newKeyPath = folder.appendingPathComponent("notes-new.key").path
        let secret = "the eagle lands at midnight"

        print(VersionReport.text)
        print(
            "(Two OpenSSL versions because the first is what the engine reports, the headers it was compiled with\n"
                + " or its own static copy, and the second the libcrypto this process loaded, which makes the keys.)")
        step(1, "Generate a random 256-bit raw key with OpenSSL and store it in a key file (mode 0600).")
        let key = try EncryptionKey.generateRaw()
        try key.write(toKeyFile: keyPath)
        print("   \(keyPath) \(try permissions(keyPath))")

        step(2, "Create an encrypted database and write a secret into it.")
        do {
            let db = try Connection(path: path, key: EncryptionKey(contentsOf: keyPath))
            try db.execute("CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            try db.transaction {
                for index in 1...3 { try db.execute("INSERT INTO note(body) VALUES (?)", "\(secret) #\(index)") }
            }
        }
        print("   \(path) \(try permissions(path)), 3 rows")

        step(3, "Read the file's bytes: no SQLite header, no trace of the secret.")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let header = bytes.prefix(16).map { Hex.string([$0]) }.joined(separator: " ")
        print("   first 16 bytes: \(header)")
        print("   a plaintext SQLite file would start with 53 51 4c 69 74 65 20 66 6f 72 6d 61 74 20 33 00")
        print("   secret found in the file: \(bytes.contains(subsequence: Array(secret.utf8)) ? "YES (bad)" : "no")")

        step(4, "Open it without the key, then with a wrong key: both fail, the file is untouched.")
        for (label, encryption) in [("no key", Encryption.none), ("wrong key", .key(try EncryptionKey.generateRaw()))] {
            do {
                _ = try Connection(path: path, encryption: encryption)
                print("   \(label): opened (unexpected)")
            } catch let error as DatabaseError {
                print("   \(label): refused: \(error.reason)")
            }
        }

        step(5, "Rotate the key with KeyRotation (copy method): a verified copy under the new key replaces the file")
        print("   in one atomic rename; a crash at any moment leaves it openable with exactly one of the two keys.")
        let newKey = try EncryptionKey.generateRaw()
        try newKey.write(toKeyFile: newKeyPath)
        let result = try KeyRotation.rotate(RotationRequest(
            path: path, oldEncryption: .key(EncryptionKey(contentsOf: keyPath)),
            newEncryption: .key(EncryptionKey(contentsOf: newKeyPath)), method: .copy))
        print("   rotated in \(result.duration.formatted(.units(allowed: [.milliseconds])))")
        let db = try Connection(path: path, key: EncryptionKey(contentsOf: newKeyPath))
        let report = try db.checkIntegrity()
        let count = try db.scalar("SELECT count(*) FROM note", as: Int.self) ?? 0
        print("   new key opens it: \(count) rows, every page \(report.isIntact ? "verified" : "NOT verified")")
        db.close()

        step(6, "The old key no longer opens the file.")
        do {
            _ = try Connection(path: path, key: EncryptionKey(contentsOf: keyPath))
            print("   old key: opened (unexpected)")
        } catch let error as DatabaseError {
            print("   old key: refused: \(error.reason)")
        }
        print("\nDone. Each step is a library call; see Docs/GettingStarted.md.")
    }

    private func permissions(_ path: String) throws -> String {
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? 0
        return "(mode \(String(mode, radix: 8)))"
    }
}

/// The demo's lines: printed as they come, or kept for `--json`.
final class DemoTranscript {
    private(set) var lines: [String] = []

    func say(_ text: String) {
        if Output.isJSON {
            lines += text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        } else {
            Output.result(text)
        }
    }
}

/// `demo --json`'s `result`.
struct DemoReport: Encodable, Sendable {
    let lines: [String]
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard !subsequence.isEmpty, count >= subsequence.count else { return false }
        return (0...(count - subsequence.count)).contains { self[$0..<($0 + subsequence.count)].elementsEqual(subsequence) }
    }
}
