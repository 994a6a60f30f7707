import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The pid of a process that has exited (a child started and waited for), for "left by a killed run" files.
public func deadProcessID() throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    try process.run()
    process.waitUntilExit()
    return process.processIdentifier
}

/// The processes whose parent is `pid` (from /proc; empty elsewhere).
public func childProcesses(of pid: Int32) -> [Int32] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    return entries.compactMap { name -> Int32? in
        guard let candidate = Int32(name),
              let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        // "pid (command) state ppid …": the command may hold spaces and parentheses, so read after the last ')'.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, Int32(fields[1]) == pid else { return nil }
        return candidate
    }
}
