#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit

/// The credentials an S3-compatible store signs its requests with (``replicaStore(for:endpoint:credentials:)``): an
/// access key ID, its secret, and for temporary credentials a session token. Without them the store reads the
/// standard places.
///
/// No description, debug description or reflection of a value shows any of them (they print as `S3Credentials(…)`
/// with where they came from), and no error, log line or message of the replication module contains them.
///
/// ```swift
/// let credentials = S3Credentials(accessKeyID: accessKeyID, secretAccessKey: secret)   // from your secret store
/// let store = try replicaStore(for: "s3://backups/notes", credentials: credentials)
/// ```
public struct S3Credentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The access key ID (`AKIA…`, or `account:user` on some stores).
    let accessKeyID: String
    /// The secret access key.
    let secretAccessKey: String
    /// The session token of temporary credentials.
    let sessionToken: String?
    /// Where they came from (`the environment`, a file and profile), for messages.
    package let source: String

    /// Credentials given directly.
    ///
    /// - Parameters:
    ///   - accessKeyID: The access key ID.
    ///   - secretAccessKey: The secret access key.
    ///   - sessionToken: The session token of temporary credentials, if any.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.init(accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, sessionToken: sessionToken, source: "given")
    }

    init(accessKeyID: String, secretAccessKey: String, sessionToken: String?, source: String) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken.flatMap { $0.isEmpty ? nil : $0 }
        self.source = source
    }

    /// The standard places, in AWS's order: the variables `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (with
    /// `AWS_SESSION_TOKEN` for temporary credentials); otherwise the shared credentials file
    /// (`AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`), profile `AWS_PROFILE` or `default`.
    ///
    /// - Parameter environment: The variables to read (the process's by default).
    /// - Throws: ``DatabaseError`` (`invalidArgument`) when there are none, or when a file is not readable, may be
    ///   read by others than its owner, or has no such profile.
    package static func standard(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> S3Credentials {
        if let accessKeyID = environment["AWS_ACCESS_KEY_ID"], !accessKeyID.isEmpty {
            guard let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty else {
                throw DatabaseError(
                    .invalidArgument, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both")
            }
            return S3Credentials(
                accessKeyID: accessKeyID, secretAccessKey: secret, sessionToken: environment["AWS_SESSION_TOKEN"],
                source: "the environment (AWS_ACCESS_KEY_ID)")
        }
        let profile = environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        if let path = environment["AWS_SHARED_CREDENTIALS_FILE"], !path.isEmpty {
            return try S3Credentials(file: path, profile: profile)
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        let path = home + "/.aws/credentials"
        if FileManager.default.fileExists(atPath: path) {
            return try S3Credentials(file: path, profile: profile)
        }
        throw DatabaseError(
            .invalidArgument,
            "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
                + "credentials), or write them to a credentials file named by AWS_SHARED_CREDENTIALS_FILE "
                + "(or ~/.aws/credentials)")
    }

    /// Credentials from a file in AWS's shared credentials format:
    ///
    /// ```
    /// [default]
    /// aws_access_key_id = AKIAIOSFODNN7EXAMPLE
    /// aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
    /// aws_session_token = …            (only for temporary credentials)
    /// ```
    ///
    /// Sections are profiles (`[name]`, or `[profile name]`); lines starting with `#` or `;` are comments.
    ///
    /// The file is held to the rules of key files: a regular file, owned by this user or root, that group and others
    /// cannot read (mode 0600); anything else is refused before it is read.
    ///
    /// - Throws: ``DatabaseError`` (`invalidArgument`) when the file cannot be read, breaks those rules, or has no
    ///   such profile or no key in it. The message names the file and profile, never a value from it.
    package init(file path: String, profile: String = "default") throws {
        // Held to the rules of key files: a credentials file others can read is refused, not used.
        let text = try SecretFile.readText(atPath: path, describedAs: "the S3 credentials file \(path)")
        var section: String?
        var values: [String: String] = [:]
        for rawLine in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                var name = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                if name.hasPrefix("profile ") { name = name.dropFirst("profile ".count).trimmingCharacters(in: .whitespaces) }
                section = name
                continue
            }
            guard section == profile, let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            values[name] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        guard let accessKeyID = values["aws_access_key_id"], !accessKeyID.isEmpty,
              let secret = values["aws_secret_access_key"], !secret.isEmpty
        else {
            throw DatabaseError(
                .invalidArgument,
                "the S3 credentials file \(path) has no aws_access_key_id and aws_secret_access_key in profile [\(profile)]")
        }
        self.init(
            accessKeyID: accessKeyID, secretAccessKey: secret, sessionToken: values["aws_session_token"],
            source: "\(path) [\(profile)]")
    }

    /// `S3Credentials(from …)`: where they came from, none of their values.
    public var description: String { "S3Credentials(from \(source))" }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// Only ``source`` (so `dump` and debuggers show no secret).
    public var customMirror: Mirror { Mirror(self, children: ["source": source]) }

    /// `text` with every occurrence of a credential replaced by `…` (for text from elsewhere, such as a store's
    /// error message, before it goes into an error).
    func redacting(_ text: String) -> String {
        var result = text
        for secret in [secretAccessKey, sessionToken ?? "", accessKeyID] where secret.count >= 4 {
            result = result.replacingOccurrences(of: secret, with: "…")
        }
        return result
    }
}
#endif
