import Foundation
import SQLCipherKit

/// Another process with its own SQLCipher connection to a database: it holds locks and writes while the code under
/// test runs, as a second service or an operator's shell would.
///
/// It is python's `sqlcipher3` module (SQLCipher 4, installed by .ci/test), which opens SQLCipher 3 files with
/// `cipher_compatibility = 3`; the file-locking protocol is the same whatever the engine. The key reaches it through
/// an environment variable, never argv.
public final class PeerProcess {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    /// Whether the peer can run here (python3 with sqlcipher3).
    public static let isAvailable: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "import sqlcipher3"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = nil
        environment["LD_LIBRARY_PATH"] = nil
        probe.environment = environment
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    public static let unavailableReason = "needs python3 with sqlcipher3 (pip install sqlcipher3==0.6.4), as .ci/test installs"

    private static let script = #"""
        import os, select, sys, time, sqlcipher3
        db = sqlcipher3.connect(sys.argv[1], timeout=60, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA cipher_log_level = NONE")
        db.execute('PRAGMA key = "%s"' % os.environ["PEER_KEY"])
        if os.environ.get("PEER_COMPATIBILITY") == "3":
            db.execute("PRAGMA cipher_compatibility = 3")
        if os.environ.get("PEER_READS_FIRST") != "0":
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        print("ready", flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "lock":
                db.execute("BEGIN EXCLUSIVE")
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            elif words[0] == "unlock":
                db.execute("COMMIT")
            elif words[0] == "read":
                # Holds a read transaction (a WAL snapshot) until "end".
                db.execute("BEGIN")
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            elif words[0] == "end":
                db.execute("COMMIT")
            elif words[0] == "rekey":
                # Another process (a replica) changes the key; the new key's text is the rest of the line.
                db.execute('PRAGMA rekey = "%s"' % line.strip()[len("rekey "):])
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            elif words[0] == "insert":
                # Answers "ok", or "error MESSAGE" when the write fails.
                try:
                    db.execute("INSERT INTO \"%s\"(body) VALUES ('peer insert')" % words[1])
                except Exception as error:
                    print("error %s" % error, flush=True)
                    continue
            elif words[0] == "count":
                # Answers "count N", or "error MESSAGE" when the read fails.
                try:
                    print("count %d" % db.execute("SELECT count(*) FROM \"%s\"" % words[1]).fetchone()[0], flush=True)
                except Exception as error:
                    print("error %s" % error, flush=True)
                continue
            elif words[0] == "value":
                # Answers "value TEXT" (the first column of the first row of the rest of the line, as text), or
                # "error MESSAGE".
                try:
                    row = db.execute(line.strip()[len("value "):]).fetchone()
                    print("value %s" % (row[0] if row else "none"), flush=True)
                except Exception as error:
                    print("error %s" % error, flush=True)
                continue
            elif words[0] == "write-every":
                # Inserts a row into TABLE (default t) every N ms until a line arrives on stdin; answers with the
                # number written.
                interval = int(words[1]) / 1000.0
                table = words[2] if len(words) > 2 else "t"
                written = 0
                print("writing", flush=True)
                while not select.select([sys.stdin], [], [], 0)[0]:
                    db.execute("INSERT INTO \"%s\"(body) VALUES ('peer write')" % table)
                    written += 1
                    time.sleep(interval)
                sys.stdin.readline()
                print("wrote %d" % written, flush=True)
                continue
            elif words[0] == "quit":
                break
            print("ok", flush=True)
        """#

    /// Starts the peer on a database with a raw key (its `x'…'` text).
    ///
    /// - Parameter readsFirst: Whether the peer reads the schema before it says it is ready (`false`: it only opens
    ///   the file and keys the connection, as a client that has not run a statement yet).
    public init(database: String, rawKeyText: String, readsFirst: Bool = true) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, database]
        var environment = ProcessInfo.processInfo.environment
        // The SQLCipher 4 leg preloads libraries for this test process; python brings its own engine.
        environment["LD_PRELOAD"] = nil
        environment["LD_LIBRARY_PATH"] = nil
        environment["PEER_KEY"] = rawKeyText
        environment["PEER_READS_FIRST"] = readsFirst ? "1" : "0"
        environment["PEER_COMPATIBILITY"] = Engine.isVersion4 ? "4" : "3"
        process.environment = environment
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        try expectLine("ready")
    }

    /// Sends a command and waits for its answer (`ok`, or what the command prints).
    @discardableResult
    public func send(_ command: String, expecting answer: String = "ok") throws -> String {
        try input.fileHandleForWriting.write(contentsOf: Data((command + "\n").utf8))
        return try expectLine(answer)
    }

    /// Reads one line of the peer's output; it must start with `prefix`.
    @discardableResult
    public func expectLine(_ prefix: String) throws -> String {
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            guard let first = byte.first else { break }
            if first == UInt8(ascii: "\n") { break }
            line.append(first)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix(prefix) else {
            throw PeerError(message: "the peer process answered `\(text)` instead of `\(prefix)…`")
        }
        return text
    }

    /// Holds a read transaction (a WAL snapshot) until ``endRead()``.
    public func beginRead() throws { try send("read") }

    /// Ends the read transaction of ``beginRead()``.
    public func endRead() throws { try send("end") }

    /// Inserts one row into `table(body)` through the peer's connection: success, or the error SQLite gave it.
    public func insert(into table: String) throws -> Result<Void, PeerError> {
        let line = try send("insert \(table)", expecting: "")
        return line == "ok" ? .success(()) : .failure(PeerError(message: line))
    }

    /// The peer's process ID.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Counts the rows of `table` through the peer's connection: the count, or the error SQLite gave it.
    public func count(_ table: String) throws -> Result<Int, PeerError> {
        let line = try send("count \(table)", expecting: "")
        if line.hasPrefix("count "), let count = Int(line.dropFirst("count ".count)) { return .success(count) }
        return .failure(PeerError(message: line))
    }

    /// The first column of the first row of `sql` (one line), as text; `.failure` when the query fails.
    public func value(_ sql: String) throws -> Result<String, PeerError> {
        let answer = try send("value \(sql)", expecting: "")
        if answer.hasPrefix("value ") { return .success(String(answer.dropFirst("value ".count))) }
        return .failure(PeerError(message: answer))
    }

    /// Changes the database's key from this process (as another replica of a service would), through SQLCipher's
    /// rekey; the key text travels on the peer's standard input, never in its argv.
    public func rekey(toRawKeyText text: String) throws { try send("rekey \(text)") }

    /// Ends the peer (its connection closes with it).
    public func stop() {
        guard !isStopped.withLock({ stopped in defer { stopped = true }; return stopped }) else { return }
        if process.isRunning { try? input.fileHandleForWriting.write(contentsOf: Data("quit\n".utf8)) }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    private let isStopped = Shared(false)

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    public struct PeerError: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }
}

extension PeerProcess {
    /// Starts inserting a row into `table(body)` every `interval` milliseconds.
    public func startWriting(everyMilliseconds interval: Int, table: String = "t") throws {
        try send("write-every \(interval) \(table)", expecting: "writing")
    }

    /// Stops the writes; returns how many rows were written.
    public func stopWriting() throws -> Int {
        let line = try send("stop", expecting: "wrote ")
        return Int(line.dropFirst("wrote ".count)) ?? -1
    }
}
