/// What ``Connection/checkIntegrity()`` found.
public struct IntegrityReport: Sendable, Hashable {
    /// The problems `PRAGMA quick_check` reported (or the error it stopped with); empty when it answered `ok`.
    public let quickCheckProblems: [String]

    /// The rows of `PRAGMA cipher_integrity_check` (each a page whose HMAC failed, or the error it stopped with);
    /// empty when every page verified; `nil` when it did not run (a plaintext database, or SQLCipher before 4.2).
    public let cipherIntegrityProblems: [String]?

    /// Rows of `PRAGMA cipher_integrity_check` that are notices, not damage: "HMAC is not enabled, unable to
    /// integrity check" for a database without page HMACs (nothing to check).
    public let cipherIntegrityNotices: [String]

    /// Creates a report.
    public init(quickCheckProblems: [String], cipherIntegrityProblems: [String]?, cipherIntegrityNotices: [String] = []) {
        self.quickCheckProblems = quickCheckProblems
        self.cipherIntegrityProblems = cipherIntegrityProblems
        self.cipherIntegrityNotices = cipherIntegrityNotices
    }

    /// Whether a row of `PRAGMA cipher_integrity_check` is a notice rather than a damaged page.
    static func isNotice(_ row: String) -> Bool {
        row.lowercased().hasPrefix("hmac is not enabled")
    }

    /// `true` when neither check found a problem.
    public var isIntact: Bool {
        quickCheckProblems.isEmpty && (cipherIntegrityProblems ?? []).isEmpty
    }
}

extension Connection {
    /// Checks every page: `PRAGMA quick_check` (b-tree structure; reading a page decrypts it and checks its HMAC)
    /// and, on SQLCipher 4.2 and later, `PRAGMA cipher_integrity_check` (every page's HMAC, including free pages).
    ///
    /// A tampered page usually makes `quick_check` stop with `SQLITE_CORRUPT` instead of answering: such an error is
    /// reported as a problem, not thrown, so the report is complete either way.
    ///
    /// - Returns: The report; ``IntegrityReport/isIntact`` says whether the database passed.
    /// - Throws: ``DatabaseError/connectionClosed``, or an error that is not about the file's content (such as
    ///   `SQLITE_BUSY`).
    ///
    /// See [PRAGMA quick_check](https://www.sqlite.org/pragma.html#pragma_quick_check) and
    /// [cipher_integrity_check](https://www.zetetic.net/sqlcipher/sqlcipher-api/#cipher_integrity_check).
    public func checkIntegrity() throws -> IntegrityReport {
        _ = try checkedConnection()
        let quickCheck = try problems { try quickCheckProblems() }
        var cipherCheck: [String]?
        var notices: [String] = []
        if checksCipherIntegrity {
            let rows = try problems { try cipherIntegrityRows() }
            cipherCheck = rows.filter { !IntegrityReport.isNotice($0) }
            notices = rows.filter(IntegrityReport.isNotice)
        }
        return IntegrityReport(
            quickCheckProblems: quickCheck, cipherIntegrityProblems: cipherCheck, cipherIntegrityNotices: notices)
    }

    /// Whether ``cipherIntegrityRows()`` applies: an encrypted database on SQLCipher 4.2 or later.
    var checksCipherIntegrity: Bool {
        isEncrypted && SQLCipher.supports(.cipherIntegrityCheck)
    }

    /// `PRAGMA cipher_integrity_check`'s rows, where ``checksCipherIntegrity``. No rows means every page verified
    /// (Docs/EngineNotes.md#integrity-check); with page HMACs off the engine answers one notice row instead
    /// (``IntegrityReport/isNotice(_:)``): nothing to check, not damage. The one reader of the PRAGMA: the integrity
    /// report and copy verification go through it.
    func cipherIntegrityRows() throws -> [String] {
        try all("PRAGMA cipher_integrity_check", as: String.self)
    }

    private func problems(_ check: () throws -> [String]) throws -> [String] {
        do {
            return try check()
        } catch let error as DatabaseError {
            switch error.resultCode {
            case DatabaseError.SQLITE_CORRUPT, DatabaseError.SQLITE_NOTADB, DatabaseError.SQLITE_IOERR,
                 DatabaseError.SQLITE_FORMAT:
                return [error.message]
            default:
                throw error
            }
        }
    }
}
