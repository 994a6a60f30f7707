#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
import SQLCipherKitReplication
import SQLCipherKitTestSupport
import Testing

@Suite("A folder replica store")
struct FolderReplicaStoreTests {
    @Test("stores, lists, reads back and deletes objects, each file mode 0600")
    func roundTrip() async throws {
        try await withTemporaryDirectory { folder in
            let store = try FolderReplicaStore(root: folder.path("replica"))
            try await store.put("db/generations/0001/snapshot", bytes: [1, 2, 3])
            try await store.put("db/generations/0001/wal/0000000001", bytes: Array(repeating: 7, count: 5000))
            let listed = try await store.list(prefix: "db/generations/0001/")
            #expect(listed.map(\.key) == ["db/generations/0001/snapshot", "db/generations/0001/wal/0000000001"])
            #expect(listed.map(\.size) == [3, 5000])
            #expect(try await store.get("db/generations/0001/snapshot") == [1, 2, 3])
            #expect(try fileMode(folder.path("replica/db/generations/0001/snapshot")) == 0o600)
            try await store.delete(["db/generations/0001/snapshot", "db/missing"])
            #expect(try await store.list(prefix: "db/").map(\.key) == ["db/generations/0001/wal/0000000001"])
            await #expect(throws: ReplicationError.self) { _ = try await store.get("db/generations/0001/snapshot") }
        }
    }

    @Test("streams a file range into an object; a file shorter than announced stores nothing")
    func streamedFiles() async throws {
        try await withTemporaryDirectory { folder in
            let store = try FolderReplicaStore(root: folder.path("replica"))
            let source = folder.path("source")
            let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            try Data(bytes).write(to: URL(fileURLWithPath: source))
            try await store.put("big", file: source, offset: 1000, length: 2_000_000, progress: nil)
            #expect(try await store.get("big") == Array(bytes[1000..<2_001_000]))
            #expect(try fileMode(folder.path("replica/big")) == 0o600)
            await #expect(throws: ReplicationError.self) {
                try await store.put("short", file: source, offset: 2_999_000, length: 5000, progress: nil)
            }
            #expect(try await store.list(prefix: "short").isEmpty)
        }
    }

    @Test("refuses keys that would reach outside its folder")
    func keysStayInside() async throws {
        try await withTemporaryDirectory { folder in
            let store = try FolderReplicaStore(root: folder.path("replica"))
            for key in ["../escape", "/absolute", "a/../../b", "", "a//b"] {
                let error = await #expect(throws: DatabaseError.self) { try await store.put(key, bytes: [1]) }
                #expect(error?.kind == .invalidArgument)
            }
            #expect(!FileManager.default.fileExists(atPath: folder.path("escape")))
        }
    }
}

private func fileMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? Int ?? 0) & 0o777
}
#endif
