import SQLCipherKit
import Testing

/// A virtual table module keeps prepared statements of its own on the connection (FTS reads and writes its shadow
/// tables through them). Closing must leave those to the module: finalizing them too was a double free that crashed
/// the process at close (SIGSEGV on SQLCipher 3.4.1, a glibc abort on 4.19).
@Suite("Closing a connection that used a virtual table")
struct VirtualTableCloseTests {
    @Test("an FTS4 table written and read: close does not crash, statements still held see connectionClosed")
    func closesAfterFTS() throws {
        try withTemporaryDirectory { dir in
            let db = try Connection(path: dir.path("fts.db"), key: TestKeys.raw)
            try db.execute("CREATE VIRTUAL TABLE search USING fts4(body); INSERT INTO search VALUES ('kept at rest')")
            let held = try db.prepare("SELECT count(*) FROM search WHERE search MATCH 'rest'")
            #expect(try held.cursor().next() != nil)
            db.close()
            expectError(.connectionClosed) { try held.reset() }
            let again = try Connection(path: dir.path("fts.db"), key: TestKeys.raw)
            defer { again.close() }
            #expect(try again.scalar("SELECT count(*) FROM search WHERE search MATCH 'rest'", as: Int.self) == 1)
        }
    }
}
