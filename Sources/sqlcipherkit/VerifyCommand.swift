import ArgumentParser
import SQLCipherKit

/// `sqlcipherkit verify`: opens with the key and checks every page (``Connection/checkIntegrity()``).
struct VerifyCommand: OperatorCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that a key opens a database and that every page is intact.",
        discussion: """
            Opens the database read-only with the key (a wrong key exits with 3), then runs PRAGMA quick_check \
            (every page is read, so decrypted and its HMAC checked) and, on SQLCipher 4.2 or later, PRAGMA \
            cipher_integrity_check, which must return no rows. A tampered or damaged page exits with 4; the \
            damaged pages are named and the problems summarised. Nothing is written. A progress line shows while \
            the check runs when standard error is a terminal.

            Example:
              sqlcipherkit verify notes.db --key-file notes.key
              sqlcipherkit verify legacy.db --key-env LEGACY_KEY --cipher-compatibility 3 --json
              sqlcipherkit verify old.db --key-file old.key --cipher-compatibility 2 --hmac-pgno be
            """
    )

    @Argument(help: ArgumentHelp("The database.", valueName: "database"))
    var database: String

    @OptionGroup(title: "Key")
    var key: KeyOptions

    @OptionGroup(title: "Cipher settings")
    var cipher: CipherOptions

    @OptionGroup(title: "Output")
    var output: OutputOptions

    var cipherOptionsForRun: CipherOptions? { cipher }

    /// Problems shown per check in text output; `--json` has them all.
    static let shownProblemCount = 5

    func run() throws {
        let encryption = try cipher.encryption(for: try key.loadKey())
        guard FileFacts.isNonEmptyFile(database) else {
            throw CommandFailure("\(database) does not exist or is empty; nothing to verify", kind: "missingFile")
        }
        let connection = try Connection(
            path: database, encryption: encryption, options: OpenOptions(mode: .readOnly))
        let pageCount = (try? connection.scalar("PRAGMA page_count", as: Int.self)) ?? nil
        let report = try PhaseProgress(label: "verify") {
            PhaseState(phase: "reading and checking every page (quick_check, cipher_integrity_check)", total: pageCount)
        }.run { try connection.checkIntegrity() }
        connection.close()
        let summary = VerificationReport(path: database, report: report)
        if Output.isJSON {
            Output.setJSONResult(summary)
        } else {
            for line in Self.text(summary) { Output.result(line) }
        }
        guard report.isIntact else {
            throw CommandFailure(
                "\(database) did not verify"
                    + (summary.damagedPages.isEmpty
                        ? "" : ": damaged page(s) \(Self.pageList(summary.damagedPages))"),
                status: .verificationFailed, kind: "damaged")
        }
    }

    static func text(_ summary: VerificationReport) -> [String] {
        var lines = ["\(summary.path): the key opens it"]
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
        lines.append(summary.verified ? "verified" : "NOT verified")
        return lines
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
    let path: String
    let verified: Bool
    /// quick_check's problems; empty when it answered `ok`.
    let quickCheckProblems: [String]
    let cipherIntegrityCheckRan: Bool
    /// cipher_integrity_check's rows that report damage; empty when it found none or did not run.
    let cipherIntegrityProblems: [String]
    /// Rows that are notices, not damage (such as "HMAC is not enabled" for a database without page HMACs).
    let cipherIntegrityNotices: [String]
    /// The page numbers the problems name, sorted, without duplicates.
    let damagedPages: [Int]

    init(path: String, report: IntegrityReport) {
        self.path = path
        verified = report.isIntact
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
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
