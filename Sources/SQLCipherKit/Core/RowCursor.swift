import CSQLCipher

/// Iterates the rows of a statement one at a time, without copying them.
///
/// ```swift
/// let rows = try db.cursor("SELECT id, body FROM note")
/// while let row = try rows.next() {
///     let id: Int64 = try row[0]
/// }
/// ```
///
/// The ``Row`` returned by ``next()`` reads the statement's current row and is valid until the next call (reading it
/// later throws ``DatabaseError/rowMisuse``; ``Row/copy()`` keeps it). The cursor
/// resets its statement when it is exhausted, when an error occurs, and when it is released early, so no read
/// transaction is left open behind the caller's back. A new cursor over the same statement, or a run of it, ends
/// this one: it then returns no more rows and no longer resets the statement. While a cursor is open, the
/// connection's statement cache gives other calls with the same SQL a statement of their own.
public final class RowCursor: DatabaseCursor {
    /// The statement the cursor steps.
    public let statement: Statement

    // Read on every row; the dynamic exclusivity check cost 2 runtime calls per row in the fetch benchmark. Sound
    // without it: a cursor is used from one thread (it is not Sendable).
    @usableFromInline
    @exclusivity(unchecked)
    var isDone = false

    @usableFromInline
    let columnCount: Int

    @usableFromInline
    let generation: Int

    @usableFromInline
    init(statement: Statement) {
        self.statement = statement
        self.columnCount = statement.columnCount
        statement.cursorGeneration &+= 1
        self.generation = statement.cursorGeneration
        statement.openCursorGeneration = generation
    }

    /// Marks the cursor finished, and its statement free for the statement cache again if this cursor is its open one.
    @inlinable
    @inline(__always)
    func finish() {
        isDone = true
        if statement.openCursorGeneration == generation { statement.openCursorGeneration = 0 }
    }

    /// `false` once a newer cursor over the statement exists: resetting or stepping would disturb that one.
    @usableFromInline
    var ownsStatement: Bool { statement.cursorGeneration == generation }

    deinit {
        if !isDone && ownsStatement && statement.handle.isOpen {
            sqlite3_reset(statement.sqliteStatement)
        }
        if statement.openCursorGeneration == generation { statement.openCursorGeneration = 0 }
    }

    /// Advances to the next row.
    ///
    /// - Returns: The row, or `nil` when there are no more rows.
    /// - Throws: A SQLite error (the cursor is then finished).
    @inlinable
    @inline(__always)
    public func next() throws -> Row? {
        if isDone { return nil }
        guard ownsStatement else {
            isDone = true
            return nil
        }
        do {
            if try statement.step() {
                return Row(cursor: self)
            }
        } catch {
            finish()
            throw error
        }
        finish()
        sqlite3_reset(statement.sqliteStatement)
        return nil
    }
}

@available(*, unavailable, message: "A RowCursor belongs to its connection's thread.")
extension RowCursor: Sendable {}

extension RowCursor {
    /// Resets the statement now instead of when the cursor is released.
    @inlinable
    public func close() {
        if !isDone {
            finish()
            if ownsStatement && statement.handle.isOpen { statement.resetNow() }
        }
    }
}
