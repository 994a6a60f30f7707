import CSQLCipher

extension Connection {
    /// Changes the key of the database in place, then reopens the connection with the new key and verifies it.
    ///
    /// ```swift
    /// try db.rekey(to: newKey)   // db is open again, with the new key
    /// ```
    ///
    /// SQLCipher's rekey rewrites every page in one transaction (atomic under a crash), but reports almost no errors
    /// in SQLCipher 3 and leaves the handle unusable after a failure (Docs/EngineNotes.md#rekey). So this method:
    /// - refuses to run inside a transaction (rekey would commit it), on a read-only or plaintext connection, and
    ///   while other SQLCipherKit connections of this process have the file open (they would keep the old key and
    ///   corrupt the file with their next write);
    /// - in WAL mode, checkpoints with TRUNCATE, so a copy of the main file no longer opens with the old key;
    /// - always closes the handle, then reopens with the new key and runs `PRAGMA quick_check` (every page is
    ///   decrypted and its HMAC checked).
    ///
    /// On failure the connection stays closed (``isClosed`` is `true`) and the error says whether the file now opens
    /// with the old key, the new key, or neither.
    ///
    /// A reader in another process can keep the WAL from being truncated (its snapshot still needs the frames). The
    /// rekey has then taken — the file opens with the new key only, every page verified — and this method returns
    /// normally with ``RekeyOutcome/isWALTruncated`` `false`: until a later `wal_checkpoint(TRUNCATE)` succeeds (see
    /// ``checkpoint(_:schema:)``), the main file alone, without its `-wal`, still holds pages under the old key.
    ///
    /// Other processes' connections keep the old key and fail with "file is not a database" at their next read;
    /// they must reopen with the new key. Use the `sqlcipherkit rotate` command (copy method) when other processes
    /// must not see the change mid-flight.
    ///
    /// - Parameter newKey: The new key. For a database with a plaintext header, a raw key without salt gets the
    ///   current salt (rekey keeps the salt).
    /// - Returns: What was left to do after the rekey took (a WAL that could not yet be truncated).
    /// - Throws: ``DatabaseError/invalidState`` when a precondition fails (nothing was changed);
    ///   ``DatabaseError/callbackMisuse`` when called from inside a callback or closure of this connection's (a SQL
    ///   function, a hook, a writer's closure; nothing was changed);
    ///   ``DatabaseError/busy`` when another connection's lock stopped it, ``DatabaseError/diskFull`` when the disk
    ///   filled up, ``DatabaseError/verificationFailed`` when it did not take for another reason (in each case the
    ///   message says which key opens the file).
    @discardableResult
    public func rekey(to newKey: EncryptionKey) throws -> RekeyOutcome {
        let sqliteConnection = try checkedConnection()
        // It closes and reopens the handle, which a callback or closure of the caller's running now is using.
        if isLent { throw refusal(of: "rekey(to:)") }
        guard let oldKey = encryption.key else {
            throw Self.rekeyRefused(
                "the database is not encrypted; rekey cannot encrypt it (SQLCipher ignores it)",
                remedy: .encryptIntoNewFile)
        }
        guard !isInsideTransaction else {
            throw Self.rekeyRefused("a transaction is open; rekey would commit it. Commit or roll back first")
        }
        guard !isReadOnly else {
            throw Self.rekeyRefused("the connection is read-only")
        }
        let otherCount = OpenFiles.openCount(path: filePath) - 1
        guard otherCount <= 0 else {
            throw Self.rekeyRefused(
                "\(otherCount) other connection(s) of this process have the file open; they would keep the old key"
                    + " and corrupt the file with their next write. Close them first")
        }
        var newKey = newKey
        if newKey.kind == .raw, let salt = oldKey.salt {
            newKey = try newKey.withSalt(salt)
        }
        let settings = encryption.settings
        let isWAL = try pragmaText("journal_mode")?.caseInsensitiveEquals("wal") == true

        statementCache.removeAll()
        let code = newKey.material.withUnsafeBytes { bytes in
            sqlite3_rekey(sqliteConnection, bytes.baseAddress, CInt(bytes.count))
        }
        var checkpointError: Error?
        if code == SQLITE_OK && isWAL {
            // Not waiting: a reader that keeps the log busy is reported in the outcome, and the barrier of a pool
            // is not held for the busy timeout while it reads.
            do { try checkpointTruncateWithoutWaiting() } catch { checkpointError = error }
        }
        // A handle that attempted a rekey is never used again, whatever the result (Docs/EngineNotes.md#rekey).
        close()

        do {
            guard code == SQLITE_OK else {
                throw DatabaseError(
                    kind: .sqlite, code: ResultCode(rawValue: code), message: String(cString: sqlite3_errstr(code)))
            }
            try open(encryption: .key(newKey, settings: settings))
            try quickCheck()
        } catch {
            close()
            let opening = KeyState.probe(
                path: path, old: .key(oldKey, settings: settings), new: .key(newKey, settings: settings))
            let state = switch opening {
            case .old: "\(opening); nothing was changed"
            case .new: "\(opening), but the check after the rekey failed"
            case .neither: "\(opening): restore it from a backup"
            case .both, .locked: "\(opening)"
            }
            let underlying = error as? DatabaseError
            var reason = underlying?.message ?? "\(error)"
            var resultCode = underlying?.extendedResultCode ?? DatabaseError.SQLITE_ERROR
            var kind: DatabaseError.Kind = switch underlying?.resultCode {
            case DatabaseError.SQLITE_FULL?: .diskFull
            case DatabaseError.SQLITE_BUSY?, DatabaseError.SQLITE_LOCKED?: .busy
            default: underlying?.kind == .diskFull ? .diskFull : .verificationFailed
            }
            if code == SQLITE_OK && opening == .old {
                // SQLCipher 3 reports success when a write of the rekey failed and was rolled back: the new key's
                // "does not open" is not the cause. A rekey journals every page, so it needs about the file's size
                // free; when that is missing, the disk is full.
                let needed = regularFileSize(atPath: path) ?? 0
                if let free = availableBytes(onFileSystemOf: path), free < needed {
                    kind = .diskFull
                    resultCode = DatabaseError.SQLITE_FULL
                    reason = "the disk is full: \(free) bytes free, and a rekey needs about the file's size"
                        + " (\(needed) bytes) for its journal"
                } else {
                    reason = "the engine reported success but did not rewrite the file (SQLCipher 3 reports no error"
                        + " when a write of the rekey fails)"
                }
            }
            options.logger?.error("rekey failed", metadata: ["path": "\(path)", "state": "\(state)"])
            // A full disk is said as such: the rekey wrote nothing, and the old key still opens the file.
            throw DatabaseError(
                kind: kind, code: resultCode,
                message: "rekey failed (\(reason)); \(state). The connection is closed")
        }
        // The rekey took and every page checks out under the new key. A truncate that another reader still keeps
        // from completing is a step left to do, not a failure: the frames under the new key are committed.
        if isWAL && checkpointError != nil {
            do {
                try checkpointTruncateWithoutWaiting()
            } catch {
                options.logger?.warning(
                    "rekeyed; the WAL is not truncated yet (another connection is reading), so the main file keeps pages under the old key until a TRUNCATE checkpoint",
                    metadata: ["path": "\(path)", "error": "\(error)"])
                return RekeyOutcome(isWALTruncated: false)
            }
        }
        options.logger?.info("rekeyed", metadata: ["path": "\(path)", "wal": "\(isWAL)"])
        return RekeyOutcome(isWALTruncated: true)
    }

    /// What ``rekey(to:)`` left to do after the new key took.
    public struct RekeyOutcome: Sendable, Equatable {
        /// `false` when the database is in WAL mode and its `-wal` could not be truncated after the rekey (another
        /// connection or process was reading). The new key opens the database; the main file on its own, without
        /// the `-wal`, still has pages under the old key until a `wal_checkpoint(TRUNCATE)` succeeds. `true`
        /// otherwise (also for a rollback-journal database).
        public let isWALTruncated: Bool

        package init(isWALTruncated: Bool) {
            self.isWALTruncated = isWALTruncated
        }
    }

    static func rekeyRefused(_ message: String, remedy: DatabaseError.Remedy? = nil) -> DatabaseError {
        DatabaseError(.invalidState, "rekey refused: " + message, remedy: remedy)
    }
}

