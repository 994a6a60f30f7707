import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A statement the compiler produced. Its owner finalizes it, or hands it to a ``Statement`` that adopts it.
struct CompiledStatement {
    /// The compiled `sqlite3_stmt*`.
    let sqliteStatement: OpaquePointer
    /// The file names of the ATTACH actions the guard saw compiled (`nil`: given by a parameter or an expression);
    /// empty when the statement attaches nothing.
    let attachFileNames: [String?]
}

/// The one place the library compiles a caller's SQL (`Connection.execute(_:)`, `executeScript`, `Statement`), with
/// the guard's bookkeeping around each `sqlite3_prepare_v2`: its state reset, a refusal turned into the error, a
/// compiled statement checked (`VACUUM INTO`), the ATTACH file names it saw noted.
///
/// It holds the connection's handle, not its C pointer, and reads the pointer at each compile: code run between the
/// statements of a script (an `executeScript` row handler) may close the connection, and the next statement must then
/// fail as closed instead of being compiled on a freed connection.
struct StatementCompiler {
    let handle: ConnectionHandle

    var guardState: GuardState { handle.guardState }

    /// Compiles the first statement of the C string at `start`.
    ///
    /// - Parameters:
    ///   - tail: Set to where the rest of the SQL begins (`nil` or a pointer to the terminating NUL at the end).
    ///   - sql: The SQL an error names; `nil` for the statement's own text (built only on an error).
    /// - Returns: The statement, or `nil` when the text holds only spaces, `;` or comments before `tail`.
    func compile(
        _ start: UnsafePointer<CChar>, tail: inout UnsafePointer<CChar>?, sql: String? = nil
    ) throws -> CompiledStatement? {
        guard handle.isUsable, let sqliteConnection = handle.sqliteConnection else {
            throw handle.unusableError(sql: sql ?? Self.text(from: start, to: nil))
        }
        let guardState = guardState
        guardState.beginCompiling()
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(sqliteConnection, start, -1, &statement, &tail)
        let end = tail
        guard code == SQLITE_OK else {
            throw EncryptionGuard.error(code: code, sql: sql ?? Self.text(from: start, to: end), handle: handle)
        }
        guard let statement else { return nil }
        do {
            try EncryptionGuard.checkCompiled(statement, sql: sql ?? Self.text(from: start, to: end), state: guardState)
        } catch {
            sqlite3_finalize(statement)
            throw error
        }
        return CompiledStatement(sqliteStatement: statement, attachFileNames: guardState.compiledAttachFileNames)
    }

    /// Compiles the statements of `sql` one after the other, each only once `body` is done with the one before it
    /// (a script may create a table and then use it). `body` owns each statement it is handed.
    func forEachStatement(
        in sql: String, _ body: (CompiledStatement, _ text: () -> String) throws -> Void
    ) throws {
        try sql.withCString { start in
            var next: UnsafePointer<CChar>? = start
            while let current = next, current.pointee != 0 {
                var tail: UnsafePointer<CChar>?
                let compiled = try compile(current, tail: &tail)
                next = tail
                guard let compiled else { continue }  // whitespace or comment
                let end = tail
                try body(compiled) { Self.text(from: current, to: end) }
            }
        }
    }

    /// Whether the C string at `start` holds another statement (not just spaces, `;` or comments). Text that does
    /// not compile counts: it is still more SQL than a single statement's caller should have passed.
    func containsStatement(_ start: UnsafePointer<CChar>) -> Bool {
        var byte = start
        // `;` and SQLite's spaces (tab, newline, vertical tab, form feed, carriage return, space): nothing to compile.
        while byte.pointee == 0x3B || byte.pointee == 0x20 || (0x09...0x0D).contains(byte.pointee) {
            byte += 1
        }
        guard byte.pointee != 0 else { return false }
        defer { guardState.lastRefusal = nil }  // a refusal inside the leftover is not the first statement's
        var tail: UnsafePointer<CChar>?
        do {
            guard let compiled = try compile(byte, tail: &tail) else { return false }
            sqlite3_finalize(compiled.sqliteStatement)
            return true
        } catch {
            return true
        }
    }

    /// The trimmed text between two points of a C string (`end == nil`: to its end).
    static func text(from start: UnsafePointer<CChar>, to end: UnsafePointer<CChar>?) -> String {
        let count = end.map { $0 - start } ?? strlen(start)
        let bytes = UnsafeRawBufferPointer(start: start, count: count)
        return String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
    }
}
