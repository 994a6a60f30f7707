#if !Replication  // trait Replication (Package.swift)
import ArgumentParser
import SQLCipherKit

/// `replicate`, `restore` and `snapshots` in a build without the package trait Replication: instead of "unknown
/// subcommand", as if the feature did not exist, each says where to get it (exit 2, `error.kind`
/// `notInThisBuild` in `--json`). They take any arguments and are hidden from `--help`, which lists what this build
/// can do (Docs/CLI.md, "Installing").
enum ReplicationNotInThisBuild {
    static let commands: [any ParsableCommand.Type] = [Replicate.self, Restore.self, Snapshots.self, Promote.self]

    /// What each of them answers.
    static func failure(_ name: String) -> CommandFailure {
        CommandFailure(
            """
            `\(name)` is not in this build of sqlcipherkit: replicate, restore, snapshots and promote come with the package \
            trait Replication, which a default build leaves out. Install the Debian package, which has them \
            (sudo apt-get install ./sqlcipherkit_\(SQLCipherKitVersion.string)-1_amd64.deb, made by \
            Packaging/build-deb), or build them from source: \
            swift build -c release --traits Replication --product sqlcipherkit
            """,
            status: .usage, kind: "notInThisBuild")
    }

    /// What `--help` of each prints: the answer, and the two command lines.
    static func discussion(_ name: String) -> String {
        failure(name).message + """


            Examples (either gives replicate, restore and snapshots):
              sudo apt-get install ./sqlcipherkit_\(SQLCipherKitVersion.string)-1_amd64.deb
              swift build -c release --traits Replication --product sqlcipherkit
            """
    }

    static let abstract = "Not in this build (package trait Replication): see Docs/CLI.md, \"Installing\"."

    /// Any arguments at all (`--json` still gives the JSON object): the answer is the same.
    struct Replicate: OperatorCommand {
        static let configuration = CommandConfiguration(
            commandName: "replicate", abstract: abstract, discussion: discussion("replicate"),
            shouldDisplay: false)
        @OptionGroup var output: OutputOptions
        @Argument(parsing: .allUnrecognized) var arguments: [String] = []
        func run() throws { throw failure("replicate") }
    }

    struct Restore: OperatorCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore", abstract: abstract, discussion: discussion("restore"), shouldDisplay: false)
        @OptionGroup var output: OutputOptions
        @Argument(parsing: .allUnrecognized) var arguments: [String] = []
        func run() throws { throw failure("restore") }
    }

    struct Promote: OperatorCommand {
        static let configuration = CommandConfiguration(
            commandName: "promote", abstract: abstract, discussion: discussion("promote"), shouldDisplay: false)
        @OptionGroup var output: OutputOptions
        @Argument(parsing: .allUnrecognized) var arguments: [String] = []
        func run() throws { throw failure("promote") }
    }

    struct Snapshots: OperatorCommand {
        static let configuration = CommandConfiguration(
            commandName: "snapshots", abstract: abstract, discussion: discussion("snapshots"),
            shouldDisplay: false)
        @OptionGroup var output: OutputOptions
        @Argument(parsing: .allUnrecognized) var arguments: [String] = []
        func run() throws { throw failure("snapshots") }
    }
}
#endif
