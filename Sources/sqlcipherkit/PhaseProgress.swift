import ArgumentParser
import Foundation
import SQLCipherKit
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
            "auto: a bar on a terminal (never wider than it), nothing otherwise; tty: the bar anyway; plain:"
                + " timestamped lines for logs (each phase's start and final figure, and every"
                + " \(PhaseProgress.plainInterval) s with done/total and an ETA); none.",
            valueName: "mode"))
    var progress: ProgressMode = .auto
}

/// Renders progress; pure (the time and the terminal's width are parameters), so tests check it without a terminal
/// or timing.
enum ProgressLine {
    /// The terminal width assumed when none is known.
    static let defaultWidth = 80

    /// The bar and counts of a measured or estimated phase, or the phase alone, in at most `width - 1` columns: a
    /// line as wide as the terminal wraps, and every redraw would leave a line behind. What gives way first: the bar,
    /// then the ETA, then the time so far, then the middle of the label (the path), then the end of the phase's name.
    static func render(
        label: String, state: PhaseState, elapsedSeconds: Int, etaSeconds: Int? = nil, width: Int = defaultWidth
    ) -> String {
        let limit = max(1, width - 1)
        // The label holds a path: no control character reaches the terminal.
        var label = ValueText.escaped(label)
        let measured: (done: Int, total: Int)? = state.done.flatMap { done in
            state.total.flatMap { $0 > 0 ? (done, $0) : nil }
        }
        // A phase without counts ends with `…` (going on); cut short, it keeps one.
        var phase = ValueText.escaped(state.phase) + (measured == nil ? "…" : "")
        func tail(bar: Bool, showsETA: Bool, showsTime: Bool = true) -> String {
            let time = showsTime ? " \(elapsedSeconds) s" : ""
            guard let measured else { return time }
            var text = ""
            if bar {
                let barWidth = 20
                let filled = Int(shownFraction(state) * Double(barWidth))
                text += " [" + String(repeating: "#", count: filled)
                    + String(repeating: " ", count: barWidth - filled) + "]"
            }
            text += " " + counts(state, done: measured.done, total: measured.total) + time
            return text + (showsETA && showsTime ? eta(etaSeconds) : "")
        }
        for (bar, showsETA, showsTime) in [(true, true, true), (false, true, true), (false, false, true),
                                           (false, false, false)] {
            let line = "\(label): \(phase)" + tail(bar: bar, showsETA: showsETA, showsTime: showsTime)
            if DisplayWidth.of(line) <= limit { return line }
        }
        let rest = tail(bar: false, showsETA: false, showsTime: false)
        let room = limit - DisplayWidth.of(": " + rest)
        let phaseWidth = DisplayWidth.of(phase)
        if room - phaseWidth >= min(DisplayWidth.of(label), 16) {
            label = DisplayWidth.truncatingMiddle(label, to: room - phaseWidth)
        } else {
            label = DisplayWidth.truncatingMiddle(label, to: min(DisplayWidth.of(label), max(room / 3, 1)))
            phase = DisplayWidth.truncatingEnd(phase, to: max(room - DisplayWidth.of(label), 1))
        }
        return DisplayWidth.truncatingEnd("\(label): \(phase)" + rest, to: limit)
    }

    /// A `--progress plain` line: UTC time, label, phase, counts and ETA when measured, time in the command so far.
    static func plain(
        label: String, state: PhaseState, elapsedSeconds: Int, etaSeconds: Int?, now: Date
    ) -> String {
        "\(timestamp(now)) \(plainBody(label: label, state: state, etaSeconds: etaSeconds)) (\(elapsedSeconds) s)"
    }

    /// A plain line without its times: what is compared to leave out a line that would say nothing new.
    static func plainBody(label: String, state: PhaseState, etaSeconds: Int?) -> String {
        var line = "\(ValueText.escaped(label)): \(ValueText.escaped(state.phase))"
        if let done = state.done, let total = state.total, total > 0 {
            line += " " + counts(state, done: done, total: total) + eta(etaSeconds)
        }
        return line
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

/// How many terminal columns text takes: East Asian wide and fullwidth characters and emoji take two, combining marks
/// and zero-width characters none, anything else one. Errs wide, never narrow: a line that fits by this count fits.
enum DisplayWidth {
    static func of(_ text: String) -> Int {
        text.reduce(0) { $0 + of($1) }
    }

    static func of(_ character: Character) -> Int {
        var width = 0
        for scalar in character.unicodeScalars {
            width += of(scalar)
        }
        return character.unicodeScalars.count > 1 ? max(width, 1) : width
    }

    static func of(_ scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if value < 0x20 || (0x7F..<0xA0).contains(value) { return 0 }
        let wide: [ClosedRange<UInt32>] = [
            0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0...0x23F3, 0x25FD...0x25FE,
            0x2614...0x2615, 0x2648...0x2653, 0x26A1...0x26A1, 0x26AA...0x26AB, 0x26BD...0x26BE, 0x26C4...0x26C5,
            0x26CE...0x26CE, 0x26D4...0x26D4, 0x26EA...0x26EA, 0x26F2...0x26F5, 0x26FA...0x26FD, 0x2705...0x2705,
            0x270A...0x270B, 0x2728...0x2728, 0x274C...0x274C, 0x2753...0x2757, 0x2795...0x2797, 0x27B0...0x27B0,
            0x27BF...0x27BF, 0x2B1B...0x2B1C, 0x2B50...0x2B50, 0x2B55...0x2B55, 0x2E80...0x303E, 0x3041...0x33FF,
            0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF, 0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF,
            0xFE10...0xFE19, 0xFE30...0xFE6F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x18CFF, 0x1B000...0x1B2FF,
            0x1F004...0x1F004, 0x1F0CF...0x1F0CF, 0x1F18E...0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F2FF,
            0x1F300...0x1F64F, 0x1F680...0x1F6FF, 0x1F7E0...0x1F7EB, 0x1F90C...0x1F9FF, 0x1FA70...0x1FAFF,
            0x20000...0x3FFFD,
        ]
        return wide.contains { $0.contains(value) } ? 2 : 1
    }

    /// `text` cut to `width` columns, ending with `…` when cut.
    static func truncatingEnd(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        var result = ""
        var used = 0
        for character in text {
            let next = of(character)
            if used + next > width - 1 { break }
            result.append(character)
            used += next
        }
        return result + "…"
    }

    /// `text` cut to `width` columns by taking out its middle (a path keeps its start and its file name).
    static func truncatingMiddle(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        guard width > 2 else { return truncatingEnd(text, to: width) }
        let characters = Array(text)
        var head = "", tail = ""
        var headWidth = 0, tailWidth = 0
        var front = 0, back = characters.count - 1
        // Alternate, the end first: the file name says more than the folders before it.
        var takesBack = true
        while front <= back {
            let character = takesBack ? characters[back] : characters[front]
            let next = of(character)
            if headWidth + tailWidth + next > width - 1 { break }
            if takesBack {
                tail = String(character) + tail
                tailWidth += next
                back -= 1
            } else {
                head.append(character)
                headWidth += next
                front += 1
            }
            takesBack.toggle()
        }
        return head + "…" + tail
    }
}

/// The width of the terminal on standard error: the kernel's (TIOCGWINSZ), else `COLUMNS`, else 80.
enum TerminalWidth {
    /// Tests set it: the width a run's progress is drawn for, as if its terminal had it.
    @TaskLocal static var override: Int?

    static func current() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let text = getenv("COLUMNS").map({ String(cString: $0) }), let columns = Int(text), columns > 0 {
            return columns
        }
        return ProgressLine.defaultWidth
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
    private let running = Locked<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let drawing = Locked(Drawing())
    /// The terminal width to draw for (the bar): a test's, or the terminal's, asked at every redraw (it may change).
    private let width: @Sendable () -> Int

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
        if let fixed = TerminalWidth.override {
            width = { fixed }
        } else {
            width = { TerminalWidth.current() }
        }
    }

    /// Runs `body` with progress shown (at once, then every 250 ms and at every ``update()``) and ended afterwards:
    /// `done` when `body` returns a value `isSuccess` accepts, `stopped` when it throws or returns a failure (a
    /// rotation reports a failed database as a value).
    func run<T>(isSuccess: (T) -> Bool = { _ in true }, _ body: () throws -> T) rethrows -> T {
        if let interruptNote, capture == nil {
            TemporaryFiles.setInterruptNote((style == .bar ? "\n" : "") + "interrupted: " + interruptNote + "\n")
        }
        defer { if interruptNote != nil, capture == nil { TemporaryFiles.setInterruptNote(nil) } }
        guard style != .off else { return try body() }
        drawing.withLock { $0 = Drawing() }
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
        succeeded = isSuccess(value)
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

    /// What has been drawn: the clock of the phase shown, and for `--progress plain` the phase of the lines written,
    /// the last line written without its times, and the newest line of the phase not written yet.
    private struct Drawing {
        var clock = PhaseClock()
        var phase: String?
        var lastBody: String?
        var lastLineTime = 0.0
        var pending: String?
        var start = ContinuousClock.now
    }

    /// The text to write now, if any. `--progress plain` writes a line when a phase starts, then every
    /// ``plainInterval`` s while it says something new, and when the phase ends the newest line not yet written (its
    /// final figure: a phase shorter than the interval shows more than its 0 %). A phase is known by its name, not by
    /// how it is shown: an estimate that stalls ("finishing") and moves again is one phase, not a new line each time.
    private func nextLine(_ drawing: inout Drawing, raw: PhaseState, isFinal: Bool) -> String? {
        let elapsed = ContinuousClock.now - drawing.start
        let now = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let (shown, eta) = drawing.clock.observe(raw, now: now)
        switch style {
        case .off:
            return nil
        case .bar:
            return "\r\u{1B}[K" + ProgressLine.render(
                label: label, state: shown, elapsedSeconds: Int(now), etaSeconds: eta, width: width())
        case .lines:
            let body = ProgressLine.plainBody(label: label, state: shown, etaSeconds: eta)
            let line = ProgressLine.plain(
                label: label, state: shown, elapsedSeconds: Int(now), etaSeconds: eta, now: Date()) + "\n"
            if raw.phase != drawing.phase {
                let ended = drawing.pending ?? ""
                drawing.phase = raw.phase
                drawing.pending = nil
                drawing.lastBody = body
                drawing.lastLineTime = now
                return ended + line
            }
            guard body != drawing.lastBody else {
                drawing.pending = nil
                return nil
            }
            guard isFinal || printsEveryUpdate || now - drawing.lastLineTime >= Double(Self.plainInterval) else {
                drawing.pending = line
                return nil
            }
            drawing.pending = nil
            drawing.lastBody = body
            drawing.lastLineTime = now
            return line
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
            // The newest state first, when it says something the last line did not.
            draw(isFinal: true)
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
    private let observed = Locked<(copy: BackupProgress?, furthestPhase: Int, copyEndShown: Bool)>((nil, 0, false))

    /// What every temporary database file's name holds after the database's name (the library's
    /// `<name>.sqlcipherkit-tmp-<pid>-<random>`).
    static let temporaryMarker = ".sqlcipherkit-tmp-"

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
        // The export writes `<name>.sqlcipherkit-tmp-…` beside the database; the kept original is
        // `<name>.<time>-<random>.before-rotation` (first under a temporary name of its own). With --backup-dir the
        // database's own folder, both are in one folder: only the export's prefix tells them apart.
        backupCopy = backupDirectory.map { FileGrowth(newFilesIn: [($0, name + ".")], pageSize: pageSize) }
        exportCopy = FileGrowth(newFilesIn: [(folder, name + Self.temporaryMarker)], pageSize: pageSize)
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
            // The copy's last step is shown once as what it is (all pages), then the verification.
            let showsEnd = copy.pagesCopied >= copy.pageCount && observed.withLock { value in
                defer { value.copyEndShown = true }
                return !value.copyEndShown
            }
            candidate = copy.pagesCopied < copy.pageCount || showsEnd
                ? (3, PhaseState(phase: wording.copy, done: min(copy.pagesCopied, copy.pageCount), total: copy.pageCount))
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
