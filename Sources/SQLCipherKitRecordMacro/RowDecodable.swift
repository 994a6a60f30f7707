// Only with the package trait RecordMacro, which brings swift-syntax (1 to 2.5 minutes of first build): see
// Docs/Codable.md, "@RowDecodable".
#if RecordMacro
@_exported import SQLCipherKit

/// Conforms a struct to ``SQLCipherKit/FetchableRecord`` with an `init(row:)` that reads each stored property from
/// the column of its name: the fast path of a `Decodable` record, without writing it.
///
/// ```swift
/// import SQLCipherKitRecordMacro
///
/// @RowDecodable
/// struct Note: Decodable {
///     var id: Int64
///     var body: String
///     var archivedAt: Date?                 // NULL or no column: nil
///     enum CodingKeys: String, CodingKey { case id, body, archivedAt = "archived_at" }
/// }
/// let notes = try db.fetchAll(Note.self, "SELECT * FROM note")   // init(row:), not init(from:)
/// ```
///
/// The generated initializer reads what the synthesized `init(from:)` decodes, the way
/// ``SQLCipherKit/Row/decode(_:)`` reads it:
/// - every stored instance property except a `let` with an initial value; with a `CodingKeys` enum, the properties it
///   lists, each from the column its raw value names;
/// - a ``SQLCipherKit/DatabaseValueConvertible`` property with that type's strict conversion (TEXT read as `Int`
///   throws), any other `Decodable` property from a single-value container or JSON
///   (`Row.decodeColumn(_:named:)`);
/// - an optional property (`T?`, `Optional<T>`) as `nil` when its column is NULL or missing; any other throws
///   ``SQLCipherKit/DatabaseError/invalidArgument`` for a missing column.
///
/// The type need not be `Decodable`. The macro reports an error for a class or an enum, a stored property whose type
/// is not written out, a property wrapper, and a `CodingKeys` raw value that is not a plain string literal. A type
/// that is both `Decodable` and `FetchableRecord` is fetched through `init(row:)`, which reads columns by index and
/// skips the keyed container `init(from:)` goes through (figures in Docs/Performance.md).
@attached(extension, conformances: FetchableRecord, names: named(init(row:)))
public macro RowDecodable() = #externalMacro(module: "SQLCipherKitMacros", type: "RowDecodableMacro")
#endif
