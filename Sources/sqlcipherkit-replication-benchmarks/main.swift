// sqlcipherkit-replication-benchmarks: replication of a DatabaseService measured (Docs/Replication.md), and the
// writer process of .ci/replication-crash-campaign. Exit code 0 whatever the figures; 1 on errors.
//
//   sqlcipherkit-replication-benchmarks [all|throughput|lag|restore|snapshot] [--megabytes N] [--seconds N]
//       [--rate N] [--writes N] [--folder PATH] [--replica s3://BUCKET/PREFIX --endpoint URL]
//   [--store-folder PATH]
//   (--store-folder: where the throughput and lag rounds' folder stores go, e.g. a tmpfs; --replica: the snapshot
//   and restore figures through that store; credentials from AWS_ACCESS_KEY_ID and
//   AWS_SECRET_ACCESS_KEY; the bucket must exist)
//   sqlcipherkit-replication-benchmarks writer --database DB --key-file KEY --replica FOLDER
//       [--sync-interval-ms 200] [--rate 300] [--checkpoint-frames 200] [--snapshot-seconds 5]
//   sqlcipherkit-replication-benchmarks power-loss pool|queue|hand-over --database DB --key-file KEY [--commits 3]
//       [--journal delete]   (the writers of Tests/PowerLoss/powerloss.py: PowerLossWriter.swift)
#if Services  // trait Services (Package.swift), which turns on Replication
import Foundation
import Logging

let arguments = Array(CommandLine.arguments.dropFirst())

/// The value after `--name`, or `fallback`.
func option(_ name: String, _ fallback: String) -> String {
    guard let index = arguments.firstIndex(of: "--" + name), index + 1 < arguments.count else { return fallback }
    return arguments[index + 1]
}

func intOption(_ name: String, _ fallback: Int) -> Int { Int(option(name, "\(fallback)")) ?? fallback }

/// The value after `--name`, or `nil` when the option is not given.
func optionalOption(_ name: String) -> String? { arguments.contains("--" + name) ? option(name, "") : nil }

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
    return handler
}

let mode = arguments.first.flatMap { $0.hasPrefix("--") ? nil : $0 } ?? "all"
do {
    switch mode {
    case "writer":
        try await CrashWriter(
            database: option("database", ""), keyFile: option("key-file", ""), replica: option("replica", ""),
            syncInterval: .milliseconds(intOption("sync-interval-ms", 200)), rate: intOption("rate", 300),
            checkpointFrames: intOption("checkpoint-frames", 200),
            snapshotInterval: .seconds(intOption("snapshot-seconds", 5))
        ).run()
    case "power-loss":
        try await PowerLossWriter(
            mode: arguments.count > 1 ? arguments[1] : "", database: option("database", ""),
            keyFile: option("key-file", ""), commits: intOption("commits", 3), journal: option("journal", "delete")
        ).run()
    case "all", "throughput", "lag", "restore", "snapshot":
        let benchmarks = ReplicationBenchmarks(
            folder: option("folder", NSTemporaryDirectory()), megabytes: intOption("megabytes", 1024),
            seconds: intOption("seconds", 20), rate: intOption("rate", 1000), writes: intOption("writes", 5000),
            replicaURL: optionalOption("replica"), endpoint: optionalOption("endpoint"),
            storeFolder: optionalOption("store-folder"))
        try await benchmarks.run(mode)
    default:
        FileHandle.standardError.write(Data("unknown mode \(mode); see the comment at the top of main.swift\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
#else
import TraitFallback

exitBecauseTraitIsOff(program: "sqlcipherkit-replication-benchmarks", trait: "Services")
#endif
