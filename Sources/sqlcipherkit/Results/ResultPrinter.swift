import SQLCipherKit

/// Prints the rows of one statement after another in a ``ResultStyle``: `begin` with the column names, `add` each
/// row, `end`. List, CSV, JSON and line modes stream; table, box and column keep the statement's rows until `end` to
/// size the columns.
final class ResultPrinter {
    private let style: ResultStyle
    private let sink: any TextSink
    private var columns: [String] = []
    private var rowCount = 0
    private var gridRows: [[String]] = []
    /// Column mode's rows, `nil` for NULL.
    private var columnRows: [[String?]] = []

    init(style: ResultStyle, sink: any TextSink) {
        self.style = style
        self.sink = sink
    }

    func begin(columns: [String]) {
        self.columns = columns
        rowCount = 0
        gridRows = []
        columnRows = []
    }

    func add(_ values: [DatabaseValue]) throws {
        defer { rowCount += 1 }
        switch style.mode {
        case .list:
            let (separator, end) = (style.effectiveColumnSeparator, style.effectiveRowSeparator)
            if rowCount == 0 && style.showsHeader {
                try sink.write(columns.map(ValueText.escaped).joined(separator: separator) + end)
            }
            try sink.write(values.map { ValueText.list($0, nullValue: style.nullValue) }.joined(separator: separator) + end)
        case .csv:
            let (separator, end) = (style.effectiveColumnSeparator, style.effectiveRowSeparator)
            if rowCount == 0 && style.showsHeader {
                try sink.write(columns.map { ValueText.csvField($0, separator: separator) }.joined(separator: separator) + end)
            }
            try sink.write(values.map { ValueText.csv($0, separator: separator) }.joined(separator: separator) + end)
        case .json:
            let members = zip(columns, values).map { ValueText.jsonString($0) + ":" + ValueText.json($1) }
            try sink.write((rowCount == 0 ? "[" : ",\n") + "{" + members.joined(separator: ",") + "}")
        case .line:
            let width = columns.map(\.count).max() ?? 0
            var lines = rowCount == 0 ? "" : "\n"
            for (name, value) in zip(columns, values) {
                let shownName = ValueText.escaped(name)
                lines += String(repeating: " ", count: max(0, width - shownName.count)) + shownName + " = "
                    + ValueText.list(value, nullValue: style.nullValue) + "\n"
            }
            try sink.write(lines)
        case .table, .box:
            gridRows.append(values.map { ValueText.list($0, nullValue: style.nullValue) })
        case .column:
            // NULL is kept apart: it prints as the null text, never wrapped (as in sqlite3).
            columnRows.append(values.map { $0.isNull ? nil : ValueText.list($0, nullValue: "") })
        }
    }

    /// Ends the statement's output (closes the JSON array, draws the grid) and flushes the sink.
    func end() throws {
        switch style.mode {
        case .json where rowCount > 0:
            try sink.write("]\n")
        case .table where rowCount > 0, .box where rowCount > 0:
            try sink.write(Grid(header: columns.map(ValueText.escaped), rows: gridRows).text(boxed: style.mode == .box))
        case .column where rowCount > 0:
            let layout = ColumnLayout(
                header: columns.map(ValueText.escaped), rows: columnRows, widths: style.columnWidths,
                nullValue: style.nullValue)
            try sink.write(layout.text(showsHeader: style.showsHeader))
        default:
            break
        }
        gridRows = []
        columnRows = []
        try sink.flush()
    }
}

/// The grid of table and box modes: every cell is already one line of text (``ValueText/list(_:nullValue:)``).
struct Grid {
    let header: [String]
    let rows: [[String]]

    private struct Lines {
        let top: (String, String, String)
        let middle: (String, String, String)
        let bottom: (String, String, String)
        let horizontal: String
        let vertical: String
    }

    private static let ascii = Lines(
        top: ("+", "+", "+"), middle: ("+", "+", "+"), bottom: ("+", "+", "+"), horizontal: "-", vertical: "|")
    private static let box = Lines(
        top: ("┌", "┬", "┐"), middle: ("├", "┼", "┤"), bottom: ("└", "┴", "┘"), horizontal: "─", vertical: "│")

    func text(boxed: Bool) -> String {
        let lines = boxed ? Self.box : Self.ascii
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) }
        }
        func rule(_ corners: (String, String, String)) -> String {
            corners.0 + widths.map { String(repeating: lines.horizontal, count: $0 + 2) }.joined(separator: corners.1)
                + corners.2 + "\n"
        }
        func line(_ cells: [String]) -> String {
            let padded = zip(cells, widths).map { " " + $0 + String(repeating: " ", count: $1 - $0.count) + " " }
            return lines.vertical + padded.joined(separator: lines.vertical) + lines.vertical + "\n"
        }
        var text = rule(lines.top) + line(header) + rule(lines.middle)
        for row in rows { text += line(row) }
        return text + rule(lines.bottom)
    }
}

/// Runs a script and prints the rows of each statement that returns any.
enum ScriptPrinting {
    /// Runs `sql` on `connection` (``Connection/executeScript(_:eachRow:)``: every statement through the SQL guard),
    /// printing through `printer`. The output of the statement that failed is ended first, so a JSON array is
    /// closed and a grid drawn with the rows it had.
    /// `afterEachStatement` is called when a statement has run to its end (`exec` counts them).
    static func run(
        _ sql: String, on connection: Connection, printer: ResultPrinter,
        afterEachStatement: (Statement) throws -> Void = { _ in }
    ) throws {
        var current: Statement?
        do {
            try connection.executeScript(sql, eachRow: { statement, row in
                if current !== statement {
                    if current != nil { try printer.end() }
                    current = statement
                    printer.begin(columns: statement.columnNames)
                }
                try printer.add(try row.databaseValues)
            }, afterEachStatement: afterEachStatement)
        } catch {
            if current != nil { try? printer.end() }
            throw error
        }
        if current != nil { try printer.end() }
    }
}
