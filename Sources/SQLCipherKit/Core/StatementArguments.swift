import CSQLCipher

/// Values for a statement's parameters: an array for positional parameters, a dictionary for named ones.
///
/// ```swift
/// try db.execute("INSERT INTO note(body, rank) VALUES (?, ?)", arguments: ["one", 1])
/// try db.execute("INSERT INTO note(body, rank) VALUES (:body, :rank)", arguments: ["body": "two", "rank": nil])
/// ```
///
/// Each value is boxed; when the number of values is fixed, the variadic forms (`db.execute(sql, "one", 1)`) bind
/// without boxing.
public struct StatementArguments: ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    enum Storage {
        case positional([(any DatabaseValueConvertible)?])
        case named([(String, (any DatabaseValueConvertible)?)])
    }

    let storage: Storage

    /// Positional values, bound to parameters 1…n.
    public init(_ values: [(any DatabaseValueConvertible)?]) {
        storage = .positional(values)
    }

    /// Named values; a name may carry its prefix (`:a`, `@a`, `$a`) or not.
    public init(_ values: [String: (any DatabaseValueConvertible)?]) {
        storage = .named(values.map { ($0.key, $0.value) })
    }

    /// Positional values, bound to parameters 1…n.
    public init(arrayLiteral elements: (any DatabaseValueConvertible)?...) {
        storage = .positional(elements)
    }

    /// Named values.
    public init(dictionaryLiteral elements: (String, (any DatabaseValueConvertible)?)...) {
        storage = .named(elements)
    }
}

/// Binds a boxed value (nil binds NULL).
struct AnyDatabaseValueConvertible: DatabaseValueConvertible {
    let base: (any DatabaseValueConvertible)?

    init(_ base: (any DatabaseValueConvertible)?) {
        self.base = base
    }

    var databaseValue: DatabaseValue {
        base?.databaseValue ?? .null
    }

    static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> AnyDatabaseValueConvertible? {
        AnyDatabaseValueConvertible(databaseValue)
    }

    /// Binds NULL, or the boxed value through its own ``DatabaseValueConvertible/bind(to:)``.
    func bind(to parameter: DatabaseParameter) -> ResultCode {
        base?.bind(to: parameter) ?? parameter.bind(.null)
    }
}

