#if Replication  // trait Replication (Package.swift)
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``ReplicaStore`` in an S3-compatible bucket (AWS S3, or any store that speaks its API: MinIO, Ceph, OpenStack
/// Swift's s3api, …), under a prefix.
///
/// Requests are signed with AWS Signature Version 4 (every payload hashed: `x-amz-content-sha256` carries its
/// SHA-256) and sent with async-http-client. Objects larger than ``Configuration-swift.struct/partSize`` are sent as
/// a multipart upload, one part read from the file at a time, so memory stays bounded (about two parts) whatever the
/// size; downloads into a file are streamed. Errors are ``ReplicationError``s naming the cause: `accessDenied`
/// (wrong access key or secret, expired token), `noSuchBucket`, `clockSkew`, `unreachable`, `notFound`. No error, log
/// line or description contains a credential.
///
/// ```swift
/// let store = try S3ReplicaStore(
///     bucket: "backups", prefix: "notes", credentials: try S3Credentials.standard(),
///     configuration: .init(endpoint: "http://127.0.0.1:8080"))
/// ```
package struct S3ReplicaStore: ConditionalReplicaStore {
    /// Where the bucket's name goes in a request.
    package enum Addressing: String, Sendable {
        /// `https://endpoint/BUCKET/key`: what most S3-compatible stores expect.
        case path
        /// `https://BUCKET.endpoint/key`: AWS's default (the bucket's name must be a valid host name).
        case virtualHost = "virtual"
    }

    /// Where the store is and how to talk to it.
    package struct Configuration: Sendable {
        /// The endpoint (`http://127.0.0.1:8080`); `nil` for AWS (`https://s3.REGION.amazonaws.com`).
        package var endpoint: String?
        /// The region requests are signed for (`us-east-1` for most S3-compatible stores).
        package var region: String
        /// Path-style or virtual-host addressing; `nil`: path-style with an endpoint, virtual-host on AWS.
        package var addressing: Addressing?
        /// Objects larger than this go as a multipart upload in parts of this size (8 MiB by default; AWS requires
        /// at least 5 MiB for every part but the last).
        package var partSize: Int
        /// How long one request (one part, one object) may take.
        package var requestTimeout: Duration
        /// Where the store logs its requests (method, object, status; never a credential) at debug level.
        package var logger: Logger

        /// The clock requests are signed with (tests move it to provoke the store's clock-skew error).
        var now: @Sendable () -> Date = { Date() }
        /// The host to connect to instead of the URL's (tests: a virtual-host name that does not resolve here);
        /// requests still carry and sign the URL's host.
        var connectionHost: String?
        /// The most keys a listing page may hold (`nil`: the store's default, 1,000 on AWS).
        var listPageSize: Int?

        /// A configuration.
        package init(
            endpoint: String? = nil, region: String = "us-east-1", addressing: Addressing? = nil,
            partSize: Int = 8 << 20, requestTimeout: Duration = .seconds(300),
            logger: Logger = Logger(label: "sqlcipherkit.replication.s3")
        ) {
            self.endpoint = endpoint
            self.region = region
            self.addressing = addressing
            self.partSize = partSize
            self.requestTimeout = requestTimeout
            self.logger = logger
        }
    }

    /// The bucket.
    package let bucket: String
    /// The prefix every key is stored under (`notes/`), empty for the bucket's root.
    package let prefix: String
    let credentials: S3Credentials
    let configuration: Configuration
    private let scheme: String
    private let endpointHost: String
    private let port: Int?
    private let addressing: Addressing
    private let signer: SigV4Signer
    private let client: HTTPClient

    /// A store in `bucket` under `prefix`.
    ///
    /// A plain `http://` endpoint that is not on this machine gets a warning in ``transportWarning`` and the log:
    /// the objects are ciphertext either way, but the requests' signatures could be replayed by whoever sees them.
    ///
    /// - Throws: ``DatabaseError`` (`invalidArgument`) for an endpoint that is not an `http(s)://host[:port]`
    ///   URL, an empty bucket name, a part size under 1 byte, or virtual-host addressing with a bucket name that is
    ///   not a host name.
    package init(
        bucket: String, prefix: String = "", credentials: S3Credentials, configuration: Configuration = Configuration()
    ) throws {
        guard !bucket.isEmpty, !bucket.contains("/"), !bucket.utf8.contains(0) else {
            throw DatabaseError(.invalidArgument, "not a bucket name: \"\(bucket)\"")
        }
        guard configuration.partSize > 0 else {
            throw DatabaseError(.invalidArgument, "the part size must be at least 1 byte")
        }
        let endpoint = configuration.endpoint ?? "https://s3.\(configuration.region).amazonaws.com"
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
              components.path.isEmpty || components.path == "/", components.query == nil, components.user == nil
        else {
            throw DatabaseError(
                .invalidArgument, "\(endpoint) is not an S3 endpoint: give http(s)://host[:port] (no path)")
        }
        let addressing = configuration.addressing ?? (configuration.endpoint == nil ? .virtualHost : .path)
        if addressing == .virtualHost {
            let isHostName = bucket.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                    || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
            }
            guard isHostName else {
                throw DatabaseError(
                    .invalidArgument,
                    "the bucket name \(bucket) is not a host name, which virtual-host addressing needs: use path-style")
            }
        }
        self.bucket = bucket
        let trimmed = prefix.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        self.prefix = trimmed.isEmpty ? "" : trimmed + "/"
        self.credentials = credentials
        self.configuration = configuration
        self.scheme = scheme
        self.endpointHost = host
        self.port = components.port
        self.addressing = addressing
        self.signer = SigV4Signer(region: configuration.region)
        self.client = Self.sharedClient
        var warning: String?
        if scheme == "http" && !Self.isLoopback(host) {
            warning = "the S3 endpoint \(scheme)://\(host) is plain http on another machine: the objects are"
                + " ciphertext, but whoever sees the requests can replay their signatures; use https"
            configuration.logger.warning("\(warning!)")
        }
        transportWarning = warning
    }

    /// Set for a plain `http://` endpoint that is not on this machine (see the initializer); `nil` otherwise.
    package let transportWarning: String?

    /// `localhost`, 127.0.0.0/8 or `::1`.
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if bare.lowercased() == "localhost" || bare == "::1" { return true }
        let octets = bare.split(separator: ".")
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// The HTTP client every S3 store of the process shares. Not AsyncHTTPClient's `HTTPClient.shared`, whose
    /// browser-like settings suit a store badly: it retries a refused connection for up to 90 seconds (a store that is
    /// down held every sync for that long; the replicator has its own back-off and keeps serving meanwhile), and it
    /// follows redirects with a request signed for another URL. Here a connection that cannot be made fails the
    /// request at once (a host that does not answer at all, after 10 seconds), redirects are not followed (the
    /// store's answer is reported as it is), and an idle read waits up to 90 seconds.
    private static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration(
            certificateVerification: .fullVerification,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .seconds(90)),
            proxy: nil,
            ignoreUncleanSSLShutdown: false,
            decompression: .disabled)
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// `s3://BUCKET/PREFIX (endpoint)`; never a credential.
    package var description: String {
        "s3://\(bucket)/\(prefix) (\(endpointDescription))"
    }

    private var endpointDescription: String {
        "\(scheme)://\(endpointHost)" + (port.map { ":\($0)" } ?? "")
    }

    // MARK: - ReplicaStore

    package func put(_ key: String, bytes: [UInt8]) async throws {
        let name = try objectName(key)
        _ = try await send("PUT", object: name, body: bytes, operation: "store", key: key)
    }

    package func put(
        _ key: String, file path: String, offset: Int64, length: Int64, progress: (@Sendable (Int64) -> Void)?
    ) async throws {
        let name = try objectName(key)
        guard let input = try ReadOnlyFile(path: path) else {
            throw ReplicationError(.sourceChanged, "\(path) does not exist")
        }
        let partSize = Int64(configuration.partSize)
        if length <= partSize {
            let bytes = try readRange(input, offset: offset, count: Int(length), end: offset + length)
            _ = try await send("PUT", object: name, body: bytes, operation: "store", key: key)
            progress?(length)
            return
        }
        let created = try await send(
            "POST", object: name, query: [("uploads", "")], body: [], operation: "start a multipart upload of", key: key)
        guard let uploadID = S3XML.value("UploadId", in: created.body[...]) else {
            throw ReplicationError(
                .storeError, "the S3 store at \(endpointDescription) started no multipart upload for \(key)")
        }
        do {
            var parts: [(number: Int, etag: String)] = []
            var done: Int64 = 0
            while done < length {
                try Task.checkCancellation()
                let count = Int(min(partSize, length - done))
                let bytes = try readRange(input, offset: offset + done, count: count, end: offset + length)
                let number = parts.count + 1
                let uploaded = try await send(
                    "PUT", object: name, query: [("partNumber", "\(number)"), ("uploadId", uploadID)], body: bytes,
                    operation: "store part \(number) of", key: key)
                guard let etag = uploaded.headers["etag"] else {
                    throw ReplicationError(
                        .storeError, "the S3 store at \(endpointDescription) gave no ETag for part \(number) of \(key)")
                }
                parts.append((number, etag))
                done += Int64(count)
                progress?(done)
            }
            let manifest = "<CompleteMultipartUpload>"
                + parts.map { "<Part><PartNumber>\($0.number)</PartNumber><ETag>\(S3XML.escape($0.etag))</ETag></Part>" }
                .joined() + "</CompleteMultipartUpload>"
            let completed = try await send(
                "POST", object: name, query: [("uploadId", uploadID)], body: Array(manifest.utf8),
                contentType: "application/xml", operation: "complete the multipart upload of", key: key)
            // S3 may answer 200 and still fail the completion, with an error document as the body.
            if S3XML.value("Code", in: completed.body[...]) != nil, completed.body.contains("<Error>") {
                throw failure(status: 200, body: completed.body, operation: "complete the multipart upload of", key: key)
            }
        } catch {
            // Best effort: the store drops the parts stored so far (otherwise they stay until its own clean-up).
            _ = try? await send(
                "DELETE", object: name, query: [("uploadId", uploadID)], operation: "abort the multipart upload of",
                key: key)
            throw error
        }
    }

    package func get(_ key: String) async throws -> [UInt8] {
        let name = try objectName(key)
        let response = try await execute("GET", object: name, operation: "read", key: key)
        do {
            let buffer = try await response.body.collect(upTo: Int.max)
            return Array(buffer.readableBytesView)
        } catch {
            throw unreachable(error, while: "reading \(key)")
        }
    }

    package func list(prefix listPrefix: String) async throws -> [ReplicaObject] {
        var objects: [ReplicaObject] = []
        var token: String?
        repeat {
            var query: [(name: String, value: String)] = [("list-type", "2"), ("prefix", prefix + listPrefix)]
            if let token { query.append(("continuation-token", token)) }
            if let size = configuration.listPageSize { query.append(("max-keys", "\(size)")) }
            let page = try await send("GET", object: nil, query: query, operation: "list", key: listPrefix).body
            for contents in S3XML.elements("Contents", in: page) {
                guard let name = S3XML.value("Key", in: contents),
                      let size = S3XML.value("Size", in: contents).flatMap(Int64.init)
                else {
                    throw ReplicationError(
                        .storeError, "the S3 store at \(endpointDescription) sent a listing this store cannot read")
                }
                guard name.hasPrefix(prefix) else { continue }
                objects.append(ReplicaObject(key: String(name.dropFirst(prefix.count)), size: size))
            }
            let isTruncated = S3XML.value("IsTruncated", in: page[...]) == "true"
            token = isTruncated ? S3XML.value("NextContinuationToken", in: page[...]) : nil
            if isTruncated && token == nil {
                throw ReplicationError(
                    .storeError, "the S3 store at \(endpointDescription) sent a partial listing without a continuation")
            }
        } while token != nil
        return objects.sorted { $0.key < $1.key }
    }

    package func delete(_ keys: [String]) async throws {
        for key in keys {
            let name = try objectName(key)
            do {
                _ = try await send("DELETE", object: name, operation: "delete", key: key)
            } catch ReplicationError.Kind.notFound {
                continue
            }
        }
    }

    // MARK: - Conditional writes

    /// The version is the object's ETag.
    package func getVersioned(_ key: String) async throws -> (bytes: [UInt8], version: String?)? {
        let name = try objectName(key)
        let response: HTTPClientResponse
        do {
            response = try await execute("GET", object: name, operation: "read", key: key)
        } catch ReplicationError.Kind.notFound {
            return nil
        }
        do {
            let buffer = try await response.body.collect(upTo: Int.max)
            return (Array(buffer.readableBytesView), response.headers.first(name: "etag"))
        } catch {
            throw unreachable(error, while: "reading \(key)")
        }
    }

    /// `If-None-Match: *` or `If-Match: <ETag>` (AWS S3 honours both). A store that answers `NotImplemented`
    /// (OpenStack Swift's s3api, measured on Debian 12: it then writes nothing) gives ``ConditionalWrite/unsupported``.
    package func put(_ key: String, bytes: [UInt8], if condition: WriteCondition) async throws -> ConditionalWrite {
        let name = try objectName(key)
        let header: (name: String, value: String) = switch condition {
        case .absent: ("if-none-match", "*")
        case .version(let etag): ("if-match", etag)
        }
        let answer = try await send(
            "PUT", object: name, body: bytes, extraHeaders: [header], accepting: [409, 412, 501],
            operation: "store (conditionally)", key: key)
        switch answer.status {
        case 412, 409: return .conditionFailed
        case 501: return .unsupported
        default: return .written
        }
    }

    // MARK: - Requests

    /// A response whose body was read (small answers: errors, listings, manifests of uploads).
    private struct Answer {
        let status: UInt
        let headers: [String: String]
        let body: String
    }

    private func objectName(_ key: String) throws -> String {
        guard !key.isEmpty, !key.hasPrefix("/"), !key.utf8.contains(0) else {
            throw DatabaseError(.invalidArgument, "not a valid object key: \(key)")
        }
        return prefix + key
    }

    /// Sends a request and reads its (small) answer.
    private func send(
        _ method: String, object: String?, query: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        contentType: String? = nil, extraHeaders: [(name: String, value: String)] = [], accepting: Set<UInt> = [],
        operation: String, key: String
    ) async throws -> Answer {
        let response = try await execute(
            method, object: object, query: query, body: body, contentType: contentType, extraHeaders: extraHeaders,
            accepting: accepting, operation: operation, key: key)
        let text: String
        do {
            text = String(buffer: try await response.body.collect(upTo: 16 << 20))
        } catch {
            throw unreachable(error, while: "reading the answer to \(operation) \(key)")
        }
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        return Answer(status: response.status.code, headers: headers, body: text)
    }

    /// Sends a signed request; a response of another status than 2xx (or one of `accepting`) becomes the
    /// ``ReplicationError`` it means.
    private func execute(
        _ method: String, object: String?, query: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        contentType: String? = nil, extraHeaders: [(name: String, value: String)] = [], accepting: Set<UInt> = [],
        operation: String, key: String
    ) async throws -> HTTPClientResponse {
        let bucketPath = addressing == .path ? "/" + SigV4Signer.uriEncode(bucket, keepingSlash: false) : ""
        let objectPath = object.map { "/" + SigV4Signer.uriEncode($0, keepingSlash: true) } ?? ""
        var path = bucketPath + objectPath
        if path.isEmpty { path = "/" }
        let host = addressing == .virtualHost ? bucket + "." + endpointHost : endpointHost
        let isDefaultPort = port == nil || (scheme == "http" && port == 80) || (scheme == "https" && port == 443)
        let hostHeader = isDefaultPort ? host : "\(host):\(port!)"
        let queryText = SigV4Signer.canonicalQuery(query)
        let connectHost = configuration.connectionHost ?? host
        let url = "\(scheme)://\(connectHost)" + (port.map { ":\($0)" } ?? "") + path
            + (queryText.isEmpty ? "" : "?" + queryText)

        var headers: [(name: String, value: String)] = [("host", hostHeader)]
        if let contentType { headers.append(("content-type", contentType)) }
        headers += extraHeaders
        let signed = signer.sign(
            SigV4Signer.Request(
                method: method, path: path, query: query, headers: headers,
                payloadHash: SHA256.hex(body ?? [])),
            credentials: credentials, at: configuration.now())

        var request = HTTPClientRequest(url: url)
        request.method = .init(rawValue: method)
        for header in headers + signed { request.headers.add(name: header.name, value: header.value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }

        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: timeAmount(configuration.requestTimeout))
        } catch {
            configuration.logger.debug(
                "S3 request failed", metadata: ["method": "\(method)", "object": "\(object ?? "")"])
            throw unreachable(error, while: "\(operation) \(key)")
        }
        configuration.logger.debug(
            "S3 request",
            metadata: ["method": "\(method)", "object": "\(object ?? "")", "status": "\(response.status.code)"])
        guard (200..<300).contains(response.status.code) || accepting.contains(response.status.code) else {
            let text = (try? await response.body.collect(upTo: 1 << 20)).map { String(buffer: $0) } ?? ""
            throw failure(status: response.status.code, body: text, operation: operation, key: key)
        }
        return response
    }

    /// The error a store's answer means: the S3 error code decides the kind.
    private func failure(status: UInt, body: String, operation: String, key: String) -> ReplicationError {
        let code = S3XML.value("Code", in: body[...])
        let message = S3XML.value("Message", in: body[...]).map { credentials.redacting($0) }
        let said = [code, message].compactMap { $0 }.joined(separator: ": ")
        let answer = said.isEmpty ? "HTTP \(status)" : "HTTP \(status), \(said)"
        let store = "the S3 store at \(endpointDescription)"
        switch code ?? "" {
        case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
            "InvalidSecurity":
            return ReplicationError(
                .accessDenied, "\(store) refused the credentials from \(credentials.source) (\(answer))",
                remedy: .checkCredentials)
        case "AccessDenied", "AllAccessDisabled":
            return ReplicationError(
                .accessDenied,
                "\(store) denied \(operation) \(key) in bucket \(bucket) to the credentials from"
                    + " \(credentials.source) (\(answer)): they need access to the bucket",
                remedy: .checkCredentials)
        case "NoSuchBucket":
            return ReplicationError(
                .noSuchBucket, "the bucket \(bucket) does not exist at \(endpointDescription) (\(answer))",
                remedy: .createBucketOrCorrectURL)
        case "RequestTimeTooSkewed":
            return ReplicationError(
                .clockSkew,
                "\(store) refused the request because this machine's clock"
                    + " (\(SigV4Signer.timestamps(configuration.now()).full)) is too far from its own (\(answer))",
                remedy: .setClock)
        case "NoSuchKey", "NoSuchUpload":
            return ReplicationError(.notFound, "no object \(key) in s3://\(bucket)/\(prefix) (\(answer))")
        case "" where status == 404:
            return ReplicationError(.notFound, "no object \(key) in s3://\(bucket)/\(prefix) (\(answer))")
        case "" where status == 403:
            return ReplicationError(
                .accessDenied,
                "\(store) refused \(operation) \(key) with the credentials from \(credentials.source) (\(answer))",
                remedy: .checkCredentials)
        default:
            return ReplicationError(.storeError, "\(store) could not \(operation) \(key) (\(answer))")
        }
    }

    private func unreachable(_ error: any Error, while doing: String) -> ReplicationError {
        if let error = error as? ReplicationError { return error }
        if error is CancellationError { return ReplicationError(.unreachable, "cancelled while \(doing)") }
        return ReplicationError(
            .unreachable,
            "cannot reach the S3 store at \(endpointDescription) while trying to \(doing): "
                + credentials.redacting(String(describing: error)))
    }

    private func readRange(_ file: ReadOnlyFile, offset: Int64, count: Int, end: Int64) throws -> [UInt8] {
        let bytes = try file.read(count: count, at: offset)
        guard bytes.count == count else {
            throw ReplicationError(
                .sourceChanged, "\(file.path) ended after \(offset + Int64(bytes.count)) bytes; \(end) were expected")
        }
        return bytes
    }

    private func timeAmount(_ duration: Duration) -> TimeAmount {
        let parts = duration.components
        return .nanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}

/// The few pieces of S3's XML answers this store reads (element texts of listings, upload IDs and errors), and the
/// escaping of what it writes. S3's answers are flat and small; no general XML parser is needed.
enum S3XML {
    /// The contents of every `<name>…</name>` element, in order.
    static func elements(_ name: String, in text: String) -> [Substring] {
        var found: [Substring] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>"), let close = rest.range(of: "</\(name)>", range: open.upperBound..<rest.endIndex) {
            found.append(rest[open.upperBound..<close.lowerBound])
            rest = rest[close.upperBound...]
        }
        return found
    }

    /// The text of the first `<name>…</name>` element, unescaped.
    static func value(_ name: String, in text: Substring) -> String? {
        guard let open = text.range(of: "<\(name)>"),
              let close = text.range(of: "</\(name)>", range: open.upperBound..<text.endIndex)
        else { return nil }
        return unescape(text[open.upperBound..<close.lowerBound])
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&apos;")
    }

    static func unescape(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var result = ""
        var rest = text
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            guard let semicolon = rest[ampersand...].firstIndex(of: ";") else { break }
            let entity = rest[rest.index(after: ampersand)..<semicolon]
            switch entity {
            case "amp": result += "&"
            case "lt": result += "<"
            case "gt": result += ">"
            case "quot": result += "\""
            case "apos": result += "'"
            default:
                let number = entity.hasPrefix("#x") ? UInt32(entity.dropFirst(2), radix: 16)
                    : entity.hasPrefix("#") ? UInt32(entity.dropFirst()) : nil
                if let scalar = number.flatMap(Unicode.Scalar.init) {
                    result.unicodeScalars.append(scalar)
                } else {
                    result += rest[ampersand...semicolon]
                }
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return result + rest
    }
}
#endif
