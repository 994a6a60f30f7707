#include "CSQLCipherKitSupport.h"

// The owners the calling thread runs blocks for, outermost first, in C thread-locals: reading or writing them costs
// a few instructions, where a pthread key or a dispatch queue's specific costs tens to a hundred.
#define CAPACITY 32
static _Thread_local const void *owners[CAPACITY];
static _Thread_local unsigned depth;

void CSQLCipherKitSupport_pushOwner(const void *owner) {
    if (depth < CAPACITY) owners[depth] = owner;
    depth += 1;
}

void CSQLCipherKitSupport_popOwner(void) {
    if (depth > 0) depth -= 1;
}

int CSQLCipherKitSupport_isMarkedForOwner(const void *owner) {
    unsigned stored = depth < CAPACITY ? depth : CAPACITY;
    for (unsigned index = stored; index > 0; index -= 1) {
        if (owners[index - 1] == owner) return 1;
    }
    return 0;
}
