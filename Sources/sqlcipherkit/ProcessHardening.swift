import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// No core file with a key in it: an engine crash (SQLCipher 4 has a few) would otherwise write the process memory,
/// where the key and the derived key sit in hex, to disk. `main` calls this before anything else.
enum ProcessHardening {
    /// `PR_SET_DUMPABLE` and `PR_GET_DUMPABLE` from <linux/prctl.h>.
    private static let setDumpableOption: CInt = 4
    private static let getDumpableOption: CInt = 3

    /// Sets the core-file size limit to 0 (soft and hard) and, on Linux, marks the process not dumpable (which also
    /// keeps other processes of the same user from attaching to it or reading its memory through /proc).
    static func disableCoreDumps() {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        #if os(Linux)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        _ = prctl(setDumpableOption, 0)
        #else
        _ = setrlimit(RLIMIT_CORE, &limit)
        #endif
    }

    /// Unblocks SIGINT, SIGTERM, SIGHUP and SIGQUIT, whose handlers remove the temporary files in progress. A
    /// blocked signal mask is inherited through `exec`: a parent that had them blocked (Foundation's `Process`
    /// starts children so, from a thread that blocks most signals) would leave the handlers unreachable, and a
    /// supervisor's SIGTERM would do nothing until it escalated to SIGKILL, which leaves the temporary file (for
    /// `decrypt`, plaintext) on disk until the next run. `main` calls this right after installing the handlers.
    static func unblockCleanupSignals() {
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&signals, signal) }
        _ = pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    /// The core-file limits (soft, hard) and, on Linux, the dumpable flag, for the hidden `debug-process-state`.
    static func state() -> (coreSoftLimit: UInt64, coreHardLimit: UInt64, dumpable: Int?) {
        var limit = rlimit()
        #if os(Linux)
        _ = getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        let dumpable: Int? = Int(prctl(getDumpableOption, 0))
        #else
        _ = getrlimit(RLIMIT_CORE, &limit)
        let dumpable: Int? = nil
        #endif
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max), dumpable)
    }

    #if os(Linux)
    /// `prctl(2)` is variadic in C, so Swift cannot call it directly; on Linux (x86_64, arm64) calling it through a
    /// fixed-argument pointer is what every caller's machine code does anyway.
    private static func prctl(_ option: CInt, _ argument: UInt) -> CInt {
        typealias Prctl = @convention(c) (CInt, UInt, UInt, UInt, UInt) -> CInt
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "prctl") else { return -1 }
        return unsafeBitCast(symbol, to: Prctl.self)(option, argument, 0, 0, 0)
    }
    #endif
}

/// `sqlcipherkit debug-process-state` (hidden): prints what ``ProcessHardening`` set, so a test can check a real
/// process.
struct DebugProcessStateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug-process-state",
        abstract: "Print the core-dump limits and the dumpable flag of this process (for tests).",
        discussion: """
            Hidden. Shows what the CLI sets before it reads any key: core-file limit 0 and, on Linux, not dumpable.

            Example:
              sqlcipherkit debug-process-state
            """,
        shouldDisplay: false)

    func run() throws {
        let state = ProcessHardening.state()
        Output.result("core-limit: \(state.coreSoftLimit) \(state.coreHardLimit)")
        Output.result("dumpable: \(state.dumpable.map(String.init) ?? "n/a")")
    }
}
