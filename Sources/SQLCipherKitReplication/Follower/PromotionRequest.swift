#if Replication  // trait Replication (Package.swift)
import Foundation
import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An operator's request that the process following a copy promote it, and that process's answer: how
/// `sqlcipherkit promote` reaches a service in follower mode, which holds the copy (and its follower lock) itself.
///
/// Files beside the copy, each written whole or not at all (temporary name, flush, rename, folder flush), mode 0600:
/// - `<copy>.promote-request`: written by the command, never over another request; names a random identifier.
/// - `<copy>.promote-request.taken`: the request, renamed by the following process when it takes it, and locked
///   (`flock`, taken before the rename) until it has answered. The rename decides who owns the request: a command
///   that gave up waiting removes `<copy>.promote-request`, and when that name is gone the request was taken and the
///   command waits for the answer, as long as the lock says the process answering it is alive.
/// - `<copy>.promote-answer`: written by the following process once it has promoted the copy or failed to, with the
///   identifier it answers; then the taken request is removed. The command reads the answer for its identifier and
///   removes it.
///
/// Neither file holds anything secret: an identifier, a process number, generation names, an error message.
package struct PromotionRequest: Codable, Sendable, Equatable {
    package var format = 1
    /// A random identifier the answer repeats.
    package var id: String
    /// The requesting process, for the logs.
    package var requestedBy: Int32

    /// A new request from this process.
    package init() {
        id = (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined(separator: "-")
        requestedBy = getpid()
    }

    package static func requestPath(for copy: String) -> String { copy + ".promote-request" }
    static func takenPath(for copy: String) -> String { copy + ".promote-request.taken" }
    package static func answerPath(for copy: String) -> String { copy + ".promote-answer" }

    /// Places the request beside `copy`.
    ///
    /// - Throws: ``DatabaseError`` `busy` when a request is pending already (another operator's, or one nobody
    ///   took); `fileSystem`.
    package func place(for copy: String) throws {
        let path = Self.requestPath(for: copy)
        let temporary = path + ".tmp-\(id)"
        try SideFile.write(self, to: temporary)
        defer { unlink(temporary) }
        // link(2) never replaces: a request already there stays, and this one is refused.
        guard link(temporary, path) == 0 else {
            if errno == EEXIST {
                throw DatabaseError(
                    .busy,
                    "a promotion request is pending for \(copy) already (\(path)); wait for its answer, or remove it if"
                        + " no process follows the copy")
            }
            throw fileSystemFailure("cannot create \(path)")
        }
        try syncToDisk(atPath: parentFolder(of: path))
    }

    /// Removes the request beside `copy` if nobody has taken it yet (a command that gave up waiting).
    ///
    /// - Returns: `true` when it was withdrawn; `false` when the following process had taken it (its answer follows).
    package func withdraw(for copy: String) -> Bool {
        let path = Self.requestPath(for: copy)
        guard (try? Self.decode(PromotionRequest.self, at: path)) == self else { return false }
        return unlink(path) == 0
    }

    /// Takes the request pending beside `copy`, if any: from here on it is the caller's to answer, and it stays
    /// locked until ``TakenPromotionRequest/answer(_:)`` (or the process ends).
    ///
    /// - Throws: ``DatabaseError`` `damaged` when the file is not a request (it is left, renamed, for the operator);
    ///   `fileSystem`.
    package static func take(for copy: String) throws -> TakenPromotionRequest? {
        let path = requestPath(for: copy)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw fileSystemFailure("cannot open \(path)")
        }
        // Locked before it is renamed: a command that sees the taken name sees it locked while it is answered.
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            return nil
        }
        let taken = takenPath(for: copy)
        var opened = stat()
        var renamed = stat()
        guard rename(path, taken) == 0, fstat(descriptor, &opened) == 0, stat(taken, &renamed) == 0,
              opened.st_ino == renamed.st_ino, opened.st_dev == renamed.st_dev
        else {
            // Withdrawn (or replaced by another request) between the open and the rename: not ours to answer.
            close(descriptor)
            return nil
        }
        do {
            guard let request = try decode(PromotionRequest.self, at: taken) else {
                close(descriptor)
                return nil
            }
            return TakenPromotionRequest(request: request, copy: copy, descriptor: descriptor)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// Whether the request beside `copy` was taken and its answer is still being worked out by a live process.
    package static func isBeingAnswered(_ copy: String) -> Bool {
        isLocked(takenPath(for: copy))
    }

    /// Removes the answer to this request (the command has read it).
    package func removeAnswer(for copy: String) {
        if (try? answer(for: copy)) != nil { unlink(Self.answerPath(for: copy)) }
    }

    /// Whether a process holds the copy's follower lock (a follower runs on it).
    package static func isFollowed(_ copy: String) -> Bool {
        isLocked(copy + ".follower-lock")
    }

    /// Whether a process holds an exclusive `flock` on the file at `path` (no file: no).
    static func isLocked(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return true }
        flock(descriptor, LOCK_UN)
        return false
    }

    /// The answer to this request, if there is one yet (an answer to another request is left alone).
    package func answer(for copy: String) throws -> PromotionAnswer? {
        guard let answer = try Self.decode(PromotionAnswer.self, at: Self.answerPath(for: copy)), answer.request == id
        else { return nil }
        return answer
    }

    static func decode<T: Decodable>(_ type: T.Type, at path: String) throws -> T? {
        try SideFile.read(
            T.self, at: path, expected: T.self == PromotionRequest.self ? "a promotion request" : "a promotion answer",
            left: "it was left as it is")
    }
}

/// A request this process took: locked until it is answered.
package final class TakenPromotionRequest: @unchecked Sendable {
    package let request: PromotionRequest
    let copy: String
    private var descriptor: CInt

    init(request: PromotionRequest, copy: String, descriptor: CInt) {
        self.request = request
        self.copy = copy
        self.descriptor = descriptor
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Writes `answer` beside the copy, then removes the request it answers (both flushed), and lets go of it.
    package func answer(_ answer: PromotionAnswer) throws {
        defer {
            close(descriptor)
            descriptor = -1
        }
        try SideFile.write(answer, to: PromotionRequest.answerPath(for: copy))
        unlink(PromotionRequest.takenPath(for: copy))
        try syncToDisk(atPath: parentFolder(of: copy))
    }
}

/// What the following process answered to a ``PromotionRequest``.
package struct PromotionAnswer: Codable, Sendable, Equatable {
    package var format = 1
    /// The request answered.
    package var request: String
    /// Whether the copy is the primary now.
    package var promoted: Bool
    /// The last point of the old primary the copy holds (`generation/index`).
    package var promotedFrom: String?
    /// The generation the new primary writes.
    package var generation: String?
    /// Why it was not promoted.
    package var error: String?

    package init(request: String, promoted: Bool, promotedFrom: String?, generation: String?, error: String?) {
        self.request = request
        self.promoted = promoted
        self.promotedFrom = promotedFrom
        self.generation = generation
        self.error = error
    }
}
#endif
