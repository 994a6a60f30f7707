import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// "Hardening II": every writer of a new database file goes through one replacement path (AtomicReplacement). These
/// cases run the real `sqlcipherkit` binary, one per reproduction of the issue, and judge the outcome by the bytes on
/// disk and by opening the result with a fresh connection, never by the exit status alone.
@Suite("every writer of a new database file replaces it safely", .serialized)
struct ReplacementSafetyTests {
    // MARK: 1. Concurrent rotations

    enum Pairing: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// A run with the right key, then at once a run with a key that never opened the file.
        case rightThenWrong
        /// The wrong-key run first, then the right-key one.
        case wrongThenRight
        /// Two runs with the right current key, to two different new keys.
        case rightThenRight
        var testDescription: String { rawValue }
    }

    @Test("two rotations of one file at once destroy nothing", arguments: Pairing.allCases)
    func concurrentRotations(pairing: Pairing) throws {
        let scratch = try Scratch()
        let rows = 20_000
        var keys = try (0..<3).map { try scratch.rawKeyFile("k\($0).key") }
        let wrong = try scratch.rawKeyFile("wrong.key")
        let db = try scratch.database("shared.db", key: keys[0].key, rowCount: rows)
        var outcomes: [String: Int] = [:]

        for round in 0..<5 {
            // keys[0] opens the file; keys[1] and keys[2] are the two new keys of this round.
            let runs: [(current: String, new: String, isRight: Bool)] = switch pairing {
            case .rightThenWrong: [(keys[0].path, keys[1].path, true), (wrong.path, keys[2].path, false)]
            case .wrongThenRight: [(wrong.path, keys[2].path, false), (keys[0].path, keys[1].path, true)]
            case .rightThenRight: [(keys[0].path, keys[1].path, true), (keys[0].path, keys[2].path, true)]
            }
            let started = try runs.map {
                try RunningCommand(
                    ["rotate", "shared.db", "--key-file", $0.current, "--new-key-file", $0.new], in: scratch)
            }
            // The file is watched while both run: it must never be missing or empty.
            var smallestSize = Int.max
            while started.contains(where: \.isRunning) {
                smallestSize = min(smallestSize, regularFileSize(db) ?? 0)
                usleep(200)
            }
            smallestSize = min(smallestSize, regularFileSize(db) ?? 0)
            let results = try started.map { try $0.finish() }
            #expect(smallestSize > 0, "round \(round): the file was missing or empty while the rotations ran")

            let candidates = [keys[0], keys[1], keys[2], wrong]
            let opening = candidates.indices.filter { opens(db, with: candidates[$0].key) }
            #expect(opening.count == 1, "round \(round): opened by keys \(opening)\n\(results)")
            guard opening.count == 1, let winner = opening.first, winner < 3 else { break }
            #expect(try rowCount(db, key: candidates[winner].key) == rows, "round \(round)")

            // What the runs said must match the file: the run whose new key opens it said "rotated"; no other did.
            let succeeded = results.indices.filter { results[$0].status == 0 }
            // Rotations take turns: the first rotates, the second then finds the file under another key.
            #expect(succeeded.count == 1, "round \(round): not exactly one run rotated\n\(results)")
            for (index, run) in runs.enumerated() where !run.isRight {
                #expect(results[index].status != 0, "round \(round): a wrong-key run succeeded\n\(results[index])")
            }
            if winner == 0 {
                #expect(succeeded.isEmpty, "round \(round): a run said it rotated, the old key still opens\n\(results)")
            } else {
                let winningRun = runs.firstIndex { $0.new == candidates[winner].path }
                #expect(succeeded == winningRun.map { [$0] }, "round \(round): key \(winner) opens it\n\(results)")
            }
            let outcome = results.map { $0.status == 0 ? "rotated" : "refused(\($0.status))" }.joined(separator: "+")
            outcomes[outcome, default: 0] += 1
            // The key that opens the file is the current one of the next round.
            if winner != 0 { keys.swapAt(0, winner) }
        }

        let final = try runSubprocess(
            ["rotate", "shared.db", "--key-file", keys[0].path, "--new-key-file", keys[1].path], in: scratch)
        #expect(final.status == 0, "\(final)")
        #expect(!final.standardOutput.contains("symlink"), "a plain relative path is not a symlink: \(final)")
        #expect(opens(db, with: keys[1].key) && !opens(db, with: keys[0].key))
        #expect(try rowCount(db, key: keys[1].key) == rows)
        #expect(temporaryFiles(in: scratch.url.path).isEmpty, "\(temporaryFiles(in: scratch.url.path))")
        print("concurrent rotations \(pairing.rawValue): "
            + outcomes.sorted { $0.key < $1.key }.map { "\($0.value)× \($0.key)" }.joined(separator: ", "))
    }

    // MARK: 2. Symbolic links

    @Test("rotate through a symlink rotates the real file, keeps the link, and names the real path")
    func rotateThroughSymlink() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        try makeFolders(scratch, "app", "data")
        let real = try scratch.database("data/real.db", key: oldKey, rowCount: 300)
        try makeSymlink(scratch.path("app/current.db"), to: "../data/real.db")
        let realResolved = try #require(resolvedPath(real))

        let result = try runSubprocess(
            ["rotate", "app/current.db", "--key-file", oldPath, "--new-key-file", newPath], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.contains(realResolved), "\(result)")
        #expect(opens(real, with: newKey) && !opens(real, with: oldKey))
        #expect(try rowCount(real, key: newKey) == 300)
        #expect(symlinkTarget(scratch.path("app/current.db")) == "../data/real.db")

        let json = try runSubprocess(
            ["rotate", "app/current.db", "--key-file", newPath, "--new-key-file", oldPath, "--json"], in: scratch)
        #expect(json.status == 0, "\(json)")
        let database = ((jsonEnvelope(json)?["result"] as? [String: Any])?["databases"] as? [[String: Any]])?.first
        #expect(database?["path"] as? String == "app/current.db")
        #expect(database?["resolvedPath"] as? String == realResolved, "\(json)")
        #expect(opens(real, with: oldKey) && !opens(real, with: newKey))
        #expect(symlinkTarget(scratch.path("app/current.db")) == "../data/real.db")
        #expect(temporaryFiles(in: scratch.path("data")).isEmpty && temporaryFiles(in: scratch.path("app")).isEmpty)
    }

    @Test("backup from a symlinked source, and into a symlinked destination: the link is followed, said, and kept")
    func backupWithSymlinks() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k.key")
        let (_, otherKey) = try scratch.rawKeyFile("other.key")
        try makeFolders(scratch, "app", "data", "backups")
        let real = try scratch.database("data/real.db", key: key, rowCount: 300)
        try makeSymlink(scratch.path("app/current.db"), to: "../data/real.db")
        let realBytes = try fileBytes(real)

        // Source through a link.
        let fromLink = try runSubprocess(
            ["backup", "app/current.db", "backups/a.db", "--key-file", keyPath], in: scratch)
        #expect(fromLink.status == 0, "\(fromLink)")
        #expect(try rowCount(scratch.path("backups/a.db"), key: key) == 300)
        #expect(symlinkTarget(scratch.path("app/current.db")) == "../data/real.db")
        #expect(try fileBytes(real) == realBytes)

        // Destination through a link to an existing, older backup (another key): that file is replaced, the link kept.
        let stored = try scratch.database("backups/stored.db", key: otherKey, rowCount: 5)
        try makeSymlink(scratch.path("backups/latest.db"), to: "stored.db")
        let storedResolved = try #require(resolvedPath(stored))
        let toLink = try runSubprocess(
            ["backup", "data/real.db", "backups/latest.db", "--key-file", keyPath, "--replace"], in: scratch)
        #expect(toLink.status == 0, "\(toLink)")
        #expect(symlinkTarget(scratch.path("backups/latest.db")) == "stored.db", "the link was replaced")
        #expect(opens(stored, with: key) && !opens(stored, with: otherKey))
        #expect(try rowCount(stored, key: key) == 300)
        #expect(toLink.standardOutput.contains(storedResolved), "the output does not name the real file: \(toLink)")

        // A dangling link is refused with a message; it stays a link, and nothing is created at its target.
        try makeSymlink(scratch.path("backups/dangling.db"), to: "gone.db")
        let dangling = try runSubprocess(
            ["backup", "data/real.db", "backups/dangling.db", "--key-file", keyPath, "--replace"], in: scratch)
        #expect(dangling.status == 1, "\(dangling)")
        #expect(dangling.standardError.contains("symbolic link"), "\(dangling)")
        #expect(symlinkTarget(scratch.path("backups/dangling.db")) == "gone.db")
        #expect(!FileManager.default.fileExists(atPath: scratch.path("backups/gone.db")))
        #expect(temporaryFiles(in: scratch.path("backups")).isEmpty)
    }

    // MARK: 3. One file under two names

    @Test("backup onto the source under another name is refused; the source is unchanged")
    func backupOntoItself() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k1.key")
        let (otherPath, otherKey) = try scratch.rawKeyFile("k2.key")
        let db = try scratch.database("s.db", key: key, rowCount: 50)
        let before = try fileBytes(db)
        let result = try runSubprocess(
            ["backup", "s.db", "./s.db", "--replace", "--key-file", keyPath, "--dest-key-file", otherPath], in: scratch)
        #expect(result.status != 0, "\(result)")
        #expect(result.standardError.contains("same file"), "\(result)")
        #expect(try fileBytes(db) == before)
        #expect(opens(db, with: key) && !opens(db, with: otherKey))
        #expect(temporaryFiles(in: scratch.url.path).isEmpty)
    }

    @Test("rotate of one file named twice (./ and a hard link) rotates it at most once, and says what it did",
          arguments: ["./s.db", "t.db"])
    func rotateNamedTwice(secondName: String) throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("s.db", key: oldKey, rowCount: 50)
        if secondName == "t.db" { #expect(link(db, scratch.path("t.db")) == 0) }
        let before = try fileBytes(db)
        let result = try runSubprocess(
            ["rotate", "s.db", secondName, "--key-file", oldPath, "--new-key-file", newPath], in: scratch)
        let opensOld = opens(db, with: oldKey)
        let opensNew = opens(db, with: newKey)
        #expect(opensOld != opensNew, "old \(opensOld), new \(opensNew)")
        if opensNew {
            #expect(result.status == 0, "rotated, yet reported as a failure: \(result)")
            #expect(!result.standardError.contains("not rotated"), "\(result)")
            #expect(try rowCount(db, key: newKey) == 50)
        } else {
            // Refused by the library's check (the tool hands it every database in one call): each name's result
            // line says why.
            #expect(result.status != 0, "\(result)")
            #expect(result.standardOutput.contains("s.db and \(secondName) are the same file"), "\(result)")
            #expect(try fileBytes(db) == before)
        }
        #expect(temporaryFiles(in: scratch.url.path).isEmpty)
    }

    // MARK: 4. Owner, group and mode

    @Test("rotate --method copy keeps the owner, group and mode of the file",
          .enabled(if: geteuid() == 0, "needs root: only root can give a file to user and group 65534"))
    func rotateKeepsOwnership() throws {
        let scratch = try Scratch()
        let (oldPath, oldKey) = try scratch.rawKeyFile("old.key")
        let (newPath, newKey) = try scratch.rawKeyFile("new.key")
        let db = try scratch.database("owned.db", key: oldKey, rowCount: 100)
        #expect(chown(db, 65534, 65534) == 0 && chmod(db, 0o640) == 0)
        let inodeBefore = try #require(fileStatus(db)).st_ino
        let result = try runSubprocess(
            ["rotate", "owned.db", "--method", "copy", "--key-file", oldPath, "--new-key-file", newPath], in: scratch)
        #expect(result.status == 0, "\(result)")
        let after = try #require(fileStatus(db))
        #expect(after.st_ino != inodeBefore, "not a new file: the copy method renames a new file into place")
        #expect(after.st_uid == 65534 && after.st_gid == 65534, "owner \(after.st_uid):\(after.st_gid)")
        #expect(after.st_mode & 0o7777 == 0o640, "mode \(String(after.st_mode & 0o7777, radix: 8))")
        #expect(opens(db, with: newKey) && !opens(db, with: oldKey))
        #expect(try rowCount(db, key: newKey) == 100)
    }

    @Test("backup --replace keeps the owner, group and mode of the backup it replaces, and says so",
          .enabled(if: geteuid() == 0, "needs root: only root can give a file to user and group 65534"))
    func backupReplaceKeepsOwnership() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k.key")
        let (_, oldKey) = try scratch.rawKeyFile("old.key")
        _ = try scratch.database("s.db", key: key, rowCount: 100)
        let copy = try scratch.database("copy.db", key: oldKey, rowCount: 3)
        #expect(chown(copy, 65534, 65534) == 0 && chmod(copy, 0o640) == 0)
        let result = try runSubprocess(["backup", "s.db", "copy.db", "--key-file", keyPath, "--replace"], in: scratch)
        #expect(result.status == 0, "\(result)")
        let after = try #require(fileStatus(copy))
        #expect(after.st_uid == 65534 && after.st_gid == 65534, "owner \(after.st_uid):\(after.st_gid)")
        #expect(after.st_mode & 0o7777 == 0o640, "mode \(String(after.st_mode & 0o7777, radix: 8))")
        #expect(!result.standardOutput.contains("0600"), "the file has mode 0640: \(result)")
        #expect(opens(copy, with: key) && !opens(copy, with: oldKey))
        #expect(try rowCount(copy, key: key) == 100)
    }

    @Test("migrate keeps the owner, group and mode of the file",
          .enabled(if: geteuid() == 0, "needs root: only root can give a file to user and group 65534"),
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: migrate writes the SQLCipher 4 format"))
    func migrateKeepsOwnership() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k.key")
        let db = try scratch.database("legacy.db", key: key, settings: .sqlcipher3, rowCount: 100)
        #expect(chown(db, 65534, 65534) == 0 && chmod(db, 0o640) == 0)
        let inodeBefore = try #require(fileStatus(db)).st_ino
        let result = try runSubprocess(["migrate", "legacy.db", "--key-file", keyPath], in: scratch)
        #expect(result.status == 0, "\(result)")
        let after = try #require(fileStatus(db))
        #expect(after.st_ino != inodeBefore)
        #expect(after.st_uid == 65534 && after.st_gid == 65534, "owner \(after.st_uid):\(after.st_gid)")
        #expect(after.st_mode & 0o7777 == 0o640, "mode \(String(after.st_mode & 0o7777, radix: 8))")
        #expect(try rowCount(db, key: key) == 100)
        #expect(!opens(db, with: key, settings: .sqlcipher3))
    }

    // MARK: 5. Signals

    /// Rows carry this text, so a plaintext copy of them can be found by scanning bytes.
    static let plaintextMarker = "PLAINTEXT-ROW-MARKER-3f9c"

    @Test("SIGINT, SIGTERM and SIGKILL in the middle of decrypt, encrypt, backup and rotate --method copy")
    func signals() throws {
        let scratch = try Scratch()
        let rows = 200_000
        let (keyPath, key) = try scratch.rawKeyFile("k.key")
        let (newKeyPath, newKey) = try scratch.rawKeyFile("new.key")
        try makeFolders(scratch, "enc", "plain", "reenc", "bak")
        let source = scratch.path("enc/big.db")
        do {
            let db = try Connection(path: source, key: key)
            try db.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            try db.transaction {
                let insert = try db.prepare("INSERT INTO item(id, body) VALUES (?, ?)")
                for id in 1...rows {
                    try insert.run(id, "\(Self.plaintextMarker) \(id) " + String(repeating: "x", count: 40))
                }
            }
            db.close()
        }
        var sourceKey = (path: keyPath, key: key)
        var otherKey = (path: newKeyPath, key: newKey)
        var measured: [String] = []

        struct Case {
            let name: String
            let folder: String
            let arguments: () -> [String]
            /// The file the command writes (for rotate: the source itself).
            let destination: String
        }
        let cases = [
            Case(name: "decrypt", folder: "plain", arguments: {
                ["decrypt", "enc/big.db", "plain/big.db", "--key-file", keyPath, "--allow-plaintext"]
            }, destination: scratch.path("plain/big.db")),
            Case(name: "encrypt", folder: "reenc", arguments: {
                ["encrypt", "plain/big.db", "reenc/big.db", "--new-key-file", keyPath]
            }, destination: scratch.path("reenc/big.db")),
            Case(name: "backup", folder: "bak", arguments: {
                ["backup", "enc/big.db", "bak/big.db", "--key-file", keyPath]
            }, destination: scratch.path("bak/big.db")),
        ]

        func checkSource() throws {
            #expect(opens(source, with: sourceKey.key), "the source no longer opens with its key")
            #expect(try rowCount(source, key: sourceKey.key) == rows)
        }

        func interrupt(_ arguments: [String], folder: String, signal: Int32, label: String) throws -> CommandResult {
            let run = try RunningCommand(arguments, in: scratch)
            let folderPath = scratch.path(folder)
            // Mid-run: the temporary file exists and has content (or the run is over, which the caller reports).
            func copyHasContent() -> Bool {
                temporaryFiles(in: folderPath).contains { (regularFileSize(folderPath + "/" + $0) ?? 0) > 0 }
            }
            while run.isRunning && !copyHasContent() {
                usleep(500)
            }
            let wasRunning = run.isRunning
            if signal == SIGKILL {
                // Its guardian too (GuardianTests checks that the guardian alone cleans up): this is what a power
                // loss leaves, for the next run to remove.
                for child in childProcesses(of: run.pid) { kill(child, SIGKILL) }
            }
            kill(run.pid, signal)
            let result = try run.finish()
            #expect(wasRunning && run.endedBySignal == signal, "\(label): not ended by the signal (\(result))")
            return result
        }

        for testCase in cases {
            for signal in [SIGINT, SIGTERM] {
                let interrupted = try interrupt(
                    testCase.arguments(), folder: testCase.folder, signal: signal, label: "\(testCase.name) \(signal)")
                // It says what it left as it was (the copy's source is only read).
                #expect(interrupted.standardError.contains("interrupted: nothing changed: "), "\(interrupted)")
                #expect(interrupted.standardError.contains("is untouched"), "\(interrupted)")
                #expect(temporaryFiles(in: scratch.path(testCase.folder)).isEmpty,
                        "\(testCase.name), signal \(signal): \(temporaryFiles(in: scratch.path(testCase.folder)))")
                #expect(
                    !FileManager.default.fileExists(atPath: testCase.destination), "\(testCase.name), signal \(signal)")
                try checkSource()
            }
            _ = try interrupt(
                testCase.arguments(), folder: testCase.folder, signal: SIGKILL, label: "\(testCase.name) KILL")
            let leftovers = temporaryFiles(in: scratch.path(testCase.folder))
            #expect(!leftovers.isEmpty, "\(testCase.name): SIGKILL mid-copy leaves the temporary file")
            #expect(!FileManager.default.fileExists(atPath: testCase.destination))
            try checkSource()
            // The next run of the same command removes what the killed one left.
            let start = ContinuousClock.now
            let next = try runSubprocess(testCase.arguments(), in: scratch)
            measured.append(
                "\(testCase.name) \(milliseconds(ContinuousClock.now - start)) ms (\(leftovers.count) left by SIGKILL)")
            #expect(next.status == 0, "\(next)")
            #expect(
                temporaryFiles(in: scratch.path(testCase.folder)).isEmpty, "\(testCase.name) after SIGKILL and a new run")
            try checkSource()
        }
        let plainCopy = try Connection(path: scratch.path("plain/big.db"), encryption: .none)
        #expect(try plainCopy.scalar("SELECT count(*) FROM item", as: Int.self) == rows)
        plainCopy.close()
        #expect(try rowCount(scratch.path("reenc/big.db"), key: key) == rows)
        #expect(try rowCount(scratch.path("bak/big.db"), key: key) == rows)

        // rotate --method copy: interrupted, the file keeps its key; killed, the next rotation cleans up.
        let rotate = {
            ["rotate", "enc/big.db", "--method", "copy", "--key-file", sourceKey.path, "--new-key-file", otherKey.path]
        }
        for signal in [SIGINT, SIGTERM] {
            let interrupted = try interrupt(rotate(), folder: "enc", signal: signal, label: "rotate \(signal)")
            #expect(
                interrupted.standardError.contains("interrupted: nothing changed unless the rotation had reached the"
                    + " final rename of the verified copy"), "\(interrupted)")
            #expect(temporaryFiles(in: scratch.path("enc")).isEmpty, "rotate, signal \(signal)")
            #expect(!opens(source, with: otherKey.key))
            try checkSource()
        }
        _ = try interrupt(rotate(), folder: "enc", signal: SIGKILL, label: "rotate KILL")
        let rotateLeftovers = temporaryFiles(in: scratch.path("enc"))
        #expect(!rotateLeftovers.isEmpty, "rotate: SIGKILL mid-copy leaves the temporary file")
        #expect(!opens(source, with: otherKey.key))
        try checkSource()
        let start = ContinuousClock.now
        let rotated = try runSubprocess(rotate(), in: scratch)
        measured.append(
            "rotate \(milliseconds(ContinuousClock.now - start)) ms (\(rotateLeftovers.count) left by SIGKILL)")
        #expect(rotated.status == 0, "\(rotated)")
        swap(&sourceKey, &otherKey)
        try checkSource()
        #expect(temporaryFiles(in: scratch.path("enc")).isEmpty)

        // Started with nohup, a hangup mid-run must not end it: the rotation finishes.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/nohup") {
            let run = try RunningCommand(rotate(), nohup: true, in: scratch)
            let folderPath = scratch.path("enc")
            while run.isRunning && temporaryFiles(in: folderPath).isEmpty { usleep(500) }
            let wasRunning = run.isRunning
            kill(run.pid, SIGHUP)
            let result = try run.finish()
            #expect(wasRunning && run.endedBySignal == 0 && result.status == 0, "nohup rotate, SIGHUP: \(result)")
            if opens(source, with: otherKey.key) { swap(&sourceKey, &otherKey) }
            try checkSource()
            #expect(temporaryFiles(in: folderPath).isEmpty)
        }

        // No file but the intended plaintext copy holds a row in clear.
        let marker = Array(Self.plaintextMarker.utf8)
        for file in allFiles(under: scratch.url.path) where file != scratch.path("plain/big.db") {
            #expect(!contains(try fileBytes(file), marker), "\(file) holds a plaintext row")
        }
        print("signals on SQLCipher \(SQLCipher.version), \(rows) rows; full runs after SIGKILL: "
            + measured.joined(separator: "; "))
    }

    // MARK: 6. Live backup

    @Test("backup while another process writes every 10 ms: it finishes, verifies, and holds a consistent count",
          .enabled(
            if: PeerProcess.isAvailable,
            "needs python3 with sqlcipher3 (pip install sqlcipher3==0.6.4), as .ci/test installs"),
          arguments: ["WAL", "DELETE"])
    func liveBackup(journalMode: String) throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k.key")
        let db = try scratch.database("live.db", key: key, rowCount: 20_000, journalMode: journalMode)
        let keyText = try String(contentsOfFile: keyPath, encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let writer = try PeerProcess(database: db, rawKeyText: keyText)
        defer { writer.stop() }
        try writer.startWriting(everyMilliseconds: 10, table: "item")
        // The backup starts once the writer has written (counted, not waited for).
        #expect(blockingWait { ((try? rowCountWaiting(db, key: key)) ?? 0) >= 20_003 }, "the writer never wrote")
        let before = try rowCountWaiting(db, key: key)

        let start = ContinuousClock.now
        let result = try #require(
            try runSubprocessBounded(
                ["backup", "live.db", "copy.db", "--key-file", keyPath, "--json"], limit: .seconds(120), in: scratch),
            "the backup did not end within 120 s")
        let duration = ContinuousClock.now - start

        // The library behind the command, under the same writer, reports how often the copy started again.
        var restarts = 0
        let libraryStart = ContinuousClock.now
        do {
            let source = try Connection(
                path: db, key: key, options: OpenOptions(mode: .readOnly, busyTimeout: .seconds(60)))
            try source.backup(toPath: scratch.path("library-copy.db")) { restarts = $0.restartCount }
            source.close()
        }
        let libraryDuration = ContinuousClock.now - libraryStart
        let written = try writer.stopWriting()
        let after = try rowCountWaiting(db, key: key)

        #expect(result.status == 0, "\(result)")
        let copy = scratch.path("copy.db")
        #expect(runInProcess(["verify", copy, "--key-file", keyPath]).status == 0)
        let copied = try rowCount(copy, key: key)
        #expect(copied >= before && copied <= after, "copy \(copied), source before \(before), after \(after)")
        #expect(try rowCount(scratch.path("library-copy.db"), key: key) <= after)
        #expect(try fileMode(copy) == 0o600)
        #expect(temporaryFiles(in: scratch.url.path).isEmpty)
        let restartsInJSON = ((jsonEnvelope(result)?["result"] as? [String: Any])?["restartCount"] as? Int)
            .map(String.init) ?? "not in the CLI's JSON"
        print("live backup \(journalMode) on SQLCipher \(SQLCipher.version): CLI \(milliseconds(duration)) ms"
            + " (restarts: \(restartsInJSON)), rows \(before)→\(copied) copied, \(after) after; library backup"
            + " \(milliseconds(libraryDuration)) ms, \(restarts) restart(s); peer wrote \(written) rows")
    }
}

// MARK: - Helpers

/// The row count, read with a busy timeout (another process is writing).
private func rowCountWaiting(_ path: String, key: EncryptionKey) throws -> Int {
    let db = try Connection(path: path, key: key, options: OpenOptions(mode: .readOnly, busyTimeout: .seconds(60)))
    defer { db.close() }
    return try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? -1
}


private func allFiles(under folder: String) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: folder) else { return [] }
    return enumerator.compactMap { $0 as? String }.map { folder + "/" + $0 }.filter {
        var status = stat()
        return lstat($0, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }
}

private func makeFolders(_ scratch: Scratch, _ names: String...) throws {
    for name in names {
        try FileManager.default.createDirectory(atPath: scratch.path(name), withIntermediateDirectories: true)
    }
}

private func makeSymlink(_ path: String, to target: String) throws {
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
}

private func fileStatus(_ path: String) -> stat? {
    var status = stat()
    return stat(path, &status) == 0 ? status : nil
}

private func regularFileSize(_ path: String) -> Int? {
    fileStatus(path).map { Int($0.st_size) }
}

private func symlinkTarget(_ path: String) -> String? {
    var status = stat()
    guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFLNK else { return nil }
    return try? FileManager.default.destinationOfSymbolicLink(atPath: path)
}

private func resolvedPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

private func milliseconds(_ duration: Duration) -> Int {
    Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
}
