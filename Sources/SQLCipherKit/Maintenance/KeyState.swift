/// Which of two keys, an old one and a new one, opens a database: the one answer to "which key opens it" after a
/// rekey, a key rotation or a live hand-over, found by a fresh probe and never guessed from an error.
///
/// ```swift
/// switch KeyState.probe(path: "notes.db", old: .key(oldKey), new: .key(newKey)) {
/// case .new: print("rotated")
/// case .old: print("still on the old key")
/// case let state: print(state)        // "it opens with neither key", …
/// }
/// ```
public enum KeyState: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The old key opens it, the new one does not.
    case old
    /// The new key opens it, the old one does not.
    case new
    /// Both open it (the two keys were the same).
    case both
    /// Neither opens it.
    case neither
    /// Another connection or process holds a lock, so it could not be checked.
    case locked

    /// A sentence part that says the state: "it opens with the old key only", ….
    public var description: String {
        switch self {
        case .old: "it opens with the old key only"
        case .new: "it opens with the new key only"
        case .both: "it opens with both keys (were they the same?)"
        case .neither: "it opens with neither key"
        case .locked: "another connection holds a lock, so which key opens it was not checked"
        }
    }

    /// How much of the file a probe reads with each key.
    public enum ProbeDepth: Sendable {
        /// Page 1 only (decrypted and authenticated): enough to tell which key the file is under.
        case firstPage
        /// Every page (`quick_check`): the key opens the file and every page checks out under it.
        case everyPage
    }

    /// Tries each key on a fresh read-only check that writes nothing (a hot journal is rolled back in memory, so the
    /// answer is what a read-write open will find).
    ///
    /// - Parameters:
    ///   - path: The database.
    ///   - old: The old key and settings.
    ///   - new: The new key and settings.
    ///   - depth: How much of the file each key must open.
    ///   - busyTimeout: How long to wait for another connection's lock before answering ``locked``.
    public static func probe(
        path: String, old: Encryption, new: Encryption, depth: ProbeDepth = .everyPage,
        busyTimeout: Duration = .milliseconds(200)
    ) -> KeyState {
        let opensWithOld = opens(path: path, encryption: old, depth: depth, busyTimeout: busyTimeout)
        let opensWithNew = opens(path: path, encryption: new, depth: depth, busyTimeout: busyTimeout)
        switch (opensWithOld, opensWithNew) {
        case (nil, _), (_, nil): return .locked
        case (true?, false?): return .old
        case (false?, true?): return .new
        case (true?, true?): return .both
        case (false?, false?): return .neither
        }
    }

    /// Whether one key opens the file; `nil` when a lock kept it from being checked.
    static func opens(path: String, encryption: Encryption, depth: ProbeDepth, busyTimeout: Duration) -> Bool? {
        do {
            let check = ReadOnlyCheck(path: path)
            check.namesOtherFormat = false
            try check.run(encryption: encryption, busyTimeout: busyTimeout) { connection in
                switch depth {
                case .everyPage: try connection.quickCheck()
                case .firstPage: _ = try connection.scalar("SELECT count(*) FROM sqlite_master", as: Int.self)
                }
            }
            return true
        } catch let error as DatabaseError
            where error.kind == .busy || error.resultCode == DatabaseError.SQLITE_BUSY
                || error.resultCode == DatabaseError.SQLITE_LOCKED {
            return nil
        } catch {
            return false
        }
    }
}
