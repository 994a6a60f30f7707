import ArgumentParser
import Foundation
import SQLCipherKit
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a long step is doing now: the phase's name and, when it can be measured, how far it is.
struct PhaseState: Sendable, Equatable {
    var phase: String
    var done: Int?
    var total: Int?
    /// `true` when `done` is estimated from a file's size (SQLCipher reports no progress for exports and rekeys).
    var isEstimate = false
    /// What `done` and `total` count.
    var unit = "pages"
}

/// `--progress`: how a long command shows how far it is.
enum ProgressMode: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// A redrawn bar on a terminal; nothing when standard error is not a terminal or with `--json`.
    case auto
    /// The redrawn bar, even when standard error is not a terminal.
    case tty
    /// Timestamped lines for logs, cron and CI: one per phase and one every few seconds, with done/total and an ETA.
    case plain
    /// Nothing.
    case none
}

/// `--progress` on the long commands (backup, rotate, migrate, encrypt, decrypt, restore, verify).
struct ProgressOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "auto: a bar on a terminal, nothing otherwise; tty: the bar anyway; plain: timestamped lines for logs"
                + " (each phase, then every \(PhaseProgress.plainInterval) s with done/total and an ETA); none.",
            valueName: "mode"))
    var progress: ProgressMode = .auto
}

/// Renders progress; pure (the time is a parameter), so tests check it without a terminal or timing.
enum ProgressLine {
    /// The bar and counts of a measured or estimated phase, or the phase alone.
    static func render(label: String, state: PhaseState, elapsedSeconds: Int, etaSeconds: Int? = nil) -> String {
        var line = "\(label): \(state.phase)"
        if let done = state.done, let total = state.total, total > 0 {
            let width = 20
            let fraction = shownFraction(state)
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
            line += " [\(bar)] " + counts(state, done: done, total: total)
        } else {
            line += "…"
        }
        return line + " \(elapsedSeconds) s" + (state.done != nil && state.total != nil ? eta(etaSeconds) : "")
    }

    /// A `--progress plain` line: UTC time, label, phase, counts and ETA when measured, time in the command so far.
    static func plain(
        label: String, state: PhaseState, elapsedSeconds: Int, etaSeconds: Int?, now: Date
    ) -> String {
        var line = "\(timestamp(now)) \(label): \(state.phase)"
        if let done = state.done, let total = state.total, total > 0 {
            line += " " + counts(state, done: done, total: total) + eta(etaSeconds)
        }
        return line + " (\(elapsedSeconds) s)"
    }

    /// `~120/400 pages 30% (estimated)`. An estimate never shows 100 %: what it estimates may not be over yet.
    private static func counts(_ state: PhaseState, done: Int, total: Int) -> String {
        let percent = Int(shownFraction(state) * 100)
        return "\(state.isEstimate ? "~" : "")\(min(done, total))/\(total) \(state.unit) \(percent)%"
            + (state.isEstimate ? " (estimated)" : "")
    }

    static func shownFraction(_ state: PhaseState) -> Double {
        guard let done = state.done, let total = state.total, total > 0 else { return 0 }
        let fraction = min(1, max(0, Double(done) / Double(total)))
        return state.isEstimate ? min(fraction, 0.99) : fraction
    }

    private static func eta(_ seconds: Int?) -> String {
        guard let seconds else { return ", ETA --:--" }
        return ", ETA \(seconds / 60):" + (seconds % 60 < 10 ? "0" : "") + "\(seconds % 60)"
    }

    /// `2026-11-27T15:04:05Z`.
    static func timestamp(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

/// Honest estimates: the ETA of a phase from its own start, and an estimate that has stopped moving shown as what it
/// is (the file is written; the rest, such as a commit or a verification, is not measured) instead of a bar stuck
/// at 89 % or 100 %. Pure: every call gets the time, so tests drive it without sleeping.
struct PhaseClock: Sendable {
    /// An estimate that has not grown for this long is no longer shown as a bar.
    static let stallSeconds = 2.0

    private var phase: String?
    private var phaseStart = 0.0
    private var lastDone: Int?
    private var lastGrowth = 0.0

    /// The state to show at `now` (seconds since the command started) and its ETA in seconds, when known.
    mutating func observe(_ state: PhaseState, now: Double) -> (state: PhaseState, etaSeconds: Int?) {
        if state.phase != phase {
            phase = state.phase
            phaseStart = now
            lastDone = nil
        }
        if state.done != lastDone {
            lastDone = state.done
            lastGrowth = now
        }
        guard let done = state.done, let total = state.total, total > 0 else { return (state, nil) }
        if state.isEstimate && (done >= total || (done > 0 && now - lastGrowth >= Self.stallSeconds)) {
            // The file stopped growing (or passed its estimate): its writing is over, what follows is not measured.
            return (PhaseState(phase: "\(state.phase): ~\(done) \(state.unit) written, finishing"), nil)
        }
        let elapsed = now - phaseStart
        guard done > 0, done < total, elapsed >= 1 else { return (state, done >= total ? 0 : nil) }
        return (state, Int((elapsed * Double(total - done) / Double(done)).rounded(.up)))
    }
}

/// A long step's progress on standard error, as `--progress` asks: a status line redrawn four times a second on a
/// terminal, or timestamped lines (each phase, and every ``plainInterval`` seconds). A thread of its own polls the
/// phase; steps that report progress themselves also call ``update()``. Never drawn with `--json` unless asked for.
final class PhaseProgress: Sendable {
    /// Seconds between two `--progress plain` lines of one phase.
    static let plainInterval = 5

    private enum Style { case off, bar, lines }

    private let label: String
    private let capture: OutputCapture?
    private let style: Style
    /// `--progress plain` prints at every update and every poll (tests; SQLCIPHERKIT_PROGRESS_EVERY_UPDATE=1).
    private let printsEveryUpdate: Bool
    private let state: @Sendable () -> PhaseState
    private let interruptNote: String?
    private let running = Mutex<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let drawing = Mutex<Drawing>((PhaseClock(), nil, 0, .now))

    /// - Parameters:
    ///   - mode: `--progress`.
    ///   - interruptNote: Printed if the command is interrupted (SIGINT, SIGTERM…) while `run`'s body runs: what
    ///     was left as it was.
    ///   - state: Called on the ticker thread at every redraw.
    init(
        label: String, mode: ProgressMode = .auto, interruptNote: String? = nil,
        state: @escaping @Sendable () -> PhaseState
    ) {
        self.label = label
        self.state = state
        self.interruptNote = interruptNote
        capture = Output.capture
        switch mode {
        case .auto: style = Output.showsProgress ? .bar : .off
        case .tty: style = .bar
        case .plain: style = .lines
        case .none: style = .off
        }
        printsEveryUpdate = Output.progressPrintsEveryUpdate
            || getenv("SQLCIPHERKIT_PROGRESS_EVERY_UPDATE").map { String(cString: $0) } == "1"
    }

    /// Runs `body` with progress shown (at once, then every 250 ms and at every ``update()``) and ended afterwards.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        if let interruptNote, capture == nil {
            TemporaryFiles.setInterruptNote((style == .bar ? "\n" : "") + "interrupted: " + interruptNote + "\n")
        }
        defer { if interruptNote != nil, capture == nil { TemporaryFiles.setInterruptNote(nil) } }
        guard style != .off else { return try body() }
        drawing.withLock { $0.start = .now }
        draw(isFinal: false)
        running.withLock { $0 = true }
        let thread = Thread { [self] in
            while running.withLock({ $0 }) {
                Thread.sleep(forTimeInterval: 0.25)
                if running.withLock({ $0 }) { draw(isFinal: false) }
            }
            stopped.signal()
        }
        thread.start()
        var succeeded = false
        defer {
            running.withLock { $0 = false }
            stopped.wait()
            finish(succeeded: succeeded)
        }
        let value = try body()
        succeeded = true
        return value
    }

    /// Called by steps that report progress themselves (a page count), so that `--progress plain` can print at once.
    func update() {
        guard style == .lines, running.withLock({ $0 }) else { return }
        draw(isFinal: false)
    }

    private func draw(isFinal: Bool) {
        let raw = state()
        // Written under the lock: the ticker and ``update()`` never interleave or reorder their lines.
        drawing.withLock { drawing in
            guard let line = nextLine(&drawing, raw: raw, isFinal: isFinal) else { return }
            Output.write(line, toStandardError: true, capture: capture)
        }
    }

    private typealias Drawing = (
        clock: PhaseClock, lastPhase: String?, lastLine: Double, start: ContinuousClock.Instant
    )

    /// The text to write now, if any (`--progress plain` writes a line per phase and every ``plainInterval`` s).
    private func nextLine(_ drawing: inout Drawing, raw: PhaseState, isFinal: Bool) -> String? {
        let elapsed = ContinuousClock.now - drawing.start
        let now = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let (shown, eta) = drawing.clock.observe(raw, now: now)
        switch style {
        case .off:
            return nil
        case .bar:
            return "\r\u{1B}[K" + ProgressLine.render(
                label: label, state: shown, elapsedSeconds: Int(now), etaSeconds: eta)
        case .lines:
            let isNewPhase = shown.phase != drawing.lastPhase
            guard isFinal || isNewPhase || printsEveryUpdate || now - drawing.lastLine >= Double(Self.plainInterval)
            else { return nil }
            drawing.lastPhase = shown.phase
            drawing.lastLine = now
            return ProgressLine.plain(
                label: label, state: shown, elapsedSeconds: Int(now), etaSeconds: eta, now: Date()) + "\n"
        }
    }

    private func finish(succeeded: Bool) {
        switch style {
        case .off:
            break
        case .bar:
            draw(isFinal: true)
            Output.write("\n", toStandardError: true, capture: capture)
        case .lines:
            let seconds = drawing.withLock { Int((ContinuousClock.now - $0.start).components.seconds) }
            Output.write(
                "\(ProgressLine.timestamp(Date())) \(label): \(succeeded ? "done" : "stopped (see the error below)")"
                    + " (\(seconds) s)\n",
                toStandardError: true, capture: capture)
        }
    }
}

/// Measures a step the engine reports nothing about, from the size of the files it writes.
struct FileGrowth: Sendable {
    /// Files (by name) already in each watched folder when the step started: only new ones are measured.
    private let existing: [String: Set<String>]
    private let prefixes: [(folder: String, prefix: String)]
    private let sideFiles: [String]
    let pageSize: Int

    /// Watches new files in `folder` whose name starts with `prefix`, and the given side files (`-journal`, `-wal`).
    init(newFilesIn folders: [(folder: String, prefix: String)], sideFiles: [String] = [], pageSize: Int) {
        prefixes = folders
        self.sideFiles = sideFiles
        self.pageSize = max(pageSize, 512)
        var existing: [String: Set<String>] = [:]
        for (folder, _) in folders {
            existing[folder] = Set((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
        }
        self.existing = existing
    }

    /// The largest new or side file, in bytes (`nil` when none exists yet).
    func largestByteCount() -> Int? {
        var largest: Int?
        for (folder, prefix) in prefixes {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            for name in names where name.hasPrefix(prefix) && existing[folder]?.contains(name) != true {
                if let size = Self.size(folder + "/" + name) { largest = max(largest ?? 0, size) }
            }
        }
        for path in sideFiles {
            if let size = Self.size(path) { largest = max(largest ?? 0, size) }
        }
        return largest
    }

    /// Pages written so far, estimated from ``largestByteCount()``.
    func pagesWritten(bytesPerPage: Int? = nil) -> Int? {
        largestByteCount().map { $0 / (bytesPerPage ?? pageSize) }
    }

    static func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
    }

    /// The folder and file name of a path.
    static func split(_ path: String) -> (folder: String, name: String) {
        let url = URL(fileURLWithPath: path)
        return (url.deletingLastPathComponent().path, url.lastPathComponent)
    }
}

/// Which phase a rotation (or a migration, which is one) is in, from what can be observed: the library's page
/// progress for the copy, and the growth of the files each phase writes (the kept original in `--backup-dir`, an
/// export's temporary file beside the database, the journal of an in-place rekey).
final class RotationPhases: Sendable {
    private let path: String
    private let pageCount: Int
    private let pageSize: Int
    private let isInPlace: Bool
    private let backupCopy: FileGrowth?
    private let exportCopy: FileGrowth
    private let journal: FileGrowth
    private let observed = Mutex<(copy: BackupProgress?, furthestPhase: Int)>((nil, 0))

    /// How the phases are named: a key rotation, or a migration (the same key, another format).
    enum Wording: Sendable {
        case rotation, migration

        var copy: String {
            self == .rotation ? "writing the copy under the new key" : "writing the copy in the SQLCipher 4 format"
        }
        var verification: String {
            self == .rotation
                ? "verifying the new file (new key opens it, old key does not)"
                : "verifying the migrated file (the key opens it with SQLCipher 4 settings, not with SQLCipher 3's)"
        }
        var keptCopy: String {
            self == .rotation
                ? "keeping a copy of the original (old key)" : "keeping a copy of the original (SQLCipher 3 format)"
        }
    }

    private let wording: Wording

    init(path: String, pageSize: Int, isInPlace: Bool, backupDirectory: String?, wording: Wording = .rotation) {
        self.wording = wording
        self.path = path
        self.pageSize = pageSize
        self.isInPlace = isInPlace
        pageCount = max(1, (FileGrowth.size(path) ?? 0) / max(pageSize, 512))
        let (folder, name) = FileGrowth.split(path)
        backupCopy = backupDirectory.map { FileGrowth(newFilesIn: [($0, name + ".")], pageSize: pageSize) }
        exportCopy = FileGrowth(newFilesIn: [(folder, name + ".")], pageSize: pageSize)
        journal = FileGrowth(newFilesIn: [], sideFiles: [path + "-journal", path + "-wal"], pageSize: pageSize)
    }

    /// Called with the library's page progress (copy method).
    func record(_ progress: BackupProgress) {
        observed.withLock { $0.copy = progress }
    }

    func state() -> PhaseState {
        let copy = observed.withLock { $0.copy }
        var candidate: (rank: Int, state: PhaseState)
        if let copy {
            candidate = copy.pagesCopied < copy.pageCount
                ? (3, PhaseState(phase: wording.copy, done: copy.pagesCopied, total: copy.pageCount))
                : (4, PhaseState(phase: wording.verification))
        } else if let pages = exportCopy.pagesWritten(), pages > 0 {
            candidate = (3, PhaseState(
                phase: wording.copy + " (export)", done: pages, total: pageCount, isEstimate: true))
        } else if isInPlace, let pages = journal.pagesWritten(bytesPerPage: pageSize + 8), pages > 0 {
            candidate = (3, PhaseState(
                phase: "rekeying in place", done: pages, total: pageCount, isEstimate: true))
        } else if let backupCopy, let pages = backupCopy.pagesWritten(), pages > 0 {
            candidate = (2, PhaseState(
                phase: wording.keptCopy, done: pages, total: pageCount, isEstimate: true))
        } else {
            candidate = (1, PhaseState(phase: "checking the current key and taking the lock"))
        }
        let furthest = observed.withLock { value in
            value.furthestPhase = max(value.furthestPhase, candidate.rank)
            return value.furthestPhase
        }
        if candidate.rank < furthest {
            // A later phase's file is gone again: that phase ended, the final checks run.
            return PhaseState(phase: wording.verification)
        }
        return candidate.state
    }
}
