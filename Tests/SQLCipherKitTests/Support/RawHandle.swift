import CSQLCipher
import SQLCipherKit

/// A bare SQLCipher handle that SQLCipherKit does not know of: stands in for another process.
final class RawHandle {
    private(set) var handle: OpaquePointer?

    init(path: String, key: String) throws {
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
            throw DatabaseError(kind: .sqlite, code: DatabaseError.SQLITE_CANTOPEN, message: "raw open failed")
        }
        let bytes = Array(key.utf8)
        _ = sqlite3_key(handle, bytes, CInt(bytes.count))
        try execute("SELECT count(*) FROM sqlite_master")
    }

    func execute(_ sql: String) throws {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else {
            throw DatabaseError(kind: .sqlite, code: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(handle)))
        }
    }

    func close() {
        sqlite3_close(handle)
        handle = nil
    }

    deinit { close() }
}
