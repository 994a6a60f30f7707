import CSQLCipher

/// A custom aggregate function: a fresh value is made for each group, fed every row, then asked for the result.
///
/// ```swift
/// struct Product: DatabaseAggregate {
///     var product = 1.0
///     mutating func step(_ arguments: [DatabaseValue]) throws {
///         product *= Double.fromDatabaseValue(arguments[0]) ?? 1
///     }
///     func finalize() throws -> (any DatabaseValueConvertible)? { product }
/// }
/// try db.createAggregate("product", argumentCount: 1) { Product() }
/// ```
public protocol DatabaseAggregate {
    /// Called for each row of the group with the function's arguments.
    mutating func step(_ arguments: [DatabaseValue]) throws
    /// The result for the group (`nil` is NULL).
    func finalize() throws -> (any DatabaseValueConvertible)?
}

extension DatabaseValue {
    /// Reads an `sqlite3_value` (a function argument).
    init(sqliteValue value: OpaquePointer) {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            self = .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT:
            self = .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            let count = Int(sqlite3_value_bytes(value))
            self = .text(sqlite3_value_text(value).map {
                String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
            } ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_value_bytes(value))
            self = .blob(count == 0 ? [] : Array(UnsafeRawBufferPointer(start: sqlite3_value_blob(value), count: count)))
        default:
            self = .null
        }
    }

    /// Sets a function's result.
    func setResult(of context: OpaquePointer) {
        switch self {
        case .null:
            sqlite3_result_null(context)
        case .integer(let value):
            sqlite3_result_int64(context, value)
        case .real(let value):
            sqlite3_result_double(context, value)
        case .text(let text):
            var text = text
            text.withUTF8 { utf8 in
                sqlite3_result_text(
                    context, UnsafeRawPointer(utf8.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                        .assumingMemoryBound(to: CChar.self), CInt(utf8.count), CSQLCipher_transient())
            }
        case .blob(let bytes):
            bytes.withUnsafeBytes { buffer in
                if buffer.isEmpty {
                    sqlite3_result_zeroblob(context, 0)
                } else {
                    sqlite3_result_blob(context, buffer.baseAddress, CInt(buffer.count), CSQLCipher_transient())
                }
            }
        }
    }
}

/// Reports a Swift error as the SQL function's error (its message; never bound values). A refusal of the
/// connection's use inside the function (``DatabaseError/callbackMisuse``) is kept for the statement that ran it, which
/// throws it as it is.
private func setError(_ error: any Error, of context: OpaquePointer, handle: ConnectionHandle) {
    if let error = error as? DatabaseError, error.kind == .callbackMisuse {
        handle.recordMisuse(error)
    }
    let message = (error as? DatabaseError)?.message ?? "\(error)"
    sqlite3_result_error(context, message, -1)
}

/// Fails the SQL function with the refusal inside it, if there was one (it stays kept for the statement).
private func failIfRefused(_ context: OpaquePointer, handle: ConnectionHandle) -> Bool {
    guard handle.hasPendingMisuse else { return false }
    sqlite3_result_error(context, "the connection was closed or used where it must not be, inside an SQL function", -1)
    return true
}

private func arguments(_ count: CInt, _ values: UnsafeMutablePointer<OpaquePointer?>?) -> [DatabaseValue] {
    (0..<Int(count)).map { DatabaseValue(sqliteValue: values![$0]!) }
}

private final class FunctionBox {
    let body: ([DatabaseValue]) throws -> (any DatabaseValueConvertible)?
    let handle: ConnectionHandle

    init(_ body: @escaping ([DatabaseValue]) throws -> (any DatabaseValueConvertible)?, handle: ConnectionHandle) {
        self.body = body
        self.handle = handle
    }
}

private final class AggregateBox {
    let make: () -> any DatabaseAggregate
    let handle: ConnectionHandle

    init(_ make: @escaping () -> any DatabaseAggregate, handle: ConnectionHandle) {
        self.make = make
        self.handle = handle
    }
}

/// One group's aggregate state, referenced from SQLite's per-group context memory.
private final class AggregateState {
    var aggregate: any DatabaseAggregate
    var error: (any Error)?

    init(_ aggregate: any DatabaseAggregate) {
        self.aggregate = aggregate
    }
}

private let releaseBox: @convention(c) (UnsafeMutableRawPointer?) -> Void = { pointer in
    if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
}

extension Connection {
    /// Registers a scalar SQL function written in Swift.
    ///
    /// ```swift
    /// try db.createFunction("reverse", argumentCount: 1, isDeterministic: true) { arguments in
    ///     String.fromDatabaseValue(arguments[0]).map { String($0.reversed()) }
    /// }
    /// ```
    ///
    /// A thrown error becomes the statement's error (its message; the SQL is in the ``DatabaseError``). The function
    /// is registered again when the connection reopens (after a rekey); a pool registers it on every connection
    /// through its configuration's `prepareConnection`.
    ///
    /// The function may run statements on the connection, but must not close or rekey it: ``Connection/close()``
    /// inside it does nothing, and the statement that called the function fails with
    /// ``DatabaseError/callbackMisuse`` (the connection stays usable).
    ///
    /// - Parameters:
    ///   - name: The SQL name.
    ///   - argumentCount: The number of arguments, or `nil` for any number.
    ///   - isDeterministic: Whether the same arguments always give the same result (lets SQLite optimise, and use
    ///     it in indexes and CHECK constraints).
    ///   - body: Computes the result from the arguments; `nil` is NULL.
    ///
    /// See [sqlite3_create_function](https://www.sqlite.org/c3ref/create_function.html).
    public func createFunction(
        _ name: String, argumentCount: Int? = nil, isDeterministic: Bool = false,
        _ body: @escaping ([DatabaseValue]) throws -> (any DatabaseValueConvertible)?
    ) throws {
        let count = try Self.checkedArgumentCount(argumentCount)
        let flags = SQLITE_UTF8 | (isDeterministic ? SQLITE_DETERMINISTIC : 0)
        try register("function \(name.lowercased())/\(count)") { connection in
            let sqliteConnection = try connection.checkedConnection()
            let box = Unmanaged.passRetained(FunctionBox(body, handle: connection.handle)).toOpaque()
            let code = sqlite3_create_function_v2(sqliteConnection, name, count, flags, box, { context, argc, argv in
                let box = Unmanaged<FunctionBox>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue()
                let handle = box.handle
                do {
                    let result = try handle.lend(to: .function) { try box.body(arguments(argc, argv)) }
                    if failIfRefused(context!, handle: handle) { return }
                    (result?.databaseValue ?? .null).setResult(of: context!)
                } catch {
                    setError(error, of: context!, handle: handle)
                }
            }, nil, nil, releaseBox)
            guard code == SQLITE_OK else {
                throw DatabaseError.fromSQLite(code: code, connection: sqliteConnection)
            }
        }
    }

    /// Registers an aggregate SQL function written in Swift: `make` creates the state for each group.
    ///
    /// See ``DatabaseAggregate`` and [sqlite3_create_function](https://www.sqlite.org/c3ref/create_function.html).
    public func createAggregate(
        _ name: String, argumentCount: Int? = nil, isDeterministic: Bool = false,
        _ make: @escaping () -> any DatabaseAggregate
    ) throws {
        let count = try Self.checkedArgumentCount(argumentCount)
        let flags = SQLITE_UTF8 | (isDeterministic ? SQLITE_DETERMINISTIC : 0)
        try register("function \(name.lowercased())/\(count)") { connection in
            let sqliteConnection = try connection.checkedConnection()
            let box = Unmanaged.passRetained(AggregateBox(make, handle: connection.handle)).toOpaque()
            let code = sqlite3_create_function_v2(sqliteConnection, name, count, flags, box, nil, { context, argc, argv in
                guard let state = aggregateState(context!, create: true), state.error == nil else { return }
                let handle = aggregateHandle(context!)
                do {
                    try handle.lend(to: .aggregate) { try state.aggregate.step(arguments(argc, argv)) }
                } catch {
                    state.error = error
                }
            }, { context in
                // Final: for an empty group, SQLite calls it without any step; make a fresh state then.
                let state = aggregateState(context!, create: true)
                defer { releaseAggregateState(context!) }
                guard let state else { return }
                let handle = aggregateHandle(context!)
                if let error = state.error {
                    setError(error, of: context!, handle: handle)
                    return
                }
                do {
                    let result = try handle.lend(to: .aggregate) { try state.aggregate.finalize() }
                    if failIfRefused(context!, handle: handle) { return }
                    (result?.databaseValue ?? .null).setResult(of: context!)
                } catch {
                    setError(error, of: context!, handle: handle)
                }
            }, releaseBox)
            guard code == SQLITE_OK else {
                throw DatabaseError.fromSQLite(code: code, connection: sqliteConnection)
            }
        }
    }

    /// Registers a collation: a comparison of two strings returning a negative number, zero, or a positive number.
    ///
    /// ```swift
    /// try db.createCollation("length") { a, b in a.count - b.count }
    /// try db.all("SELECT name FROM person ORDER BY name COLLATE length", as: String.self)
    /// ```
    ///
    /// The collation must not close or rekey the connection: ``Connection/close()`` inside it does nothing, and the
    /// step that compared then throws ``DatabaseError/callbackMisuse`` (with no transaction open, a write it was
    /// part of is rolled back).
    ///
    /// See [sqlite3_create_collation](https://www.sqlite.org/c3ref/create_collation.html).
    public func createCollation(_ name: String, _ compare: @escaping (String, String) -> Int) throws {
        try register("collation \(name.lowercased())") { connection in
            let sqliteConnection = try connection.checkedConnection()
            let box = Unmanaged.passRetained(HookBox<(String, String) -> Int>(compare, handle: connection.handle))
                .toOpaque()
            let code = sqlite3_create_collation_v2(sqliteConnection, name, SQLITE_UTF8, box, { context, count1, text1, count2, text2 in
                let box = HookBox<(String, String) -> Int>.from(context)
                let string1 = String(decoding: UnsafeRawBufferPointer(start: text1, count: Int(count1)), as: UTF8.self)
                let string2 = String(decoding: UnsafeRawBufferPointer(start: text2, count: Int(count2)), as: UTF8.self)
                // A refusal inside it is thrown by the step that ran it (a collation cannot fail a statement).
                let result = box.handle.lend(to: .collation) { box.closure(string1, string2) }
                return result < 0 ? -1 : (result > 0 ? 1 : 0)
            }, releaseBox)
            guard code == SQLITE_OK else {
                throw DatabaseError.fromSQLite(code: code, connection: sqliteConnection)
            }
        }
    }

    private static func checkedArgumentCount(_ argumentCount: Int?) throws -> CInt {
        guard let argumentCount else { return -1 }
        guard (0...127).contains(argumentCount) else {
            throw DatabaseError(
                .invalidArgument,
                "a function takes 0 to 127 arguments, not \(argumentCount)")
        }
        return CInt(argumentCount)
    }
}

/// The handle an aggregate runs for.
private func aggregateHandle(_ context: OpaquePointer) -> ConnectionHandle {
    Unmanaged<AggregateBox>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue().handle
}

/// The state of the group `context` belongs to, kept in SQLite's aggregate context (one pointer).
private func aggregateState(_ context: OpaquePointer, create: Bool) -> AggregateState? {
    let size = CInt(MemoryLayout<UnsafeMutableRawPointer?>.size)
    guard let memory = sqlite3_aggregate_context(context, create ? size : 0) else { return nil }
    let slot = memory.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
    if let pointer = slot.pointee {
        return Unmanaged<AggregateState>.fromOpaque(pointer).takeUnretainedValue()
    }
    guard create else { return nil }
    let box = Unmanaged<AggregateBox>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue()
    let state = AggregateState(box.make())
    slot.pointee = Unmanaged.passRetained(state).toOpaque()
    return state
}

private func releaseAggregateState(_ context: OpaquePointer) {
    guard let memory = sqlite3_aggregate_context(context, 0) else { return }
    let slot = memory.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
    if let pointer = slot.pointee {
        Unmanaged<AggregateState>.fromOpaque(pointer).release()
        slot.pointee = nil
    }
}
