/// What ``RowCursor``, ``DecodingCursor`` and ``RecordCursor`` share: one element at a time from ``next()``, and
/// the loops over the remaining elements, written once.
///
/// ```swift
/// let titles = try db.cursor("SELECT title FROM note").map { row in try row[0] as String }
/// ```
///
/// A cursor belongs to its connection's thread. A ``Row`` is valid only until the next call to ``next()``: `map`
/// and ``forEach(_:)`` hand each one over while it is current.
public protocol DatabaseCursor: AnyObject {
    /// What the cursor returns: a ``Row``, or a record built from one.
    associatedtype Element

    /// Advances to the next element, or returns `nil` when there are no more.
    func next() throws -> Element?
}

extension DatabaseCursor {
    /// Calls `body` for each remaining element.
    ///
    /// - Throws: The first error of ``next()`` or of `body`.
    @inlinable
    public func forEach(_ body: (Element) throws -> Void) throws {
        while let element = try next() {
            try body(element)
        }
    }

    /// The remaining elements, transformed.
    ///
    /// - Throws: The first error of ``next()`` or of `transform`.
    @inlinable
    public func map<T>(_ transform: (Element) throws -> T) throws -> [T] {
        var result: [T] = []
        while let element = try next() {
            result.append(try transform(element))
        }
        return result
    }
}
