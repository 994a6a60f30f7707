import SQLCipherKit

/// A line of the shell that starts with a dot: the command's name and its arguments, split at spaces; an argument
/// in single or double quotes may hold spaces (`.import 'my file.csv' t`).
struct DotCommand: Equatable {
    let name: String
    let arguments: [String]

    init(name: String, arguments: [String]) {
        self.name = name
        self.arguments = arguments
    }

    init(parsing line: String) throws {
        var words: [String] = []
        var characters = Substring(line.drop { $0 != "." }.dropFirst())
        while true {
            characters = characters.drop(while: \.isWhitespace)
            guard let first = characters.first else { break }
            if first == "'" || first == "\"" {
                let body = characters.dropFirst()
                guard let end = body.firstIndex(of: first) else {
                    throw CommandFailure("the quote \(first) of an argument is not closed", status: .usage)
                }
                words.append(String(body[..<end]))
                characters = body[body.index(after: end)...]
            } else {
                let end = characters.firstIndex(where: \.isWhitespace) ?? characters.endIndex
                words.append(String(characters[..<end]))
                characters = characters[end...]
            }
        }
        guard let name = words.first, !name.isEmpty else {
            throw CommandFailure("a dot alone is no command; enter .help", status: .usage)
        }
        self.init(name: name, arguments: Array(words.dropFirst()))
    }

    /// The help the shell prints for `.help`, one command per line.
    static let help = """
        .dump [TABLE]          the database (or the tables matching TABLE) as SQL text, UNENCRYPTED:
                               only when the shell was started with --allow-plaintext
        .exit, .quit           leave the shell
        .headers on|off        column names before the rows in list and csv modes
        .help                  this list
        .import [--csv] [--skip N] FILE TABLE
                               CSV records (RFC 4180) into TABLE, after skipping N of them; a missing
                               TABLE is made from the first record, the header; into an existing
                               table every record is a row (as in sqlite3)
        .indexes [TABLE]       the indexes (of the tables matching TABLE)
        .mode MODE             list, csv, json, table, box or line
        .nullvalue TEXT        what NULL prints as in list, table, box and line modes (default \\N)
        .once FILE             the next statement's results to FILE (mode 0600), UNENCRYPTED: only with
                               --allow-plaintext
        .output [FILE]         the results to FILE (mode 0600), UNENCRYPTED: only with --allow-plaintext;
                               without FILE (or with stdout) back to standard output
        .read FILE             run the statements and dot-commands of FILE
        .schema [PATTERN]      the CREATE statements (of the objects or tables matching PATTERN)
        .tables [PATTERN]      the tables and views (matching PATTERN)
        .timer on|off          print the time each input took, on standard error
        Patterns are LIKE patterns: % matches any text, _ one character, without regard to case.

        """

    /// `on` or `off` (also `yes`/`no`, `true`/`false`, `1`/`0`).
    func switchArgument() throws -> Bool {
        guard arguments.count == 1 else { throw usage("on|off") }
        switch arguments[0].lowercased() {
        case "on", "yes", "true", "1": return true
        case "off", "no", "false", "0": return false
        default: throw usage("on|off")
        }
    }

    /// The error for a command given the wrong arguments.
    func usage(_ expected: String) -> CommandFailure {
        CommandFailure("usage: .\(name) \(expected)", status: .usage)
    }
}
