// A read-only overlay VFS: SQLite reads a database and its side files as they are on disk, and everything it would
// write (a hot journal's rollback, the journal's deletion, a WAL index) lands in this process's memory instead.
//
// It wraps the default VFS (unix on Linux) and hands every real read and every lock to that VFS's own file objects,
// so SQLite's per-inode lock bookkeeping stays right: closing a descriptor drops every fcntl lock the process holds
// on that file, which the unix VFS knows and works around, and a second descriptor opened here would not.
//
// What it promises (Docs/Security.md, "Read-only checks"):
// - every real file is opened read-only, nothing is created, written, truncated, synced or deleted on disk;
// - the database file gets one real lock, SHARED, taken at the first read and held until the file closes: no other
//   connection can write the file or roll a journal back into it while the check reads; anything above SHARED
//   (what a rollback asks for) is granted inside the overlay only, and, as the real lock would be, not while another
//   connection holds RESERVED;
// - a file reads as the real one until the connection first writes or truncates it (so a change another connection
//   commits before this one's lock is seen, as it would be); from then on its bytes and size are the overlay's;
// - a side file that does not exist reads as an empty file that exists only here; a deleted one stops existing here;
// - the WAL index is private heap memory: no -shm is opened, mapped or created.
//
// One overlay serves one connection (its name is registered per overlay and removed when it is destroyed); the
// connection calls it from one thread at a time, as SQLite does for a connection opened with SQLITE_OPEN_NOMUTEX.

#include "CSQLCipherKitSupport.h"

#ifndef SQLITE_HAS_CODEC
#define SQLITE_HAS_CODEC 1
#endif
#if __has_include(<sqlcipher/sqlite3.h>)
#include <sqlcipher/sqlite3.h>
#else
#include <sqlite3.h>
#endif

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// SQLITE_IOCAP_BATCH_ATOMIC (SQLite 3.21): a batch-atomic file would be written through file controls this overlay
// does not forward. The linked header may be older than the constant.
#define OVERLAY_IOCAP_BATCH_ATOMIC 0x00004000
// SQLite's smallest page size: every page a rollback writes covers whole chunks, so the overlay holds about the bytes
// of the pages written (SQLCipher 3's 1024-byte pages would take four times their size in 4096-byte chunks).
#define OVERLAY_CHUNK_SIZE 512
#define OVERLAY_DEFAULT_SECTOR_SIZE 4096

// MARK: - Bytes that replace a file's own

/// A file as the overlay shows it. Until the connection first writes or truncates it, it is the real file as it is
/// now (another connection may still change it before this one holds its lock); from then on, `size` bytes, of which
/// those in a chunk come from memory, the others below `baseLimit` from the real file, and the rest are zero.
typedef struct {
    int isDetached;
    sqlite3_int64 size;
    sqlite3_int64 baseLimit;
    sqlite3_int64 *chunkKeys;
    unsigned char **chunkValues;
    size_t chunkCapacity;   // a power of two, or 0
    size_t chunkCount;
} OverlayData;

static size_t chunkSlot(const OverlayData *data, sqlite3_int64 key) {
    uint64_t hash = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(hash >> 17) & (data->chunkCapacity - 1);
}

static unsigned char *findChunk(const OverlayData *data, sqlite3_int64 key) {
    if (data->chunkCapacity == 0) return NULL;
    for (size_t slot = chunkSlot(data, key);; slot = (slot + 1) & (data->chunkCapacity - 1)) {
        if (data->chunkValues[slot] == NULL) return NULL;
        if (data->chunkKeys[slot] == key) return data->chunkValues[slot];
    }
}

static void placeChunk(OverlayData *data, sqlite3_int64 key, unsigned char *value) {
    size_t slot = chunkSlot(data, key);
    while (data->chunkValues[slot] != NULL) slot = (slot + 1) & (data->chunkCapacity - 1);
    data->chunkKeys[slot] = key;
    data->chunkValues[slot] = value;
    data->chunkCount += 1;
}

/// Rebuilds the table with room for `capacity` slots, keeping the chunks below `keepBelow` and freeing the others.
static int rebuildChunks(OverlayData *data, size_t capacity, sqlite3_int64 keepBelow) {
    sqlite3_int64 *keys = calloc(capacity, sizeof(sqlite3_int64));
    unsigned char **values = calloc(capacity, sizeof(unsigned char *));
    if (keys == NULL || values == NULL) {
        free(keys);
        free(values);
        return SQLITE_NOMEM;
    }
    sqlite3_int64 *oldKeys = data->chunkKeys;
    unsigned char **oldValues = data->chunkValues;
    size_t oldCapacity = data->chunkCapacity;
    data->chunkKeys = keys;
    data->chunkValues = values;
    data->chunkCapacity = capacity;
    data->chunkCount = 0;
    for (size_t slot = 0; slot < oldCapacity; slot++) {
        if (oldValues[slot] == NULL) continue;
        if (oldKeys[slot] < keepBelow) {
            placeChunk(data, oldKeys[slot], oldValues[slot]);
        } else {
            free(oldValues[slot]);
        }
    }
    free(oldKeys);
    free(oldValues);
    return SQLITE_OK;
}

static void clearData(OverlayData *data) {
    for (size_t slot = 0; slot < data->chunkCapacity; slot++) free(data->chunkValues[slot]);
    free(data->chunkKeys);
    free(data->chunkValues);
    memset(data, 0, sizeof(*data));
}

/// Reads bytes of the real file below `baseLimit`; zeros elsewhere (and where the real file is shorter).
static int readBase(const OverlayData *data, sqlite3_file *real, unsigned char *buffer, int count,
                    sqlite3_int64 offset) {
    memset(buffer, 0, (size_t)count);
    if (real == NULL || offset >= data->baseLimit) return SQLITE_OK;
    sqlite3_int64 available = data->baseLimit - offset;
    int realCount = available < count ? (int)available : count;
    int rc = real->pMethods->xRead(real, buffer, realCount, offset);
    return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_OK : rc;
}

/// The part of a byte range `[offset + done, offset + count)` that lies in one chunk.
typedef struct {
    sqlite3_int64 key;   // the chunk's number
    int within;          // where the part starts inside the chunk
    int length;          // how many bytes of the range the chunk holds
} ChunkPiece;

static ChunkPiece chunkPiece(sqlite3_int64 offset, int done, int count) {
    sqlite3_int64 position = offset + done;
    ChunkPiece piece = {position / OVERLAY_CHUNK_SIZE, (int)(position % OVERLAY_CHUNK_SIZE), 0};
    piece.length = OVERLAY_CHUNK_SIZE - piece.within;
    if (piece.length > count - done) piece.length = count - done;
    return piece;
}

/// Takes the real file's size as the overlay's own before the first change.
static int detachData(OverlayData *data, sqlite3_file *real) {
    if (data->isDetached) return SQLITE_OK;
    sqlite3_int64 size = 0;
    if (real != NULL) {
        int rc = real->pMethods->xFileSize(real, &size);
        if (rc != SQLITE_OK) return rc;
    }
    data->size = size;
    data->baseLimit = size;
    data->isDetached = 1;
    return SQLITE_OK;
}

static int dataSize(const OverlayData *data, sqlite3_file *real, sqlite3_int64 *size) {
    *size = 0;
    if (data->isDetached) {
        *size = data->size;
        return SQLITE_OK;
    }
    return real != NULL ? real->pMethods->xFileSize(real, size) : SQLITE_OK;
}

static int readData(const OverlayData *data, sqlite3_file *real, void *buffer, int count, sqlite3_int64 offset) {
    unsigned char *out = buffer;
    if (!data->isDetached && real != NULL) return real->pMethods->xRead(real, buffer, count, offset);
    sqlite3_int64 available = data->size - offset;
    int wanted = available <= 0 ? 0 : (available < count ? (int)available : count);
    int done = 0;
    while (done < wanted) {
        ChunkPiece part = chunkPiece(offset, done, wanted);
        const unsigned char *chunk = findChunk(data, part.key);
        if (chunk != NULL) {
            memcpy(out + done, chunk + part.within, (size_t)part.length);
        } else {
            int rc = readBase(data, real, out + done, part.length, offset + done);
            if (rc != SQLITE_OK) return rc;
        }
        done += part.length;
    }
    if (wanted < count) {
        memset(out + wanted, 0, (size_t)(count - wanted));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int writeData(OverlayData *data, sqlite3_file *real, const void *buffer, int count, sqlite3_int64 offset) {
    const unsigned char *in = buffer;
    int detached = detachData(data, real);
    if (detached != SQLITE_OK) return detached;
    int done = 0;
    while (done < count) {
        ChunkPiece part = chunkPiece(offset, done, count);
        unsigned char *chunk = findChunk(data, part.key);
        if (chunk == NULL) {
            if ((data->chunkCount + 1) * 2 > data->chunkCapacity) {
                size_t capacity = data->chunkCapacity == 0 ? 64 : data->chunkCapacity * 2;
                if (rebuildChunks(data, capacity, INT64_MAX) != SQLITE_OK) return SQLITE_NOMEM;
            }
            chunk = malloc(OVERLAY_CHUNK_SIZE);
            if (chunk == NULL) return SQLITE_NOMEM;
            if (part.length < OVERLAY_CHUNK_SIZE) {
                // The chunk starts as the file reads now: the real bytes below baseLimit, zeros above.
                int rc = readBase(data, real, chunk, OVERLAY_CHUNK_SIZE, part.key * OVERLAY_CHUNK_SIZE);
                if (rc != SQLITE_OK) {
                    free(chunk);
                    return rc;
                }
            }
            placeChunk(data, part.key, chunk);
        }
        memcpy(chunk + part.within, in + done, (size_t)part.length);
        done += part.length;
    }
    if (offset + count > data->size) data->size = offset + count;
    return SQLITE_OK;
}

static int truncateData(OverlayData *data, sqlite3_file *real, sqlite3_int64 size) {
    int detached = detachData(data, real);
    if (detached != SQLITE_OK) return detached;
    if (size < data->size) {
        sqlite3_int64 firstDropped = (size + OVERLAY_CHUNK_SIZE - 1) / OVERLAY_CHUNK_SIZE;
        if (data->chunkCapacity > 0 && rebuildChunks(data, data->chunkCapacity, firstDropped) != SQLITE_OK) {
            return SQLITE_NOMEM;
        }
        unsigned char *partial = size % OVERLAY_CHUNK_SIZE ? findChunk(data, size / OVERLAY_CHUNK_SIZE) : NULL;
        if (partial != NULL) {
            int within = (int)(size % OVERLAY_CHUNK_SIZE);
            memset(partial + within, 0, (size_t)(OVERLAY_CHUNK_SIZE - within));
        }
    }
    if (size < data->baseLimit) data->baseLimit = size;
    data->size = size;
    return SQLITE_OK;
}

// MARK: - The files an overlay knows

/// A path the connection opened, created or deleted, with what the overlay shows for it.
typedef struct OverlayEntry {
    struct OverlayEntry *next;
    char *name;
    /// Deleted here: it no longer exists for this connection, whatever is on disk.
    int isDeleted;
    /// Exists only here (created by the connection, or created again after it was deleted).
    int isVirtual;
    /// The SQLITE_OPEN_* kind it was opened as (SQLITE_OPEN_MAIN_JOURNAL, …), 0 until then.
    int kind;
    OverlayData data;
} OverlayEntry;

struct CSQLCipherKitSupport_Overlay {
    sqlite3_vfs vfs;
    sqlite3_vfs *base;
    char name[80];
    OverlayEntry *entries;
    int openFileCount;
    int finishedJournal;
    sqlite3_int64 memoryHighWater;
};

typedef struct {
    sqlite3_file file;              // pMethods: the overlay's methods
    CSQLCipherKitSupport_Overlay *overlay;
    OverlayEntry *entry;            // NULL for a file without a name (a temporary file)
    OverlayData anonymous;          // the bytes of a file without a name
    sqlite3_file *real;             // the base VFS's file, open read-only; NULL when it is not on disk
    int isMainDatabase;
    int deletesOnClose;
    int lockLevel;                  // the level SQLite asked for
    int holdsRealSharedLock;
    void **sharedMemoryRegions;     // the private WAL index
    int sharedMemoryRegionCount;
    int usedSharedMemory;
} OverlayFile;

static OverlayData *fileData(OverlayFile *file) {
    return file->entry != NULL ? &file->entry->data : &file->anonymous;
}

static OverlayEntry *findEntry(CSQLCipherKitSupport_Overlay *overlay, const char *name) {
    for (OverlayEntry *entry = overlay->entries; entry != NULL; entry = entry->next) {
        if (strcmp(entry->name, name) == 0) return entry;
    }
    return NULL;
}

static OverlayEntry *addEntry(CSQLCipherKitSupport_Overlay *overlay, const char *name) {
    OverlayEntry *entry = calloc(1, sizeof(OverlayEntry));
    if (entry == NULL) return NULL;
    entry->name = strdup(name);
    if (entry->name == NULL) {
        free(entry);
        return NULL;
    }
    entry->next = overlay->entries;
    overlay->entries = entry;
    return entry;
}

static void noteMemory(CSQLCipherKitSupport_Overlay *overlay) {
    sqlite3_int64 total = 0;
    for (OverlayEntry *entry = overlay->entries; entry != NULL; entry = entry->next) {
        total += (sqlite3_int64)entry->data.chunkCount * OVERLAY_CHUNK_SIZE;
    }
    if (total > overlay->memoryHighWater) overlay->memoryHighWater = total;
}

/// SQLite finished with a rollback journal: it deleted, truncated or rewrote it (the header zeroed), which it does
/// once a hot journal has been rolled back (or found to be stale).
static void noteJournalChange(OverlayFile *file) {
    if (file->entry != NULL && file->entry->kind == SQLITE_OPEN_MAIN_JOURNAL) file->overlay->finishedJournal = 1;
}

// MARK: - File methods

static int overlayClose(sqlite3_file *handle) {
    OverlayFile *file = (OverlayFile *)handle;
    for (int index = 0; index < file->sharedMemoryRegionCount; index++) free(file->sharedMemoryRegions[index]);
    free(file->sharedMemoryRegions);
    file->sharedMemoryRegions = NULL;
    file->sharedMemoryRegionCount = 0;
    int rc = SQLITE_OK;
    if (file->real != NULL) {
        // The base VFS releases the lock and, when another connection of this process holds a lock on the same
        // file, keeps the descriptor open until that one is released (POSIX drops all of them at the first close).
        rc = file->real->pMethods->xClose(file->real);
        free(file->real);
        file->real = NULL;
    }
    if (file->entry == NULL) {
        clearData(&file->anonymous);
    } else if (file->deletesOnClose) {
        clearData(&file->entry->data);
        file->entry->isDeleted = 1;
        file->entry->isVirtual = 0;
    }
    file->overlay->openFileCount -= 1;
    return rc;
}

static int overlayRead(sqlite3_file *handle, void *buffer, int count, sqlite3_int64 offset) {
    OverlayFile *file = (OverlayFile *)handle;
    return readData(fileData(file), file->real, buffer, count, offset);
}

static int overlayWrite(sqlite3_file *handle, const void *buffer, int count, sqlite3_int64 offset) {
    OverlayFile *file = (OverlayFile *)handle;
    int rc = writeData(fileData(file), file->real, buffer, count, offset);
    if (rc == SQLITE_OK) {
        noteJournalChange(file);
        noteMemory(file->overlay);
    }
    return rc;
}

static int overlayTruncate(sqlite3_file *handle, sqlite3_int64 size) {
    OverlayFile *file = (OverlayFile *)handle;
    int rc = truncateData(fileData(file), file->real, size);
    if (rc == SQLITE_OK) noteJournalChange(file);
    return rc;
}

static int overlaySync(sqlite3_file *handle, int flags) {
    (void)handle;
    (void)flags;
    return SQLITE_OK;
}

static int overlayFileSize(sqlite3_file *handle, sqlite3_int64 *size) {
    OverlayFile *file = (OverlayFile *)handle;
    return dataSize(fileData(file), file->real, size);
}

static int overlayLock(sqlite3_file *handle, int level) {
    OverlayFile *file = (OverlayFile *)handle;
    if (file->isMainDatabase && file->real != NULL) {
        // With the WAL index in private memory, an EXCLUSIVE lock would let the closing connection checkpoint the
        // whole WAL into memory, for nothing: refused, as another connection's lock would refuse it.
        if (level > SQLITE_LOCK_SHARED && file->usedSharedMemory) return SQLITE_BUSY;
        if (!file->holdsRealSharedLock) {
            int rc = file->real->pMethods->xLock(file->real, SQLITE_LOCK_SHARED);
            if (rc != SQLITE_OK) return rc;
            file->holdsRealSharedLock = 1;
        }
        if (level > SQLITE_LOCK_SHARED && file->lockLevel <= SQLITE_LOCK_SHARED) {
            // As the real lock would: not while another connection holds RESERVED (it is writing its journal).
            int isReserved = 0;
            int rc = file->real->pMethods->xCheckReservedLock(file->real, &isReserved);
            if (rc != SQLITE_OK) return rc;
            if (isReserved) return SQLITE_BUSY;
        }
    }
    if (level > file->lockLevel) file->lockLevel = level;
    return SQLITE_OK;
}

static int overlayUnlock(sqlite3_file *handle, int level) {
    // The real SHARED lock stays until the file closes: the whole check reads one state of the file.
    OverlayFile *file = (OverlayFile *)handle;
    if (level < file->lockLevel) file->lockLevel = level;
    return SQLITE_OK;
}

static int overlayCheckReservedLock(sqlite3_file *handle, int *isReserved) {
    OverlayFile *file = (OverlayFile *)handle;
    *isReserved = 0;
    if (file->isMainDatabase && file->real != NULL) {
        // Another connection (this process's or another's) writing its journal: that journal is not hot.
        return file->real->pMethods->xCheckReservedLock(file->real, isReserved);
    }
    return SQLITE_OK;
}

static int overlayFileControl(sqlite3_file *handle, int operation, void *argument) {
    OverlayFile *file = (OverlayFile *)handle;
    switch (operation) {
    case SQLITE_FCNTL_LOCKSTATE:
        *(int *)argument = file->lockLevel;
        return SQLITE_OK;
#ifdef SQLITE_FCNTL_HAS_MOVED
    case SQLITE_FCNTL_HAS_MOVED:
        if (file->real == NULL) {
            *(int *)argument = 0;
            return SQLITE_OK;
        }
        return file->real->pMethods->xFileControl(file->real, operation, argument);
#endif
    default:
        // Size hints, chunk sizes, persistent WAL, memory maps and the rest act on the real file, or ask for
        // behaviour this overlay does not have: "not handled", which SQLite takes as a default answer.
        return SQLITE_NOTFOUND;
    }
}

static int overlaySectorSize(sqlite3_file *handle) {
    OverlayFile *file = (OverlayFile *)handle;
    if (file->real != NULL) return file->real->pMethods->xSectorSize(file->real);
    return OVERLAY_DEFAULT_SECTOR_SIZE;
}

static int overlayDeviceCharacteristics(sqlite3_file *handle) {
    OverlayFile *file = (OverlayFile *)handle;
    int characteristics = SQLITE_IOCAP_POWERSAFE_OVERWRITE;
    if (file->real != NULL) characteristics = file->real->pMethods->xDeviceCharacteristics(file->real);
    return characteristics & ~OVERLAY_IOCAP_BATCH_ATOMIC;
}

static int overlaySharedMemoryMap(sqlite3_file *handle, int region, int regionSize, int extends,
                                  void volatile **address) {
    OverlayFile *file = (OverlayFile *)handle;
    *address = NULL;
    file->usedSharedMemory = 1;
    if (region >= file->sharedMemoryRegionCount) {
        // As a -shm file too short for the region: nothing unless SQLite asks to extend it.
        if (!extends) return SQLITE_OK;
        void **regions = realloc(file->sharedMemoryRegions, sizeof(void *) * (size_t)(region + 1));
        if (regions == NULL) return SQLITE_NOMEM;
        for (int index = file->sharedMemoryRegionCount; index <= region; index++) regions[index] = NULL;
        file->sharedMemoryRegions = regions;
        file->sharedMemoryRegionCount = region + 1;
    }
    if (file->sharedMemoryRegions[region] == NULL) {
        if (!extends) return SQLITE_OK;
        file->sharedMemoryRegions[region] = calloc(1, (size_t)regionSize);
        if (file->sharedMemoryRegions[region] == NULL) return SQLITE_NOMEM;
    }
    *address = file->sharedMemoryRegions[region];
    return SQLITE_OK;
}

static int overlaySharedMemoryLock(sqlite3_file *handle, int offset, int count, int flags) {
    // The WAL index is this connection's alone: no other connection can hold any of its locks.
    (void)handle;
    (void)offset;
    (void)count;
    (void)flags;
    return SQLITE_OK;
}

static void overlaySharedMemoryBarrier(sqlite3_file *handle) {
    (void)handle;
    atomic_thread_fence(memory_order_seq_cst);
}

static int overlaySharedMemoryUnmap(sqlite3_file *handle, int deletes) {
    (void)deletes;
    OverlayFile *file = (OverlayFile *)handle;
    for (int index = 0; index < file->sharedMemoryRegionCount; index++) free(file->sharedMemoryRegions[index]);
    free(file->sharedMemoryRegions);
    file->sharedMemoryRegions = NULL;
    file->sharedMemoryRegionCount = 0;
    return SQLITE_OK;
}

static const sqlite3_io_methods overlayMethods = {
    2,   // shared memory, no memory-mapped reads (xFetch would hand out the real file's pages)
    overlayClose,
    overlayRead,
    overlayWrite,
    overlayTruncate,
    overlaySync,
    overlayFileSize,
    overlayLock,
    overlayUnlock,
    overlayCheckReservedLock,
    overlayFileControl,
    overlaySectorSize,
    overlayDeviceCharacteristics,
    overlaySharedMemoryMap,
    overlaySharedMemoryLock,
    overlaySharedMemoryBarrier,
    overlaySharedMemoryUnmap,
};

// MARK: - VFS methods

static CSQLCipherKitSupport_Overlay *overlayOf(sqlite3_vfs *vfs) {
    return (CSQLCipherKitSupport_Overlay *)vfs->pAppData;
}

static int baseExists(CSQLCipherKitSupport_Overlay *overlay, const char *name, int *exists) {
    *exists = 0;
    return overlay->base->xAccess(overlay->base, name, SQLITE_ACCESS_EXISTS, exists);
}

static int overlayOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *outFlags) {
    CSQLCipherKitSupport_Overlay *overlay = overlayOf(vfs);
    OverlayFile *file = (OverlayFile *)handle;
    memset(file, 0, sizeof(*file));
    file->overlay = overlay;
    file->isMainDatabase = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    file->deletesOnClose = (flags & SQLITE_OPEN_DELETEONCLOSE) != 0;
    int isCreating = (flags & SQLITE_OPEN_CREATE) != 0;

    if (name != NULL) {
        OverlayEntry *entry = findEntry(overlay, name);
        int onDisk = 0;
        if (entry == NULL || (!entry->isDeleted && !entry->isVirtual)) {
            int rc = baseExists(overlay, name, &onDisk);
            if (rc != SQLITE_OK) return rc;
        }
        int existsHere = entry != NULL ? (entry->isVirtual || (!entry->isDeleted && onDisk)) : onDisk;
        if (!existsHere && !isCreating) return SQLITE_CANTOPEN;
        if (entry == NULL) {
            entry = addEntry(overlay, name);
            if (entry == NULL) return SQLITE_NOMEM;
        }
        if (existsHere && !entry->isVirtual) {
            sqlite3_file *real = calloc(1, (size_t)overlay->base->szOsFile);
            if (real == NULL) return SQLITE_NOMEM;
            int readOnlyFlags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_EXCLUSIVE
                                           | SQLITE_OPEN_DELETEONCLOSE)) | SQLITE_OPEN_READONLY;
            int ignored = 0;
            int rc = overlay->base->xOpen(overlay->base, name, real, readOnlyFlags, &ignored);
            if (rc != SQLITE_OK) {
                if (real->pMethods != NULL) real->pMethods->xClose(real);
                free(real);
                return rc;
            }
            file->real = real;
        } else if (!existsHere) {
            // Created here, or created again after a deletion here: nothing of a file on disk shows through.
            clearData(&entry->data);
            entry->data.isDetached = 1;
            entry->isVirtual = 1;
        }
        entry->isDeleted = 0;
        entry->kind = flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_TEMP_DB
                               | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_TRANSIENT_DB | SQLITE_OPEN_SUBJOURNAL
                               | SQLITE_OPEN_MASTER_JOURNAL | SQLITE_OPEN_WAL);
        file->entry = entry;
    }
    if (file->entry == NULL) file->anonymous.isDetached = 1;
    file->file.pMethods = &overlayMethods;
    overlay->openFileCount += 1;
    // The connection believes it may write: a hot journal is rolled back (here) instead of stopping the read.
    if (outFlags != NULL) *outFlags = flags;
    return SQLITE_OK;
}

static int overlayDelete(sqlite3_vfs *vfs, const char *name, int syncsDirectory) {
    (void)syncsDirectory;
    CSQLCipherKitSupport_Overlay *overlay = overlayOf(vfs);
    OverlayEntry *entry = findEntry(overlay, name);
    if (entry == NULL) {
        int onDisk = 0;
        int rc = baseExists(overlay, name, &onDisk);
        if (rc != SQLITE_OK) return rc;
        if (!onDisk) return SQLITE_IOERR_DELETE_NOENT;
        entry = addEntry(overlay, name);
        if (entry == NULL) return SQLITE_NOMEM;
    } else if (entry->isDeleted) {
        return SQLITE_IOERR_DELETE_NOENT;
    }
    if (entry->kind == SQLITE_OPEN_MAIN_JOURNAL) overlay->finishedJournal = 1;
    clearData(&entry->data);
    entry->isDeleted = 1;
    entry->isVirtual = 0;
    return SQLITE_OK;
}

static int overlayAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    CSQLCipherKitSupport_Overlay *overlay = overlayOf(vfs);
    OverlayEntry *entry = findEntry(overlay, name);
    if (entry != NULL && entry->isDeleted) {
        *result = 0;
        return SQLITE_OK;
    }
    if (entry != NULL && entry->isVirtual) {
        *result = 1;
        return SQLITE_OK;
    }
    return overlay->base->xAccess(overlay->base, name, flags, result);
}

static int overlayFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xFullPathname(base, name, size, out);
}

static void *overlayDlOpen(sqlite3_vfs *vfs, const char *name) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xDlOpen(base, name);
}

static void overlayDlError(sqlite3_vfs *vfs, int size, char *message) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    base->xDlError(base, size, message);
}

static void (*overlayDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xDlSym(base, library, symbol);
}

static void overlayDlClose(sqlite3_vfs *vfs, void *library) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    base->xDlClose(base, library);
}

static int overlayRandomness(sqlite3_vfs *vfs, int size, char *out) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xRandomness(base, size, out);
}

static int overlaySleep(sqlite3_vfs *vfs, int microseconds) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xSleep(base, microseconds);
}

static int overlayCurrentTime(sqlite3_vfs *vfs, double *now) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xCurrentTime(base, now);
}

static int overlayGetLastError(sqlite3_vfs *vfs, int size, char *message) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xGetLastError != NULL ? base->xGetLastError(base, size, message) : 0;
}

static int overlayCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    sqlite3_vfs *base = overlayOf(vfs)->base;
    return base->xCurrentTimeInt64(base, now);
}

// MARK: - The interface

static _Atomic unsigned long long overlaySerial;

CSQLCipherKitSupport_Overlay *CSQLCipherKitSupport_overlayCreate(void) {
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (base == NULL) return NULL;
    CSQLCipherKitSupport_Overlay *overlay = calloc(1, sizeof(CSQLCipherKitSupport_Overlay));
    if (overlay == NULL) return NULL;
    overlay->base = base;
    snprintf(overlay->name, sizeof(overlay->name), "CSQLCipherKitSupport_overlay_%llu",
             (unsigned long long)atomic_fetch_add(&overlaySerial, 1));
    sqlite3_vfs *vfs = &overlay->vfs;
    vfs->iVersion = base->iVersion >= 2 && base->xCurrentTimeInt64 != NULL ? 2 : 1;
    vfs->szOsFile = (int)sizeof(OverlayFile);
    vfs->mxPathname = base->mxPathname;
    vfs->zName = overlay->name;
    vfs->pAppData = overlay;
    vfs->xOpen = overlayOpen;
    vfs->xDelete = overlayDelete;
    vfs->xAccess = overlayAccess;
    vfs->xFullPathname = overlayFullPathname;
    vfs->xDlOpen = overlayDlOpen;
    vfs->xDlError = overlayDlError;
    vfs->xDlSym = overlayDlSym;
    vfs->xDlClose = overlayDlClose;
    vfs->xRandomness = overlayRandomness;
    vfs->xSleep = overlaySleep;
    vfs->xCurrentTime = overlayCurrentTime;
    vfs->xGetLastError = overlayGetLastError;
    if (vfs->iVersion >= 2) vfs->xCurrentTimeInt64 = overlayCurrentTimeInt64;
    if (sqlite3_vfs_register(vfs, 0) != SQLITE_OK) {
        free(overlay);
        return NULL;
    }
    return overlay;
}

const char *CSQLCipherKitSupport_overlayName(const CSQLCipherKitSupport_Overlay *overlay) {
    return overlay->name;
}

int CSQLCipherKitSupport_overlayFinishedJournal(const CSQLCipherKitSupport_Overlay *overlay) {
    return overlay->finishedJournal;
}

long long CSQLCipherKitSupport_overlayMemoryHighWater(const CSQLCipherKitSupport_Overlay *overlay) {
    return (long long)overlay->memoryHighWater;
}

int CSQLCipherKitSupport_overlayDestroy(CSQLCipherKitSupport_Overlay *overlay) {
    if (overlay == NULL) return 0;
    sqlite3_vfs_unregister(&overlay->vfs);
    // A file still open would point into freed memory: keep everything (a leak, never a crash).
    if (overlay->openFileCount != 0) return -1;
    OverlayEntry *entry = overlay->entries;
    while (entry != NULL) {
        OverlayEntry *next = entry->next;
        clearData(&entry->data);
        free(entry->name);
        free(entry);
        entry = next;
    }
    free(overlay);
    return 0;
}
