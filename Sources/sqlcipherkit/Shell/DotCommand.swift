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
        .headers on|off        column names before the rows in list, csv and column modes
        .help                  this list
        .import [--csv] [--skip N] FILE TABLE
                               CSV records (RFC 4180) into TABLE, after skipping N of them; a missing
                               TABLE is made from the first record, the header; into an existing
                               table every record is a row (as in sqlite3)
        .indexes [TABLE]       the indexes (of the tables matching TABLE)
        .mode MODE             list, csv, json, table, box, line or column
        .nullvalue TEXT        what NULL prints as in list, table, box, line and column modes (default \\N)
        .once FILE             the next statement's results to FILE (mode 0600), UNENCRYPTED: only with
                               --allow-plaintext
        .output [FILE]         the results to FILE (mode 0600), UNENCRYPTED: only with --allow-plaintext;
                               without FILE (or with stdout) back to standard output
        .read FILE             run the statements and dot-commands of FILE
        .schema [PATTERN]      the CREATE statements (of the objects or tables matching PATTERN)
        .separator COL [ROW]   what separates values (and rows) in list and csv modes; \\t \\n \\r \\\\ work
        .show                  the settings
        .tables [PATTERN]      the tables and views (matching PATTERN)
        .timer on|off          print the time each input took, on standard error
        .width [N ...]         column mode's widths, one per column (0: fit the values; < 0: align right)
        Patterns are LIKE patterns: % matches any text, _ one character, without regard to case.
        Not here: .backup, .save, .restore, .clone, .open (use sqlcipherkit backup, decrypt, or a new shell);
        .shell, .system, .load (the shell runs no other program or extension).

        """

    /// What to use instead of a sqlite3 command the shell does not have, or `nil`.
    static func pointer(for name: String) -> String? {
        switch name {
        case "backup", "save", "clone":
            ".\(name) is not in this shell: an encrypted copy is made by `sqlcipherkit backup DB DEST --key-file KEY`"
                + " (the same key and settings, verified), a plaintext one by `sqlcipherkit decrypt`"
        case "restore":
            ".restore is not in this shell: leave it and copy the backup over the database with `sqlcipherkit backup"
                + " BACKUP DB --key-file KEY --replace`"
        case "open":
            ".open is not in this shell, which works on the one database it was started with, keyed once: leave it"
                + " (.quit) and start `sqlcipherkit shell OTHER.db --key-file KEY`, or ATTACH 'OTHER.db' AS other (opened"
                + " with this database's key)"
        case "shell", "system", "load":
            ".\(name) is not in this shell: it runs no other program and loads no extension"
        default:
            nil
        }
    }

    /// A `.separator` argument with sqlite3's escapes: `\t`, `\n`, `\r`, `\\`, `\'`, `\"`.
    static func unescaped(_ text: String) -> String {
        guard text.contains("\\") else { return text }
        var result = ""
        var iterator = text.makeIterator()
        while let character = iterator.next() {
            guard character == "\\", let next = iterator.next() else {
                result.append(character)
                continue
            }
            switch next {
            case "t": result.append("\t")
            case "n": result.append("\n")
            case "r": result.append("\r")
            case "\\", "'", "\"": result.append(next)
            default: result.append(contentsOf: ["\\", next])
            }
        }
        return result
    }

    /// `text` in double quotes with C escapes, as sqlite3's `.show` prints a text setting.
    static func cQuoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "\t": result += "\\t"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let octal = String(scalar.value, radix: 8)
                result += "\\" + String(repeating: "0", count: 3 - octal.count) + octal
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

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
