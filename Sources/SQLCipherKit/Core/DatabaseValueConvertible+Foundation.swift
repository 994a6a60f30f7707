#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CSQLCipher

// MARK: - Data

extension Data: DatabaseValueConvertible {
    /// A BLOB value.
    public var databaseValue: DatabaseValue {
        .blob([UInt8](self))
    }

    /// A BLOB, or the UTF-8 bytes of a TEXT.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Data? {
        [UInt8].fromDatabaseValue(databaseValue).map { Data($0) }
    }

    /// Binds a BLOB from the data's bytes, without copying them into a ``DatabaseValue`` first (empty data binds an
    /// empty BLOB, not NULL).
    public func bind(to parameter: DatabaseParameter) -> ResultCode {
        withUnsafeBytes { parameter.bindBlob($0) }
    }
}

// MARK: - UUID

extension UUID: DatabaseValueConvertible {
    /// A 16-byte BLOB, the compact form that sorts and indexes well.
    public var databaseValue: DatabaseValue {
        let bytes = uuid
        return .blob([
            bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5, bytes.6, bytes.7,
            bytes.8, bytes.9, bytes.10, bytes.11, bytes.12, bytes.13, bytes.14, bytes.15,
        ])
    }

    /// A 16-byte BLOB, or TEXT in the canonical `8-4-4-4-12` hex form (either case).
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> UUID? {
        switch databaseValue {
        case .blob(let b) where b.count == 16:
            UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                        b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        case .text(let text):
            UUID(uuidString: text)
        default:
            nil
        }
    }
}

// MARK: - URL

extension URL: DatabaseValueConvertible {
    /// The absolute string as TEXT.
    public var databaseValue: DatabaseValue {
        .text(absoluteString)
    }

    /// A TEXT that parses as a URL.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> URL? {
        guard case .text(let text) = databaseValue else { return nil }
        return URL(string: text)
    }
}

// MARK: - Date

/// Dates are stored as UTC TEXT `YYYY-MM-DD HH:MM:SS.SSS`, the format SQLite's date and time functions produce and
/// understand, which also sorts chronologically. Reading accepts:
/// - TEXT `YYYY-MM-DD`, `YYYY-MM-DD HH:MM`, `YYYY-MM-DD HH:MM:SS`, `YYYY-MM-DD HH:MM:SS.SSS` (any number of
///   fraction digits), with `T` instead of the space, and an optional `Z` or `±HH:MM` suffix (UTC when absent);
/// - INTEGER or REAL: seconds since 1970-01-01 00:00:00 UTC (what `unixepoch()` gives; `strftime('%s', …)` gives
///   TEXT, so cast it: `CAST(strftime('%s', 'now') AS INTEGER)`, or store it in an INTEGER column).
///
/// Stored values have millisecond precision.
///
/// See [Date And Time Functions](https://www.sqlite.org/lang_datefunc.html).
extension Date: DatabaseValueConvertible {
    /// UTC TEXT `YYYY-MM-DD HH:MM:SS.SSS`.
    public var databaseValue: DatabaseValue {
        .text(DatabaseDateFormat.format(self))
    }

    /// See the type's documentation for the accepted forms.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Date? {
        switch databaseValue {
        case .text(let text): DatabaseDateFormat.parse(text)
        case .integer(let seconds): Date(timeIntervalSince1970: TimeInterval(seconds))
        case .real(let seconds) where seconds.isFinite: Date(timeIntervalSince1970: seconds)
        default: nil
        }
    }
}

/// Formats and parses dates without Foundation's formatters (which are slow and locale-sensitive).
enum DatabaseDateFormat {
    static func format(_ date: Date) -> String {
        let totalMilliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let (days, dayMilliseconds) = floorDivide(totalMilliseconds, 86_400_000)
        let (year, month, day) = civilFromDays(days)
        let hour = dayMilliseconds / 3_600_000
        let minute = dayMilliseconds / 60_000 % 60
        let second = dayMilliseconds / 1000 % 60
        let millisecond = dayMilliseconds % 1000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2)) "
            + "\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(millisecond, 3))"
    }

    static func parse(_ text: String) -> Date? {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.digits(4), scanner.skip(UInt8(ascii: "-")),
              let month = scanner.digits(2), (1...12).contains(month), scanner.skip(UInt8(ascii: "-")),
              let day = scanner.digits(2), (1...31).contains(day)
        else { return nil }
        var hour = 0, minute = 0, second = 0
        var fraction = 0.0
        var offsetSeconds = 0
        if scanner.skip(UInt8(ascii: " ")) || scanner.skip(UInt8(ascii: "T")) {
            guard let h = scanner.digits(2), h < 24, scanner.skip(UInt8(ascii: ":")),
                  let m = scanner.digits(2), m < 60
            else { return nil }
            hour = h
            minute = m
            if scanner.skip(UInt8(ascii: ":")) {
                guard let s = scanner.digits(2), s < 60 else { return nil }
                second = s
                if scanner.skip(UInt8(ascii: ".")) {
                    var scale = 0.1
                    var sawDigit = false
                    while let digit = scanner.digit() {
                        fraction += Double(digit) * scale
                        scale /= 10
                        sawDigit = true
                    }
                    guard sawDigit else { return nil }
                }
            }
            if scanner.skip(UInt8(ascii: "Z")) {
                offsetSeconds = 0
            } else if let sign = scanner.sign() {
                guard let oh = scanner.digits(2), oh < 24, scanner.skip(UInt8(ascii: ":")),
                      let om = scanner.digits(2), om < 60
                else { return nil }
                offsetSeconds = sign * (oh * 3600 + om * 60)
            }
        }
        guard scanner.isAtEnd else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds) + fraction
        return Date(timeIntervalSince1970: seconds)
    }

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        var isAtEnd: Bool { position == bytes.count }

        mutating func skip(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func digit() -> Int? {
            guard position < bytes.count, (48...57).contains(bytes[position]) else { return nil }
            defer { position += 1 }
            return Int(bytes[position] - 48)
        }

        mutating func digits(_ count: Int) -> Int? {
            var value = 0
            for _ in 0..<count {
                guard let digit = digit() else { return nil }
                value = value * 10 + digit
            }
            return value
        }

        mutating func sign() -> Int? {
            if skip(UInt8(ascii: "+")) { return 1 }
            if skip(UInt8(ascii: "-")) { return -1 }
            return nil
        }
    }

    private static func pad(_ value: some BinaryInteger, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let quotient = a / b
        let remainder = a % b
        return remainder < 0 ? (quotient - 1, remainder + b) : (quotient, remainder)
    }

    // Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian calendar).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
