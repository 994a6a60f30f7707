import CSQLCipher
import Logging

/// One statement that finished running, reported by ``Connection/trace(includingBoundValues:_:)``.
public struct TraceEvent: Sendable, CustomStringConvertible {
    /// The SQL as written, with its `?` / `:name` parameters (never their values); SQL that mentions `key` has its
    /// literals redacted, as in errors (an `ATTACH … KEY 'k'` would otherwise carry the key).
    public let sql: String
    /// How long the statement ran (from its first step to its end or reset).
    public let duration: Duration
    /// The SQL with the bound values spliced in, only when tracing was asked to include them, and never for an
    /// `ATTACH` (whose bound parameter can be a key).
    public let expandedSQL: String?

    /// The SQL (expanded only when asked for) and the duration.
    public var description: String {
        "\(expandedSQL ?? sql) (\(duration))"
    }
}

private final class TraceBox {
    let handler: (TraceEvent) -> Void
    let includesBoundValues: Bool
    let handle: ConnectionHandle

    init(handler: @escaping (TraceEvent) -> Void, includesBoundValues: Bool, handle: ConnectionHandle) {
        self.handler = handler
        self.includesBoundValues = includesBoundValues
        self.handle = handle
    }
}

extension Connection {
    /// Reports every statement the connection runs, with its duration. `nil` stops tracing.
    ///
    /// ```swift
    /// try db.trace { event in print(event) }        // "SELECT * FROM note WHERE id = ? (0.000041 seconds)"
    /// ```
    ///
    /// Bound values are not shown unless `includingBoundValues` is `true` — and even then never for `ATTACH`
    /// statements, whose parameter can be a key. Keys never appear in traced SQL anyway: SQLCipherKit passes them
    /// through `sqlite3_key`, `sqlite3_rekey` and bound parameters, and refuses `PRAGMA key` in SQL.
    ///
    /// The handler must not close or rekey the connection: ``close()`` inside it does nothing, and the call that ran
    /// the statement throws ``DatabaseError/callbackMisuse`` (the statement has ended by then: a trace event comes
    /// once it has run).
    ///
    /// - Warning: Bound values can be confidential (they are your rows); include them only while debugging.
    ///
    /// See [sqlite3_trace_v2](https://www.sqlite.org/c3ref/trace_v2.html).
    public func trace(includingBoundValues: Bool = false, _ handler: ((TraceEvent) -> Void)?) throws {
        try register("trace") { connection in
            let sqliteConnection = try connection.checkedConnection()
            guard let handler else {
                sqlite3_trace_v2(sqliteConnection, 0, nil, nil)
                connection.callbackBoxes["trace"] = nil
                return
            }
            let box = TraceBox(handler: handler, includesBoundValues: includingBoundValues, handle: connection.handle)
            connection.callbackBoxes["trace"] = box
            sqlite3_trace_v2(sqliteConnection, UInt32(SQLITE_TRACE_PROFILE), { _, context, statement, nanoseconds in
                guard let context, let statement else { return 0 }
                let box = Unmanaged<TraceBox>.fromOpaque(context).takeUnretainedValue()
                let sqliteStatement = OpaquePointer(statement)
                // An ATTACH … KEY 'k' of the caller's would hand its key to the handler (and to a log).
                let sql = KeyRedaction.redacting(sql: sqlite3_sql(sqliteStatement).map { String(cString: $0) } ?? "")
                var expanded: String?
                if box.includesBoundValues && !sql.trimmingWhitespace().uppercased().hasPrefix("ATTACH"),
                   let text = sqlite3_expanded_sql(sqliteStatement) {
                    expanded = String(cString: text)
                    sqlite3_free(text)
                }
                let elapsed = nanoseconds?.assumingMemoryBound(to: Int64.self).pointee ?? 0
                let event = TraceEvent(sql: sql, duration: .nanoseconds(elapsed), expandedSQL: expanded)
                box.handle.lend(to: .trace) { box.handler(event) }
                return 0
            }, Unmanaged.passUnretained(box).toOpaque())
        }
    }

    /// Traces every statement to a swift-log logger (message `sql`, metadata `duration` and `expanded` when asked).
    public func trace(to logger: Logger, level: Logger.Level = .debug, includingBoundValues: Bool = false) throws {
        try trace(includingBoundValues: includingBoundValues) { event in
            var metadata: Logger.Metadata = ["duration": "\(event.duration)"]
            if let expanded = event.expandedSQL { metadata["expanded"] = "\(expanded)" }
            logger.log(level: level, "\(event.sql)", metadata: metadata)
        }
    }

    /// Re-applies the trace registration (SQLCipher 3's export removes it; see `exportEncrypted`).
    func restoreTrace() {
        if let registration = registrations.first(where: { $0.key == "trace" }) {
            try? registration.apply(self)
        }
    }
}
