#if SQLKit  // trait SQLKit (Package.swift)
import SQLCipherKit
import SQLKit

/// A row read through ``SQLCipherSQLDatabase``: its column names and values, copied out of the statement so it can
/// cross threads.
public struct SQLCipherRow: SQLRow, CustomStringConvertible {
    /// The column names, in order.
    public let allColumns: [String]
    /// The values, in column order.
    public let values: [DatabaseValue]
    let decoder: SQLCipherDataDecoder

    init(columns: [String], values: [DatabaseValue], decoder: SQLCipherDataDecoder) {
        self.allColumns = columns
        self.values = values
        self.decoder = decoder
    }

    private func index(of column: String) throws -> Int {
        guard let index = allColumns.firstIndex(of: column) else {
            throw DecodingError.keyNotFound(
                SomeCodingKey(stringValue: column),
                .init(codingPath: [], debugDescription: "no column named \(column) in the row"))
        }
        return index
    }

    public func contains(column: String) -> Bool {
        allColumns.contains(column)
    }

    public func decodeNil(column: String) throws -> Bool {
        values[try index(of: column)].isNull
    }

    public func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        try decoder.decode(D.self, from: values[try index(of: column)])
    }

    /// The column names and storage classes; never the values (they may be confidential).
    public var description: String {
        "SQLCipherRow(" + zip(allColumns, values).map { "\($0): \($1.storageClassName)" }.joined(separator: ", ") + ")"
    }
}
#endif
