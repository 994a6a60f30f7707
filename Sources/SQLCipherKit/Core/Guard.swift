import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The authorizer installed on every connection. It refuses the SQL that would defeat the encryption, and it decides
/// before any authorizer of the caller's (which cannot override it):
///
/// - every PRAGMA of the cipher and key families (`cipher*`, `sqlcipher*`, `*kdf*`, `*hmac*`, `rekey*`, `*key`)
///   except a read, without a value, of one of ``readablePragmas``. Keys never travel in SQL, and a cipher setting
///   changed on an open database makes the next write go out in another layout: the file then opens with no
///   setting at all. The engine-wide ones (`cipher_default_*`, `cipher_log*`, `cipher_memory_security`) change every
///   connection of the process, and `cipher_migrate`, `cipher_add_random`, `cipher_profile` are actions;
/// - `page_size` with a value on an encrypted schema: SQLCipher takes it as the cipher page size;
/// - `temp_store` with any value but exactly `MEMORY` or `2`: FILE writes plaintext temporary files, and SQLite reads
///   an unknown value (`'memory '`, `' 2'`) as DEFAULT;
/// - an ATTACH whose file name carries a key as a URI parameter (see ``hasURIKeyParameter(_:)``).
///
/// `VACUUM INTO`, which compiles without asking the authorizer anything, is refused once compiled
/// (``checkCompiled(_:sql:state:)``).
///
/// Such a statement fails to prepare with `SQLITE_AUTH` and a message that names the PRAGMA and what to use instead.
/// The library's own statements (cipher settings of an attached database, the checks below) run with
/// ``GuardState/isRunningLibraryStatement`` set, which nothing outside the library can set.
///
/// An ATTACH cannot be judged when it compiles (the authorizer sees the file name, not the key), so a statement that
/// attaches is checked when it has run: see ``checkNewAttachments(handle:before:createdFiles:)``.
enum EncryptionGuard {
    /// The PRAGMAs that carry a key.
    static let keyPragmas: Set<String> = ["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]

    /// The cipher PRAGMAs SQL may read (without a value). Each is a pure read on SQLCipher 3.4.1 and 4.x; the ones
    /// SQLCipher 3.4.1 does not know return no row there.
    static let readablePragmas: Set<String> = [
        "cipher_version", "cipher_provider", "cipher_provider_version", "cipher_fips_status", "cipher_status",
        "cipher_page_size", "kdf_iter", "cipher_use_hmac", "cipher_kdf_algorithm", "cipher_hmac_algorithm",
        "fast_kdf_iter", "cipher_hmac_pgno", "cipher_hmac_salt_mask",
        "cipher_plaintext_header_size", "cipher_salt", "cipher_settings", "cipher_integrity_check",
    ]

    /// Whether a PRAGMA name belongs to the cipher or key families (refused unless it is a listed read).
    ///
    /// Compared byte by byte: it runs for every PRAGMA a connection compiles, several per open, and the `String`
    /// searches (`contains`) were a visible part of an open.
    static func isCipherPragma(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            matches(bytes, "cipher", at: 0) || matches(bytes, "sqlcipher", at: 0) || matches(bytes, "rekey", at: 0)
                || matches(bytes, "key", at: bytes.count - 3) || occurs(bytes, "kdf") || occurs(bytes, "hmac")
        }
    }

    /// Whether `pattern` (ASCII) is at `offset` in `bytes`.
    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, _ pattern: StaticString, at offset: Int) -> Bool {
        let count = pattern.utf8CodeUnitCount
        guard offset >= 0, offset + count <= bytes.count else { return false }
        let start = pattern.utf8Start
        for index in 0..<count where bytes[offset + index] != start[index] { return false }
        return true
    }

    /// Whether `pattern` (ASCII) is anywhere in `bytes`.
    private static func occurs(_ bytes: UnsafeBufferPointer<UInt8>, _ pattern: StaticString) -> Bool {
        let last = bytes.count - pattern.utf8CodeUnitCount
        guard last >= 0 else { return false }
        for offset in 0...last where matches(bytes, pattern, at: offset) { return true }
        return false
    }

    /// Installs the guard on a new handle.
    static func install(on handle: ConnectionHandle, encryption: Encryption, options: OpenOptions) {
        guard let sqliteConnection = handle.sqliteConnection else { return }
        let state = handle.guardState
        state.isKeyed = encryption.key != nil
        state.allowsPlaintextAttachments = options.allowsPlaintextAttachments
        state.keyedSchemas = state.isKeyed ? ["main"] : []
        sqlite3_set_authorizer(sqliteConnection, authorize, Unmanaged.passUnretained(state).toOpaque())
    }

    // MARK: - Deciding

    /// Why the guard refuses a PRAGMA, or `nil` to let it through.
    static func refusal(pragma rawName: String, value: String?, schema: String?, state: GuardState) -> GuardRefusal? {
        let name = rawName.lowercased()
        let trimmedName = name.trimmingWhitespace()
        // Built only for a refusal: every PRAGMA a connection compiles comes through here.
        var shown: String { displayed(schema.map { "\($0)." } ?? "", trimmedName) }
        if name == "temp_store" {
            guard let value, !["memory", "2"].contains(value.lowercased()) else { return nil }
            return GuardRefusal(
                "PRAGMA \(shown) with a value other than MEMORY or 2 is refused: temp_store stays MEMORY, because FILE"
                    + " writes plaintext temporary files (and SQLite reads an unknown value as DEFAULT)")
        }
        if name == "page_size", value != nil, state.keyedSchemas.contains((schema ?? "main").lowercased()) {
            return GuardRefusal(
                "PRAGMA \(shown) = … is refused on an encrypted database: SQLCipher takes it as the cipher page size,"
                    + " which makes the file unreadable", remedy: .pageSizeWhenCreating)
        }
        guard isCipherPragma(name) || isCipherPragma(trimmedName) else { return nil }
        if keyPragmas.contains(trimmedName) {
            return GuardRefusal(
                "PRAGMA \(shown) is refused: keys never travel in SQL", remedy: .keyThroughAPI, hidesSQL: true)
        }
        if value == nil && readablePragmas.contains(name) {
            return nil
        }
        if value == nil {
            return GuardRefusal(
                "PRAGMA \(shown) is refused: SQL may read only these cipher PRAGMAs: "
                    + readablePragmas.sorted().joined(separator: ", ")
                    + ". The others are actions (such as cipher_migrate) or engine-wide state",
                remedy: name.trimmingWhitespace().hasSuffix("cipher_migrate") ? .migrateWithExport : nil)
        }
        return GuardRefusal(
            "PRAGMA \(shown) = … is refused: SQL may not change cipher or key settings (changed on an open database,"
                + " they make the file unreadable; the engine-wide ones change every connection of the process)",
            remedy: .cipherSettingsWhenOpening, hidesSQL: true)
    }

    /// A name as shown in a message: only when it looks like an identifier (so nothing typed by mistake, such as a
    /// key, is echoed).
    private static func displayed(_ prefix: String, _ name: String) -> String {
        let text = prefix + name
        let isIdentifier = text.count <= 80 && text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x5F || byte == 0x2E
        }
        return isIdentifier ? text : "<a cipher PRAGMA>"
    }

    private static let authorize: @convention(c) (
        UnsafeMutableRawPointer?, CInt, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?
    ) -> CInt = { context, action, argument1, argument2, argument3, argument4 in
        guard let context else { return SQLITE_OK }
        let state = Unmanaged<GuardState>.fromOpaque(context).takeUnretainedValue()
        if state.isRunningLibraryStatement {
            return SQLITE_OK
        }
        if action == SQLITE_PRAGMA, let argument1,
           let refusal = refusal(
            pragma: String(cString: argument1), value: argument2.map { String(cString: $0) },
            schema: argument3.map { String(cString: $0) }, state: state) {
            state.lastRefusal = refusal
            return SQLITE_DENY
        }
        if action == SQLITE_ATTACH {
            let fileName = argument1.map { String(cString: $0) }
            if let fileName, hasURIKeyParameter(fileName) {
                state.lastRefusal = uriKeyRefusal
                return SQLITE_DENY
            }
            state.compiledAttachFileNames.append(fileName)
        }
        if !state.blockedSchemas.isEmpty, let argument3,
           state.blockedSchemas.contains(String(cString: argument3).lowercased()) {
            state.lastRefusal = GuardRefusal("the plaintext attachment could not be detached; it stays unusable")
            return SQLITE_DENY
        }
        guard let box = state.userAuthorizer else { return SQLITE_OK }
        let request = AuthorizerRequest(
            actionCode: action, argument1: argument1.map { String(cString: $0) },
            argument2: argument2.map { String(cString: $0) }, databaseName: argument3.map { String(cString: $0) },
            triggerOrView: argument4.map { String(cString: $0) })
        let decision = box.handle.lend(to: .authorizer) { box.authorize(request) }
        // A refusal inside it fails the compile, whose error is then that refusal.
        return box.handle.hasPendingMisuse ? SQLITE_DENY : decision.code
    }

    // MARK: - Errors

    /// The error for a failed prepare or step: a refusal of a callback of the caller's during it (see
    /// ``ConnectionHandle/recordMisuse(_:)``) is the cause; an `SQLITE_AUTH` the guard caused names the refused PRAGMA,
    /// and leaves out SQL that may hold a key.
    static func error(code: CInt, sql: String?, handle: ConnectionHandle) -> DatabaseError {
        if handle.hasPendingMisuse, let misuse = handle.takePendingMisuse() {
            handle.guardState.lastRefusal = nil
            return misuse
        }
        let connection = handle.sqliteConnection
        if handle.openTransactionScopeCount > 0, let connection, sqlite3_get_autocommit(connection) != 0 {
            // Inside transaction {} or savepoint {}, the engine rolled the transaction back after this error.
            handle.engineRollbackCount += 1
        }
        let state = handle.guardState
        var error = DatabaseError.fromSQLite(code: code, connection: connection, sql: sql)
        if code & 0xFF == SQLITE_NOTADB, let plaintextFile = state.lastPlaintextAttachment {
            error = plaintextAttachmentError(file: plaintextFile, sql: sql, underlying: error)
        }
        state.lastPlaintextAttachment = nil
        guard code & 0xFF == SQLITE_AUTH, let refusal = state.lastRefusal else { return error }
        state.lastRefusal = nil
        return DatabaseError(
            kind: error.kind, code: error.extendedResultCode, message: "\(error.reason): \(refusal.message)",
            remedy: refusal.remedy, sql: refusal.hidesSQL ? nil : sql)
    }

    // MARK: - ATTACH

    /// The error of an ATTACH that failed with `SQLITE_NOTADB` on a file that is a plaintext database: the key it
    /// used (its KEY, or the main database's without one) cannot open a file that is not encrypted.
    static func plaintextAttachmentError(file: String, sql: String?, underlying: DatabaseError) -> DatabaseError {
        DatabaseError(
            kind: .notEncrypted, code: underlying.extendedResultCode,
            message: "the file attached is a plaintext SQLite database (not encrypted), so the key the ATTACH used"
                + " (its KEY, or without one the main database's key) does not open it",
            remedy: .attachPlaintextWithEmptyKey, sql: sql)
    }

    /// Whether the file an ATTACH names (a path, or a `file:` URI) starts with SQLite's plaintext header.
    static func isPlaintextDatabase(fileName: String) -> Bool {
        guard let path = filePath(ofAttachName: fileName) else { return false }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var header = [UInt8](repeating: 0, count: 16)
        let count = header.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 16) }
        return count == 16 && header == Array("SQLite format 3\0".utf8)
    }

    /// The file path an ATTACH file name stands for: the name itself, or the path of a `file:` URI (without its
    /// authority, query and fragment, percent-decoded). `nil` for a memory database.
    static func filePath(ofAttachName name: String) -> String? {
        guard !name.isEmpty, name != ":memory:" else { return nil }
        guard name.lowercased().hasPrefix("file:") else { return name }
        var rest = Substring(name.dropFirst(5))
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if rest.hasPrefix("//") {
            // file://host/path: only an empty or "localhost" authority names a local file.
            let afterSlashes = rest.dropFirst(2)
            guard let slash = afterSlashes.firstIndex(of: "/") else { return nil }
            rest = afterSlashes[slash...]
        }
        var bytes: [UInt8] = []
        var utf8 = Array(rest.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == 0x25, utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        let path = String(decoding: bytes, as: UTF8.self)
        return path.isEmpty || path == ":memory:" ? nil : path
    }

    /// Steps a statement that attaches a database, then checks what it attached (see
    /// ``checkNewAttachments(handle:before:createdFiles:)``) before anything else can use it.
    /// A failed ATTACH removes the empty file it created (see ``FilesAnAttachMayCreate``).
    static func step(
        attachingStatement statement: OpaquePointer, fileNames: [String?], handle: ConnectionHandle
    ) throws -> CInt {
        let isFirstStep = sqlite3_stmt_busy(statement) == 0
        let before = isFirstStep ? attachedSchemas(handle) : nil
        let createdFiles = isFirstStep ? FilesAnAttachMayCreate(fileNames: fileNames) : nil
        let code = sqlite3_step(statement)
        if code == SQLITE_DONE, let before {
            try checkNewAttachments(handle: handle, before: before, createdFiles: createdFiles)
        } else if code != SQLITE_ROW {
            createdFiles?.removeCreatedEmptyFiles()
            if code & 0xFF == SQLITE_NOTADB {
                // "File is encrypted or is not a database" for a plaintext file says the opposite of the truth.
                handle.guardState.lastPlaintextAttachment = fileNames.lazy.compactMap { $0 }
                    .first(where: isPlaintextDatabase(fileName:))
            }
            // SQLite names the file in "unable to open database: file:x.db?key=…": the message would carry the key.
            if let message = sqlite3_errmsg(handle.sqliteConnection).map({ String(cString: $0) }),
               mentionsURIKey(message) {
                throw uriKeyRefusal.error(sql: nil)
            }
        }
        return code
    }

    /// Checks the schemas an ATTACH added:
    /// - a new (empty) file is made private (0600; SQLite gives its journal and WAL the same mode);
    /// - a schema keyed from its URI file name (`file:x.db?key=…`, given by a parameter or an expression, which the
    ///   authorizer does not see) is detached at once, the empty file it created removed, and the statement fails:
    ///   keys never travel in SQL;
    /// - on a keyed connection, a schema without a codec (no KEY on SQLCipher 3 before the main key was used,
    ///   `KEY ''`, an empty blob or bound value) is detached at once, the empty file it created removed, and the
    ///   statement fails: the next statement could write plaintext into it. Unless plaintext attachments are
    ///   allowed (``OpenOptions/allowsPlaintextAttachments``, or the library's own plaintext export).
    ///
    /// The file removed is one that did not exist before the statement ran, when the authorizer saw its name;
    /// otherwise (a name given by a parameter or an expression) the new schema's file when it is empty.
    static func checkNewAttachments(
        handle: ConnectionHandle, before: [(name: String, file: String)], createdFiles: FilesAnAttachMayCreate?
    ) throws {
        let state = handle.guardState
        let known = Set(before.map { $0.name.lowercased() })
        for schema in attachedSchemas(handle) where !known.contains(schema.name.lowercased()) {
            // A memory or temporary database ("" as its file) never reaches the disk.
            guard !schema.file.isEmpty else { continue }
            let isNewFile = regularFileSize(atPath: schema.file) == 0
            if isNewFile {
                _ = chmod(schema.file, 0o600)
            }
            let reason: String
            var remedy: DatabaseError.Remedy?
            if wasKeyedByURI(schema: schema.name, handle: handle) {
                reason = uriKeyRefusal.message
            } else if hasCodec(schema: schema.name, handle: handle) {
                state.keyedSchemas.insert(schema.name.lowercased())
                continue
            } else {
                state.keyedSchemas.remove(schema.name.lowercased())
                guard state.isKeyed, !state.allowsPlaintextAttachments,
                      !state.isAllowingLibraryPlaintextAttachment else { continue }
                reason = "ATTACH of \(displayed("", schema.name)) without a key is refused on an encrypted"
                    + " connection: the file would be written in plaintext"
                remedy = .attachWithKey
            }
            let detached = runLibraryStatement("DETACH DATABASE \(Connection.quoteIdentifier(schema.name))", handle)
            if detached {
                if let createdFiles, createdFiles.knowsEveryName {
                    createdFiles.removeCreatedEmptyFiles()
                } else if isNewFile && regularFileSize(atPath: schema.file) == 0 {
                    _ = unlink(schema.file)
                }
            } else {
                state.blockedSchemas.insert(schema.name.lowercased())
            }
            throw DatabaseError.notAuthorized(
                "not authorized: \(reason)" + (detached ? "" : "; it could not be detached and stays unusable"),
                remedy: remedy)
        }
    }

    /// The attached schemas, in order (`PRAGMA database_list`).
    static func attachedSchemas(_ handle: ConnectionHandle) -> [(name: String, file: String)] {
        var schemas: [(name: String, file: String)] = []
        withLibraryStatement("PRAGMA database_list", handle) { statement in
            while sqlite3_step(statement) == SQLITE_ROW {
                let name = sqlite3_column_text(statement, 1).map { String(cString: $0) } ?? ""
                let file = sqlite3_column_text(statement, 2).map { String(cString: $0) } ?? ""
                schemas.append((name, file))
            }
        }
        return schemas
    }

    /// Whether a schema has a codec: `cipher_page_size` returns a row only then, on both engines.
    static func hasCodec(schema: String, handle: ConnectionHandle) -> Bool {
        var hasRow = false
        withLibraryStatement("PRAGMA \(Connection.quoteIdentifier(schema)).cipher_page_size", handle) { statement in
            hasRow = sqlite3_step(statement) == SQLITE_ROW
        }
        return hasRow
    }

    private static func runLibraryStatement(_ sql: String, _ handle: ConnectionHandle) -> Bool {
        var code = SQLITE_ERROR
        let prepared = withLibraryStatement(sql, handle) { statement in
            code = sqlite3_step(statement)
        }
        return prepared && code == SQLITE_DONE
    }

    /// Compiles and hands over one of the library's own statements, with the guard and the caller's authorizer off.
    @discardableResult
    private static func withLibraryStatement(
        _ sql: String, _ handle: ConnectionHandle, _ body: (OpaquePointer) -> Void
    ) -> Bool {
        guard let sqliteConnection = handle.sqliteConnection else { return false }
        return handle.guardState.with(\.isRunningLibraryStatement) {
            var statement: OpaquePointer?
            defer { sqlite3_finalize(statement) }
            guard sqlite3_prepare_v2(sqliteConnection, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                return false
            }
            body(statement)
            return true
        }
    }
}

/// Why the guard refused a statement.
struct GuardRefusal {
    /// Why, without the advice (``remedy``).
    let message: String
    /// What to do instead, worded by whoever shows the error.
    let remedy: DatabaseError.Remedy?
    /// The SQL may hold a key (or a value typed where a key belongs): the error leaves it out.
    let hidesSQL: Bool

    init(_ message: String, remedy: DatabaseError.Remedy? = nil, hidesSQL: Bool = false) {
        self.message = message
        self.remedy = remedy
        self.hidesSQL = hidesSQL
    }

    /// The error for a statement refused for this reason.
    func error(sql: String?) -> DatabaseError {
        DatabaseError.notAuthorized("not authorized: \(message)", remedy: remedy, sql: hidesSQL ? nil : sql)
    }
}

/// The guard's state for one handle, passed to the authorizer as its context. It lives as long as the handle.
final class GuardState {
    /// The caller's authorizer, asked after the guard.
    var userAuthorizer: AuthorizerBox?
    /// Set only by the library around its own statements (cipher settings of an attached schema, the checks after
    /// an ATTACH): the guard and the caller's authorizer let them through.
    var isRunningLibraryStatement = false
    /// Set only by the library around its own plaintext ATTACH (`Connection.attach(_:as:encryption: .none)` and the
    /// plaintext export).
    var isAllowingLibraryPlaintextAttachment = false
    /// The main database has a key.
    var isKeyed = false
    /// ``OpenOptions/allowsPlaintextAttachments``.
    var allowsPlaintextAttachments = false
    /// The schemas (lowercased) known to have a codec.
    var keyedSchemas: Set<String> = []
    /// Plaintext attachments that could not be detached: every action on them is refused.
    var blockedSchemas: Set<String> = []
    /// The file names of the ATTACH actions compiled since ``beginCompiling()`` (`nil`: given by a parameter or an
    /// expression), so a statement knows whether it attaches and what it may create.
    var compiledAttachFileNames: [String?] = []
    /// The guard's last refusal, turned into the error's message.
    var lastRefusal: GuardRefusal?
    /// The plaintext database an ATTACH that just failed with `SQLITE_NOTADB` named, for its error.
    var lastPlaintextAttachment: String?

    /// Called before a statement of the caller's is compiled.
    func beginCompiling() {
        lastRefusal = nil
        compiledAttachFileNames.removeAll(keepingCapacity: true)
    }

    /// Runs `body` with `flag` set, and puts the flag back as it was (nested uses stay set).
    func with<T>(_ flag: ReferenceWritableKeyPath<GuardState, Bool>, _ body: () throws -> T) rethrows -> T {
        let was = self[keyPath: flag]
        self[keyPath: flag] = true
        defer { self[keyPath: flag] = was }
        return try body()
    }
}

extension Connection {
    /// Runs `body` with the guard letting the library's own statements through. Only library code calls it.
    func withLibraryStatements<T>(_ body: () throws -> T) rethrows -> T {
        try handle.guardState.with(\.isRunningLibraryStatement, body)
    }

    /// Runs `body` with a plaintext ATTACH allowed (the library's explicit `.none` paths).
    func withPlaintextAttachmentAllowed<T>(_ body: () throws -> T) rethrows -> T {
        try handle.guardState.with(\.isAllowingLibraryPlaintextAttachment, body)
    }

    /// Turns SQLCipher 4's engine log off for the whole process (the CLI reports errors itself).
    package func silenceEngineLog() throws {
        try withLibraryStatements { try execute("PRAGMA cipher_log_level = NONE") }
    }
}
