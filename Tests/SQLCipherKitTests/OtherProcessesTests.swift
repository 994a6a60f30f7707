import Foundation
@testable import SQLCipherKit
import Testing

/// A process that holds a file open until its standard input ends, then closes the file and stays alive.
private final class BriefHolder {
    let process = Process()
    let input = Pipe()

    init(path: String) throws {
        // The shell holds the file as descriptor 3 until its input ends, then closes it and becomes `sleep`.
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", #"exec 3<"$1"; while read -r _; do :; done; exec 3<&-; exec sleep 120"#, "sh", path]
        process.standardInput = input
        try process.run()
    }

    func holds(_ path: String) -> Bool {
        let folder = "/proc/\(process.processIdentifier)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\($0)")) == path }
    }

    /// Waits (at most 60 s, to turn a hang into a failure) until `condition` holds.
    func wait(until condition: () -> Bool) -> Bool {
        for _ in 0..<6_000 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    /// Kills it. Not `waitUntilExit()`: with the suite's other children around, Foundation could miss this one's
    /// exit and wait for ever; Foundation reaps it.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
    }
}

@Suite("Other processes holding a database", .enabled(if: OtherProcesses.canFindHolders, "needs Linux's /proc"))
struct OtherProcessesTests {
    @Test("a process that keeps the file open is a holder; one that lets go before the second look is not")
    func onlyLastingHolders() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("held.db")
        try Connection(path: path, key: TestKeys.raw).execute("CREATE TABLE t(x)")

        let lasting = try BriefHolder(path: path)
        defer { lasting.stop() }
        #expect(lasting.wait { lasting.holds(path) })
        #expect(OtherProcesses.holding(paths: [path], beforeRecheck: {}) == [lasting.process.processIdentifier])

        // Seen at the first look, gone at the second: a child between fork and exec looks like this.
        let brief = try BriefHolder(path: path)
        defer { brief.stop() }
        #expect(brief.wait { brief.holds(path) })
        var rechecks = 0
        let holders = OtherProcesses.holding(paths: [path]) {
            rechecks += 1
            if rechecks == 1 {
                try? brief.input.fileHandleForWriting.close()
                #expect(brief.wait { !brief.holds(path) })
            }
        }
        #expect(rechecks == 2)
        #expect(holders == [lasting.process.processIdentifier])
    }
}
