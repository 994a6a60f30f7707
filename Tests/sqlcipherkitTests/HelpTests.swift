import ArgumentParser
import Foundation
import Testing
@testable import sqlcipherkit

/// `--help` at 80 columns (the width of a pipe or a small terminal): every example can be pasted as it is printed,
/// and the cipher options are folded where they only matter for unusual files.
@Suite("sqlcipherkit --help")
struct HelpTests {
    /// The root command and every subcommand, hidden ones included.
    static var commands: [any ParsableCommand.Type] {
        [SQLCipherKitCommand.self] + SQLCipherKitCommand.configuration.subcommands
    }

    static func help(_ command: any ParsableCommand.Type, hidden: Bool = false) -> String {
        SQLCipherKitCommand.helpMessage(for: command, includeHidden: hidden, columns: 80)
    }

    /// The example commands of a discussion: the lines after `Example:`/`Examples:` that start with
    /// `sqlcipherkit`, each with its continuation lines (a line ending in ` \` goes on on the next).
    static func examples(of command: any ParsableCommand.Type) -> [[String]] {
        var examples: [[String]] = []
        var inExamples = false
        var continues = false
        for line in command.configuration.discussion.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("Example") && text.hasSuffix(":") {
                inExamples = true
                continue
            }
            guard inExamples, !text.isEmpty else {
                inExamples = false
                continue
            }
            if continues {
                examples[examples.count - 1].append(text)
            } else if text.hasPrefix("sqlcipherkit") {
                examples.append([text])
            }
            continues = text.hasSuffix(" \\")
        }
        return examples
    }

    @Test("every subcommand has examples, and at 80 columns each of their lines is printed whole")
    func examplesPaste() {
        var checked = 0
        for command in Self.commands {
            let name = command.configuration.commandName ?? "?"
            let printed = Set(Self.help(command).split(separator: "\n").map {
                $0.trimmingCharacters(in: .whitespaces)
            })
            let examples = Self.examples(of: command)
            if command.configuration.shouldDisplay {
                #expect(!examples.isEmpty, "\(name) --help has no example")
            }
            for example in examples {
                // The last line of an example ends the command; every other one says it goes on.
                #expect(!example.last!.hasSuffix("\\"), "\(name): \(example)")
                for line in example {
                    #expect(printed.contains(line), "\(name) --help at 80 columns breaks the example line: \(line)")
                    checked += 1
                }
            }
        }
        #expect(checked > 40)
    }

    @Test("no line of any --help is wider than 80 columns (but the USAGE synopsis, which ArgumentParser never wraps)")
    func width() {
        for command in Self.commands {
            for line in Self.help(command).split(separator: "\n") where !line.hasPrefix("USAGE: ") {
                #expect(line.count <= 80, "\(command.configuration.commandName ?? "?"): \(line)")
            }
        }
    }

    /// The 11 cipher options.
    static let cipherOptions = [
        "--cipher-compatibility", "--page-size", "--kdf-iterations", "--hmac", "--kdf-algorithm", "--hmac-algorithm",
        "--plaintext-header-size", "--salt-file", "--hmac-pgno", "--fast-kdf-iterations", "--hmac-salt-mask",
    ]

    @Test("the cipher options are folded under --help-hidden, and the short help says so; encrypt and migrate show them")
    func cipherOptionsFolded() {
        let shown: Set<String> = ["encrypt", "migrate"]
        var folded = 0
        for command in Self.commands {
            let name = command.configuration.commandName ?? "?"
            let full = Self.help(command, hidden: true)
            guard full.contains("--kdf-iterations <n>") else { continue }
            let short = Self.help(command)
            for option in Self.cipherOptions {
                #expect(full.contains(option), "\(name) --help-hidden lacks \(option)")
            }
            if shown.contains(name) {
                #expect(short.contains("--kdf-iterations <n>"), "\(name) --help should show the cipher options")
            } else {
                folded += 1
                for option in Self.cipherOptions where option != "--hmac" {
                    #expect(!short.contains(option + " <"), "\(name) --help shows \(option)")
                }
                #expect(short.contains("listed by --help-hidden"), "\(name) --help does not say how to see them")
                #expect(full.contains("CIPHER SETTINGS (ADVANCED)"), "\(name) --help-hidden: no advanced heading")
            }
        }
        // rotate, verify, info, decrypt, backup, exec, shell; replicate and restore with the Replication trait.
        #expect(folded >= 7)
    }

    @Test("--progress is offered by the long commands")
    func progressOption() {
        let long: Set<String> = ["backup", "rotate", "migrate", "encrypt", "decrypt", "restore", "verify"]
        // Hidden commands are left out: without the Replication trait `restore` is a hidden one that only says how to
        // get it (ReplicationNotInThisBuildTests).
        for command in Self.commands where command.configuration.shouldDisplay {
            let name = command.configuration.commandName ?? "?"
            let short = Self.help(command)
            #expect(short.contains("--progress <mode>") == long.contains(name), "\(name)")
        }
    }
}
