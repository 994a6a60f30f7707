import Foundation
import SQLCipherKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A PID namespace of its own (`unshare --pid --fork --mount-proc`), as another container sharing a volume has: the
/// pids of its processes mean nothing here, and a pid in a file name may belong to no process, or to another one.
enum OtherPIDNamespace {
    /// Whether this process may make one (root, and unshare(1) allowed by the container or sandbox).
    static let isAvailable: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["--pid", "--fork", "--mount-proc", "/bin/true"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    static let unavailableReason: Comment =
        "needs a second PID namespace: /usr/bin/unshare --pid --fork --mount-proc as root (not permitted here)"

    /// Runs a command in a new namespace under a shell that stays its first process (so the command is not pid 1,
    /// which the kernel treats apart); `--kill-child` ends the namespace when unshare itself is killed.
    static let launcher = [
        "/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "/bin/sh", "-c", "\"$@\"; exit $?", "sh",
    ]

    /// A pid number no process has in this namespace, to be given to a process in the other one: a file named after
    /// it looks, from here, like the file of a process that is gone.
    static func pidFreeHere() throws -> Int32 {
        let maximum = Int32(
            (try String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8))
                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 32768
        var candidate = maximum / 2
        while candidate > 300 {
            if kill(candidate, 0) != 0 && errno == ESRCH { return candidate }
            candidate -= 1
        }
        throw HolderError(message: "no free pid number below \(maximum / 2)")
    }

    /// The python interpreter itself (not a wrapper such as a pyenv shim, which would start processes of its own and
    /// so take the pid chosen for the holder).
    static let python: String = {
        let probe = Process()
        let output = Pipe()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "import sys; print(sys.executable)"]
        probe.standardOutput = output
        guard (try? probe.run()) != nil else { return "/usr/bin/python3" }
        let path = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        probe.waitUntilExit()
        return path.trimmingCharacters(in: .whitespacesAndNewlines)
    }()

    struct HolderError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}

/// A process in another PID namespace that makes a temporary file beside a database exactly as SQLCipherKit does
/// (`<database>.sqlcipherkit-tmp-<its pid>-<random>`, `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, an exclusive
/// `flock` on it for as long as it lives), writes a partial copy and a `-journal` beside it, says `ready` and waits.
/// Its pid there is chosen to be one no process has here.
final class TemporaryFileHolder {
    private let unshare = Process()
    private let input = Pipe()
    private let output = Pipe()
    /// The temporary file.
    let path: String
    /// The holder's pid in its own namespace (the one in the file name).
    let pidInItsNamespace: Int32

    private static let script = #"""
        import fcntl, os, sys
        path = "%s.sqlcipherkit-tmp-%d-%s" % (sys.argv[1], os.getpid(), os.urandom(8).hex())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, bytes(range(256)) * 64)
        journal = os.open(path + "-journal", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.write(journal, b"the copy's journal" * 32)
        os.close(journal)
        print("ready %s %d" % (path, os.getpid()), flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
        os.unlink(path + "-journal")
        os.unlink(path)
        print("done", flush=True)
        """#

    /// Starts the holder beside `database` and waits for its `ready` line (a hang fails after 60 s or more: the pipe
    /// closes when the holder dies).
    init(beside database: String) throws {
        let pid = try OtherPIDNamespace.pidFreeHere()
        unshare.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        unshare.arguments = [
            "--pid", "--fork", "--mount-proc", "--kill-child", "/bin/sh", "-c",
            // The namespace's next pid is chosen, then python is started (not exec'd: the shell stays pid 1).
            "echo \(pid - 1) > /proc/sys/kernel/ns_last_pid && \"$0\" -c \"$1\" \"$2\"; exit $?",
            OtherPIDNamespace.python, Self.script, database,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = nil
        environment["LD_LIBRARY_PATH"] = nil
        unshare.environment = environment
        unshare.standardInput = input
        unshare.standardOutput = output
        try unshare.run()
        let words = try Self.readLine(output).split(separator: " ")
        guard words.count == 3, words[0] == "ready", let holderPID = Int32(words[2]) else {
            throw OtherPIDNamespace.HolderError(message: "the holder said `\(words.joined(separator: " "))`")
        }
        path = String(words[1])
        pidInItsNamespace = holderPID
    }

    /// The holder's files (the temporary file and its journal) with their bytes.
    func files() throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in [path, path + "-journal"] where FileManager.default.fileExists(atPath: name) {
            files[name] = try fileBytes(name)
        }
        return files
    }

    /// Lets the holder remove its files and end.
    func finish() throws {
        input.fileHandleForWriting.write(Data("quit\n".utf8))
        _ = try Self.readLine(output)
        unshare.waitUntilExit()
    }

    /// Kills the holder with SIGKILL (nothing of it runs again) and waits until it is gone: its shell, the
    /// namespace's first process, waits for it, and unshare for the shell, so once unshare has exited the holder's
    /// descriptors (and its lock) are closed.
    func kill() {
        for shell in childProcesses(of: unshare.processIdentifier) {
            for holder in childProcesses(of: shell) { Glibc.kill(holder, SIGKILL) }
        }
        unshare.waitUntilExit()
    }

    deinit {
        if unshare.isRunning {
            kill()
        }
    }

    private static func readLine(_ pipe: Pipe) throws -> String {
        var line = Data()
        while true {
            let byte = pipe.fileHandleForReading.readData(ofLength: 1)
            guard let first = byte.first, first != UInt8(ascii: "\n") else { break }
            line.append(first)
        }
        return String(decoding: line, as: UTF8.self)
    }
}
