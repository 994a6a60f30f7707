import CSQLCipher

extension Connection {
    /// Reads the main database file's bytes as stored (encrypted) through SQLite's own file handle.
    ///
    /// POSIX file locks belong to the process: closing any other descriptor of the database file would drop the
    /// locks every SQLite connection of this process holds on it. So a file the process has open through SQLite is
    /// never opened separately to be copied (replication's snapshots read it here).
    ///
    /// - Returns: The bytes read (fewer than `count` only at the end of the file).
    /// - Throws: ``DatabaseError`` (`fileSystem`).
    package func readMainFile(count: Int, at offset: Int64) throws -> [UInt8] {
        var pointer: UnsafeMutableRawPointer?
        guard let handle = sqliteConnection,
              sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
              let file = pointer?.assumingMemoryBound(to: sqlite3_file.self), let methods = file.pointee.pMethods
        else { throw DatabaseError(.fileSystem, "cannot reach the database file of \(filePath)") }
        var size: sqlite3_int64 = 0
        guard methods.pointee.xFileSize?(file, &size) == SQLITE_OK else {
            throw DatabaseError(.fileSystem, "cannot read the size of \(filePath)")
        }
        let available = max(0, min(Int64(count), Int64(size) - offset))
        guard available > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int(available))
        let code = bytes.withUnsafeMutableBytes { buffer in
            methods.pointee.xRead?(file, buffer.baseAddress, CInt(available), offset) ?? SQLITE_IOERR
        }
        guard code == SQLITE_OK else {
            throw DatabaseError(
                .fileSystem, "\(filePath) could not be read at offset \(offset) (SQLite I/O code \(code))")
        }
        return bytes
    }
}
