#include "CSQLCipherKitSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/vfs.h>
#else
#include <sys/mount.h>
#include <sys/param.h>
#endif

#define SLOT_COUNT 32
#define PATH_CAPACITY 4096
#define SUFFIX_ROOM 16

enum { slotFree = 0, slotWriting = 1, slotActive = 2 };

static const char *const suffixes[] = {"", "-journal", "-wal", "-shm"};
#define SUFFIX_COUNT (sizeof(suffixes) / sizeof(suffixes[0]))

static _Atomic int slotStates[SLOT_COUNT];
static char slotPaths[SLOT_COUNT][SUFFIX_COUNT][PATH_CAPACITY + SUFFIX_ROOM];

// The guardian's end of the socket pair in this process (-1: no guardian), and a lock so records never interleave.
static int guardianPipe = -1;
static pid_t guardianProcess = -1;
static pthread_mutex_t guardianLock = PTHREAD_MUTEX_INITIALIZER;

static void writeAll(int descriptor, const void *bytes, size_t count) {
    const char *next = bytes;
    while (count > 0) {
#if defined(MSG_NOSIGNAL)
        // A guardian that died must not take this process with it (SIGPIPE).
        ssize_t written = send(descriptor, next, count, MSG_NOSIGNAL);
#else
        ssize_t written = write(descriptor, next, count);   // SO_NOSIGPIPE is set on the socket
#endif
        if (written < 0) {
            if (errno == EINTR) continue;
            return;
        }
        next += written;
        count -= (size_t)written;
    }
}

/// A record for the guardian: 'R', slot, length (2 bytes), path; or 'U', slot.
static void tellGuardian(char operation, int slot, const char *path, size_t length) {
    if (guardianPipe < 0) return;
    unsigned char header[4] = {(unsigned char)operation, (unsigned char)slot, (unsigned char)(length >> 8),
                               (unsigned char)(length & 0xFF)};
    int savedErrno = errno;
    pthread_mutex_lock(&guardianLock);
    writeAll(guardianPipe, header, operation == 'R' ? 4 : 2);
    if (operation == 'R') writeAll(guardianPipe, path, length);
    pthread_mutex_unlock(&guardianLock);
    errno = savedErrno;
}

int CSQLCipherKitSupport_registerTemporaryFile(const char *path) {
    size_t length = strlen(path);
    if (length == 0 || length >= PATH_CAPACITY) return -1;
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        int expected = slotFree;
        if (!atomic_compare_exchange_strong(&slotStates[slot], &expected, slotWriting)) continue;
        for (size_t index = 0; index < SUFFIX_COUNT; index++) {
            memcpy(slotPaths[slot][index], path, length);
            strcpy(slotPaths[slot][index] + length, suffixes[index]);
        }
        atomic_store(&slotStates[slot], slotActive);
        tellGuardian('R', slot, path, length);
        return slot;
    }
    return -1;
}

void CSQLCipherKitSupport_unregisterTemporaryFile(int slot) {
    if (slot < 0 || slot >= SLOT_COUNT) return;
    tellGuardian('U', slot, NULL, 0);
    atomic_store(&slotStates[slot], slotFree);
}

void CSQLCipherKitSupport_removeRegisteredTemporaryFiles(void) {
    int savedErrno = errno;
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        if (atomic_load(&slotStates[slot]) != slotActive) continue;
        for (size_t index = 0; index < SUFFIX_COUNT; index++) {
            unlink(slotPaths[slot][index]);
        }
    }
    errno = savedErrno;
}

// What an interrupted run left as it was, printed by the handler (two buffers: one is written while the other may be
// read by a handler; `activeNote` says which one holds the note, -1 none).
#define NOTE_CAPACITY 1024
static char noteBuffers[2][NOTE_CAPACITY];
static size_t noteLengths[2];
static _Atomic int activeNote = -1;

void CSQLCipherKitSupport_setInterruptNote(const char *text) {
    if (text == NULL) {
        atomic_store(&activeNote, -1);
        return;
    }
    int next = atomic_load(&activeNote) == 0 ? 1 : 0;
    size_t length = strlen(text);
    if (length > NOTE_CAPACITY) length = NOTE_CAPACITY;
    memcpy(noteBuffers[next], text, length);
    noteLengths[next] = length;
    atomic_store(&activeNote, next);
}

static void cleanupAndReraise(int signalNumber) {
    CSQLCipherKitSupport_removeRegisteredTemporaryFiles();
    int note = atomic_exchange(&activeNote, -1);
    if (note >= 0) {
        int savedErrno = errno;
        const char *next = noteBuffers[note];
        size_t count = noteLengths[note];
        while (count > 0) {
            ssize_t written = write(STDERR_FILENO, next, count);
            if (written < 0 && errno == EINTR) continue;
            if (written <= 0) break;
            next += written;
            count -= (size_t)written;
        }
        errno = savedErrno;
    }
    struct sigaction defaultAction;
    memset(&defaultAction, 0, sizeof(defaultAction));
    defaultAction.sa_handler = SIG_DFL;
    sigemptyset(&defaultAction.sa_mask);
    sigaction(signalNumber, &defaultAction, NULL);
    raise(signalNumber);
}

int CSQLCipherKitSupport_installCleanupSignalHandlers(void) {
    static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = cleanupAndReraise;
    sigemptyset(&action.sa_mask);
    for (size_t index = 0; index < sizeof(signals) / sizeof(signals[0]); index++) {
        sigaddset(&action.sa_mask, signals[index]);
    }
    for (size_t index = 0; index < sizeof(signals) / sizeof(signals[0]); index++) {
        if (sigaction(signals[index], &action, NULL) != 0) return -1;
    }
    // A process may start with these signals blocked (inherited from whatever started it; some test runners and
    // supervisors block them): a handler never runs for a blocked signal, and the run would go on to the end.
    sigset_t handled;
    sigemptyset(&handled);
    for (size_t index = 0; index < sizeof(signals) / sizeof(signals[0]); index++) {
        sigaddset(&handled, signals[index]);
    }
    if (pthread_sigmask(SIG_UNBLOCK, &handled, NULL) != 0) return -1;
    return 0;
}

// MARK: - Guardian

/// Reads exactly `count` bytes; 0 on end of file or error.
static int readExactly(int descriptor, void *bytes, size_t count) {
    char *next = bytes;
    while (count > 0) {
        ssize_t got = read(descriptor, next, count);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        next += got;
        count -= (size_t)got;
    }
    return 1;
}

/// The guardian's life, in the child: only async-signal-safe calls (the parent may have had other threads).
static void runGuardian(int input) {
    static const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    struct sigaction ignore;
    memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    for (size_t index = 0; index < sizeof(ignored) / sizeof(ignored[0]); index++) {
        sigaction(ignored[index], &ignore, NULL);
    }
    // Out of the terminal's process group: Ctrl-C, or a kill of the group, does not reach it.
    setsid();
    // Every other descriptor closed: the guardian holds no database, no lock, no pipe of the caller's.
    for (int descriptor = 0; descriptor < 3; descriptor++) {
        if (descriptor != input) close(descriptor);
    }
#if defined(__linux__) && defined(SYS_close_range)
    if (input > 3) syscall(SYS_close_range, 3, (unsigned)input - 1, 0);
    if (syscall(SYS_close_range, (unsigned)input + 1, ~0U, 0) != 0)
#endif
    {
        struct rlimit limit;
        rlim_t maximum = (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
            ? limit.rlim_cur : 65536;
        if (maximum > 1048576) maximum = 1048576;
        for (rlim_t descriptor = 3; descriptor < maximum; descriptor++) {
            if ((int)descriptor != input) close((int)descriptor);
        }
    }
    // The table of slots is this process's copy: fill it from the parent's records.
    for (int slot = 0; slot < SLOT_COUNT; slot++) atomic_store(&slotStates[slot], slotFree);
    for (;;) {
        unsigned char header[2];
        if (!readExactly(input, header, 2)) break;
        int slot = header[1];
        if (slot >= SLOT_COUNT) break;
        if (header[0] == 'U') {
            atomic_store(&slotStates[slot], slotFree);
            continue;
        }
        if (header[0] != 'R') break;
        unsigned char lengthBytes[2];
        if (!readExactly(input, lengthBytes, 2)) break;
        size_t length = ((size_t)lengthBytes[0] << 8) | lengthBytes[1];
        if (length == 0 || length >= PATH_CAPACITY) break;
        char path[PATH_CAPACITY];
        if (!readExactly(input, path, length)) break;
        for (size_t index = 0; index < SUFFIX_COUNT; index++) {
            memcpy(slotPaths[slot][index], path, length);
            strcpy(slotPaths[slot][index] + length, suffixes[index]);
        }
        atomic_store(&slotStates[slot], slotActive);
    }
    // The parent is gone (or sent something it should not have): whatever it still had registered goes.
    CSQLCipherKitSupport_removeRegisteredTemporaryFiles();
    _exit(0);
}

int CSQLCipherKitSupport_startGuardian(void) {
    if (guardianPipe >= 0) return (int)guardianProcess;
    int descriptors[2];
#if defined(SOCK_CLOEXEC)
    // Close-on-exec from the start: no program started by another thread meanwhile inherits either end.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, descriptors) != 0) return -1;
#else
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, descriptors) != 0) return -1;
#endif
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    int on = 1;
    setsockopt(descriptors[1], SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof(on));
#endif
    pid_t child = fork();
    if (child < 0) {
        int savedErrno = errno;
        close(descriptors[0]);
        close(descriptors[1]);
        errno = savedErrno;
        return -1;
    }
    if (child == 0) {
        close(descriptors[1]);
        runGuardian(descriptors[0]);
    }
    close(descriptors[0]);
    // Only this process holds the writing end: a program it starts must not keep the guardian waiting.
    fcntl(descriptors[1], F_SETFD, FD_CLOEXEC);
    guardianPipe = descriptors[1];
    guardianProcess = child;
    return (int)child;
}

// MARK: - File systems

int CSQLCipherKitSupport_isLocalFileSystem(const char *path) {
    struct statfs status;
    if (statfs(path, &status) != 0) return -1;
#if defined(__linux__)
    // statfs(2) magic numbers: NFS, SMB, CIFS, SMB2, FUSE, Ceph, 9p, AFS, Coda, OCFS2, GFS2, Lustre.
    static const unsigned long network[] = {
        0x6969UL, 0x517BUL, 0xFF534D42UL, 0xFE534D42UL, 0x65735546UL, 0x00C36400UL, 0x01021997UL, 0x5346414FUL,
        0x73757245UL, 0x7461636FUL, 0x01161970UL, 0x0BD00BD0UL,
    };
    unsigned long type = (unsigned long)status.f_type & 0xFFFFFFFFUL;
    for (size_t index = 0; index < sizeof(network) / sizeof(network[0]); index++) {
        if (type == network[index]) return 0;
    }
    return 1;
#else
    static const char *const network[] = {"nfs", "smbfs", "afpfs", "webdav", "macfuse", "osxfuse"};
    for (size_t index = 0; index < sizeof(network) / sizeof(network[0]); index++) {
        if (strcmp(status.f_fstypename, network[index]) == 0) return 0;
    }
    return 1;
#endif
}
