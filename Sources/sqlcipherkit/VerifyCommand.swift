import ArgumentParser
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `sqlcipherkit verify`: opens with the key and checks every page and the write-ahead log
/// (``DatabaseVerification``).
struct VerifyCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that a key opens a database and that every page is intact.",
        discussion: CipherOptions.withFoldedNote("""
            Opens the database read-only with the key (a wrong key exits with 3), then runs PRAGMA quick_check \
            (every page is read, so decrypted and its HMAC checked) and, on SQLCipher 4.2 or later, PRAGMA \
            cipher_integrity_check, which must return no rows, and checks the -wal frame by frame: a frame that \
            fails its checksum makes SQLite drop it and every commit after it. A tampered or damaged page, or a \
            commit the -wal would lose, exits with 4; the damaged pages and the frame are named and the problems \
            summarised. A hot journal (a transaction a crash left unfinished) is reported, and the database is \
            checked as its rollback will leave it. Nothing is written and nothing is created: a rollback is played \
            in memory (about the journal's size), and no -wal or -shm is made. A progress line shows while the \
            check runs when standard error is a terminal (--progress plain: timestamped lines for logs).

            Example:
              sqlcipherkit verify notes.db --key-file notes.key
              sqlcipherkit verify legacy.db --key-env LEGACY_KEY --cipher-compatibility 3 \\
                  --json
              sqlcipherkit verify old.db --key-file old.key --cipher-compatibility 2 \\
                  --hmac-pgno be
            """)
    )

    @Argument(help: ArgumentHelp("The database.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings (advanced)", visibility: .hidden)
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    @OptionGroup(title: "Output")
    var display: ProgressOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    /// Problems shown per check in text output; `--json` has them all.
    static let shownProblemCount = 5

    func run() throws {
        let encryption = try cipher.encryption(for: try key.loadKey())
        try FileFacts.requireDatabase(database, nothingTo: "verify")
        let verification = try PhaseProgress(
            label: "verify", mode: display.progress, interruptNote: "nothing changed: verify only reads \(database)"
        ) {
            PhaseState(phase: "reading and checking every page (quick_check, cipher_integrity_check) and the -wal")
        }.run(isSuccess: { $0.isIntact }) {
            try DatabaseVerification.verify(path: database, encryption: encryption, busyTimeout: .seconds(5))
        }
        let summary = VerificationReport(verification)
        if Output.isJSON {
            Output.setJSONResult(summary)
        } else {
            for line in Self.text(summary) { Output.result(line) }
        }
        guard verification.isIntact else {
            var reasons: [String] = []
            if !summary.damagedPages.isEmpty { reasons.append("damaged page(s) \(Self.pageList(summary.damagedPages))") }
            if let wal = summary.writeAheadLog, !wal.intact { reasons.append(Self.walDamage(wal)) }
            throw CommandFailure(
                "\(database) did not verify" + (reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")),
                status: .verificationFailed, kind: "damaged")
        }
    }

    static func text(_ summary: VerificationReport) -> [String] {
        var lines = ["\(summary.path): the key opens it"]
        if summary.hotJournal {
            lines.append(
                "hot journal: a transaction did not finish (a crash or a killed process); checked as its rollback will"
                    + " leave the database, rolled back in memory only (the file and its journal are unchanged; the"
                    + " next read-write open rolls it back)")
        }
        lines += problemLines("quick_check", summary.quickCheckProblems, okText: "ok")
        if summary.cipherIntegrityCheckRan {
            lines += problemLines("cipher_integrity_check", summary.cipherIntegrityProblems, okText: "ok (no rows)")
            if !summary.cipherIntegrityNotices.isEmpty {
                lines.append("cipher_integrity_check notice: " + summary.cipherIntegrityNotices.joined(separator: "; "))
            }
        } else {
            lines.append("cipher_integrity_check: not run (needs SQLCipher 4.2; linked: \(SQLCipher.version))")
        }
        if !summary.damagedPages.isEmpty {
            lines.append("damaged pages (\(summary.damagedPages.count)): \(pageList(summary.damagedPages))")
        }
        if let wal = summary.writeAheadLog {
            lines.append("write-ahead log: " + walText(wal))
        } else if summary.writeAheadLogInUse {
            lines.append(
                "write-ahead log: in use by another connection; its pages were read through the shared WAL index, but"
                    + " the file was not checked frame by frame")
        }
        lines.append(summary.verified ? "verified" : "NOT verified")
        return lines
    }

    static func walText(_ wal: VerificationReport.WriteAheadLog) -> String {
        if wal.intact {
            let counts = "\(wal.frameCount) frame(s), \(wal.commitCount) commit(s)"
            return wal.headerProblem == nil ? counts + ", checksums ok" : counts + "; header not valid"
                + " (\(wal.headerProblem!)): SQLite ignores the file, and no commit is in it"
        }
        return "DAMAGED: " + walDamage(wal)
    }

    static func walDamage(_ wal: VerificationReport.WriteAheadLog) -> String {
        let lost = wal.lastLostFrame.map { " (frames \(wal.validFrameCount + 1)-\($0))" } ?? ""
        if let problem = wal.headerProblem {
            return "the -wal header is not valid (\(problem)): SQLite ignores the whole file and drops"
                + " \(wal.lostCommitCount) commit(s)\(lost) without an error"
        }
        return "frame \(wal.firstDamagedFrame ?? 0) of the -wal does not match its checksum: SQLite stops reading at"
            + " it and drops \(wal.lostCommitCount) commit(s)\(lost) without an error"
    }

    private static func problemLines(_ name: String, _ problems: [String], okText: String) -> [String] {
        guard !problems.isEmpty else { return ["\(name): \(okText)"] }
        var lines = ["\(name): \(problems.count) problem(s)"]
        lines += problems.prefix(shownProblemCount).map { "  \($0)" }
        if problems.count > shownProblemCount {
            lines.append("  … and \(problems.count - shownProblemCount) more (all of them with --json)")
        }
        return lines
    }

    /// `3, 7, 9-14, 20` (ranges collapsed; at most 20 items, then a count).
    static func pageList(_ pages: [Int]) -> String {
        var items: [String] = []
        var index = 0
        while index < pages.count {
            var end = index
            while end + 1 < pages.count && pages[end + 1] == pages[end] + 1 { end += 1 }
            items.append(end > index ? "\(pages[index])-\(pages[end])" : "\(pages[index])")
            index = end + 1
        }
        guard items.count > 20 else { return items.joined(separator: ", ") }
        return items.prefix(20).joined(separator: ", ") + ", … (\(items.count - 20) more ranges)"
    }
}

/// `verify --json`'s `result`.
struct VerificationReport: Encodable, Sendable {
    /// `writeAheadLog` in `verify --json` (``WriteAheadLogReport``).
    struct WriteAheadLog: Encodable, Sendable {
        let byteCount: Int
        let intact: Bool
        /// `badMagic`, `badPageSize`, `unknownVersion`, `badChecksum`, or `null`.
        @Nullable var headerProblem: String?
        let frameCount: Int
        let validFrameCount: Int
        let commitCount: Int
        @Nullable var firstDamagedFrame: Int?
        let lostCommitCount: Int
        @Nullable var lastLostFrame: Int?

        private enum CodingKeys: String, CodingKey {
            case byteCount, intact, headerProblem, frameCount, validFrameCount, commitCount, firstDamagedFrame,
                 lostCommitCount, lastLostFrame
        }

        /// Every key always present (`null` for what does not apply), as Docs/CLI.md lists them.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(byteCount, forKey: .byteCount)
            try container.encode(intact, forKey: .intact)
            try container.encode(headerProblem, forKey: .headerProblem)
            try container.encode(frameCount, forKey: .frameCount)
            try container.encode(validFrameCount, forKey: .validFrameCount)
            try container.encode(commitCount, forKey: .commitCount)
            try container.encode(firstDamagedFrame, forKey: .firstDamagedFrame)
            try container.encode(lostCommitCount, forKey: .lostCommitCount)
            try container.encode(lastLostFrame, forKey: .lastLostFrame)
        }

        init(_ report: WriteAheadLogReport) {
            byteCount = report.byteCount
            intact = report.isIntact
            headerProblem = report.headerProblem?.rawValue
            frameCount = report.frameCount
            validFrameCount = report.validFrameCount
            commitCount = report.commitCount
            firstDamagedFrame = report.firstDamagedFrame
            lostCommitCount = report.lostCommitCount
            lastLostFrame = report.lastLostFrame
        }
    }

    let path: String
    let verified: Bool
    /// A hot journal was found; the checks read the database as its rollback will leave it.
    let hotJournal: Bool
    /// quick_check's problems; empty when it answered `ok`.
    let quickCheckProblems: [String]
    let cipherIntegrityCheckRan: Bool
    /// cipher_integrity_check's rows that report damage; empty when it found none or did not run.
    let cipherIntegrityProblems: [String]
    /// Rows that are notices, not damage (such as "HMAC is not enabled" for a database without page HMACs).
    let cipherIntegrityNotices: [String]
    /// The page numbers the problems name, sorted, without duplicates.
    let damagedPages: [Int]
    /// The -wal checked frame by frame; `null` when there is none or it is in use.
    @Nullable var writeAheadLog: WriteAheadLog?
    /// A -wal exists and another connection has the database open: it was not checked frame by frame.
    let writeAheadLogInUse: Bool

    private enum CodingKeys: String, CodingKey {
        case path, verified, hotJournal, quickCheckProblems, cipherIntegrityCheckRan, cipherIntegrityProblems,
             cipherIntegrityNotices, damagedPages, writeAheadLog, writeAheadLogInUse
    }

    /// Every key always present (`writeAheadLog` is `null` when there is no -wal or it is in use).
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(verified, forKey: .verified)
        try container.encode(hotJournal, forKey: .hotJournal)
        try container.encode(quickCheckProblems, forKey: .quickCheckProblems)
        try container.encode(cipherIntegrityCheckRan, forKey: .cipherIntegrityCheckRan)
        try container.encode(cipherIntegrityProblems, forKey: .cipherIntegrityProblems)
        try container.encode(cipherIntegrityNotices, forKey: .cipherIntegrityNotices)
        try container.encode(damagedPages, forKey: .damagedPages)
        try container.encode(writeAheadLog, forKey: .writeAheadLog)
        try container.encode(writeAheadLogInUse, forKey: .writeAheadLogInUse)
    }

    init(_ verification: DatabaseVerification) {
        let report = verification.integrity
        path = verification.path
        verified = verification.isIntact
        hotJournal = verification.hasHotJournal
        writeAheadLog = verification.writeAheadLog.map(WriteAheadLog.init)
        writeAheadLogInUse = verification.isWriteAheadLogInUse
        // quick_check may answer one row holding many lines ("*** in database main ***\nPage 7: …"): one entry each.
        quickCheckProblems = report.quickCheckProblems
            .flatMap { $0.split(separator: "\n").map { $0.trimmingWhitespace() } }
            .filter { !$0.isEmpty && !$0.hasPrefix("*** in database") }
        cipherIntegrityCheckRan = report.cipherIntegrityProblems != nil
        cipherIntegrityProblems = report.cipherIntegrityProblems ?? []
        cipherIntegrityNotices = report.cipherIntegrityNotices
        damagedPages = Array(Set((quickCheckProblems + cipherIntegrityProblems).flatMap(Self.pageNumbers))).sorted()
    }

    /// The numbers after "page" in a problem line ("HMAC verification failed for page 7", "Page 12: …",
    /// "On tree page 3 cell 2: …").
    static func pageNumbers(in line: String) -> [Int] {
        let words = line.lowercased().split(whereSeparator: { !$0.isLetter && !$0.isNumber })
        var pages: [Int] = []
        for (index, word) in words.enumerated() where word == "page" && index + 1 < words.count {
            if let number = Int(words[index + 1]), number > 0 { pages.append(number) }
        }
        return pages
    }
}

/// File-system facts the commands check before calling the library, for clearer messages.
enum FileFacts {
    static func isNonEmptyFile(_ path: String) -> Bool {
        let format = DatabaseFileInspection.inspect(path: path).format
        return format != .missing && format != .empty && format != .notARegularFile
    }

    /// Whether `path` names a folder (symbolic links followed).
    static func isFolder(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// A folder given where a database file belongs is a mistake of its own, not a missing file.
    static func refuseFolder(_ path: String) throws {
        guard isFolder(path) else { return }
        throw CommandFailure("\(path) is a folder, not a database file", kind: "fileSystem")
    }

    /// The database a command reads must be a file with content: says which of missing, a folder or empty it is.
    static func requireDatabase(_ path: String, nothingTo verb: String) throws {
        switch DatabaseFileInspection.inspect(path: path).format {
        case .missing:
            throw CommandFailure("\(path) does not exist; nothing to \(verb)", kind: "missingFile")
        case .notARegularFile:
            try refuseFolder(path)
            throw CommandFailure("\(path) is not a regular file; nothing to \(verb)", kind: "fileSystem")
        case .empty:
            throw CommandFailure("\(path) is empty (0 bytes), not a database yet; nothing to \(verb)", kind: "missingFile")
        case .plaintext, .plaintextHeader, .encrypted:
            return
        }
    }

    /// A destination that must not exist yet (`encrypt`, `decrypt`, `keygen`): the same kind as `backup`'s.
    static func refuseExistingDestination(_ path: String, replaceOption: String? = nil) throws {
        guard DatabaseFileInspection.inspect(path: path).format != .missing else { return }
        let advice = replaceOption.map { "pass \($0) to replace it" } ?? "choose another name or remove it first"
        throw CommandFailure("\(path) exists; \(advice) (nothing was written)", kind: "destinationExists")
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
