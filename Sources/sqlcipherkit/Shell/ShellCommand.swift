import ArgumentParser
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sqlcipherkit shell`: an interactive SQL shell on one ``Connection``, keyed once.
struct ShellCommand: SQLSessionCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell",
        abstract: "An interactive SQL shell on an encrypted database, keyed once.",
        discussion: CipherOptions.withFoldedNote("""
            The key comes from --key-file or --key-env, or is asked without echo; never from an argument, never \
            in SQL (PRAGMA key and every cipher PRAGMA are refused, as in exec). A statement ends with a \
            semicolon and may span lines. Lines that start with a dot are commands; .help lists them: .tables, \
            .schema, .indexes, .dump, .import [--csv] [--skip N] FILE TABLE (CSV), \
            .mode list|csv|json|table|box|line|column, .headers, .nullvalue, .separator, .width, .show, \
            .output FILE and .once FILE (created with mode 0600, never through a symbolic link), .read FILE, \
            .timer, .quit. The modes print as exec's: list (the default) one line per row, tab-separated, a tab \
            or newline in a value escaped, NULL as \\N; csv per RFC 4180; json one array of objects per \
            statement; table, box, line and column (as sqlite3's, .width sets its widths) to read at a terminal. \
            .backup, .open and the other sqlite3 commands that are not here say what to use instead.

            On a terminal: line editing (arrows, Home/End, Ctrl-A/E/B/F/U/K/W/L), up and down through the \
            statements typed, kept in memory only (there is no history file; a statement that holds key \
            material, such as ATTACH ... KEY, is not kept), Ctrl-C to drop the line or interrupt the running \
            statement, Ctrl-D on an empty line to leave. An error is printed and the shell goes on.

            Not on a terminal (a script on standard input): no prompt; the first error stops the shell with the \
            error's exit status, like sqlite3 -bail, and what came before it stays done. A NUL byte, or bytes \
            that are not UTF-8, in a line is an error.

            .dump, .output FILE and .once FILE write UNENCRYPTED text (as decrypt does): they are refused unless \
            the shell was started with --allow-plaintext, which also lets the SQL ATTACH a database without a \
            key. Results on standard output need nothing.

            Examples:
              sqlcipherkit shell notes.db --key-file notes.key
              sqlcipherkit shell notes.db --key-file notes.key < report.sql
              sqlcipherkit shell notes.db --key-env NOTES_KEY --mode box
            """)
    )

    @Argument(help: ArgumentHelp("The database.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key")
    var key: ShellKeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @Flag(help: "Open a plaintext (unencrypted) database, without a key.")
    var plaintext = false

    @Flag(help: "Create the database (mode 0600) when it does not exist.")
    var create = false

    @Flag(help: "Allow what writes plaintext: .dump, .output FILE, .once FILE, and ATTACH without a key.")
    var allowPlaintext = false

    @OptionGroup(title: "Printing (the starting .mode, .headers and .nullvalue)")
    var printing: PrintingOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    var acceptsKeyFromStandardInput: Bool { false }

    func validate() throws {
        if key.readsStandardInput {
            throw ValidationError(
                "the shell reads its statements from standard input: give the key with --key-file or --key-env, or"
                    + " type it when asked")
        }
        try validateOpening()
        try printing.validate(json: output.json)
        if output.json && Terminal.isStandardInputTerminal {
            throw ValidationError("--json needs the statements on standard input (a script), not a terminal")
        }
    }

    func run() throws {
        ErrorWording.isForShell.store(true, ordering: .relaxed)
        let isInteractive = Terminal.isStandardInputTerminal
        let connection = try openConnection()
        defer { connection.close() }
        let collected = Output.isJSON ? CollectingSink() : nil
        var style = printing.style
        // As sqlite3's `.mode column`: the header is shown unless asked for (or against).
        if style.mode == .column && !printing.header { style.showsHeader = true }
        let session = ShellSession(
            connection: connection, databasePath: database,
            filesInUse: FileAccess.filesInUse(database: database, keyFile: key.files.first),
            allowsPlaintext: allowPlaintext, style: style, headersWereChosen: printing.header,
            sink: collected ?? StandardOutputSink())
        defer { if let collected { Output.setJSONResult(ShellReport(output: collected.text)) } }
        if isInteractive {
            try runInteractive(session, connection: connection)
        } else {
            try session.run(DescriptorLines(descriptor: STDIN_FILENO, promptDescriptor: nil), stopsAtFirstError: true)
        }
        try session.finish()
    }

    private func runInteractive(_ session: ShellSession, connection: Connection) throws {
        let terminal: CInt? = isatty(STDOUT_FILENO) == 1 ? STDOUT_FILENO : isatty(STDERR_FILENO) == 1 ? STDERR_FILENO : nil
        let source: any LineSource =
            terminal.flatMap { LineEditor.isTerminalCapable ? LineEditor(input: STDIN_FILENO, output: $0) : nil }
            ?? DescriptorLines(descriptor: STDIN_FILENO, promptDescriptor: terminal ?? STDERR_FILENO)
        Output.message(
            "sqlcipherkit \(SQLCipherKitVersion.string) shell on \(database) (SQLCipher \(SQLCipher.version)). End"
                + " statements with ';'. Enter .help for the commands, .quit or Ctrl-D to leave.")
        let interrupt = StatementInterrupt(interruptHandle: connection.interruptHandle)
        session.interrupt = interrupt
        defer { interrupt?.stop() }
        try session.run(source, stopsAtFirstError: false)
    }
}

/// `shell --json`'s `result`: what the shell would have printed on standard output.
struct ShellReport: Encodable, Sendable {
    let output: String
}
