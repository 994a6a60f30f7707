/// Column mode's text, laid out as the sqlite3 shell (3.40) lays out `.mode column`, so that what its users expect
/// (and the scripts that read it) still holds:
///
/// - a column is as wide as its widest value or name, but no wider than 60 characters, unless `.width` gives its
///   width; a negative width aligns the column to the right;
/// - a value wider than its column goes on over more lines, cut every `width` characters; when any row takes more
///   than one line, a blank line follows every row but the last;
/// - a name wider than its column is cut to the width;
/// - the header is the names, then a line of dashes; the columns are separated by two spaces and every cell,
///   the last too, is filled with spaces to its width;
/// - NULL prints as the null text, never cut.
///
/// Widths count Unicode scalars, as sqlite3 counts UTF-8 characters. Every cell is already one line of text
/// (``ValueText/list(_:nullValue:)``).
struct ColumnLayout {
    /// The widest a column grows by itself (sqlite3's `--wrap 60`, its default for column mode).
    static let wrapWidth = 60

    let header: [String]
    /// The cells, `nil` for NULL.
    let rows: [[String?]]
    /// `.width`: one width per column, in order; missing or 0 for "as wide as its values, up to 60".
    let widths: [Int]
    let nullValue: String

    func text(showsHeader: Bool) -> String {
        let columnCount = header.count
        let asked = (0..<columnCount).map { $0 < widths.count ? widths[$0] : 0 }
        let cutWidths = asked.map { $0 == 0 ? Self.wrapWidth : abs($0) }
        let names = zip(header, cutWidths).map { Self.pieces(of: $0, width: $1)[0] }
        let cells: [[[String]]] = rows.map { row in
            (0..<columnCount).map { column in
                guard column < row.count, let value = row[column] else { return [nullValue] }
                return Self.pieces(of: value, width: cutWidths[column])
            }
        }
        var columnWidths = asked.map(abs)
        for column in 0..<columnCount {
            var widest = names[column].unicodeScalars.count
            for row in cells {
                for piece in row[column] { widest = max(widest, piece.unicodeScalars.count) }
            }
            columnWidths[column] = max(columnWidths[column], widest)
        }
        let alignsRight = asked.map { $0 < 0 }
        func line(_ texts: [String]) -> String {
            (0..<columnCount).map { column in
                Self.padded(texts[column], to: columnWidths[column], right: alignsRight[column])
            }.joined(separator: "  ") + "\n"
        }
        var text = ""
        if showsHeader {
            text += line(names)
            text += columnWidths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n"
        }
        let hasLongRow = cells.contains { row in row.contains { $0.count > 1 } }
        for (index, row) in cells.enumerated() {
            let lineCount = row.map(\.count).max() ?? 1
            for lineIndex in 0..<lineCount {
                text += line(row.map { lineIndex < $0.count ? $0[lineIndex] : "" })
            }
            if hasLongRow && index < cells.count - 1 { text += "\n" }
        }
        return text
    }

    /// `text` cut every `width` scalars (at least one piece, the empty text too).
    static func pieces(of text: String, width: Int) -> [String] {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count > width, width > 0 else { return [text] }
        return stride(from: 0, to: scalars.count, by: width).map { start in
            var piece = String.UnicodeScalarView()
            piece.append(contentsOf: scalars[start..<min(start + width, scalars.count)])
            return String(piece)
        }
    }

    private static func padded(_ text: String, to width: Int, right: Bool) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.unicodeScalars.count))
        return right ? padding + text : text + padding
    }
}
