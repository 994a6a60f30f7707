import CSQLCipher

/// What the guard keeps about a ``Statement`` that attaches a database, so that what it attached is checked once it
/// has run (``EncryptionGuard/step(attachingStatement:fileNames:handle:)``): the file names its ATTACH actions name,
/// and, for `ATTACH ? AS …`, the parameter that gives the name and the text bound to it, so that a failed ATTACH
/// knows what it created. A statement that attaches nothing keeps an empty one.
///
/// Stored inline in the statement (a struct, not a reference): ``attachesDatabase``, read on every step and every
/// bind, is one load at a fixed offset of the statement, as when it was a property of the statement itself.
@usableFromInline
struct AttachBookkeeping {
    /// The statement attaches a database: what it attached is checked once it has run (see `EncryptionGuard`).
    @usableFromInline
    let attachesDatabase: Bool
    /// The file names its ATTACH actions name (`nil`: given by a parameter or an expression).
    let fileNames: [String?]
    /// The parameter that gives an ATTACH's file name (`ATTACH ? AS …`), so a failed ATTACH knows what it created.
    let fileParameter: CInt?
    /// The text bound to ``fileParameter``.
    var boundFileName: String?

    /// The bookkeeping of a statement the ``StatementCompiler`` compiled: the guard noted the ATTACH actions it saw.
    init(compiled: CompiledStatement) {
        self.fileNames = compiled.attachFileNames
        self.attachesDatabase = !compiled.attachFileNames.isEmpty
        self.fileParameter = compiled.attachFileNames == [nil]
            ? EncryptionGuard.attachFileParameter(of: compiled.sqliteStatement) : nil
    }

    /// Remembers the file name bound to an ATTACH (never another parameter: the KEY's is a key).
    mutating func noteBinding(_ value: DatabaseValue, at index: CInt) {
        guard index == fileParameter else { return }
        if case .text(let name) = value {
            boundFileName = name
        } else {
            boundFileName = nil
        }
    }

    /// The file names the guard checks when the statement steps: the name bound to the one parameter that gives it,
    /// when there is one.
    var fileNamesToCheck: [String?] {
        fileNames == [nil] && boundFileName != nil ? [boundFileName] : fileNames
    }
}
