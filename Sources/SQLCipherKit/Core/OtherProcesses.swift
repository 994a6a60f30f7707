#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds other processes that have a file open, by reading `/proc/*/fd` (Linux). Elsewhere, or where `/proc` is not
/// readable, it finds nothing: the caller's documentation says to stop other users of the database first.
package enum OtherProcesses {
    /// Whether ``holding(paths:)`` can see other processes here (Linux's `/proc`).
    #if os(Linux)
    package static let canFindHolders = true
    #else
    package static let canFindHolders = false
    #endif

    /// The IDs of processes other than this one with any of the files open.
    ///
    /// A process seen holding a file is looked at again after 0.1 s and 0.3 s, and counts only if it still holds it:
    /// a child this process (or another holder) is starting has copies of every descriptor between `fork` and
    /// `exec`, where SQLite's close-on-exec descriptors close. Seen once, such a child made a rotation refuse a
    /// database nobody else used.
    ///
    /// - Parameter beforeRecheck: Runs instead of each pause (for tests).
    package static func holding(paths: [String], beforeRecheck: (() -> Void)? = nil) -> [Int32] {
        holding(files: Set(paths.compactMap { OpenFiles.fileID(path: $0) }), beforeRecheck: beforeRecheck)
    }

    /// The IDs of processes other than this one with any of the files open, by device and inode (a file that has no
    /// name any more included).
    static func holding(files targets: Set<OpenFiles.FileID>, beforeRecheck: (() -> Void)? = nil) -> [Int32] {
        #if os(Linux)
        guard !targets.isEmpty else { return [] }
        var holders = scan(targets)
        for pause in [100_000, 200_000] as [useconds_t] where !holders.isEmpty {
            if let beforeRecheck { beforeRecheck() } else { usleep(pause) }
            holders = holders.filter { processHolds(pid: $0, targets: targets) }
        }
        return holders
        #else
        return []
        #endif
    }

    #if os(Linux)
    /// One pass over `/proc`.
    private static func scan(_ targets: Set<OpenFiles.FileID>) -> [Int32] {
        guard let names = directoryEntries(of: "/proc") else { return [] }
        let ownPID = getpid()
        var holders: [Int32] = []
        for name in names {
            guard let pid = Int32(name), pid != ownPID else { continue }
            if processHolds(pid: pid, targets: targets) {
                holders.append(pid)
            }
        }
        return holders.sorted()
    }
    #endif

    #if os(Linux)
    private static func processHolds(pid: Int32, targets: Set<OpenFiles.FileID>) -> Bool {
        let folder = "/proc/\(pid)/fd"
        for name in directoryEntries(of: folder) ?? [] {
            guard Int(name) != nil, let id = OpenFiles.fileID(path: "\(folder)/\(name)") else { continue }
            if targets.contains(id) { return true }
        }
        return false
    }
    #endif
}
