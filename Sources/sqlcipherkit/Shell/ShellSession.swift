import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The shell's state and loop: lines from a ``LineSource`` are gathered in a ``StatementBuffer`` until they make a
/// complete statement (as `sqlite3_complete` decides), which runs through ``ScriptPrinting`` (the SQL guard, as for
/// `exec`); a line that starts with a dot, outside a statement, is a dot-command.
final class ShellSession {
    enum Flow { case proceed, quit }

    static let prompt = "sqlcipherkit> "
    static let continuationPrompt = "        ...> "
    /// How deep `.read` files may read others (a file that reads itself stops here).
    private static let readDepthLimit = 16

    private let connection: Connection
    private let databasePath: String
    /// What `.output` must never truncate (``FileAccess/filesInUse(database:keyFile:)``).
    private let filesInUse: [String]
    private let allowsPlaintext: Bool
    private var style: ResultStyle
    /// Whether `.headers` (or `--header`) chose the header: `.mode column` then leaves it as it is, as in sqlite3.
    private var headersWereChosen: Bool
    private var showsTimer = false
    private let standardSink: any TextSink
    private var fileSink: FileSink?
    private var sink: any TextSink { fileSink ?? standardSink }
    /// After `.once FILE`: how many inputs (the `.once` itself, then the next one) before the output goes back to
    /// standard output; 0 otherwise.
    private var onceCountdown = 0
    private var readDepth = 0
    /// Ctrl-C interrupts the running statement (interactive only).
    var interrupt: StatementInterrupt?
    /// How many bytes were looked at to find where statements end (the tests count the work with it).
    private(set) var scannedByteCount = 0

    init(connection: Connection, databasePath: String, filesInUse: [String], allowsPlaintext: Bool,
         style: ResultStyle, headersWereChosen: Bool = false, sink: any TextSink) {
        self.connection = connection
        self.databasePath = databasePath
        self.filesInUse = filesInUse
        self.allowsPlaintext = allowsPlaintext
        self.style = style
        self.headersWereChosen = headersWereChosen
        standardSink = sink
    }

    /// Runs the lines of `source` until it ends or `.quit`. With `stopsAtFirstError` the first error is thrown (a
    /// script, a `.read` file); otherwise it is printed and the next line read (a terminal).
    @discardableResult
    func run(_ source: any LineSource, stopsAtFirstError: Bool) throws -> Flow {
        var statement = StatementBuffer()
        func takeStatement() -> StatementBuffer {
            defer { statement = StatementBuffer() }
            scannedByteCount += statement.scannedByteCount
            return statement
        }
        while true {
            let input = try source.readLine(prompt: statement.isEmpty ? Self.prompt : Self.continuationPrompt)
            switch input {
            case .interrupted:
                source.statementEnded(isSecret: takeStatement().holdsKeyMaterial)
            case .endOfInput:
                let last = takeStatement()
                // What is left without a final semicolon still runs, as in the sqlite3 shell.
                guard last.holdsText else { return .proceed }
                return try perform(source, stopsAtFirstError: stopsAtFirstError, isSecret: last.holdsKeyMaterial) {
                    try runSQL(last.text)
                }
            case .unreadable(let reason):
                // The statement the line belongs to is dropped: run without the line, it would be another statement.
                let dropped = takeStatement()
                let flow = try perform(source, stopsAtFirstError: stopsAtFirstError, isSecret: dropped.holdsKeyMaterial) {
                    throw CommandFailure(reason, kind: "invalidArgument")
                }
                if flow == .quit { return .quit }
            case .line(let line):
                if statement.isEmpty && line.hasPrefix(".") {
                    let flow = try perform(source, stopsAtFirstError: stopsAtFirstError) {
                        try runDotCommand(DotCommand(parsing: line))
                    }
                    if flow == .quit { return .quit }
                    continue
                }
                if statement.isEmpty && line.allSatisfy(\.isWhitespace) { continue }
                statement.append(line)
                statement.append("\n")
                guard statement.isComplete else { continue }
                let complete = takeStatement()
                let flow = try perform(source, stopsAtFirstError: stopsAtFirstError, isSecret: complete.holdsKeyMaterial) {
                    try runSQL(complete.text)
                }
                if flow == .quit { return .quit }
            }
        }
    }

    /// Flushes and closes the `.output` file, if any.
    func finish() throws {
        try standardSink.flush()
        try closeOutputFile()
    }

    /// Runs one input (a statement or a dot-command). With `isSecret` (it holds key material) its lines leave the
    /// history and its error is told without the statement or SQLite's message.
    private func perform(
        _ source: any LineSource, stopsAtFirstError: Bool, isSecret: Bool = false, _ body: () throws -> Flow
    ) throws -> Flow {
        do {
            let flow = try body()
            try sink.flush()
            source.statementEnded(isSecret: isSecret)
            try countDownOnce()
            return flow
        } catch {
            let error = isSecret ? Self.withoutKeyMaterial(error) : error
            source.statementEnded(isSecret: isSecret || Self.isRefusedKeyStatement(error))
            try? countDownOnce()
            if stopsAtFirstError { throw error }
            SQLCipherKitCommand.report(error)
            return .proceed
        }
    }

    /// A statement the guard refused as a key PRAGMA: its SQL is left out of the error, and of the history.
    private static func isRefusedKeyStatement(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == DatabaseError.SQLITE_AUTH && error.sql == nil
    }

    /// The error of a statement that holds key material, without the statement and without SQLite's message, which
    /// can quote the text near the error (`near "'secret'": syntax error`). A refusal of the guard (SQLITE_AUTH) keeps
    /// its reason, which the library words without the SQL.
    static func withoutKeyMaterial(_ error: any Error) -> any Error {
        guard let error = error as? DatabaseError else { return error }
        let reason = error.resultCode == DatabaseError.SQLITE_AUTH
            ? error.reason
            : "SQLite error \(error.extendedResultCode) in a statement that holds key material; neither the statement"
                + " nor SQLite's message is shown, since they could quote the key"
        return DatabaseError(kind: error.kind, code: error.extendedResultCode, message: reason, remedy: error.remedy)
    }

    // MARK: - SQL

    private func runSQL(_ sql: String) throws -> Flow {
        interrupt?.statementStarted()
        let start = showsTimer ? ResourceUsage.now : nil
        defer { if let start { Output.message(ResourceUsage.now.report(since: start)) } }
        try ScriptPrinting.run(sql, on: connection, printer: ResultPrinter(style: style, sink: sink))
        return .proceed
    }

    // MARK: - Dot-commands

    private func runDotCommand(_ command: DotCommand) throws -> Flow {
        let arguments = command.arguments
        func optionalPattern() throws -> String? {
            guard arguments.count <= 1 else { throw command.usage("[PATTERN]") }
            return arguments.first
        }
        switch command.name {
        case "quit", "exit":
            return .quit
        case "help":
            try sink.write(DotCommand.help)
        case "tables":
            try writeLines(SchemaListing.tables(matching: optionalPattern(), on: connection))
        case "schema":
            try writeLines(SchemaListing.schema(matching: optionalPattern(), on: connection))
        case "indexes", "indices":
            try writeLines(SchemaListing.indexes(ofTablesMatching: optionalPattern(), on: connection))
        case "dump":
            let pattern = try optionalPattern()
            try refuseWithoutPlaintextPermission(
                ".dump writes the database's content UNENCRYPTED, which anyone who can read the output can read")
            Output.message(
                "warning: .dump writes the content of \(databasePath) UNENCRYPTED to"
                    + " \(fileSink?.path ?? "standard output"); anyone who can read it can read the data")
            interrupt?.statementStarted()
            try SQLDump(connection: connection, tablePattern: pattern).write(to: sink)
        case "import":
            let request = try CSVImport.Request(parsing: command)
            interrupt?.statementStarted()
            let outcome = try CSVImport.run(request, on: connection)
            if outcome.firstRowMatchesColumnNames {
                Output.message(
                    "warning: the first record of \(request.file) holds the column names of \(request.table) and was"
                        + " imported as a row (into an existing table every record is a row, as in sqlite3);"
                        + " .import --skip 1 skips a header")
            }
        case "mode":
            guard arguments.count == 1, let mode = ResultMode(rawValue: arguments[0].lowercased()) else {
                throw command.usage(ResultMode.allCases.map(\.rawValue).joined(separator: "|"))
            }
            style.mode = mode
            style.columnSeparator = nil
            style.rowSeparator = nil
            if mode == .column && !headersWereChosen { style.showsHeader = true }
        case "headers", "header":
            style.showsHeader = try command.switchArgument()
            headersWereChosen = true
        case "nullvalue":
            guard arguments.count == 1 else { throw command.usage("TEXT") }
            style.nullValue = arguments[0]
        case "separator":
            guard (1...2).contains(arguments.count) else { throw command.usage("COLUMN [ROW]") }
            style.columnSeparator = DotCommand.unescaped(arguments[0])
            if arguments.count == 2 { style.rowSeparator = DotCommand.unescaped(arguments[1]) }
        case "width":
            style.columnWidths = try arguments.map { argument in
                guard let width = Int(argument) else { throw command.usage("[WIDTH ...] (whole numbers)") }
                return width
            }
        case "show":
            guard arguments.isEmpty else { throw command.usage("") }
            try sink.write(settings())
        case "timer":
            showsTimer = try command.switchArgument()
        case "output", "once":
            try redirectOutput(command)
        case "read":
            guard arguments.count == 1 else { throw command.usage("FILE") }
            guard readDepth < Self.readDepthLimit else {
                throw CommandFailure(".read files read each other more than \(Self.readDepthLimit) deep")
            }
            let lines = TextLines(try FileAccess.read(arguments[0], purpose: "the SQL file"), source: arguments[0])
            readDepth += 1
            defer { readDepth -= 1 }
            return try run(lines, stopsAtFirstError: true)
        default:
            if let pointer = DotCommand.pointer(for: command.name) {
                throw CommandFailure(pointer, status: .usage)
            }
            throw CommandFailure("unknown command .\(command.name); enter .help for the list", status: .usage)
        }
        return .proceed
    }

    private func writeLines(_ lines: [String]) throws {
        for line in lines { try sink.write(line + "\n") }
    }

    /// `.dump`, `.output FILE` and `.once FILE` write plaintext: only with `--allow-plaintext`.
    private func refuseWithoutPlaintextPermission(_ what: String) throws {
        guard allowsPlaintext else {
            throw CommandFailure("\(what); start the shell with --allow-plaintext to allow it", status: .usage)
        }
    }

    // MARK: - Output

    /// `.output [FILE]` and `.once FILE`. A file gets the results in plaintext: refused without `--allow-plaintext`
    /// (standard output needs nothing), created with mode 0600 (``FileAccess/openForOutput(_:protecting:)``).
    private func redirectOutput(_ command: DotCommand) throws {
        let isOnce = command.name == "once"
        let usage = isOnce ? "FILE" : "[FILE]"
        guard command.arguments.count <= 1 else { throw command.usage(usage) }
        let target = command.arguments.first
        if let target, target.hasPrefix("|") {
            throw CommandFailure(
                ".\(command.name) |COMMAND is not supported: the shell runs no other program; write to a file (with"
                    + " --allow-plaintext) and run the program on it", status: .usage)
        }
        if let target, target.hasPrefix("-") {
            throw CommandFailure(
                ".\(command.name) takes no option (-x, -e, --bom are sqlite3's); name a file starting with a dash"
                    + " as ./\(target)", status: .usage)
        }
        guard let path = target, path != "stdout" else {
            if isOnce { throw command.usage(usage) }
            try closeOutputFile()
            return
        }
        try refuseWithoutPlaintextPermission(
            ".\(command.name) FILE writes the results UNENCRYPTED to a file, which anyone who can read it can read"
                + " (results on standard output need nothing)")
        try closeOutputFile()
        fileSink = FileSink(path: path, descriptor: try FileAccess.openForOutput(path, protecting: filesInUse))
        Output.message(
            "warning: the results go UNENCRYPTED to \(path)" + (isOnce ? " (the next statement's only)" : "")
                + "; anyone who can read it can read them")
        if isOnce { onceCountdown = 2 }
    }

    /// Called after every input: the output goes back to standard output after the input that follows `.once`.
    private func countDownOnce() throws {
        guard onceCountdown > 0 else { return }
        onceCountdown -= 1
        if onceCountdown == 0 { try closeOutputFile() }
    }

    private func closeOutputFile() throws {
        onceCountdown = 0
        defer { fileSink = nil }
        try fileSink?.close()
    }

    /// `.show`: the settings, one per line, as sqlite3 prints them (names right-aligned, texts in C quotes).
    private func settings() -> String {
        let widths = style.columnWidths.map { "\($0) " }.joined()
        let lines: [(String, String)] = [
            ("headers", style.showsHeader ? "on" : "off"),
            ("mode", style.mode.rawValue),
            ("nullvalue", DotCommand.cQuoted(style.nullValue)),
            ("output", fileSink?.path ?? "stdout"),
            ("colseparator", DotCommand.cQuoted(style.effectiveColumnSeparator)),
            ("rowseparator", DotCommand.cQuoted(style.effectiveRowSeparator)),
            ("timer", showsTimer ? "on" : "off"),
            ("width", widths),
            ("filename", databasePath),
            ("plaintext", allowsPlaintext ? "allowed (--allow-plaintext)" : "refused (no --allow-plaintext)"),
        ]
        return lines.map { name, value in
            String(repeating: " ", count: max(0, 12 - name.count)) + name + ": " + value + "\n"
        }.joined()
    }
}

/// Wall-clock and CPU time, for `.timer on`.
struct ResourceUsage {
    let wallSeconds: Double
    let userSeconds: Double
    let systemSeconds: Double

    static var now: ResourceUsage {
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        var usage = rusage()
        #if os(Linux)
        _ = getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        _ = getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return ResourceUsage(
            wallSeconds: Double(clock.tv_sec) + Double(clock.tv_nsec) / 1_000_000_000,
            userSeconds: seconds(usage.ru_utime), systemSeconds: seconds(usage.ru_stime))
    }

    /// The sqlite3 shell's line: `Run Time: real 0.012 user 0.004000 sys 0.000000`.
    func report(since start: ResourceUsage) -> String {
        String(
            format: "Run Time: real %.3f user %f sys %f", wallSeconds - start.wallSeconds,
            userSeconds - start.userSeconds, systemSeconds - start.systemSeconds)
    }
}
