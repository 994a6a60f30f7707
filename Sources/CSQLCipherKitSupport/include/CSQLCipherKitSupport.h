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

#endif
