#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files that hold a secret other than a database key (an object store's credentials), read under the rules of key
/// files: a regular file (never a FIFO, a device or a folder), owned by this user or root, readable by nobody else.
package enum SecretFile {
    /// The largest secret file read.
    package static let maximumByteCount = 64 << 10

    /// Reads the whole file as UTF-8 text after checking it as a key file is checked.
    ///
    /// - Parameter what: The file as messages name it ("the S3 credentials file /etc/notes/s3").
    /// - Throws: ``DatabaseError`` (`invalidArgument`) naming the file and what is wrong with it; never its content.
    package static func readText(atPath path: String, describedAs what: String) throws -> String {
        let failure = { (message: String) in DatabaseError(.invalidArgument, message) }
        let (descriptor, status) = try EncryptionKey.openSmallFile(
            atPath: path, describedAs: what, limit: maximumByteCount, failure: failure)
        defer { close(descriptor) }
        try requireOwnerOnly(status, describedAs: what, displayPath: path, failure: failure)
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        let count = try bytes.withUnsafeMutableBytes {
            try readFully(descriptor, into: $0, count: $0.count, at: 0, path: path)
        }
        guard let text = String(validating: bytes[..<count], as: UTF8.self) else {
            throw failure("\(what) is not UTF-8 text")
        }
        return text
    }

    /// Refuses a file another user owns (whoever owns it can replace the secret) or that group or others may read.
    static func requireOwnerOnly(
        _ status: stat, describedAs what: String, displayPath: String, failure: (String) -> DatabaseError
    ) throws {
        guard status.st_uid == geteuid() || status.st_uid == 0 else {
            throw failure(
                "\(what) belongs to user id \(status.st_uid), not to this user (\(geteuid())) or root; it must be"
                    + " owned by the account that uses it")
        }
        let mode = status.st_mode & 0o777
        if mode & 0o077 != 0 {
            throw failure(
                "\(what) can be read by group or others (mode \(String(mode, radix: 8))); run `chmod 600 \(displayPath)`")
        }
    }
}
