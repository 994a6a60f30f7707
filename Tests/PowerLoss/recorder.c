// The power-loss recorder (Docs/Durability.md): an LD_PRELOAD library that records, in order, every call that
// changes the state of a file under one folder, with the bytes it wrote, for the crash-state generator of
// Tests/PowerLoss/powerloss.py.
//
//   cc -shared -fPIC -O2 -o recorder.so recorder.c -ldl -lpthread
//   POWERLOSS_TRACE=/tmp/trace POWERLOSS_ROOT=/tmp/work LD_PRELOAD=./recorder.so sqlcipherkit keygen --out /tmp/work/k
//
// Why an interposer: the library, the CLI, Foundation and SQLite's unix VFS all reach the kernel through glibc's
// exported functions, so one library preloaded in front of glibc sees all of them with their arguments (strace would
// see them too, but cuts the bytes written and cannot tell a process's own calls apart from its runtime's; a test VFS
// would see SQLite's calls only, not the rename, link and fsync of the library's own code). What an interposer cannot
// see is a call glibc makes to itself (stdio's writes, for one): powerloss.py's self-check runs the same workload
// under strace and fails when strace saw a state-changing call under the folder that the trace lacks.
//
// Every function glibc 2.36 exports for these calls is wrapped, the 64-bit, `*at` and fortified (`__open_2`) names
// included: open, open64, openat, openat64, __open_2, __open64_2, __openat_2, __openat64_2, creat, creat64, write,
// pwrite, pwrite64, writev, pwritev, pwritev64, pwritev2, pwritev64v2, ftruncate, ftruncate64, truncate,
// truncate64, fallocate, fallocate64, posix_fallocate, posix_fallocate64, fsync, fdatasync, sync_file_range, syncfs,
// sync, rename, renameat, renameat2, link, linkat, symlink, symlinkat, unlink, unlinkat, remove, mkdir, mkdirat,
// rmdir, close, dup, dup2, dup3, fcntl/fcntl64 (F_DUPFD only), copy_file_range, sendfile, sendfile64.
//
// The trace is one JSON object per line, appended with one write each ({"op":…, "pid":…, "path":…, …}), the
// bytes written as "data" in hex. A call and its record are one step under a lock (a mutex for this process's
// threads, an fcntl lock on the trace for other processes), so the trace's order is the order the calls took effect.
// Only successful calls are recorded (a failed one changed nothing), and only those naming a path under
// POWERLOSS_ROOT (and fsync of any file or folder there). With POWERLOSS_STDOUT=1 writes to standard output are
// recorded too ("stdout" records): a workload's `ack` lines mark in the trace the moment a call returned.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *fd_paths[MAX_FDS];     // every descriptor opened through us, any path (openat needs its folders)
static int trace_fd = -1;
static pid_t trace_pid = -1;
static const char *root;
static size_t root_length;
static int enabled = -1;
static int record_stdout;

// The real functions, found lazily (other preloaded libraries' constructors may call us before ours runs).
#define REAL(name) real_##name
#define DECLARE(ret, name, ...) static ret (*real_##name)(__VA_ARGS__)
#define RESOLVE(name) do { if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name); } while (0)

DECLARE(int, open, const char *, int, ...);
DECLARE(int, open64, const char *, int, ...);
DECLARE(int, openat, int, const char *, int, ...);
DECLARE(int, openat64, int, const char *, int, ...);
DECLARE(int, __open_2, const char *, int);
DECLARE(int, __open64_2, const char *, int);
DECLARE(int, __openat_2, int, const char *, int);
DECLARE(int, __openat64_2, int, const char *, int);
DECLARE(int, creat, const char *, mode_t);
DECLARE(int, creat64, const char *, mode_t);
DECLARE(ssize_t, write, int, const void *, size_t);
DECLARE(ssize_t, pwrite, int, const void *, size_t, off_t);
DECLARE(ssize_t, pwrite64, int, const void *, size_t, off_t);
DECLARE(ssize_t, writev, int, const struct iovec *, int);
DECLARE(ssize_t, pwritev, int, const struct iovec *, int, off_t);
DECLARE(ssize_t, pwritev64, int, const struct iovec *, int, off_t);
DECLARE(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int);
DECLARE(ssize_t, pwritev64v2, int, const struct iovec *, int, off_t, int);
DECLARE(int, ftruncate, int, off_t);
DECLARE(int, ftruncate64, int, off_t);
DECLARE(int, truncate, const char *, off_t);
DECLARE(int, truncate64, const char *, off_t);
DECLARE(int, fallocate, int, int, off_t, off_t);
DECLARE(int, fallocate64, int, int, off_t, off_t);
DECLARE(int, posix_fallocate, int, off_t, off_t);
DECLARE(int, posix_fallocate64, int, off_t, off_t);
DECLARE(int, fsync, int);
DECLARE(int, fdatasync, int);
DECLARE(int, sync_file_range, int, off_t, off_t, unsigned int);
DECLARE(int, syncfs, int);
DECLARE(void, sync, void);
DECLARE(int, rename, const char *, const char *);
DECLARE(int, renameat, int, const char *, int, const char *);
DECLARE(int, renameat2, int, const char *, int, const char *, unsigned int);
DECLARE(int, link, const char *, const char *);
DECLARE(int, linkat, int, const char *, int, const char *, int);
DECLARE(int, symlink, const char *, const char *);
DECLARE(int, symlinkat, const char *, int, const char *);
DECLARE(int, unlink, const char *);
DECLARE(int, unlinkat, int, const char *, int);
DECLARE(int, remove, const char *);
DECLARE(int, mkdir, const char *, mode_t);
DECLARE(int, mkdirat, int, const char *, mode_t);
DECLARE(int, rmdir, const char *);
DECLARE(int, close, int);
DECLARE(int, dup, int);
DECLARE(int, dup2, int, int);
DECLARE(int, dup3, int, int, int);
DECLARE(int, fcntl, int, int, ...);
DECLARE(int, fcntl64, int, int, ...);
DECLARE(ssize_t, copy_file_range, int, off_t *, int, off_t *, size_t, unsigned int);
DECLARE(ssize_t, sendfile, int, int, off_t *, size_t);
DECLARE(ssize_t, sendfile64, int, int, off_t *, size_t);
DECLARE(ssize_t, pread, int, void *, size_t, off_t);

static void prepare_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }

static int is_enabled(void) {
    if (enabled < 0) {
        const char *trace = getenv("POWERLOSS_TRACE");
        root = getenv("POWERLOSS_ROOT");
        record_stdout = getenv("POWERLOSS_STDOUT") != NULL;
        enabled = trace && *trace && root && *root;
        if (enabled) {
            root_length = strlen(root);
            while (root_length > 1 && root[root_length - 1] == '/') root_length--;
            pthread_atfork(prepare_fork, after_fork, after_fork);
        }
    }
    return enabled;
}

// ---------------------------------------------------------------------------------------------------------------
// Paths

// Collapses "//", "/./" and "/x/../" of an absolute path, in place.
static void normalize(char *path) {
    char *out = path, *in = path;
    while (*in) {
        if (in[0] == '/') {
            while (in[1] == '/') in++;
            if (in[1] == '.' && (in[2] == '/' || in[2] == 0)) { in += 2; continue; }
            if (in[1] == '.' && in[2] == '.' && (in[3] == '/' || in[3] == 0)) {
                while (out > path && *--out != '/') {}
                in += 3;
                continue;
            }
        }
        *out++ = *in++;
    }
    if (out == path) *out++ = '/';
    *out = 0;
}

// The absolute path of `name` relative to the folder `dirfd` (AT_FDCWD: the working folder); malloc'd, or NULL.
static char *absolute(int dirfd, const char *name) {
    if (!name) return NULL;
    char base[PATH_MAX];
    if (name[0] == '/') {
        base[0] = 0;
    } else if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base)) return NULL;
    } else if (dirfd >= 0 && dirfd < MAX_FDS && fd_paths[dirfd]) {
        snprintf(base, sizeof base, "%s", fd_paths[dirfd]);
    } else {
        return NULL;
    }
    size_t length = strlen(base) + strlen(name) + 2;
    char *path = malloc(length);
    if (!path) return NULL;
    if (name[0] == '/') snprintf(path, length, "%s", name);
    else snprintf(path, length, "%s/%s", base, name);
    normalize(path);
    return path;
}

static int under_root(const char *path) {
    return path && strncmp(path, root, root_length) == 0 && (path[root_length] == '/' || path[root_length] == 0);
}

static const char *tracked(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return NULL;
    return under_root(fd_paths[fd]) ? fd_paths[fd] : NULL;
}

static void remember(int fd, char *path) {
    if (fd < 0 || fd >= MAX_FDS) { free(path); return; }
    free(fd_paths[fd]);
    fd_paths[fd] = path;
}

static void forget(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return;
    free(fd_paths[fd]);
    fd_paths[fd] = NULL;
}

// ---------------------------------------------------------------------------------------------------------------
// The trace

struct buffer { char *bytes; size_t length, capacity; };

static void put(struct buffer *b, const char *text, size_t count) {
    if (b->length + count + 1 > b->capacity) {
        size_t capacity = (b->capacity ? b->capacity * 2 : 512);
        while (capacity < b->length + count + 1) capacity *= 2;
        char *grown = realloc(b->bytes, capacity);
        if (!grown) return;
        b->bytes = grown;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->length, text, count);
    b->length += count;
    b->bytes[b->length] = 0;
}

static void put_text(struct buffer *b, const char *text) { put(b, text, strlen(text)); }

static void put_string(struct buffer *b, const char *key, const char *value) {
    if (!value) return;
    char scratch[16];
    snprintf(scratch, sizeof scratch, ",\"%s\":\"", key);
    put_text(b, scratch);
    for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
        if (*c == '"' || *c == '\\') { put(b, "\\", 1); put(b, (const char *)c, 1); }
        else if (*c < 0x20) { snprintf(scratch, sizeof scratch, "\\u%04x", *c); put_text(b, scratch); }
        else put(b, (const char *)c, 1);
    }
    put(b, "\"", 1);
}

static void put_number(struct buffer *b, const char *key, long long value) {
    char scratch[64];
    snprintf(scratch, sizeof scratch, ",\"%s\":%lld", key, value);
    put_text(b, scratch);
}

static void put_hex(struct buffer *b, const void *data, size_t count) {
    static const char digits[] = "0123456789abcdef";
    put_text(b, ",\"data\":\"");
    const unsigned char *bytes = data;
    char pair[2];
    for (size_t i = 0; i < count; i++) {
        pair[0] = digits[bytes[i] >> 4];
        pair[1] = digits[bytes[i] & 15];
        put(b, pair, 2);
    }
    put(b, "\"", 1);
}

static void begin(struct buffer *b, const char *op) {
    b->bytes = NULL;
    b->length = b->capacity = 0;
    put_text(b, "{\"op\":\"");
    put_text(b, op);
    put_text(b, "\"");
    put_number(b, "pid", getpid());
}

static int ensure_trace(void) {
    if (trace_fd >= 0 && trace_pid == getpid()) return 1;
    RESOLVE(open);
    RESOLVE(fcntl);
    RESOLVE(close);
    int fd = REAL(open)(getenv("POWERLOSS_TRACE"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    // Out of the way of programs that dup2 onto low numbers.
    int high = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 900);
    if (high >= 0) { REAL(close)(fd); fd = high; }
    trace_fd = fd;
    trace_pid = getpid();
    return 1;
}

// Locks the trace (this process's threads and other processes) around a call and its record.
static void enter(void) {
    pthread_mutex_lock(&lock);
    if (!ensure_trace()) return;
    struct flock region = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    while (REAL(fcntl)(trace_fd, F_SETLKW, &region) != 0 && errno == EINTR) {}
}

static void leave(void) {
    if (trace_fd >= 0) {
        struct flock region = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
        REAL(fcntl)(trace_fd, F_SETLK, &region);
    }
    pthread_mutex_unlock(&lock);
}

static void emit(struct buffer *b) {
    put_text(b, "}\n");
    RESOLVE(write);
    if (trace_fd >= 0 && b->bytes) {
        size_t offset = 0;
        while (offset < b->length) {
            ssize_t written = REAL(write)(trace_fd, b->bytes + offset, b->length - offset);
            if (written <= 0) { if (errno == EINTR) continue; break; }
            offset += (size_t)written;
        }
    }
    free(b->bytes);
}

// Records "stat" facts of a descriptor: its inode (a sanity check for the model) and whether it is a folder.
static void put_identity(struct buffer *b, int fd) {
    struct stat status;
    if (fstat(fd, &status) == 0) {
        put_number(b, "ino", (long long)status.st_ino);
        if (S_ISDIR(status.st_mode)) put_number(b, "dir", 1);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// open

struct open_watch { char *path; int watch; int existed; };

static void open_before(struct open_watch *w, int dirfd, const char *name) {
    w->path = is_enabled() ? absolute(dirfd, name) : NULL;
    w->watch = is_enabled() && under_root(w->path);
    if (w->watch) enter();
    struct stat before;
    w->existed = w->watch && lstat(w->path, &before) == 0;
}

static int open_after(struct open_watch *w, const char *kind, int fd, int flags, mode_t mode) {
    int saved = errno;
    if (fd >= 0) {
        if (w->watch) {
            struct buffer b;
            begin(&b, "open");
            put_number(&b, "fd", fd);
            put_string(&b, "path", w->path);
            put_number(&b, "flags", flags);
            put_number(&b, "mode", mode);
            put_number(&b, "created", (flags & O_CREAT) && !w->existed);
            put_string(&b, "via", kind);
            put_identity(&b, fd);
            emit(&b);
        }
        if (w->path) {
            if (!w->watch) pthread_mutex_lock(&lock);
            remember(fd, w->path);
            if (!w->watch) pthread_mutex_unlock(&lock);
            w->path = NULL;
        }
    }
    if (w->watch) leave();
    free(w->path);
    errno = saved;
    return fd;
}

static mode_t mode_argument(int flags, va_list arguments) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(arguments, int) : 0;
}

#define OPEN_WRAPPER(name)                                                                                  \
    int name(const char *path, int flags, ...) {                                                            \
        va_list arguments;                                                                                  \
        va_start(arguments, flags);                                                                         \
        mode_t mode = mode_argument(flags, arguments);                                                      \
        va_end(arguments);                                                                                  \
        RESOLVE(name);                                                                                      \
        struct open_watch w; \
        open_before(&w, AT_FDCWD, path); \
        return open_after(&w, #name, REAL(name)(path, flags, mode), flags, mode); \
    }
OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)

#define OPENAT_WRAPPER(name)                                                                                \
    int name(int dirfd, const char *path, int flags, ...) {                                                 \
        va_list arguments;                                                                                  \
        va_start(arguments, flags);                                                                         \
        mode_t mode = mode_argument(flags, arguments);                                                      \
        va_end(arguments);                                                                                  \
        RESOLVE(name);                                                                                      \
        struct open_watch w; \
        open_before(&w, dirfd, path); \
        return open_after(&w, #name, REAL(name)(dirfd, path, flags, mode), flags, mode); \
    }
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

int __open_2(const char *path, int flags) {
    RESOLVE(__open_2);
    struct open_watch w;
    open_before(&w, AT_FDCWD, path);
    return open_after(&w, "__open_2", REAL(__open_2)(path, flags), flags, 0);
}
int __open64_2(const char *path, int flags) {
    RESOLVE(__open64_2);
    struct open_watch w;
    open_before(&w, AT_FDCWD, path);
    return open_after(&w, "__open64_2", REAL(__open64_2)(path, flags), flags, 0);
}
int __openat_2(int dirfd, const char *path, int flags) {
    RESOLVE(__openat_2);
    struct open_watch w;
    open_before(&w, dirfd, path);
    return open_after(&w, "__openat_2", REAL(__openat_2)(dirfd, path, flags), flags, 0);
}
int __openat64_2(int dirfd, const char *path, int flags) {
    RESOLVE(__openat64_2);
    struct open_watch w;
    open_before(&w, dirfd, path);
    return open_after(&w, "__openat64_2", REAL(__openat64_2)(dirfd, path, flags), flags, 0);
}
int creat(const char *path, mode_t mode) {
    RESOLVE(creat);
    struct open_watch w;
    open_before(&w, AT_FDCWD, path);
    return open_after(&w, "creat", REAL(creat)(path, mode), O_CREAT | O_WRONLY | O_TRUNC, mode);
}
int creat64(const char *path, mode_t mode) {
    RESOLVE(creat64);
    struct open_watch w;
    open_before(&w, AT_FDCWD, path);
    return open_after(&w, "creat64", REAL(creat64)(path, mode), O_CREAT | O_WRONLY | O_TRUNC, mode);
}

// ---------------------------------------------------------------------------------------------------------------
// Writes

// Whether a write to `fd` is recorded; takes the lock when it is (the caller leaves).
static const char *watch_fd(int fd, int *is_stdout) {
    *is_stdout = 0;
    if (!is_enabled()) return NULL;
    pthread_mutex_lock(&lock);
    const char *path = tracked(fd);
    pthread_mutex_unlock(&lock);
    if (!path && fd == 1 && record_stdout) { *is_stdout = 1; path = "<stdout>"; }
    if (path) enter();
    return path;
}

// Records a write of `count` bytes at `offset` (-1: at the descriptor's position, found afterwards).
static void record_write(const char *op, int fd, int is_stdout, const struct iovec *vectors, int vector_count,
                         ssize_t count, off_t offset) {
    struct buffer b;
    begin(&b, is_stdout ? "stdout" : "write");
    put_number(&b, "fd", fd);
    if (!is_stdout) {
        put_string(&b, "path", fd_paths[fd]);
        if (offset < 0) offset = lseek(fd, 0, SEEK_CUR) - count;   // after an append or a plain write
        put_number(&b, "off", (long long)offset);
        put_identity(&b, fd);
    }
    put_string(&b, "via", op);
    // The bytes as one run.
    char *joined = malloc(count > 0 ? (size_t)count : 1);
    size_t filled = 0;
    for (int i = 0; i < vector_count && filled < (size_t)count; i++) {
        size_t take = vectors[i].iov_len;
        if (take > (size_t)count - filled) take = (size_t)count - filled;
        if (joined) memcpy(joined + filled, vectors[i].iov_base, take);
        filled += take;
    }
    put_number(&b, "len", (long long)count);
    if (joined) put_hex(&b, joined, (size_t)count);
    free(joined);
    emit(&b);
}

ssize_t write(int fd, const void *data, size_t count) {
    RESOLVE(write);
    int is_stdout;
    const char *path = watch_fd(fd, &is_stdout);
    ssize_t result = REAL(write)(fd, data, count);
    int saved = errno;
    if (path) {
        if (result > 0) {
            struct iovec vector = { (void *)data, (size_t)result };
            record_write("write", fd, is_stdout, &vector, 1, result, -1);
        }
        leave();
    }
    errno = saved;
    return result;
}

#define PWRITE_WRAPPER(name)                                                                                \
    ssize_t name(int fd, const void *data, size_t count, off_t offset) {                                    \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(fd, &is_stdout);                                                        \
        ssize_t result = REAL(name)(fd, data, count, offset);                                               \
        int saved = errno;                                                                                  \
        if (path) {                                                                                         \
            if (result > 0) {                                                                               \
                struct iovec vector = { (void *)data, (size_t)result };                                     \
                record_write(#name, fd, is_stdout, &vector, 1, result, offset);                             \
            }                                                                                               \
            leave();                                                                                        \
        }                                                                                                   \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
PWRITE_WRAPPER(pwrite)
PWRITE_WRAPPER(pwrite64)

ssize_t writev(int fd, const struct iovec *vectors, int count) {
    RESOLVE(writev);
    int is_stdout;
    const char *path = watch_fd(fd, &is_stdout);
    ssize_t result = REAL(writev)(fd, vectors, count);
    int saved = errno;
    if (path) {
        if (result > 0) record_write("writev", fd, is_stdout, vectors, count, result, -1);
        leave();
    }
    errno = saved;
    return result;
}

#define PWRITEV_WRAPPER(name)                                                                               \
    ssize_t name(int fd, const struct iovec *vectors, int count, off_t offset) {                            \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(fd, &is_stdout);                                                        \
        ssize_t result = REAL(name)(fd, vectors, count, offset);                                            \
        int saved = errno;                                                                                  \
        if (path) {                                                                                         \
            if (result > 0) record_write(#name, fd, is_stdout, vectors, count, result, offset);             \
            leave();                                                                                        \
        }                                                                                                   \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
PWRITEV_WRAPPER(pwritev)
PWRITEV_WRAPPER(pwritev64)

#define PWRITEV2_WRAPPER(name)                                                                              \
    ssize_t name(int fd, const struct iovec *vectors, int count, off_t offset, int flags) {                 \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(fd, &is_stdout);                                                        \
        ssize_t result = REAL(name)(fd, vectors, count, offset, flags);                                     \
        int saved = errno;                                                                                  \
        if (path) {                                                                                         \
            if (result > 0) record_write(#name, fd, is_stdout, vectors, count, result, offset);             \
            leave();                                                                                        \
        }                                                                                                   \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
PWRITEV2_WRAPPER(pwritev2)
PWRITEV2_WRAPPER(pwritev64v2)

// copy_file_range and sendfile: the bytes are read back from the destination once written.
static void record_copied(const char *op, int fd, off_t offset, ssize_t count) {
    RESOLVE(pread);
    char *data = malloc(count > 0 ? (size_t)count : 1);
    ssize_t got = data ? REAL(pread)(fd, data, (size_t)count, offset) : -1;
    struct iovec vector = { data, got > 0 ? (size_t)got : 0 };
    record_write(op, fd, 0, &vector, 1, got > 0 ? got : 0, offset);
    free(data);
}

ssize_t copy_file_range(int in, off_t *in_offset, int out, off_t *out_offset, size_t count, unsigned int flags) {
    RESOLVE(copy_file_range);
    int is_stdout;
    const char *path = watch_fd(out, &is_stdout);
    off_t start = out_offset ? *out_offset : lseek(out, 0, SEEK_CUR);
    ssize_t result = REAL(copy_file_range)(in, in_offset, out, out_offset, count, flags);
    int saved = errno;
    if (path) {
        if (result > 0 && !is_stdout) record_copied("copy_file_range", out, start, result);
        leave();
    }
    errno = saved;
    return result;
}

#define SENDFILE_WRAPPER(name)                                                                              \
    ssize_t name(int out, int in, off_t *offset, size_t count) {                                            \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(out, &is_stdout);                                                       \
        off_t start = lseek(out, 0, SEEK_CUR);                                                              \
        ssize_t result = REAL(name)(out, in, offset, count);                                                \
        int saved = errno;                                                                                  \
        if (path) {                                                                                         \
            if (result > 0 && !is_stdout) record_copied(#name, out, start, result);                         \
            leave();                                                                                        \
        }                                                                                                   \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
SENDFILE_WRAPPER(sendfile)
SENDFILE_WRAPPER(sendfile64)

// ---------------------------------------------------------------------------------------------------------------
// Sizes

static void record_size(const char *op, const char *kind, int fd, const char *path, long long size) {
    struct buffer b;
    begin(&b, op);
    if (fd >= 0) put_number(&b, "fd", fd);
    put_string(&b, "path", path);
    put_number(&b, "size", size);
    put_string(&b, "via", kind);
    if (fd >= 0) put_identity(&b, fd);
    emit(&b);
}

#define FTRUNCATE_WRAPPER(name)                                                                             \
    int name(int fd, off_t size) {                                                                          \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(fd, &is_stdout);                                                        \
        int result = REAL(name)(fd, size);                                                                  \
        int saved = errno;                                                                                  \
        if (path) {                                                                                         \
            if (result == 0 && !is_stdout) record_size("truncate", #name, fd, path, size);                  \
            leave();                                                                                        \
        }                                                                                                   \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
FTRUNCATE_WRAPPER(ftruncate)
FTRUNCATE_WRAPPER(ftruncate64)

#define TRUNCATE_WRAPPER(name)                                                                              \
    int name(const char *name_, off_t size) {                                                               \
        RESOLVE(name);                                                                                      \
        char *path = absolute(AT_FDCWD, name_);                                                             \
        int watch = is_enabled() && under_root(path);                                                       \
        if (watch) enter();                                                                                 \
        int result = REAL(name)(name_, size);                                                               \
        int saved = errno;                                                                                  \
        if (watch) {                                                                                        \
            if (result == 0) record_size("truncate", #name, -1, path, size);                                \
            leave();                                                                                        \
        }                                                                                                   \
        free(path);                                                                                         \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
TRUNCATE_WRAPPER(truncate)
TRUNCATE_WRAPPER(truncate64)

// fallocate without FALLOC_FL_KEEP_SIZE, posix_fallocate: the file grows (zeros) to offset + length at least.
#define FALLOCATE_WRAPPER(name)                                                                             \
    int name(int fd, int mode, off_t offset, off_t length) {                                                \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(fd, &is_stdout);                                                        \
        int result = REAL(name)(fd, mode, offset, length);                                                  \
        int saved = errno;                                                                                  \
        if (path) {                                                                                         \
            if (result == 0 && !is_stdout && mode == 0)                                                     \
                record_size("extend", #name, fd, path, (long long)(offset + length));                       \
            leave();                                                                                        \
        }                                                                                                   \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
FALLOCATE_WRAPPER(fallocate)
FALLOCATE_WRAPPER(fallocate64)

#define POSIX_FALLOCATE_WRAPPER(name)                                                                       \
    int name(int fd, off_t offset, off_t length) {                                                          \
        RESOLVE(name);                                                                                      \
        int is_stdout;                                                                                      \
        const char *path = watch_fd(fd, &is_stdout);                                                        \
        int result = REAL(name)(fd, offset, length);                                                        \
        if (path) {                                                                                         \
            if (result == 0 && !is_stdout)                                                                  \
                record_size("extend", #name, fd, path, (long long)(offset + length));                       \
            leave();                                                                                        \
        }                                                                                                   \
        return result;                                                                                      \
    }
POSIX_FALLOCATE_WRAPPER(posix_fallocate)
POSIX_FALLOCATE_WRAPPER(posix_fallocate64)

// ---------------------------------------------------------------------------------------------------------------
// Flushes

static int do_sync(const char *op, int fd, int (*call)(int)) {
    int is_stdout;
    const char *path = watch_fd(fd, &is_stdout);
    if (is_stdout) { leave(); path = NULL; }
    int result = call(fd);
    int saved = errno;
    if (path) {
        if (result == 0) {
            struct buffer b;
            begin(&b, "fsync");
            put_number(&b, "fd", fd);
            put_string(&b, "path", path);
            put_string(&b, "via", op);
            put_identity(&b, fd);
            emit(&b);
        }
        leave();
    }
    errno = saved;
    return result;
}

int fsync(int fd) {
    RESOLVE(fsync);
    return do_sync("fsync", fd, REAL(fsync));
}

int fdatasync(int fd) {
    RESOLVE(fdatasync);
    return do_sync("fdatasync", fd, REAL(fdatasync));
}

// Recorded, but not a flush: it neither writes metadata nor flushes the disk's cache.
int sync_file_range(int fd, off_t offset, off_t count, unsigned int flags) {
    RESOLVE(sync_file_range);
    int is_stdout;
    const char *path = watch_fd(fd, &is_stdout);
    int result = REAL(sync_file_range)(fd, offset, count, flags);
    int saved = errno;
    if (path) {
        if (result == 0 && !is_stdout) {
            struct buffer b;
            begin(&b, "sync_file_range");
            put_number(&b, "fd", fd);
            put_string(&b, "path", path);
            emit(&b);
        }
        leave();
    }
    errno = saved;
    return result;
}

static void record_global_sync(const char *op) {
    struct buffer b;
    begin(&b, "syncall");
    put_string(&b, "via", op);
    emit(&b);
}

int syncfs(int fd) {
    RESOLVE(syncfs);
    if (!is_enabled()) return REAL(syncfs)(fd);
    enter();
    int result = REAL(syncfs)(fd);
    int saved = errno;
    if (result == 0) record_global_sync("syncfs");
    leave();
    errno = saved;
    return result;
}

void sync(void) {
    RESOLVE(sync);
    if (!is_enabled()) { REAL(sync)(); return; }
    enter();
    REAL(sync)();
    record_global_sync("sync");
    leave();
}

// ---------------------------------------------------------------------------------------------------------------
// Names

static void record_names(const char *op, const char *kind, const char *path, const char *path2, long long extra) {
    struct buffer b;
    begin(&b, op);
    put_string(&b, "path", path);
    put_string(&b, "path2", path2);
    if (extra) put_number(&b, "flags", extra);
    put_string(&b, "via", kind);
    struct stat status;
    if (path2 && lstat(path2, &status) == 0) put_number(&b, "ino", (long long)status.st_ino);
    emit(&b);
}

// A call on one or two names: recorded when either is under the folder.
struct names_watch { char *path, *path2; int watch; };

static void names_before(struct names_watch *w, int dirfd, const char *name, int dirfd2, const char *name2) {
    w->path = is_enabled() ? absolute(dirfd, name) : NULL;
    w->path2 = is_enabled() && name2 ? absolute(dirfd2, name2) : NULL;
    w->watch = is_enabled() && (under_root(w->path) || under_root(w->path2));
    if (w->watch) enter();
}

static int names_after(struct names_watch *w, const char *op, const char *kind, long long extra, int result) {
    int saved = errno;
    if (w->watch) {
        if (result == 0) record_names(op, kind, w->path, w->path2, extra);
        leave();
    }
    free(w->path);
    free(w->path2);
    errno = saved;
    return result;
}

#define NAMES(op, kind, dirfd, name, dirfd2, name2, extra, expression)                                     \
    do {                                                                                                    \
        struct names_watch w;                                                                               \
        names_before(&w, dirfd, name, dirfd2, name2);                                                       \
        return names_after(&w, op, kind, extra, expression);                                                \
    } while (0)

int rename(const char *from, const char *to) {
    RESOLVE(rename);
    NAMES("rename", "rename", AT_FDCWD, from, AT_FDCWD, to, 0, REAL(rename)(from, to));
}
int renameat(int fromfd, const char *from, int tofd, const char *to) {
    RESOLVE(renameat);
    NAMES("rename", "renameat", fromfd, from, tofd, to, 0, REAL(renameat)(fromfd, from, tofd, to));
}
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    RESOLVE(renameat2);
    NAMES("rename", "renameat2", fromfd, from, tofd, to, flags, REAL(renameat2)(fromfd, from, tofd, to, flags));
}
int link(const char *from, const char *to) {
    RESOLVE(link);
    NAMES("link", "link", AT_FDCWD, from, AT_FDCWD, to, 0, REAL(link)(from, to));
}
int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    RESOLVE(linkat);
    NAMES("link", "linkat", fromfd, from, tofd, to, flags, REAL(linkat)(fromfd, from, tofd, to, flags));
}
int symlink(const char *target, const char *name) {
    RESOLVE(symlink);
    // path: the link's name; target kept as written (not resolved).
    char *path = absolute(AT_FDCWD, name);
    int watch = is_enabled() && under_root(path);
    if (watch) enter();
    int result = REAL(symlink)(target, name);
    int saved = errno;
    if (watch) {
        if (result == 0) record_names("symlink", "symlink", path, NULL, 0);
        leave();
    }
    free(path);
    errno = saved;
    return result;
}
int symlinkat(const char *target, int dirfd, const char *name) {
    RESOLVE(symlinkat);
    char *path = absolute(dirfd, name);
    int watch = is_enabled() && under_root(path);
    if (watch) enter();
    int result = REAL(symlinkat)(target, dirfd, name);
    int saved = errno;
    if (watch) {
        if (result == 0) record_names("symlink", "symlinkat", path, NULL, 0);
        leave();
    }
    free(path);
    errno = saved;
    return result;
}
int unlink(const char *name) {
    RESOLVE(unlink);
    NAMES("unlink", "unlink", AT_FDCWD, name, 0, NULL, 0, REAL(unlink)(name));
}
int unlinkat(int dirfd, const char *name, int flags) {
    RESOLVE(unlinkat);
    NAMES((flags & AT_REMOVEDIR) ? "rmdir" : "unlink", "unlinkat", dirfd, name, 0, NULL, 0,
          REAL(unlinkat)(dirfd, name, flags));
}
int remove(const char *name) {
    RESOLVE(remove);
    char *path = absolute(AT_FDCWD, name);
    struct stat status;
    int is_dir = path && lstat(path, &status) == 0 && S_ISDIR(status.st_mode);
    free(path);
    NAMES(is_dir ? "rmdir" : "unlink", "remove", AT_FDCWD, name, 0, NULL, 0, REAL(remove)(name));
}
int mkdir(const char *name, mode_t mode) {
    RESOLVE(mkdir);
    NAMES("mkdir", "mkdir", AT_FDCWD, name, 0, NULL, 0, REAL(mkdir)(name, mode));
}
int mkdirat(int dirfd, const char *name, mode_t mode) {
    RESOLVE(mkdirat);
    NAMES("mkdir", "mkdirat", dirfd, name, 0, NULL, 0, REAL(mkdirat)(dirfd, name, mode));
}
int rmdir(const char *name) {
    RESOLVE(rmdir);
    NAMES("rmdir", "rmdir", AT_FDCWD, name, 0, NULL, 0, REAL(rmdir)(name));
}

// ---------------------------------------------------------------------------------------------------------------
// Descriptors

int close(int fd) {
    RESOLVE(close);
    if (!is_enabled()) return REAL(close)(fd);
    if (fd == trace_fd && trace_pid == getpid()) return 0;   // a program closing every descriptor keeps ours
    pthread_mutex_lock(&lock);
    const char *path = tracked(fd);
    pthread_mutex_unlock(&lock);
    if (path) enter(); else pthread_mutex_lock(&lock);
    int result = REAL(close)(fd);
    int saved = errno;
    if (path && result == 0) {
        struct buffer b;
        begin(&b, "close");
        put_number(&b, "fd", fd);
        put_string(&b, "path", path);
        emit(&b);
    }
    forget(fd);
    if (path) leave(); else pthread_mutex_unlock(&lock);
    errno = saved;
    return result;
}

// A new descriptor for the same open file: recorded (the model follows descriptors by number).
static void record_dup(int from, int to) {
    if (!is_enabled() || to < 0 || to >= MAX_FDS) return;
    pthread_mutex_lock(&lock);
    const char *path = tracked(from);
    char *copy = from >= 0 && from < MAX_FDS && fd_paths[from] ? strdup(fd_paths[from]) : NULL;
    pthread_mutex_unlock(&lock);
    if (path) {
        enter();
        struct buffer b;
        begin(&b, "dup");
        put_number(&b, "fd", from);
        put_number(&b, "fd2", to);
        put_string(&b, "path", copy);
        emit(&b);
        remember(to, copy);
        leave();
    } else {
        pthread_mutex_lock(&lock);
        remember(to, copy);
        pthread_mutex_unlock(&lock);
    }
}

int dup(int fd) {
    RESOLVE(dup);
    int result = REAL(dup)(fd);
    int saved = errno;
    if (result >= 0) record_dup(fd, result);
    errno = saved;
    return result;
}
int dup2(int fd, int to) {
    RESOLVE(dup2);
    if (is_enabled() && to == trace_fd && trace_pid == getpid()) { errno = EBADF; return -1; }
    int result = REAL(dup2)(fd, to);
    int saved = errno;
    if (result >= 0 && fd != to) record_dup(fd, result);
    errno = saved;
    return result;
}
int dup3(int fd, int to, int flags) {
    RESOLVE(dup3);
    if (is_enabled() && to == trace_fd && trace_pid == getpid()) { errno = EBADF; return -1; }
    int result = REAL(dup3)(fd, to, flags);
    int saved = errno;
    if (result >= 0) record_dup(fd, result);
    errno = saved;
    return result;
}

// fcntl's third argument is an int or a pointer; passing it on as a pointer-sized value works for both on x86_64
// and aarch64. Only F_DUPFD/F_DUPFD_CLOEXEC are looked at.
#define FCNTL_WRAPPER(name)                                                                                 \
    int name(int fd, int command, ...) {                                                                    \
        va_list arguments;                                                                                  \
        va_start(arguments, command);                                                                       \
        void *argument = va_arg(arguments, void *);                                                         \
        va_end(arguments);                                                                                  \
        RESOLVE(name);                                                                                      \
        int result = REAL(name)(fd, command, argument);                                                     \
        int saved = errno;                                                                                  \
        if (result >= 0 && (command == F_DUPFD || command == F_DUPFD_CLOEXEC)) record_dup(fd, result);      \
        errno = saved;                                                                                      \
        return result;                                                                                      \
    }
FCNTL_WRAPPER(fcntl)
FCNTL_WRAPPER(fcntl64)
