/// A bounded least-recently-used cache of compiled statements.
@usableFromInline
struct StatementCache {
    /// A cached statement and when it was last used; a class, so a hit updates it without hashing the SQL again.
    @usableFromInline
    final class Entry {
        @usableFromInline let statement: Statement
        // Written on every cache hit; a statement cache belongs to one connection, used by one thread at a time, so
        // the dynamic exclusivity check (a runtime call per hit) guards nothing.
        @usableFromInline @exclusivity(unchecked) var lastUse: UInt64

        init(statement: Statement, lastUse: UInt64) {
            self.statement = statement
            self.lastUse = lastUse
        }
    }

    private var entries: [String: Entry] = [:]
    private var clock: UInt64 = 0
    let capacity: Int

    /// BEGIN/COMMIT/ROLLBACK, by ``TransactionStatement``: kept apart from the LRU (they run around every pool
    /// access, and would otherwise take two of its places) and found without hashing their SQL.
    private(set) var transactionStatements: [Statement?] = Array(
        repeating: nil, count: TransactionStatement.allCases.count)

    /// The `sqlite3_stmt` of each of ``transactionStatements`` (which own them), so the statements that run around
    /// every pool access are stepped without retaining and releasing their ``Statement`` (and without Swift's
    /// step and reset around them). Emptied with the statements: a
    /// connection's close finalizes them.
    private(set) var transactionStatementPointers: [OpaquePointer?] = Array(
        repeating: nil, count: TransactionStatement.allCases.count)

    /// Keeps `statement` as the connection's `which` statement.
    mutating func store(_ statement: Statement, as which: TransactionStatement) {
        transactionStatements[which.rawValue] = statement
        transactionStatementPointers[which.rawValue] = statement.sqliteStatement
    }

    /// How many of ``transactionStatements`` are being stepped through their pointer now (more than one when a
    /// callback inside one runs a transaction of its own).
    var runningTransactionStatementCount = 0

    /// The transaction statements ``removeAll()`` took out of their slots while one of them was being stepped: a
    /// callback inside that step (a rollback hook or a trace handler setting an authorizer, say) empties the cache,
    /// and releasing the running statement would finalize it under the engine. Released when the step is over.
    private var retiredTransactionStatements: [Statement] = []

    /// Ends a run that ``runningTransactionStatementCount`` counted, releasing the statements retired meanwhile once
    /// none runs any more.
    @inline(__always)
    mutating func endTransactionStatementRun() {
        runningTransactionStatementCount -= 1
        // Checked first: emptying an empty array still releases its storage.
        if !retiredTransactionStatements.isEmpty && runningTransactionStatementCount == 0 {
            retiredTransactionStatements.removeAll()
        }
    }

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// The two entries found or inserted last, with their SQL, the latest first: a connection that runs the same
    /// statement again (a pool reader's point lookup, a loop), or two statements in turn (a SELECT and an INSERT in
    /// a loop), finds them with one or two string comparisons, which are cheap for the same string, instead of
    /// hashing the SQL (hashing and the dictionary probe were a sizeable share of a point read; two statements in
    /// turn, with one entry remembered, missed both every time).
    private var latestEntry: Entry?
    private var latestSQL = ""
    private var earlierEntry: Entry?
    private var earlierSQL = ""

    @usableFromInline
    mutating func statement(for sql: String) -> Statement? {
        // The SQL is compared in place, and each branch returns at once: copying an entry and its SQL out first,
        // or carrying the entry out of the branches, cost a retain and release more per lookup.
        if latestSQL == sql, let latest = latestEntry {
            return use(latest)
        }
        if earlierSQL == sql, let earlier = earlierEntry {
            swap(&latestEntry, &earlierEntry)
            swap(&latestSQL, &earlierSQL)
            return use(earlier)
        }
        guard let found = entries[sql] else { return nil }
        remember(found, sql)
        return use(found)
    }

    @inline(__always)
    private mutating func use(_ entry: Entry) -> Statement {
        clock &+= 1
        entry.lastUse = clock
        return entry.statement
    }

    private mutating func remember(_ entry: Entry, _ sql: String) {
        earlierEntry = latestEntry
        earlierSQL = latestSQL
        latestEntry = entry
        latestSQL = sql
    }

    private mutating func forget(_ entry: Entry) {
        if entry === latestEntry {
            latestEntry = nil
            latestSQL = ""
        }
        if entry === earlierEntry {
            earlierEntry = nil
            earlierSQL = ""
        }
    }

    mutating func insert(_ statement: Statement, for sql: String) {
        guard capacity > 0 else { return }
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries[oldest.key] = nil
            forget(oldest.value)
        }
        clock &+= 1
        let entry = Entry(statement: statement, lastUse: clock)
        entries[sql] = entry
        remember(entry, sql)
    }

    mutating func removeAll() {
        entries.removeAll()
        latestEntry = nil
        latestSQL = ""
        earlierEntry = nil
        earlierSQL = ""
        for index in transactionStatements.indices {
            if runningTransactionStatementCount > 0, let statement = transactionStatements[index] {
                retiredTransactionStatements.append(statement)
            }
            transactionStatements[index] = nil
            transactionStatementPointers[index] = nil
        }
    }

    var count: Int { entries.count }
}
