import ArgumentParser

/// How rows are printed: `exec --mode` and the shell's `.mode`.
enum ResultMode: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// One line per row, values separated by tabs and escaped so that a row is always one line (the default).
    case list
    /// RFC 4180: comma-separated, quoted where needed, CRLF line ends; NULL is an empty field, '' is `""`.
    case csv
    /// One JSON array of objects per statement, SQL types kept.
    case json
    /// An ASCII grid with a header row.
    case table
    /// The same grid drawn with box-drawing characters.
    case box
    /// One `column = value` line per column, a blank line between rows.
    case line
    /// Aligned columns separated by two spaces, as the sqlite3 shell's `.mode column` (its 3.40 layout): with the
    /// header, the column names and a line of dashes; a value wider than its column's width goes on over more lines.
    case column

    /// Whether the header is part of the mode, whatever `--header`/`.headers` say.
    var alwaysShowsColumnNames: Bool {
        switch self {
        case .list, .csv, .column: false
        case .json, .table, .box, .line: true
        }
    }
}

/// The options of the printing: the mode, whether list and CSV print the column names first, and NULL's text in the
/// modes that print text.
struct ResultStyle: Sendable {
    /// What NULL prints as in list, table, box, line and column modes when nothing else is asked for: no value escaped by
    /// ``ValueText/escaped(_:)`` can be it, so NULL and the text 'NULL' differ.
    static let defaultNullValue = #"\N"#

    var mode: ResultMode = .list
    var showsHeader = false
    var nullValue = ResultStyle.defaultNullValue
    /// The shell's `.separator`: between the values of list and csv modes (`nil`: a tab, a comma).
    var columnSeparator: String?
    /// The shell's `.separator`: after each row of list and csv modes (`nil`: a newline, CRLF).
    var rowSeparator: String?
    /// The shell's `.width`: the widths of column mode's columns, in order (0: as wide as the values, up to 60; a
    /// negative width aligns to the right).
    var columnWidths: [Int] = []

    /// The separator between values in `mode`.
    var effectiveColumnSeparator: String {
        columnSeparator ?? (mode == .csv ? "," : "\t")
    }

    /// The separator after each row in `mode`.
    var effectiveRowSeparator: String {
        rowSeparator ?? (mode == .csv ? "\r\n" : "\n")
    }
}
