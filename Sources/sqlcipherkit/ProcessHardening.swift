import ArgumentParser
import SQLCipherKit
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

    /// The signals whose handlers remove the temporary files in progress.
    private static let cleanupSignals: [CInt] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Installs the handlers that remove the temporary files in progress on SIGINT, SIGTERM, SIGHUP and SIGQUIT,
    /// within two conventions of the process that started this one:
    /// - A signal ignored at start stays ignored: `nohup` ignores SIGHUP, and a shell ignores SIGINT and SIGQUIT
    ///   for background jobs; a handler would end the run there on a hangup the operator asked it to survive.
    /// - The four are unblocked. A blocked mask is inherited through `exec` (Foundation's `Process` starts
    ///   children from a thread that blocks most signals): the handlers would be unreachable, and a supervisor's
    ///   SIGTERM would do nothing until it escalated to SIGKILL, which leaves the temporary file (for `decrypt`,
    ///   plaintext) on disk until the next run.
    static func installSignalCleanup() {
        let ignored = cleanupSignals.filter(isIgnored)
        try? TemporaryFiles.installSignalCleanup()
        for signalNumber in ignored { _ = signal(signalNumber, SIG_IGN) }
        var signals = sigset_t()
        sigemptyset(&signals)
        for signalNumber in cleanupSignals { sigaddset(&signals, signalNumber) }
        _ = pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    private static func isIgnored(_ signalNumber: CInt) -> Bool {
        var current = sigaction()
        guard sigaction(signalNumber, nil, &current) == 0 else { return false }
        #if os(Linux)
        let handler = current.__sigaction_handler.sa_handler
        #else
        let handler = current.__sigaction_u.__sa_handler
        #endif
        return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
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
