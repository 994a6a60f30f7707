#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
@testable import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

/// botocore (PyPI) present: the independent signer the SigV4 tests compare with.
private let hasBotocore = (try? ObjectStore.run(["python3", "-c", "import botocore"]).status) == 0

@Suite("SigV4 signing")
struct SigV4Tests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var method: String
        var scheme = "http"
        var host: String
        var path: String
        var query: [(name: String, value: String)] = []
        var extraHeaders: [(name: String, value: String)] = []
        var body: [UInt8] = []
        var sessionToken: String?
        var unsigned = false
        var region = "us-east-1"
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "GET an object, path-style, empty payload", method: "GET", host: "127.0.0.1:18080",
             path: "/bucket/notes/generations/20261124T100000123Z-1f2e3d4c/generation.json"),
        Case(name: "PUT with a body (signed payload), virtual host, key with spaces and symbols", method: "PUT",
             host: "bucket.s3.eu-west-1.amazonaws.com", path: "/" + SigV4Signer.uriEncode("a b/c+d=e&f~g.h_i", keepingSlash: true),
             body: Array("frames \u{0}\u{1}\u{2} and more".utf8), region: "eu-west-1"),
        Case(name: "ListObjectsV2 with a prefix and a continuation token (query encoding)", method: "GET",
             host: "127.0.0.1:18080", path: "/bucket",
             query: [("list-type", "2"), ("prefix", "notes/gen erations/"), ("continuation-token", "YS9iLnR4dA==+/"),
                     ("max-keys", "7")]),
        Case(name: "session token", method: "GET", host: "bucket.s3.us-east-1.amazonaws.com", path: "/key",
             sessionToken: "FwoGZXIvYXdzEJr//////////wEaDOPaT+0xExampleSessionToken=="),
        Case(name: "start a multipart upload (a query name without value), content type", method: "POST",
             host: "127.0.0.1:18080", path: "/bucket/big.part", query: [("uploads", "")],
             extraHeaders: [("Content-Type", "application/xml")]),
        Case(name: "upload a part: two query parameters and a body", method: "PUT", host: "127.0.0.1:18080",
             path: "/bucket/big.part", query: [("uploadId", "ZjE2OWNj-ZDY0YmM5"), ("partNumber", "12")],
             body: (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) }),
        Case(name: "unsigned payload over TLS", method: "PUT", scheme: "https", host: "bucket.s3.amazonaws.com",
             path: "/unsigned", body: Array("not hashed".utf8), unsigned: true),
        Case(name: "DELETE with a Unicode key", method: "DELETE", host: "127.0.0.1:18080",
             path: "/bucket/" + SigV4Signer.uriEncode("notes/é ü/∑", keepingSlash: true)),
    ]

    @Test("gives the signature botocore's S3 signer gives for the same request", .enabled(if: hasBotocore, "botocore is not installed (pip install boto3)"), arguments: cases)
    func matchesBotocore(_ request: Case) throws {
        let credentials = S3Credentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            sessionToken: request.sessionToken)
        let date = Date(timeIntervalSince1970: 1_795_000_123)
        var headers: [(name: String, value: String)] = [("host", request.host)]
        headers += request.extraHeaders
        let payloadHash = request.unsigned ? SigV4Signer.unsignedPayload : SHA256.hex(request.body)
        let signed = SigV4Signer(region: request.region).sign(
            SigV4Signer.Request(
                method: request.method, path: request.path, query: request.query, headers: headers,
                payloadHash: payloadHash),
            credentials: credentials, at: date)
        let ours = Dictionary(uniqueKeysWithValues: signed.map { ($0.name, $0.value) })

        var specification: [String: Any] = [
            "method": request.method, "url": "\(request.scheme)://\(request.host)\(request.path)",
            "headers": Dictionary(uniqueKeysWithValues: headers.map { ($0.name, $0.value) }),
            "params": request.query.map { [$0.name, $0.value] }, "body_hex": Hex.string(request.body),
            "access_key": "AKIDEXAMPLE", "secret_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "region": request.region, "timestamp": SigV4Signer.timestamps(date).full, "unsigned": request.unsigned,
        ]
        if let token = request.sessionToken { specification["token"] = token }
        let input = String(decoding: try JSONSerialization.data(withJSONObject: specification), as: UTF8.self)
        let result = try ObjectStore.run(
            ["python3", ObjectStore.repositoryRoot + "/Tests/ObjectStore/s3check.py", "sign"], input: input)
        try #require(result.status == 0, "\(result.output)")
        let botocore = try #require(
            try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: String])

        #expect(ours["authorization"] == botocore["authorization"])
        #expect(ours["x-amz-date"] == botocore["x-amz-date"])
        #expect(ours["x-amz-content-sha256"] == botocore["x-amz-content-sha256"])
        #expect(ours["x-amz-security-token"] == botocore["x-amz-security-token"])
        #expect(ours["authorization"]?.contains("wJalrXUtnFEMI") == false)
    }

    @Test("HMAC-SHA256 gives RFC 4231's test vectors (a short key, and a key longer than a block)")
    func hmacVectors() {
        let short = HMACSHA256.authenticate(Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8))
        #expect(Hex.string(short) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let long = HMACSHA256.authenticate(
            Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            key: [UInt8](repeating: 0xaa, count: 131))
        #expect(Hex.string(long) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}

@Suite("S3 credentials")
struct S3CredentialsTests {
    @Test("come from the AWS variables first, then the shared credentials file and its profile")
    func sources() throws {
        let fromVariables = try S3Credentials.standard(environment: [
            "AWS_ACCESS_KEY_ID": "AKIDVARIABLE", "AWS_SECRET_ACCESS_KEY": "secret-from-variable-91c2",
            "AWS_SESSION_TOKEN": "token-77",
        ])
        #expect(fromVariables.accessKeyID == "AKIDVARIABLE")
        #expect(fromVariables.secretAccessKey == "secret-from-variable-91c2")
        #expect(fromVariables.sessionToken == "token-77")

        let directory = try TemporaryDirectory()
        let file = directory.path("credentials")
        try """
            # operators' credentials
            [default]
            aws_access_key_id = AKIDDEFAULT
            aws_secret_access_key = secret-default-5d1e

            [profile replica]
            aws_access_key_id=AKIDREPLICA
            aws_secret_access_key=secret-replica-0b3f
            aws_session_token = token-replica
            """.write(toFile: file, atomically: true, encoding: .utf8)
        // Held to the rules of key files: readable by others, it is refused before it is read, naming its mode.
        chmod(file, 0o644)
        let readable = #expect(throws: DatabaseError.self) {
            _ = try S3Credentials.standard(environment: ["AWS_SHARED_CREDENTIALS_FILE": file])
        }
        #expect(readable?.message.contains("mode 644") == true)
        #expect(readable?.message.contains("chmod 600") == true)
        #expect(readable?.message.contains("secret-default-5d1e") == false)
        chmod(file, 0o600)
        let fromDefault = try S3Credentials.standard(environment: ["AWS_SHARED_CREDENTIALS_FILE": file])
        #expect(fromDefault.accessKeyID == "AKIDDEFAULT")
        #expect(fromDefault.sessionToken == nil)
        let fromProfile = try S3Credentials.standard(
            environment: ["AWS_SHARED_CREDENTIALS_FILE": file, "AWS_PROFILE": "replica"])
        #expect(fromProfile.secretAccessKey == "secret-replica-0b3f")
        #expect(fromProfile.sessionToken == "token-replica")

        let missingProfile = #expect(throws: DatabaseError.self) {
            _ = try S3Credentials(file: file, profile: "other")
        }
        #expect(missingProfile?.message.contains("[other]") == true)
        #expect(missingProfile?.message.contains("secret-default-5d1e") == false)
        #expect(missingProfile?.message.contains("AKIDDEFAULT") == false)
        let none = #expect(throws: DatabaseError.self) {
            _ = try S3Credentials.standard(environment: ["HOME": directory.path("nobody")])
        }
        #expect(none?.message.contains("AWS_ACCESS_KEY_ID") == true)
    }

    @Test("no description, debug description or dump of credentials or of a store shows them")
    func neverShown() throws {
        let credentials = S3Credentials(
            accessKeyID: "AKIDSHOWN", secretAccessKey: "secret-never-shown-3a9f", sessionToken: "token-never-shown")
        let store = try S3ReplicaStore(
            bucket: "bucket", prefix: "notes", credentials: credentials,
            configuration: .init(endpoint: "http://127.0.0.1:9"))
        var dumped = ""
        dump(credentials, to: &dumped)
        var dumpedStore = ""
        dump(store, to: &dumpedStore)
        for text in [
            String(describing: credentials), String(reflecting: credentials), dumped, store.description,
            "\(store)", dumpedStore,
        ] {
            #expect(!text.contains("secret-never-shown"), "\(text)")
            #expect(!text.contains("token-never-shown"), "\(text)")
            #expect(!text.contains("AKIDSHOWN"), "\(text)")
        }
    }
}
#endif
