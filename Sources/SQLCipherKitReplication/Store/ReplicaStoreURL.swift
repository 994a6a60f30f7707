#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// The store a replica URL names: `file:///path/to/folder` (a ``FolderReplicaStore``) or
/// `s3://BUCKET/PREFIX` (an S3-compatible bucket, with `endpoint` for a store other than AWS).
///
/// ```swift
/// let store = try replicaStore(for: "file:///mnt/replica/notes")
/// ```
///
/// - Parameters:
///   - url: The replica's URL.
///   - endpoint: For `s3://`: the store's endpoint URL (`http://127.0.0.1:8080`); `nil` for AWS.
/// - Returns: The store.
/// - Throws: ``DatabaseError`` (`invalidArgument`) for a URL of another scheme or without a path, or a `file://`
///   URL naming something that is not a folder. A folder that does not exist is a store holding nothing (a
///   replicator creates it as it writes; a restore from it says that nothing is stored there).
public func replicaStore(for url: String, endpoint: String? = nil) throws -> any ReplicaStore {
    if url.hasPrefix("file://") {
        guard endpoint == nil else {
            throw DatabaseError(.invalidArgument, "an endpoint applies to s3:// replicas only, not \(url)")
        }
        let path = String(url.dropFirst("file://".count))
        guard path.hasPrefix("/"), path.count > 1, !path.contains("\0") else {
            throw DatabaseError(
                .invalidArgument, "\(url) is not a folder URL: give file:///absolute/path (three slashes)")
        }
        let decoded = path.removingPercentEncoding ?? path
        return try FolderReplicaStore(root: decoded)
    }
    if url.hasPrefix("s3://") {
        return try s3ReplicaStore(for: url, endpoint: endpoint)
    }
    throw DatabaseError(
        .invalidArgument, "\(url) is not a replica URL: give file:///path/to/folder or s3://BUCKET/PREFIX")
}

/// The S3 store of an `s3://BUCKET/PREFIX` URL: the one place the S3 transport plugs in.
///
/// - The endpoint is `endpoint`, else the variable `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, else AWS.
/// - The region is the URL's `?region=`, else `AWS_REGION` or `AWS_DEFAULT_REGION`, else `us-east-1`.
/// - Addressing is the URL's `?addressing=path` or `?addressing=virtual`, else path-style with an endpoint and
///   virtual-host on AWS.
/// - Credentials: ``S3Credentials/standard(environment:)``.
func s3ReplicaStore(
    for url: String, endpoint: String?, environment: [String: String] = ProcessInfo.processInfo.environment
) throws -> any ReplicaStore {
    var rest = Substring(url.dropFirst("s3://".count))
    var options: [String: String] = [:]
    if let question = rest.firstIndex(of: "?") {
        for pair in rest[rest.index(after: question)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard ["region", "addressing"].contains(name), parts.count == 2 else {
                throw DatabaseError(
                    .invalidArgument, "\(url): unknown option \(name) (s3:// URLs take ?region= and ?addressing=)")
            }
            options[name] = String(parts[1]).removingPercentEncoding ?? String(parts[1])
        }
        rest = rest[..<question]
    }
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let bucket = String(rest[..<slash])
    let prefix = slash < rest.endIndex ? String(rest[rest.index(after: slash)...]) : ""
    guard !bucket.isEmpty else {
        throw DatabaseError(.invalidArgument, "\(url) names no bucket: give s3://BUCKET/PREFIX")
    }
    func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
    var addressing: S3ReplicaStore.Addressing?
    if let value = options["addressing"] {
        guard let chosen = S3ReplicaStore.Addressing(rawValue: value) else {
            throw DatabaseError(.invalidArgument, "\(url): addressing is path or virtual, not \(value)")
        }
        addressing = chosen
    }
    let configuration = S3ReplicaStore.Configuration(
        endpoint: endpoint ?? variable("AWS_ENDPOINT_URL_S3") ?? variable("AWS_ENDPOINT_URL"),
        region: options["region"] ?? variable("AWS_REGION") ?? variable("AWS_DEFAULT_REGION") ?? "us-east-1",
        addressing: addressing)
    return try S3ReplicaStore(
        bucket: bucket, prefix: prefix.removingPercentEncoding ?? prefix,
        credentials: try S3Credentials.standard(environment: environment), configuration: configuration)
}
#endif
