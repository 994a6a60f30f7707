#ifndef CSQLCIPHERKITSUPPORT_H
#define CSQLCIPHERKITSUPPORT_H

/// Temporary database files that must not outlive the process: a fixed table of paths that a signal handler can
/// walk without allocating or locking (only async-signal-safe calls: unlink, sigaction, raise).

/// Registers a temporary database file (and its -journal, -wal, -shm companions). Returns a slot to unregister
/// with, or -1 when the path is too long or every slot is taken (the caller then refuses to create the file).
int CSQLCipherKitSupport_registerTemporaryFile(const char *path);

/// Forgets a slot (the file was renamed into place or removed).
void CSQLCipherKitSupport_unregisterTemporaryFile(int slot);

/// Removes every registered file and its companions. Async-signal-safe.
void CSQLCipherKitSupport_removeRegisteredTemporaryFiles(void);

/// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT that remove the registered files, then let the
/// signal take its default action (the process ends with the signal's status), and unblocks them in the calling
/// thread (call it from the main thread, before other threads start). Returns 0, or -1 with errno.
int CSQLCipherKitSupport_installCleanupSignalHandlers(void);

/// The text the handlers of `installCleanupSignalHandlers` write to standard error before the signal ends the
/// process (copied, at most 1024 bytes; NULL: none).
void CSQLCipherKitSupport_setInterruptNote(const char *text);

/// Starts the guardian: a small child process in a session of its own that learns every registered file through a
/// socket and, when it closes (this process ended in any way, SIGKILL included), removes the files still
/// registered, then exits. It ignores the terminal's signals and closes every other descriptor it inherited (so it
/// holds no database open). Call it once, early, before any file is registered. Returns the guardian's pid, or -1
/// with errno (the process then relies on its signal handlers and the next run's cleanup alone).
int CSQLCipherKitSupport_startGuardian(void);

/// Whether the file system holding `path` is local, so that an flock() taken there is seen by every process that
/// could open the file: 1 local, 0 a network or FUSE file system (NFS, SMB/CIFS, FUSE, Ceph, 9p, AFS, Coda, OCFS2,
/// GFS2, Lustre), -1 when statfs fails.
int CSQLCipherKitSupport_isLocalFileSystem(const char *path);

/// A read-only overlay VFS (OverlayVFS.c): a connection opened through it reads a database and its side files as
/// SQLite would after recovery, and writes nothing, creates nothing and deletes nothing on disk; what SQLite writes
/// (a hot journal's rollback, the WAL index) stays in this process's memory. One overlay per connection.
typedef struct CSQLCipherKitSupport_Overlay CSQLCipherKitSupport_Overlay;

/// Creates an overlay over the default VFS and registers it under a name of its own (never as the default).
/// Returns NULL when out of memory or when SQLite has no default VFS.
CSQLCipherKitSupport_Overlay *CSQLCipherKitSupport_overlayCreate(void);

/// The name to pass to sqlite3_open_v2.
const char *CSQLCipherKitSupport_overlayName(const CSQLCipherKitSupport_Overlay *overlay);

/// 1 when SQLite finished with a rollback journal through the overlay (deleted, truncated or rewrote it, as it does
/// after rolling a hot journal back); 0 otherwise.
int CSQLCipherKitSupport_overlayFinishedJournal(const CSQLCipherKitSupport_Overlay *overlay);

/// The most bytes the overlay held in memory for written pages at any moment.
long long CSQLCipherKitSupport_overlayMemoryHighWater(const CSQLCipherKitSupport_Overlay *overlay);

/// Unregisters the overlay and frees it. Call it after the connection closed: with a file still open it frees
/// nothing and returns -1; otherwise 0.
int CSQLCipherKitSupport_overlayDestroy(CSQLCipherKitSupport_Overlay *overlay);

/// The pools and queues of SQLCipherKit the calling thread runs blocks for, innermost last: SQLCipherKit refuses
/// re-entrant use of a pool from inside its own blocks with them (it would deadlock). Marks nest (a block of one
/// pool may use another); the 32 outermost of a thread are kept, deeper ones are counted but not checked.

/// Marks the calling thread as running a block for `owner`; pair it with CSQLCipherKitSupport_popOwner.
void CSQLCipherKitSupport_pushOwner(const void *owner);

/// Removes the calling thread's innermost mark.
void CSQLCipherKitSupport_popOwner(void);

/// 1 when one of the calling thread's marks is for `owner`, else 0.
int CSQLCipherKitSupport_isMarkedForOwner(const void *owner);

#endif
