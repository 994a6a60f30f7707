#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// AWS Signature Version 4 for S3 requests (header authentication), written once here and checked against botocore's
/// signer in the tests.
///
/// The steps are AWS's: a canonical request (method, URI-encoded path, sorted and encoded query, lower-cased sorted
/// headers, the list of signed headers, the payload's SHA-256 or `UNSIGNED-PAYLOAD`), a string to sign
/// (`AWS4-HMAC-SHA256`, the time, the scope `date/region/s3/aws4_request`, the canonical request's SHA-256), a
/// signing key derived from the secret by HMAC-SHA256 over the date, region, service and `aws4_request`, and the
/// signature, HMAC-SHA256 of the string to sign. The secret is used only to derive that key; nothing here logs or
/// returns it.
struct SigV4Signer: Sendable {
    /// The region of the scope (`us-east-1` for most S3-compatible stores).
    let region: String
    /// The service of the scope.
    let service: String

    init(region: String, service: String = "s3") {
        self.region = region
        self.service = service
    }

    /// The value of `x-amz-content-sha256` for a payload not hashed (allowed by S3 over TLS).
    static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// A request to sign: `path` is already URI-encoded (as sent), `query` holds raw names and values (encoded here),
    /// `headers` the headers to sign besides the ones added here (at least `host`).
    struct Request {
        var method: String
        var path: String
        var query: [(name: String, value: String)]
        var headers: [(name: String, value: String)]
        var payloadHash: String
    }

    /// The headers to send besides `request.headers`: `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token`
    /// (with a session token) and `authorization`.
    func sign(_ request: Request, credentials: S3Credentials, at date: Date) -> [(name: String, value: String)] {
        let time = Self.timestamps(date)
        var headers = request.headers
        headers.append(("x-amz-date", time.full))
        headers.append(("x-amz-content-sha256", request.payloadHash))
        if let token = credentials.sessionToken {
            headers.append(("x-amz-security-token", token))
        }
        let canonical = canonicalRequest(request, headers: headers)
        let scope = "\(time.day)/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(time.full)\n\(scope)\n\(SHA256.hex(Array(canonical.request.utf8)))"
        let key = signingKey(secret: credentials.secretAccessKey, day: time.day)
        let signature = Hex.string(HMACSHA256.authenticate(Array(stringToSign.utf8), key: key))
        var added = Array(headers.dropFirst(request.headers.count))
        added.append((
            "authorization",
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), "
                + "SignedHeaders=\(canonical.signedHeaders), Signature=\(signature)"
        ))
        return added
    }

    /// The canonical request and the `SignedHeaders` list.
    func canonicalRequest(
        _ request: Request, headers: [(name: String, value: String)]
    ) -> (request: String, signedHeaders: String) {
        let canonicalHeaders = Dictionary(
            headers.map { ($0.name.lowercased(), Self.trimmed($0.value)) }, uniquingKeysWith: { $0 + "," + $1 }
        ).sorted { $0.key < $1.key }
        let signedHeaders = canonicalHeaders.map(\.key).joined(separator: ";")
        let lines = [
            request.method,
            request.path.isEmpty ? "/" : request.path,
            Self.canonicalQuery(request.query),
            canonicalHeaders.map { "\($0.key):\($0.value)\n" }.joined(),
            signedHeaders,
            request.payloadHash,
        ]
        return (lines.joined(separator: "\n"), signedHeaders)
    }

    /// The query as signed and as sent: each name and value encoded, sorted by name then value.
    static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        let encoded: [(name: String, value: String)] = query.map {
            (uriEncode($0.name, keepingSlash: false), uriEncode($0.value, keepingSlash: false))
        }
        let sorted = encoded.sorted { (left, right) -> Bool in
            left.name == right.name ? left.value < right.value : left.name < right.name
        }
        return sorted.map { $0.name + "=" + $0.value }.joined(separator: "&")
    }

    /// AWS's URI encoding: every byte but `A–Z a–z 0–9 - _ . ~` as `%XX` (upper-case hex), `/` kept in paths.
    static func uriEncode(_ text: String, keepingSlash: Bool) -> String {
        var encoded = ""
        encoded.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepingSlash:
                encoded.append("/")
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += byte < 16 ? "%0" + hex : "%" + hex
            }
        }
        return encoded
    }

    private func signingKey(secret: String, day: String) -> [UInt8] {
        let dateKey = HMACSHA256.authenticate(Array(day.utf8), key: Array(("AWS4" + secret).utf8))
        let regionKey = HMACSHA256.authenticate(Array(region.utf8), key: dateKey)
        let serviceKey = HMACSHA256.authenticate(Array(service.utf8), key: regionKey)
        return HMACSHA256.authenticate(Array("aws4_request".utf8), key: serviceKey)
    }

    /// Leading and trailing spaces removed, runs of spaces inside made one.
    private static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    /// `20261124T100000Z` and `20261124` in UTC.
    static func timestamps(_ date: Date) -> (full: String, day: String) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let day = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
        return ("\(day)T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z", day)
    }
}

#endif
