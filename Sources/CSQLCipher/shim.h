#ifndef CSQLCIPHER_SHIM_H
#define CSQLCIPHER_SHIM_H

// SQLCipher's header declares sqlite3_key / sqlite3_rekey only when SQLITE_HAS_CODEC is defined.
#ifndef SQLITE_HAS_CODEC
#define SQLITE_HAS_CODEC 1
#endif

// Stock SQLite's /usr/include/sqlite3.h may be installed too: name SQLCipher's header explicitly.
#if __has_include(<sqlcipher/sqlite3.h>)
#include <sqlcipher/sqlite3.h>
#else
#include <sqlite3.h>
#endif

// SQLITE_TRANSIENT is a cast macro that Swift cannot import.
static inline sqlite3_destructor_type CSQLCipher_transient(void) {
    return SQLITE_TRANSIENT;
}

#endif
