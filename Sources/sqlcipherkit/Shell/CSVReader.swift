import SQLCipherKit

/// RFC 4180 records (`.import`): fields separated by commas, records by CRLF or LF; a field in double quotes may
/// hold commas, line ends and doubled quotes. A UTF-8 byte order mark at the start is skipped. Strict where a
/// lenient reader would guess: text after a closing quote, or a quote left open at the end, is an error naming the
/// line. A blank line is skipped.
enum CSVReader {
    struct Record: Equatable {
        var fields: [String]
        /// The line the record starts on, from 1.
        let line: Int
    }

    static func records(_ bytes: [UInt8], source: String) throws -> [Record] {
        let comma = UInt8(ascii: ","), quote = UInt8(ascii: "\""), cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n")
        var records: [Record] = []
        var fields: [String] = []
        var field: [UInt8] = []
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var line = 1
        var recordLine = 1
        var isQuoted = false
        var fieldStarted = false

        func endField() {
            fields.append(String(decoding: field, as: UTF8.self))
            field.removeAll(keepingCapacity: true)
            isQuoted = false
            fieldStarted = false
        }
        func endRecord() {
            endField()
            records.append(Record(fields: fields, line: recordLine))
            fields = []
        }

        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if isQuoted {
                if byte == quote {
                    if index < bytes.count && bytes[index] == quote {
                        field.append(quote)
                        index += 1
                        continue
                    }
                    // The closing quote: what follows must end the field.
                    let next = index < bytes.count ? bytes[index] : lf
                    guard next == comma || next == lf || next == cr else {
                        throw CommandFailure(
                            "\(source), line \(line): text after the closing quote of a field", kind: "invalidArgument")
                    }
                    isQuoted = false
                    fieldStarted = true
                    continue
                }
                if byte == lf { line += 1 }
                field.append(byte)
                continue
            }
            switch byte {
            case comma:
                endField()
            case cr where index < bytes.count && bytes[index] == lf:
                continue
            case lf, cr:
                // A blank line is no record.
                if !fields.isEmpty || !field.isEmpty || fieldStarted { endRecord() }
                line += 1
                recordLine = line
            case quote where field.isEmpty && !fieldStarted:
                isQuoted = true
            default:
                field.append(byte)
            }
        }
        if isQuoted {
            throw CommandFailure(
                "\(source), line \(recordLine): a quoted field is not closed at the end of the file",
                kind: "invalidArgument")
        }
        if !fields.isEmpty || !field.isEmpty || fieldStarted { endRecord() }
        return records
    }
}
