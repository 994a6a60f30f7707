// The default build (no package trait Replication) is the CLI these tests run; with the trait on, the real commands
// are tested in SQLCipherKitReplicationTests. .ci/test runs this suite in its default-traits leg.
#if !Replication
import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

/// `replicate`, `restore` and `snapshots` in a build without them: a usage error (exit 2) that says how to get them,
/// not "unknown subcommand".
@Suite("sqlcipherkit without the Replication trait")
struct ReplicationNotInThisBuildTests {
    /// A command line an operator would type for each, from Docs/CLI.md.
    static let commandLines: [[String]] = [
        ["replicate", "notes.db", "--key-file", "notes.key", "--to", "file:///mnt/replica/notes"],
        ["restore", "file:///mnt/replica/notes", "notes.db", "--at", "2026-11-24T10:00:00Z", "--key-file", "notes.key"],
        ["snapshots", "file:///mnt/replica/notes"],
        ["snapshots"],
    ]

    /// The parts of the answer an operator needs: what is missing, and both ways to get it.
    static func expectExplains(_ text: String, command: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(text.contains("`\(command)` is not in this build"), "\(text)", sourceLocation: sourceLocation)
        #expect(text.contains("package trait Replication"), "\(text)", sourceLocation: sourceLocation)
        #expect(text.contains("swift build -c release --traits Replication"), "\(text)", sourceLocation: sourceLocation)
        #expect(
            text.contains("apt-get install ./sqlcipherkit_\(SQLCipherKitVersion.string)-1_amd64.deb"), "\(text)",
            sourceLocation: sourceLocation)
    }

    @Test("each answers with the trait, the build line and the Debian package, exit 2, nothing on standard output")
    func plainAnswer() throws {
        let scratch = try Scratch()
        for arguments in Self.commandLines {
            let result = try runSubprocess(arguments, in: scratch)
            #expect(result.status == CLIExitStatus.usage.rawValue, "\(arguments): \(result)")
            #expect(result.standardOutput.isEmpty, "\(arguments): \(result)")
            #expect(result.standardError.hasPrefix("error: "), "\(arguments): \(result)")
            Self.expectExplains(result.standardError, command: arguments[0])
        }
        // Nothing was created in the working folder (no database, no key file, no temporary).
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
            .filter { !$0.hasPrefix(".running-") }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("with --json: one object, exit 2, error.kind notInThisBuild, the same message")
    func jsonAnswer() throws {
        let scratch = try Scratch()
        for arguments in Self.commandLines {
            let result = try runSubprocess(arguments + ["--json"], in: scratch)
            #expect(result.status == CLIExitStatus.usage.rawValue, "\(arguments): \(result)")
            let envelope = try #require(jsonEnvelope(result), "\(arguments): \(result)")
            #expect(envelope["command"] as? String == arguments[0])
            #expect(envelope["ok"] as? Bool == false)
            #expect(envelope["exitStatus"] as? Int == 2)
            #expect(envelope["result"] is NSNull)
            let error = try #require(envelope["error"] as? [String: Any])
            #expect(error["kind"] as? String == "notInThisBuild")
            #expect(error["code"] is NSNull)
            Self.expectExplains(error["message"] as? String ?? "", command: arguments[0])
            // Docs/CLI.md's exit-status table lists the kind under status 2.
            #expect(DocumentedJSONSchema.kindsByStatus[2]?.contains("notInThisBuild") == true)
        }
    }

    @Test("--help lists what this build can do, without them; their own --help explains, and a typo is still caught")
    func help() throws {
        let root = SQLCipherKitCommand.helpMessage(for: SQLCipherKitCommand.self, columns: 80)
        for name in ["replicate", "restore", "snapshots"] {
            #expect(!root.contains(" \(name) "), "\(root)")
        }
        let scratch = try Scratch()
        let own = try runSubprocess(["snapshots", "--help"], in: scratch)
        #expect(own.status == 0, "\(own)")
        Self.expectExplains(own.standardOutput.replacingOccurrences(of: "\n", with: " "), command: "snapshots")
        let typo = try runSubprocess(["replicat", "notes.db"], in: scratch)
        #expect(typo.status == CLIExitStatus.usage.rawValue)
        #expect(typo.standardError.contains("did you mean 'replicate'?"), "\(typo)")
    }
}
#endif
