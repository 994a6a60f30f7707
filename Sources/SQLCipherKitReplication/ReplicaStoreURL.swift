#if Replication  // trait Replication (Package.swift)
import Foundation

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
/// - Throws: ``ReplicationError`` (`invalidArgument`) for a URL of another scheme or without a path; the store's
///   own errors (a folder that cannot be created).
public func replicaStore(for url: String, endpoint: String? = nil) throws -> any ReplicaStore {
    if url.hasPrefix("file://") {
        guard endpoint == nil else {
            throw ReplicationError(.invalidArgument, "--endpoint applies to s3:// replicas only, not \(url)")
        }
        let path = String(url.dropFirst("file://".count))
        guard path.hasPrefix("/"), path.count > 1, !path.contains("\0") else {
            throw ReplicationError(
                .invalidArgument, "\(url) is not a folder URL: give file:///absolute/path (three slashes)")
        }
        let decoded = path.removingPercentEncoding ?? path
        return try FolderReplicaStore(root: decoded)
    }
    if url.hasPrefix("s3://") {
        return try s3ReplicaStore(for: url, endpoint: endpoint)
    }
    throw ReplicationError(
        .invalidArgument, "\(url) is not a replica URL: give file:///path/to/folder or s3://BUCKET/PREFIX")
}

/// The S3 store of an `s3://BUCKET/PREFIX` URL: the one place the S3 transport plugs in (its factory is called
/// here, credentials from the standard AWS variables or a file).
func s3ReplicaStore(for url: String, endpoint: String?) throws -> any ReplicaStore {
    throw ReplicationError(
        .invalidArgument, "s3:// replicas need the S3 store, which this build does not have yet; use file:///path")
}
#endif
