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
/// signal take its default action (the process ends with the signal's status). Returns 0, or -1 with errno.
int CSQLCipherKitSupport_installCleanupSignalHandlers(void);

#endif
