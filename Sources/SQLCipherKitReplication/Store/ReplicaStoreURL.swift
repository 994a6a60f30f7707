#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// The store a replica URL names: `file:///path/to/folder` or `s3://BUCKET/PREFIX`.
///
/// A folder (a mounted volume, a network share) holds each object as a file under it, its key the relative path. An
/// object appears whole or not at all: it is written to a temporary name in the same folder (mode 0600), flushed, then
/// renamed into place, and the folder is flushed. Folders are created (mode 0700) as objects are written.
///
/// An S3-compatible bucket (AWS S3, MinIO, Ceph, OpenStack Swift's s3api, …) is reached at `endpoint`, else the
/// variable `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, else AWS. The region is the URL's `?region=`, else
/// `AWS_REGION` or `AWS_DEFAULT_REGION`, else `us-east-1`; addressing is the URL's `?addressing=path` or
/// `?addressing=virtual`, else path-style with an endpoint and virtual-host on AWS. Requests are signed with AWS
/// Signature Version 4; large objects go as multipart uploads, so memory stays bounded whatever the database's size.
///
/// ```swift
/// let folder = try replicaStore(for: "file:///mnt/replica/notes")
/// let bucket = try replicaStore(for: "s3://backups/notes?region=eu-west-1", endpoint: "https://s3.example.net")
/// ```
///
/// - Parameters:
///   - url: The replica's URL.
///   - endpoint: For `s3://`: the store's endpoint URL (`http://127.0.0.1:8080`); `nil` for the variables above,
///     then AWS.
///   - credentials: For `s3://`: what requests are signed with; `nil` reads them from the standard places, in AWS's
///     order: `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`), else the shared
///     credentials file (`AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials`, profile `AWS_PROFILE` or
///     `default`).
/// - Returns: The store.
/// - Throws: ``DatabaseError`` (`invalidArgument`) for a URL of another scheme or without a path, a `file://`
///   URL naming something that is not a folder, an endpoint or credentials given for a `file://` URL, an `s3://`
///   URL with an unknown option, or no credentials in the standard places. A folder that does not exist is a store
///   holding nothing (a replicator creates it as it writes; a restore from it says that nothing is stored there).
public func replicaStore(
    for url: String, endpoint: String? = nil, credentials: S3Credentials? = nil
) throws -> any ReplicaStore {
    if url.hasPrefix("file://") {
        guard endpoint == nil else {
            throw DatabaseError(.invalidArgument, "an endpoint applies to s3:// replicas only, not \(url)")
        }
        guard credentials == nil else {
            throw DatabaseError(.invalidArgument, "credentials apply to s3:// replicas only, not \(url)")
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
        return try s3ReplicaStore(for: url, endpoint: endpoint, credentials: credentials)
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
/// - Credentials: `credentials`, else ``S3Credentials/standard(environment:)``.
func s3ReplicaStore(
    for url: String, endpoint: String?, credentials: S3Credentials? = nil,
    environment: [String: String] = ProcessInfo.processInfo.environment
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
        credentials: try credentials ?? S3Credentials.standard(environment: environment), configuration: configuration)
}
#endif
