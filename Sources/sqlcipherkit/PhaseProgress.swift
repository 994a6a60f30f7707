import Foundation
import SQLCipherKit
import Synchronization

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

/// Renders one progress line; pure, so tests check it without a terminal or timing.
enum ProgressLine {
    static func render(label: String, state: PhaseState, elapsedSeconds: Int) -> String {
        var line = "\(label): \(state.phase)"
        if let done = state.done, let total = state.total, total > 0 {
            let width = 20
            let fraction = min(1, max(0, Double(done) / Double(total)))
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
            // Estimates (pages derived from a file's size) are marked "~" and "(estimated)".
            line += " [\(bar)] \(state.isEstimate ? "~" : "")\(min(done, total))/\(total) \(state.unit) \(Int(fraction * 100))%"
                + (state.isEstimate ? " (estimated)" : "")
        } else {
            line += "…"
        }
        return line + " \(elapsedSeconds) s"
    }
}

/// A status line on standard error, redrawn four times a second by a thread of its own while a step runs that
/// reports nothing itself (an export, a rekey, a verification). Drawn only on a terminal and never with `--json`.
final class PhaseProgress: Sendable {
    private let label: String
    private let capture: OutputCapture?
    private let isEnabled: Bool
    private let state: @Sendable () -> PhaseState
    private let running = Mutex<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)

    /// - Parameter state: Called on the ticker thread at every redraw.
    init(label: String, state: @escaping @Sendable () -> PhaseState) {
        self.label = label
        self.state = state
        capture = Output.capture
        isEnabled = Output.showsProgress
    }

    /// Runs `body` with the line drawn (at once, then every 250 ms) and ended afterwards.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        guard isEnabled else { return try body() }
        let start = ContinuousClock.now
        draw(start: start)
        running.withLock { $0 = true }
        let thread = Thread { [self] in
            while running.withLock({ $0 }) {
                Thread.sleep(forTimeInterval: 0.25)
                if running.withLock({ $0 }) { draw(start: start) }
            }
            stopped.signal()
        }
        thread.start()
        defer {
            running.withLock { $0 = false }
            stopped.wait()
            draw(start: start)
            Output.write("\n", toStandardError: true, capture: capture)
        }
        return try body()
    }

    private func draw(start: ContinuousClock.Instant) {
        let elapsed = Int((ContinuousClock.now - start).components.seconds)
        let line = ProgressLine.render(label: label, state: state(), elapsedSeconds: elapsed)
        Output.write("\r\u{1B}[K" + line, toStandardError: true, capture: capture)
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

    init(path: String, pageSize: Int, isInPlace: Bool, backupDirectory: String?) {
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
                ? (3, PhaseState(phase: "writing the copy under the new key", done: copy.pagesCopied,
                                 total: copy.pageCount))
                : (4, PhaseState(phase: "verifying the new file (new key opens it, old key does not)"))
        } else if let pages = exportCopy.pagesWritten(), pages > 0 {
            candidate = (3, PhaseState(
                phase: "writing the copy under the new key (export)", done: pages, total: pageCount, isEstimate: true))
        } else if isInPlace, let pages = journal.pagesWritten(bytesPerPage: pageSize + 8), pages > 0 {
            candidate = (3, PhaseState(
                phase: "rekeying in place", done: pages, total: pageCount, isEstimate: true))
        } else if let backupCopy, let pages = backupCopy.pagesWritten(), pages > 0 {
            candidate = (2, PhaseState(
                phase: "keeping a copy of the original (old key)", done: pages, total: pageCount, isEstimate: true))
        } else {
            candidate = (1, PhaseState(phase: "checking the current key and taking the lock"))
        }
        let furthest = observed.withLock { value in
            value.furthestPhase = max(value.furthestPhase, candidate.rank)
            return value.furthestPhase
        }
        if candidate.rank < furthest {
            // A later phase's file is gone again: that phase ended, the final checks run.
            return PhaseState(phase: "verifying the new file (new key opens it, old key does not)")
        }
        return candidate.state
    }
}
