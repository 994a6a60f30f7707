import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small tmpfs mounted for a test: a file system that really fills up (ENOSPC), unlike a file-size limit, and that
/// can be made read-only for real (root ignores a folder's mode bits, a read-only mount it cannot).
public final class FullDisk: Sendable {
    /// The mount point.
    public let url: URL

    /// Whether the tests can mount one (root and `/bin/mount`).
    public static let isAvailable: Bool = {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount") else { return false }
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("fulldisk-probe-\(UUID().uuidString)")
        guard let disk = try? FullDisk(at: probe.path, bytes: 64 * 1024) else { return false }
        disk.unmount()
        return true
    }()

    /// Why a test that needs one is skipped.
    public static let unavailableReason =
        "mounts a small tmpfs to fill the disk for real: needs root and mount (CI runs as root)"

    /// Mounts a tmpfs of `bytes` bytes (mode 0700) at `path`, creating the folder.
    public init(at path: String, bytes: Int) throws {
        url = URL(fileURLWithPath: path, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let status = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(bytes),mode=0700", "tmpfs", path])
        guard status == 0 else {
            try? FileManager.default.removeItem(at: url)
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSLocalizedDescriptionKey: "mount failed"])
        }
    }

    /// A path inside the mount.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Remounts it read-only (`true`) or writable again (`false`); returns whether `mount` succeeded.
    @discardableResult
    public func remount(readOnly: Bool) -> Bool {
        (try? Self.run("/bin/mount", ["-o", readOnly ? "remount,ro" : "remount,rw", url.path])) == 0
    }

    /// Fills the disk with a file named `name` until a write fails with ENOSPC; returns the bytes written.
    @discardableResult
    public func fill(with name: String = "filler") throws -> Int {
        let descriptor = open(path(name), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0x5A, count: 4096)
        var total = 0
        while true {
            let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written > 0 {
                total += written
                continue
            }
            guard errno == ENOSPC else { throw CocoaError(.fileWriteUnknown) }
            break
        }
        // A page-sized chunk may leave a few bytes free: fill them one by one.
        var byte: UInt8 = 0x5A
        while write(descriptor, &byte, 1) == 1 { total += 1 }
        return total
    }

    /// Unmounts it and removes the mount point.
    public func unmount() {
        _ = try? Self.run("/bin/umount", [url.path])
        try? FileManager.default.removeItem(at: url)
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
