/* lmdb_backend.c - the descriptor of the embedded store (backend.h):
 * "lmdb:PATH", "lmdb://PATH", or a bare PATH (store.c), and its options
 * (docs/cli.md). */
#include "store/backend.h"
#include "store/lmdb/lmdb_int.h"

static const char *const on_off[] = {"off", "on", NULL};
static const char *const sync_names[] = {"on", "data", "off", NULL};
static const char *const writer_names[] = {"leader", "parallel", NULL};

static const ustore_scheme schemes[] = {
    {"lmdb://", "lmdb://PATH"},
    {"lmdb:", "lmdb:PATH"},
};

/* (the order of the unknown-option message) */
static const ustore_option_desc options[] = {
    {"map_size", USTORE_OPT_SIZE, "1GiB", 0, 0, 0, (size_t)1 << 20, NULL},
    {"max_map_size", USTORE_OPT_SIZE, "1TiB", 0, 0, 0, (size_t)1 << 20, NULL},
    {"sync", USTORE_OPT_WORD, "on", 0, 0, 0, 0, sync_names},
    {"sync_delay_us", USTORE_OPT_INT, "0", 0, 0, SYNC_DELAY_MAX_US, 0, NULL},
    {"txn", USTORE_OPT_WORD, "on", 0, 0, 0, 0, on_off},
    {"wal", USTORE_OPT_WORD, "off", 0, 0, 0, 0, on_off},
    {"wal_size", USTORE_OPT_SIZE, "64MiB", 0, 0, 0, 4096, NULL},
    {"writers", USTORE_OPT_WORD, "parallel", 0, 0, 0, 0, writer_names},
};

static int lmdb_open(ustore **out, size_t scheme, const char *loc,
                     const struct ustore_opts *opts, ustore_err *e) {
  (void)scheme; /* (lmdb: and lmdb:// are the same) */
  return ustore_lmdb_open(out, loc, opts, e);
}

const ustore_backend ustore_lmdb_backend = {
    "lmdb", NULL,
    schemes, sizeof schemes / sizeof schemes[0],
    options, sizeof options / sizeof options[0],
    ustore_lmdb_caps, lmdb_open, NULL, /* (no change stream) */
};
