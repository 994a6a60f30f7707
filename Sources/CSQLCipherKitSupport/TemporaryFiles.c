#include "CSQLCipherKitSupport.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define SLOT_COUNT 32
#define PATH_CAPACITY 4096
#define SUFFIX_ROOM 16

enum { slotFree = 0, slotWriting = 1, slotActive = 2 };

static const char *const suffixes[] = {"", "-journal", "-wal", "-shm"};
#define SUFFIX_COUNT (sizeof(suffixes) / sizeof(suffixes[0]))

static _Atomic int slotStates[SLOT_COUNT];
static char slotPaths[SLOT_COUNT][SUFFIX_COUNT][PATH_CAPACITY + SUFFIX_ROOM];

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
        return slot;
    }
    return -1;
}

void CSQLCipherKitSupport_unregisterTemporaryFile(int slot) {
    if (slot < 0 || slot >= SLOT_COUNT) return;
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

static void cleanupAndReraise(int signalNumber) {
    CSQLCipherKitSupport_removeRegisteredTemporaryFiles();
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
    return 0;
}
