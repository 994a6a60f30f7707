import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit
#if canImport(Glibc)
import Glibc
#endif

/// The progress a long command writes to standard error: a bar that fits the terminal (a line as wide as the terminal
/// wraps, and every redraw leaves one behind), and `--progress plain` lines that end each phase with its final figure,
/// say nothing twice, and name each phase for what it writes.
@Suite("sqlcipherkit progress: lines that fit and say each thing once")
struct ProgressLinesTests {
    /// The columns `text` takes on a UTF-8 terminal, by the C library's `wcwidth` (an independent count); a control
    /// character, which a terminal would act on, counts as 1000 so that no line holding one passes.
    static func terminalColumns(_ text: String) -> Int {
        typealias WCWidth = @convention(c) (wchar_t) -> CInt
        guard let utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", nil),
              let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "wcwidth")
        else {
            Issue.record("no C.UTF-8 locale or wcwidth to count columns with")
            return .max
        }
        let wcwidth = unsafeBitCast(symbol, to: WCWidth.self)
        let previous = uselocale(utf8)
        defer {
            uselocale(previous)
            freelocale(utf8)
        }
        return text.unicodeScalars.reduce(0) { total, scalar in
            let columns = wcwidth(wchar_t(bitPattern: scalar.value))
            return total + (columns < 0 ? 1000 : Int(columns))
        }
    }

    /// What a bar redraw writes, one entry per drawn line (`\r ESC[K` starts each, `\n` ends the last).
    static func drawnLines(_ standardError: String) -> [String] {
        standardError.components(separatedBy: "\r\u{1B}[K").flatMap { $0.split(separator: "\n").map(String.init) }
            .filter { !$0.isEmpty }
    }

    @Test("every bar line fits in width - 1 columns, whatever the label, phase, counts and width",
          arguments: [12, 20, 40, 60, 80, 132])
    func barFits(width: Int) {
        let labels = [
            "backup", "verify", "rotate /srv/tenants/acme-payroll-2026/databases/production/notes-archive-2026-11.db",
            "rotate /データ/顧客/ノート-二〇二六.db", "migrate ./legacy.db", "rotate /tmp/\u{1B}[2Jevil\u{7}.db",
            "restore 🗄️ café-été.db",
        ]
        let states = [
            PhaseState(phase: "checking the current key and taking the lock"),
            PhaseState(phase: "copying pages", done: 256, total: 61_440),
            PhaseState(
                phase: "writing the copy under the new key (export)", done: 12_345_678, total: 99_999_999,
                isEstimate: true),
            PhaseState(phase: "verifying the migrated file (the key opens it with SQLCipher 4 settings, not with"
                + " SQLCipher 3's)"),
            PhaseState(phase: "downloading", done: 1_048_576, total: 2_097_152, unit: "KiB"),
        ]
        for label in labels {
            for state in states {
                for eta in [nil, 5, 3_725] as [Int?] {
                    let line = ProgressLine.render(
                        label: label, state: state, elapsedSeconds: 12_345, etaSeconds: eta, width: width)
                    #expect(Self.terminalColumns(line) <= width - 1, "\(width): \(line.debugDescription)")
                    #expect(DisplayWidth.of(line) <= width - 1, "\(width): \(line.debugDescription)")
                }
            }
        }
        // Wide enough, nothing is cut: the whole line as before.
        let whole = ProgressLine.render(
            label: "backup", state: states[1], elapsedSeconds: 3, etaSeconds: 5, width: 200)
        #expect(whole == "backup: copying pages [                    ] 256/61440 pages 0% 3 s, ETA 0:05")
        // Narrower: the bar goes first, the counts stay.
        let narrow = ProgressLine.render(label: "backup", state: states[1], elapsedSeconds: 3, etaSeconds: 5, width: 60)
        #expect(narrow == "backup: copying pages 256/61440 pages 0% 3 s, ETA 0:05", "\(narrow)")
        // Narrower still: the ETA, then the time so far; the counts stay longest.
        #expect(ProgressLine.render(label: "backup", state: states[1], elapsedSeconds: 3, etaSeconds: 5, width: 41)
            == "backup: copying pages 256/61440 pages 0%")
        // A long path keeps its start and its file name.
        let path = ProgressLine.render(label: labels[2], state: states[1], elapsedSeconds: 3, width: 80)
        #expect(path.hasPrefix("rotate /srv/") && path.contains("…") && path.contains("256/61440"), "\(path)")
    }

    @Test("a real backup's bar fits a 40-column terminal: the width from the kernel or COLUMNS, never wider")
    func realBarFits() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let name = "notes-with-a-rather-long-name-for-an-80-column-terminal.db"
        let db = try scratch.database(name, key: key, rowCount: 3_000)
        let inProcess = TerminalWidth.$override.withValue(40) {
            runInProcess(["backup", db, scratch.path("copy-\(name)"), "--key-file", keyPath, "--progress", "tty"])
        }
        #expect(inProcess.status == 0, "\(inProcess)")
        // Standard error is a file here: TIOCGWINSZ fails and COLUMNS gives the width.
        let subprocess = try runSubprocess(
            ["backup", name, "copy2-\(name)", "--key-file", keyPath, "--progress", "tty"],
            environment: ["COLUMNS": "40"], in: scratch)
        #expect(subprocess.status == 0, "\(subprocess)")
        for run in [inProcess, subprocess] {
            let lines = Self.drawnLines(run.standardError)
            #expect(lines.count >= 2, "\(run)")
            for line in lines {
                #expect(Self.terminalColumns(line) <= 39, "\(line.debugDescription)")
            }
            #expect(lines.allSatisfy { $0.hasPrefix("backup: ") }, "\(run)")
            #expect(lines.contains { $0.contains(#/\d+/\d+ pages/#) }, "the counts are kept: \(run)")
        }
        // No width known at all: 80.
        let unknown = try runSubprocess(
            ["verify", name, "--key-file", keyPath, "--progress", "tty"], environment: ["COLUMNS": nil], in: scratch)
        for line in Self.drawnLines(unknown.standardError) {
            #expect(Self.terminalColumns(line) <= 79, "\(line.debugDescription)")
        }
    }

    /// The body of a plain line: without the time stamp before it and the elapsed time after it.
    static func body(_ line: Substring) -> String {
        var text = String(line.drop { $0 != " " }.dropFirst())
        if let range = text.range(of: #" \(\d+ s\)$"#, options: .regularExpression) { text.removeSubrange(range) }
        return text
    }

    /// The phase a plain line names (`label: phase …` up to the counts).
    static func phase(_ body: String, label: String) -> String {
        let afterLabel = body.dropFirst(label.count + 2)
        let cut = afterLabel.firstIndex { $0 == "~" || $0.isNumber || $0 == ":" } ?? afterLabel.endIndex
        return afterLabel[..<cut].trimmingCharacters(in: .whitespaces)
    }

    /// Each phase in one run of lines, and no line saying what the one before it said.
    static func expectEachPhaseOnce(
        _ standardError: String, label: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let bodies = standardError.split(separator: "\n").map(body)
        #expect(Set(bodies).count == bodies.count, "a line repeated: \(bodies)", sourceLocation: sourceLocation)
        var seen: [String] = []
        for phase in bodies.map({ phase($0, label: label) }) where phase != seen.last {
            #expect(!seen.contains(phase), "\(phase) came back: \(bodies)", sourceLocation: sourceLocation)
            seen.append(phase)
        }
    }

    @Test("--progress plain ends a short phase with its final figure, not its 0 %, and says nothing twice")
    func plainEndsEachPhase() throws {
        let scratch = try Scratch()
        let (keyPath, key) = try scratch.rawKeyFile("k")
        let (newKeyPath, _) = try scratch.rawKeyFile("new")
        let db = try scratch.database("notes.db", key: key, rowCount: 14_000)
        // Not every update: the five-second rhythm of a log, for a phase far shorter than that.
        let backup = runInProcess(["backup", db, scratch.path("b.db"), "--key-file", keyPath, "--progress", "plain"])
        #expect(backup.status == 0, "\(backup)")
        #expect(backup.standardError.contains(#/backup: copying pages (\d+)/\1 pages 100%/#), "\(backup)")
        Self.expectEachPhaseOnce(backup.standardError, label: "backup")
        #expect(backup.standardError.split(separator: "\n").last?.contains("backup: done (") == true)
        let inPlace = try runSubprocess(
            ["rotate", "notes.db", "--key-file", keyPath, "--new-key-file", newKeyPath, "--method", "in-place",
             "--progress", "plain"], in: scratch)
        #expect(inPlace.status == 0, "\(inPlace)")
        Self.expectEachPhaseOnce(inPlace.standardError, label: "rotate notes.db")
        #expect(inPlace.standardError.split(separator: "\n").last?.contains("rotate notes.db: done (") == true)
    }

    @Test("an estimate that stalls and moves again is one phase: its lines are not written twice")
    func stallingEstimate() throws {
        let capture = OutputCapture()
        let current = Locked(PhaseState(phase: "checking the current key and taking the lock"))
        let script = [
            PhaseState(phase: "rekeying in place", done: 10, total: 100, isEstimate: true),
            // Past its estimate: shown as "~100 pages written, finishing"; then the journal grows again.
            PhaseState(phase: "rekeying in place", done: 100, total: 100, isEstimate: true),
            PhaseState(phase: "rekeying in place", done: 30, total: 100, isEstimate: true),
            PhaseState(phase: "rekeying in place", done: 100, total: 100, isEstimate: true),
            PhaseState(phase: "verifying the new file (new key opens it, old key does not)"),
        ]
        Output.$capture.withValue(capture) {
            let progress = PhaseProgress(label: "rotate s.db", mode: .plain) { current.withLock { $0 } }
            progress.run {
                for state in script {
                    current.withLock { $0 = state }
                    progress.update()
                }
            }
        }
        let lines = capture.standardError.split(separator: "\n")
        Self.expectEachPhaseOnce(capture.standardError, label: "rotate s.db")
        #expect(lines.filter { $0.contains("finishing") }.count <= 1, "\(lines)")
        #expect(lines.contains { $0.contains("rekeying in place ~10/100") }, "\(lines)")
        #expect(lines.last?.contains("rotate s.db: done (") == true, "\(lines)")
    }

    @Test("with --backup-dir the database's own folder, the kept original is not called the export")
    func backupBesideDatabase() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let db = try scratch.database("notes.db", key: key, rowCount: 300)
        let phases = RotationPhases(path: db, pageSize: 1024, isInPlace: false, backupDirectory: scratch.url.path)
        #expect(phases.state().phase.hasPrefix("checking the current key"))
        // The kept original, under its temporary name, then its own.
        let keptTemporary = scratch.path("notes.db.1795899830-6067d77682aa1427.before-rotation.sqlcipherkit-tmp-1-a")
        try Data(count: 4096).write(to: URL(fileURLWithPath: keptTemporary))
        #expect(phases.state().phase == "keeping a copy of the original (old key)", "\(phases.state())")
        try FileManager.default.moveItem(
            atPath: keptTemporary, toPath: scratch.path("notes.db.1795899830-6067d77682aa1427.before-rotation"))
        #expect(phases.state().phase.hasPrefix("keeping a copy of the original (old key)"), "\(phases.state())")
        // The export's temporary file: now, and only now, the copy under the new key.
        try Data(count: 2048).write(to: URL(fileURLWithPath: scratch.path("notes.db.sqlcipherkit-tmp-1-b")))
        #expect(phases.state().phase == "writing the copy under the new key (export)")
        #expect(phases.state().done == 2)
    }

    @Test("a rotation that fails ends its plain lines with stopped, not done")
    func failedRotationStops() throws {
        let scratch = try Scratch()
        let (_, key) = try scratch.rawKeyFile("k")
        let (otherPath, _) = try scratch.rawKeyFile("other")
        let (newKeyPath, _) = try scratch.rawKeyFile("new")
        let db = try scratch.database("notes.db", key: key, rowCount: 30)
        let result = runInProcess(
            ["rotate", db, "--key-file", otherPath, "--new-key-file", newKeyPath, "--progress", "plain"])
        #expect(result.status == 3, "\(result)")
        #expect(result.standardError.contains("rotate \(db): stopped (see the error below)"), "\(result)")
        #expect(!result.standardError.contains("rotate \(db): done"), "\(result)")
    }
}
