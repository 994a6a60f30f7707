#if Services  // trait Services (Package.swift)
import Foundation
import Logging
import SQLCipherKit
import SQLCipherKitServices
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A key file replaced by hand (or removed, or made unreadable) while the service runs: the service keeps the key
/// that opens the database, and writes it back to `<key file>.in-use` so that a file on disk opens the database
/// again (a crash would otherwise lose the key). Every case reads the files' bytes and modes, opens the database
/// with a fresh connection from the file, and reads every log line for key material.
@Suite("A key the service holds only in memory is written back to a file")
struct KeyInMemoryTests {
    typealias Setup = KeyHandOverTests

    /// The rows `t` holds when the key in `keyFile` (read as the service reads key files: owner and mode checked)
    /// opens `path` on a fresh read-only connection; `nil` when it does not.
    static func rowCount(_ path: String, openedWith keyFile: String) -> Int? {
        guard let key = try? EncryptionKey(contentsOf: keyFile),
              let db = try? Connection(path: path, encryption: .key(key), options: OpenOptions(mode: .readOnly))
        else { return nil }
        defer { db.close() }
        return try? db.scalar("SELECT count(*) FROM t", as: Int.self)
    }

    /// No test key in any log line: neither its hex text (any 16 digits of it, either case) nor its bytes.
    static func expectNoKeyMaterial(_ log: LogLines, sourceLocation: SourceLocation = #_sourceLocation) {
        let bytes = Array(log.text.utf8)
        for text in Setup.keyTexts {
            let hex = String(text.dropFirst(2).dropLast())
            for fragment in [String(hex.prefix(16)), String(hex.suffix(16))] {
                #expect(!log.text.lowercased().contains(fragment), "a key's hex is in the log", sourceLocation: sourceLocation)
            }
            let raw = stride(from: 0, to: 16, by: 2).map { offset -> UInt8 in
                let start = hex.index(hex.startIndex, offsetBy: offset)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
            }
            #expect(!contains(bytes, raw), "a key's bytes are in the log", sourceLocation: sourceLocation)
        }
    }

    /// The names in the key folder that start with the key file's name.
    static func keyFiles(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("app.key") }.sorted()
    }

    static func isRegularFile(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    @Test("a key file replaced by hand with a wrong key: the key in use is written to <key file>.in-use, 0600, flushed")
    func writesTheKeyBack() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Setup.makeDatabase(in: directory)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        defer { service.pool.close() }

        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        #expect(try await service.rotateIfPending() == false)

        let inUse = keyFile + ".in-use"
        #expect(try fileBytes(inUse) == Array((Setup.keyTexts[0] + "\n").utf8), "the key that opens the database")
        #expect(Self.isRegularFile(inUse))
        #expect(try fileMode(inUse) == 0o600)
        #expect(Self.rowCount(path, openedWith: inUse) == 50, "a fresh connection opens the database from the file")
        #expect(Self.rowCount(path, openedWith: keyFile) == nil)
        #expect(Setup.text(keyFile) == Setup.keyTexts[3] + "\n", "the operator's key file is left as it is")
        #expect(try Self.keyFiles(in: directory.url.path) == ["app.key", "app.key.in-use"], "no temporary file left")
        #expect(log.all.contains { $0.hasPrefix("error") && $0.contains("does not open the database") && $0.contains(inUse) },
                "\(log.all)")
        #expect(log.messages.contains { $0.contains("mv \(inUse) \(keyFile)") }, "the log says what to do")
        Self.expectNoKeyMaterial(log)

        // The service goes on with the key that works; the next check writes nothing again.
        try await service.pool.write { db in try db.execute("INSERT INTO t(body) VALUES ('after')") }
        let lines = log.all.count
        #expect(try await service.rotateIfPending() == false)
        #expect(log.all.count == lines, "\(log.all.dropFirst(lines))")
        #expect(Self.rowCount(path, openedWith: inUse) == 51)
    }

    /// How the operator repairs the key file after the write-back.
    enum Repair: String, CaseIterable, CustomTestStringConvertible {
        case moveTheCopyBack, writeTheSameKeyAgain, handOverANewKey
        var testDescription: String { rawValue }
    }

    @Test("once the key file opens the database again, a copy of the same key is removed; one of an older key is kept",
          arguments: Repair.allCases)
    func repair(_ repair: Repair) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Setup.makeDatabase(in: directory)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        defer { service.pool.close() }
        let inUse = keyFile + ".in-use"
        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        _ = try await service.rotateIfPending()
        #expect(Self.rowCount(path, openedWith: inUse) == 50)

        switch repair {
        case .moveTheCopyBack:
            #expect(rename(inUse, keyFile) == 0)
            #expect(try await service.rotateIfPending() == false)
            #expect(try Self.keyFiles(in: directory.url.path) == ["app.key"])
        case .writeTheSameKeyAgain:
            try writeKeyFile(Setup.keyTexts[0], to: keyFile)
            #expect(try await service.rotateIfPending() == false)
            #expect(try Self.keyFiles(in: directory.url.path) == ["app.key"], "the redundant copy is removed")
            #expect(log.messages.contains { $0.contains("removed \(inUse)") }, "\(log.messages)")
        case .handOverANewKey:
            try writeKeyFile(Setup.keyTexts[2], to: keyFile + ".next")
            #expect(try await service.rotateIfPending())
            #expect(Setup.keysOpening(path) == [2])
            #expect(try Self.keyFiles(in: directory.url.path) == ["app.key", "app.key.in-use"])
            #expect(try fileBytes(inUse) == Array((Setup.keyTexts[0] + "\n").utf8), "the older key is kept")
            #expect(log.messages.contains { $0.contains("\(inUse) holds the key used before") }, "\(log.messages)")
        }
        let expected = repair == .handOverANewKey ? 2 : 0
        #expect(Setup.text(keyFile) == Setup.keyTexts[expected] + "\n")
        #expect(Self.rowCount(path, openedWith: keyFile) == 50)
        #expect(log.messages.contains { $0.contains("the key file opens the database again") }, "\(log.messages)")
        Self.expectNoKeyMaterial(log)

        // A new incident writes a copy again; an older one in the way is left alone.
        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        _ = try await service.rotateIfPending()
        let copy = repair == .handOverANewKey ? inUse + ".2" : inUse
        #expect(try fileBytes(copy) == Array((Setup.keyTexts[expected] + "\n").utf8))
        #expect(Self.rowCount(path, openedWith: copy) == 50)
    }

    @Test("a restart while the key file does not open the database fails, naming the copy that does; it is not used")
    func restartNamesTheCopy() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Setup.makeDatabase(in: directory)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        _ = try await service.rotateIfPending()
        service.pool.close()

        let error = #expect(throws: DatabaseError.self) {
            _ = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        }
        #expect(error?.kind == .wrongKey)
        #expect(error?.message.contains("\(keyFile).in-use opens it") == true, "\(String(describing: error))")
        #expect(error?.message.contains("mv \(keyFile).in-use \(keyFile)") == true, "\(String(describing: error))")
        #expect(Setup.text(keyFile) == Setup.keyTexts[3] + "\n", "nothing was moved on the operator's behalf")
        #expect(Setup.keysOpening(path) == [0])
        Self.expectNoKeyMaterial(log)
        for text in Setup.keyTexts {
            #expect(!(error?.message.contains(String(text.dropFirst(2).prefix(16))) ?? true))
        }
    }

    /// What the key file became.
    enum Loss: String, CaseIterable, CustomTestStringConvertible {
        case removed, readableByOthers, aFolder
        var testDescription: String { rawValue }
    }

    @Test("a key file removed, made readable by others or replaced by a folder: the key in use is written back",
          arguments: Loss.allCases)
    func keyFileLost(_ loss: Loss) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Setup.makeDatabase(in: directory)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        defer { service.pool.close() }
        switch loss {
        case .removed:
            #expect(unlink(keyFile) == 0)
        case .readableByOthers:
            try writeKeyFile(Setup.keyTexts[0], to: keyFile + ".writing-open")
            #expect(chmod(keyFile + ".writing-open", 0o644) == 0)
            #expect(rename(keyFile + ".writing-open", keyFile) == 0)
        case .aFolder:
            #expect(unlink(keyFile) == 0)
            try FileManager.default.createDirectory(atPath: keyFile, withIntermediateDirectories: false)
        }
        #expect(try await service.rotateIfPending() == false)
        let inUse = keyFile + ".in-use"
        #expect(try fileBytes(inUse) == Array((Setup.keyTexts[0] + "\n").utf8))
        #expect(try fileMode(inUse) == 0o600)
        #expect(Self.rowCount(path, openedWith: inUse) == 50)
        #expect(log.all.contains { $0.hasPrefix("error") && $0.contains(inUse) }, "\(log.all)")
        Self.expectNoKeyMaterial(log)
    }

    /// What an attacker (or an earlier incident) left at `<key file>.in-use`.
    enum Occupant: String, CaseIterable, CustomTestStringConvertible {
        case anotherKey, linkToAnotherFile, danglingLink, folder, fifo
        var testDescription: String { rawValue }
    }

    @Test("whatever is at <key file>.in-use is never replaced nor followed: the key goes to .in-use.2",
          arguments: Occupant.allCases)
    func occupiedName(_ occupant: Occupant) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Setup.makeDatabase(in: directory)
        let inUse = keyFile + ".in-use"
        let victim = directory.path("victim")
        switch occupant {
        case .anotherKey:
            try writeKeyFile(Setup.keyTexts[1], to: inUse)
        case .linkToAnotherFile:
            try writeKeyFile("do not touch", to: victim)
            #expect(symlink(victim, inUse) == 0)
        case .danglingLink:
            #expect(symlink(victim, inUse) == 0)
        case .folder:
            try FileManager.default.createDirectory(atPath: inUse, withIntermediateDirectories: false)
        case .fifo:
            #expect(mkfifo(inUse, 0o600) == 0)
        }
        // (A FIFO or a folder is not read: a read would block or fail.)
        let isReadable = occupant == .anotherKey || occupant == .linkToAnotherFile
        let before = isReadable ? try fileBytes(inUse) : nil
        let victimBefore = try? fileBytes(victim)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        defer { service.pool.close() }

        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        #expect(try await service.rotateIfPending() == false)

        let second = inUse + ".2"
        #expect(try fileBytes(second) == Array((Setup.keyTexts[0] + "\n").utf8))
        #expect(try fileMode(second) == 0o600)
        #expect(Self.rowCount(path, openedWith: second) == 50)
        // The occupant is as it was, and so is what a link points to.
        if isReadable { #expect(try fileBytes(inUse) == before) }
        #expect((try? fileBytes(victim)) == victimBefore)
        if occupant == .linkToAnotherFile || occupant == .danglingLink {
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: inUse)) == victim)
        }
        #expect(log.messages.contains { $0.contains(second) && $0.contains(inUse) && $0.contains("left untouched") },
                "\(log.messages)")
        Self.expectNoKeyMaterial(log)
    }

    @Test("an .in-use that already holds the key in use is kept, and nothing else is written")
    func copyAlreadyThere() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, keyFile) = try Setup.makeDatabase(in: directory)
        let inUse = keyFile + ".in-use"
        try writeKeyFile(Setup.keyTexts[0], to: inUse)
        let identity = try FileManager.default.attributesOfItem(atPath: inUse)[.systemFileNumber] as? Int
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        defer { service.pool.close() }
        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        _ = try await service.rotateIfPending()
        #expect(try Self.keyFiles(in: directory.url.path) == ["app.key", "app.key.in-use"])
        #expect(try FileManager.default.attributesOfItem(atPath: inUse)[.systemFileNumber] as? Int == identity)
        #expect(Self.rowCount(path, openedWith: inUse) == 50)
        #expect(log.messages.contains { $0.contains("already holds it") && $0.contains(inUse) }, "\(log.messages)")
        Self.expectNoKeyMaterial(log)
    }

    /// Why the key folder cannot take the copy.
    enum Refusal: String, CaseIterable, CustomTestStringConvertible {
        case readOnly, full
        var testDescription: String { rawValue }
    }

    @Test("a read-only key folder or a full disk: a clear error, no key byte, no file left; written once it can be",
          .enabled(if: FullDisk.isAvailable, Comment(rawValue: FullDisk.unavailableReason)),
          arguments: Refusal.allCases)
    func folderRefuses(_ refusal: Refusal) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (path, builtKeyFile) = try Setup.makeDatabase(in: directory)
        let disk = try FullDisk(at: directory.path("keys"), bytes: 64 * 1024)
        defer { disk.unmount() }
        let keyFile = disk.path("app.key")
        try writeKeyFile(Setup.keyTexts[0], to: keyFile)
        try FileManager.default.removeItem(atPath: builtKeyFile)
        let log = LogLines()
        let service = try DatabaseService(path: path, keyFile: keyFile, configuration: Setup.configuration(log.logger()))
        defer { service.pool.close() }

        try writeKeyFile(Setup.keyTexts[3], to: keyFile)
        switch refusal {
        case .readOnly: #expect(disk.remount(readOnly: true))
        case .full: try disk.fill()
        }
        #expect(try await service.rotateIfPending() == false, "the check goes on; the failure is logged")
        let inUse = keyFile + ".in-use"
        let reason = refusal == .readOnly ? "Read-only file system" : "No space left on device"
        #expect(log.all.contains {
            $0.hasPrefix("error") && $0.contains(inUse) && $0.contains(reason) && $0.contains("in memory only")
        }, "\(log.all)")
        #expect(try Self.keyFiles(in: disk.url.path) == ["app.key"], "no copy, no temporary file")
        #expect(try await service.pool.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } == 50)
        // The next check tries again; the same failure is not logged as an error twice.
        let errors = log.all.filter { $0.hasPrefix("error") }.count
        _ = try await service.rotateIfPending()
        #expect(log.all.filter { $0.hasPrefix("error") }.count == errors)
        Self.expectNoKeyMaterial(log)

        switch refusal {
        case .readOnly: #expect(disk.remount(readOnly: false))
        case .full: #expect(unlink(disk.path("filler")) == 0)
        }
        _ = try await service.rotateIfPending()
        #expect(try fileBytes(inUse) == Array((Setup.keyTexts[0] + "\n").utf8))
        #expect(try fileMode(inUse) == 0o600)
        #expect(Self.rowCount(path, openedWith: inUse) == 50)
        #expect(try Self.keyFiles(in: disk.url.path) == ["app.key", "app.key.in-use"])
        Self.expectNoKeyMaterial(log)
    }
}

#endif
