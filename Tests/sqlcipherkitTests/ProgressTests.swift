import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// Progress is drawn on a terminal only, never with --json; tests use a fake terminal, never timing.
@Suite("sqlcipherkit progress")
struct ProgressTests {
    @Test("the line names the phase and, when measured, the pages; estimates say so")
    func render() {
        let measured = ProgressLine.render(
            label: "backup", state: PhaseState(phase: "copying pages", done: 50, total: 200), elapsedSeconds: 3)
        #expect(measured.hasPrefix("backup: copying pages ["))
        #expect(measured.contains("50/200 pages 25%"))
        #expect(!measured.contains("estimated"))
        #expect(measured.hasSuffix(" 3 s, ETA --:--"))
        let withETA = ProgressLine.render(
            label: "backup", state: PhaseState(phase: "copying pages", done: 50, total: 200), elapsedSeconds: 3,
            etaSeconds: 75)
        #expect(withETA.hasSuffix(" 3 s, ETA 1:15"))
        let estimated = ProgressLine.render(
            label: "encrypt", state: PhaseState(phase: "copying (export)", done: 10, total: 40, isEstimate: true),
            elapsedSeconds: 0)
        #expect(estimated.contains("~10/40 pages"))
        #expect(estimated.contains("(estimated)"))
        let phaseOnly = ProgressLine.render(label: "rotate a.db", state: PhaseState(phase: "rekeying in place"),
                                            elapsedSeconds: 12)
        #expect(phaseOnly == "rotate a.db: rekeying in place… 12 s")
    }

    @Test("an estimate never shows 100 %, and a plain line carries the time, the counts and the ETA")
    func honestEstimates() {
        let full = ProgressLine.render(
            label: "encrypt", state: PhaseState(phase: "writing", done: 40, total: 40, isEstimate: true),
            elapsedSeconds: 1)
        #expect(full.contains("~40/40 pages 99%"), "\(full)")
        let measuredFull = ProgressLine.render(
            label: "backup", state: PhaseState(phase: "copying", done: 40, total: 40), elapsedSeconds: 1)
        #expect(measuredFull.contains("40/40 pages 100%"), "\(measuredFull)")
        let line = ProgressLine.plain(
            label: "backup", state: PhaseState(phase: "copying pages", done: 30, total: 120), elapsedSeconds: 7,
            etaSeconds: 21, now: Date(timeIntervalSince1970: 1_795_792_000))
        #expect(line == "2026-11-27T15:06:40Z backup: copying pages 30/120 pages 25%, ETA 0:21 (7 s)")
    }

    @Test("the ETA counts from the phase's start; an estimate that stops growing is shown as finishing, not as a bar")
    func phaseClock() {
        var clock = PhaseClock()
        let copying = { (done: Int) in PhaseState(phase: "copying", done: done, total: 100) }
        #expect(clock.observe(PhaseState(phase: "opening"), now: 0).etaSeconds == nil)
        // The phase starts at 10 s: 25 of 100 pages in 2 s leaves 6 s.
        #expect(clock.observe(copying(0), now: 10).etaSeconds == nil)
        #expect(clock.observe(copying(25), now: 12).etaSeconds == 6)
        // A measured count that stays put is still a bar (SQLite is copying a large step).
        #expect(clock.observe(copying(25), now: 20).state.done == 25)

        var estimate = PhaseClock()
        let writing = { (done: Int) in PhaseState(phase: "writing (export)", done: done, total: 100, isEstimate: true) }
        #expect(estimate.observe(writing(10), now: 0).state.done == 10)
        #expect(estimate.observe(writing(89), now: 1).state.done == 89)
        // Not grown for PhaseClock.stallSeconds: the file is written, the rest (commit, verification) is not measured.
        let stalled = estimate.observe(writing(89), now: 1 + PhaseClock.stallSeconds)
        #expect(stalled.state.done == nil && stalled.etaSeconds == nil)
        #expect(stalled.state.phase == "writing (export): ~89 pages written, finishing")
        // Past its estimate, at once.
        var past = PhaseClock()
        #expect(past.observe(writing(120), now: 0).state.phase.hasSuffix("~120 pages written, finishing"))
    }

    @Test("migrate's phases never speak of a new key")
    func migrationWording() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("legacy.db", key: key, rowCount: 300)
        try FileManager.default.createDirectory(atPath: scratch.path("kept"), withIntermediateDirectories: true)
        let phases = RotationPhases(
            path: db, pageSize: 1024, isInPlace: false, backupDirectory: scratch.path("kept"), wording: .migration)
        var seen = [phases.state().phase]
        try Data(count: 4096).write(to: URL(fileURLWithPath: scratch.path("kept/legacy.db.1-2.before-rotation")))
        seen.append(phases.state().phase)
        try Data(count: 4096).write(to: URL(fileURLWithPath: scratch.path("legacy.db.sqlcipherkit-tmp-1-2")))
        seen.append(phases.state().phase)
        phases.record(BackupProgress(pagesCopied: 1, pageCount: 10))
        seen.append(phases.state().phase)
        phases.record(BackupProgress(pagesCopied: 10, pageCount: 10))
        // The copy's end is shown once with its final figure, then the verification.
        let end = phases.state()
        #expect(end.done == 10 && end.total == 10, "\(end)")
        seen.append(end.phase)
        seen.append(phases.state().phase)
        #expect(seen.contains("keeping a copy of the original (SQLCipher 3 format)"), "\(seen)")
        #expect(seen.contains("writing the copy in the SQLCipher 4 format (export)"), "\(seen)")
        #expect(seen.contains { $0.hasPrefix("verifying the migrated file") }, "\(seen)")
        #expect(!seen.contains { $0.contains("new key") }, "\(seen)")
    }

    /// Runs the command with `--progress plain` printing at every update (no clock involved).
    func everyUpdate(_ arguments: [String]) -> CommandResult {
        Output.$progressPrintsEveryUpdate.withValue(true) { runInProcess(arguments) }
    }

    /// `2026-11-27T15:04:05Z label: …`
    static var plainLine: Regex<Substring> { #/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z [^\n]+$/# }

    @Test("--progress plain: timestamped lines off a terminal, a page count with an ETA, and a last line")
    func plainBackup() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        // More than one step of 256 pages on either engine (1,024- or 4,096-byte pages).
        let db = try scratch.database("notes.db", key: key, rowCount: 14_000)
        let result = everyUpdate(["backup", db, scratch.path("b.db"), "--key-file", keyPath, "--progress", "plain"])
        #expect(result.status == 0, "\(result)")
        let lines = result.standardError.split(separator: "\n").map(String.init)
        #expect(lines.count >= 3, "\(result)")
        for line in lines {
            #expect(line.wholeMatch(of: Self.plainLine) != nil, "not a plain progress line: \(line)")
            #expect(line.contains(" backup: "), "\(line)")
        }
        #expect(lines.contains { $0.contains("backup: copying pages 256/") && $0.contains(", ETA ") }, "\(result)")
        #expect(lines.contains { $0.contains("backup: verifying the copy") }, "\(result)")
        #expect(lines.last?.contains("backup: done (") == true, "\(result)")
        #expect(!result.standardError.contains("\u{1B}") && !result.standardError.contains("\r"))
        #expect(result.standardOutput.hasPrefix("backed up "))
        #expect(try rowCount(scratch.path("b.db"), key: key) == 14_000)
    }

    @Test("--progress plain with --json keeps standard output one JSON object; none and tty do what they say")
    func modes() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (newKeyPath, _) = try scratch.rawKeyFile("new")
        let db = try scratch.database("notes.db", key: key, rowCount: 300)
        let json = everyUpdate(["verify", db, "--key-file", keyPath, "--progress", "plain", "--json"])
        #expect(json.status == 0, "\(json)")
        #expect(jsonEnvelope(json) != nil, "\(json)")
        #expect(json.standardError.contains(" verify: reading and checking every page"), "\(json)")
        #expect(json.standardError.split(separator: "\n").last?.contains("verify: done (") == true, "\(json)")
        // none: nothing, even on a terminal; tty: the bar, even off a terminal.
        let none = onTerminal(["verify", db, "--key-file", keyPath, "--progress", "none"])
        #expect(none.status == 0 && none.standardError.isEmpty, "\(none)")
        let tty = runInProcess(["verify", db, "--key-file", keyPath, "--progress", "tty"])
        #expect(tty.status == 0 && tty.standardError.contains("\r\u{1B}[Kverify: "), "\(tty)")
        // A rotation's plain lines name the database and end with "done".
        let rotate = everyUpdate(
            ["rotate", db, "--key-file", keyPath, "--new-key-file", newKeyPath, "--progress", "plain"])
        #expect(rotate.status == 0, "\(rotate)")
        #expect(rotate.standardError.contains("rotate \(db): checking the current key"), "\(rotate)")
        #expect(rotate.standardError.split(separator: "\n").last?.contains("rotate \(db): done (") == true)
        #expect(rotate.isFreeOfKeyMaterial)
        // A failure ends the lines with "stopped", then the error.
        let failed = everyUpdate(["verify", db, "--key-file", keyPath, "--progress", "plain"])
        #expect(failed.status == 3, "the key was rotated: \(failed)")
        #expect(failed.standardError.contains("verify: stopped (see the error below)"), "\(failed)")
    }

    @Test("migrate --progress plain speaks of the SQLCipher 4 copy, never of a new key",
          .enabled(if: Engine.isVersion4, "needs SQLCipher 4: migration writes the SQLCipher 4 format"))
    func plainMigrate() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("legacy.db", key: key, settings: .sqlcipher3, rowCount: 2_000)
        try FileManager.default.createDirectory(atPath: scratch.path("kept"), withIntermediateDirectories: true)
        let result = everyUpdate(
            ["migrate", db, "--key-file", keyPath, "--backup-dir", scratch.path("kept"), "--progress", "plain"])
        #expect(result.status == 0, "\(result)")
        #expect(!result.standardError.contains("new key"), "\(result)")
        #expect(result.standardError.contains("migrate \(db): "), "\(result)")
        #expect(result.standardError.split(separator: "\n").last?.contains("done (") == true, "\(result)")
        // The kept copy is named as Docs/KeyRotation.md says: <name>.<unix time>-<random hex>.before-rotation.
        let kept = try FileManager.default.contentsOfDirectory(atPath: scratch.path("kept"))
        #expect(kept.count == 1 && kept[0].wholeMatch(of: #/legacy\.db\.\d+-[0-9a-f]+\.before-rotation/#) != nil,
                "\(kept)")
        #expect(result.standardOutput.contains("original kept at \(scratch.path("kept"))/\(kept.first ?? "")"))
    }

    /// Runs the command with standard error treated as a terminal.
    func onTerminal(_ arguments: [String]) -> CommandResult {
        // A wide terminal: these tests read the whole label (ProgressLinesTests fit it to narrow ones).
        TerminalWidth.$override.withValue(400) {
            Output.$treatsCaptureAsTerminal.withValue(true) { runInProcess(arguments) }
        }
    }

    @Test("every long step shows its phase on a terminal, and nothing with --json or without a terminal")
    func phasesShown() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (newKeyPath, _) = try scratch.rawKeyFile("new")
        let db = try scratch.database("notes.db", key: key, rowCount: 300)
        let plain = try plaintextDatabase(scratch, "plain.db")
        try FileManager.default.createDirectory(atPath: scratch.path("kept"), withIntermediateDirectories: true)
        let cases: [([String], String)] = [
            (["verify", db, "--key-file", keyPath], "verify: reading and checking every page"),
            (["backup", db, scratch.path("b.db"), "--key-file", keyPath], "backup: "),
            (["encrypt", plain, scratch.path("e.db"), "--new-key-file", newKeyPath], "encrypt: "),
            (["decrypt", db, scratch.path("d.db"), "--key-file", keyPath, "--allow-plaintext"], "decrypt: "),
            (["rotate", db, "--key-file", keyPath, "--new-key-file", newKeyPath, "--method", "in-place",
              "--backup-dir", scratch.path("kept")], "rotate \(db): "),
        ]
        for (arguments, expected) in cases {
            let result = onTerminal(arguments)
            #expect(result.status == 0, "\(result)")
            #expect(result.standardError.contains(expected), "\(arguments): \(result)")
            #expect(result.isFreeOfKeyMaterial)
        }
        // No terminal: no progress. --json: none either, even on a terminal.
        let quiet = runInProcess(["verify", scratch.path("b.db"), "--key-file", keyPath])
        #expect(quiet.status == 0, "\(quiet)")
        #expect(!quiet.standardError.contains("verify:"), "\(quiet)")
        let json = onTerminal(["verify", scratch.path("b.db"), "--key-file", keyPath, "--json"])
        #expect(json.status == 0, "\(json)")
        #expect(json.standardError.isEmpty, "\(json)")
    }

    @Test("rotation phases are told apart from what each phase writes")
    func rotationPhases() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 300)
        try FileManager.default.createDirectory(atPath: scratch.path("kept"), withIntermediateDirectories: true)
        let phases = RotationPhases(path: db, pageSize: 1024, isInPlace: true, backupDirectory: scratch.path("kept"))
        #expect(phases.state().phase.hasPrefix("checking the current key"))
        try Data(count: 4096).write(to: URL(fileURLWithPath: scratch.path("kept/notes.db.123.before-rotation")))
        #expect(phases.state().phase.hasPrefix("keeping a copy of the original"))
        #expect(phases.state().done == 4)
        try Data(count: 2 * 1032).write(to: URL(fileURLWithPath: db + "-journal"))
        #expect(phases.state().phase == "rekeying in place")
        #expect(phases.state().done == 2)
        try FileManager.default.removeItem(atPath: db + "-journal")
        #expect(phases.state().phase.hasPrefix("verifying"))
        phases.record(BackupProgress(pagesCopied: 1, pageCount: 10))
        #expect(phases.state().done == 1)
    }
}
