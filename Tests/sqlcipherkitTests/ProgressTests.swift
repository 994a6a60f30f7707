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
        #expect(measured.hasSuffix(" 3 s"))
        let estimated = ProgressLine.render(
            label: "encrypt", state: PhaseState(phase: "copying (export)", done: 10, total: 40, isEstimate: true),
            elapsedSeconds: 0)
        #expect(estimated.contains("~10/40 pages"))
        #expect(estimated.contains("(estimated)"))
        let phaseOnly = ProgressLine.render(label: "rotate a.db", state: PhaseState(phase: "rekeying in place"),
                                            elapsedSeconds: 12)
        #expect(phaseOnly == "rotate a.db: rekeying in place… 12 s")
    }

    /// Runs the command with standard error treated as a terminal.
    func onTerminal(_ arguments: [String]) -> CommandResult {
        Output.$treatsCaptureAsTerminal.withValue(true) { runInProcess(arguments) }
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
