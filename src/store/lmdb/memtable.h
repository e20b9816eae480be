/* memtable.h - the in-memory table of the LMDB store's log mode: the latest
 * version of every key written since the last checkpoint, deletions
 * included (a tombstone shadows the key in LMDB). An open-addressing hash
 * table; not thread-safe (the store locks around it). */
#ifndef UNICO_MEMTABLE_H
#define UNICO_MEMTABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct umt_entry {
  uint64_t hash;    /* 0: empty slot */
  uint64_t version; /* of the value (0 for a tombstone) */
  uint8_t *kv;      /* key bytes, then value bytes (in the table's blocks) */
  uint32_t klen, vlen;
  int deleted; /* a tombstone */
  /* Log mode with parallel writers: the log position just past the record
   * that wrote this entry (an answer judged on it waits until the log is
   * durable that far); 0 where that is known durable. */
  uint64_t lsn;
} umt_entry;

/* Where entries' keys and values live: blocks taken in turn, all freed
 * with the table (a value replaced leaves its old bytes unused until then,
 * which the log's own size bounds: each write is also a log record). */
typedef struct umt_block {
  struct umt_block *next;
  size_t used, cap;
  uint8_t data[];
} umt_block;

/* Full-size blocks (UMT_BLOCK_MAX) a store's tables hand on to the ones
 * after them: a checkpointed table's blocks are kept here, up to max,
 * instead of freed, and the next table takes them before it allocates
 * (a fresh block's pages cost a fault and a zeroing each, every time). */
#define UMT_BLOCK_MAX ((size_t)1 << 20)
typedef struct umt_spare {
  pthread_mutex_t mu;
  umt_block *list;
  size_t n, max;
} umt_spare;

/* 0, or -1 (a mutex that cannot be made). */
int umt_spare_init(umt_spare *sp, size_t max);
void umt_spare_free(umt_spare *sp);

typedef struct umt {
  umt_entry *tab;
  umt_spare *spare;  /* NULL, or where blocks come from and go back to */
  umt_block *blocks; /* the newest first */
  size_t cap;   /* a power of two */
  size_t n;     /* entries in use */
  size_t bytes; /* keys and values held */
  size_t psize; /* LMDB's page size */
  size_t cost;  /* umt_cost() of the entries held */
  /* Entries by umt_lead() of their key's first two bytes: a prefix scan
   * whose bucket is empty returns at once, without walking the table. */
  uint32_t lead[256];
} umt;

/* 0, or -1 out of memory. psize: the page size of the LMDB it goes to. */
int umt_init(umt *t, size_t psize);
/* umt_init with room for cap entries' slots at first (a power of two, at
 * least 1024): the size the table before it reached, say, so that it does
 * not grow through every size again; and its blocks from spare (may be
 * NULL), where umt_free gives them back. */
int umt_init_like(umt *t, size_t psize, size_t cap, umt_spare *spare);
void umt_free(umt *t);
/* The entry of key, or NULL. */
umt_entry *umt_find(const umt *t, const void *key, size_t klen);
/* Set key to (version, value) or to a tombstone (deleted, value ignored).
 * 0, or -1 out of memory (the table is then unchanged). */
int umt_set(umt *t, const void *key, size_t klen, uint64_t version,
            int deleted, const void *val, size_t vlen);
/* umt_set, the entry remembering lsn (umt_entry.lsn). */
int umt_put(umt *t, const void *key, size_t klen, uint64_t version,
            int deleted, const void *val, size_t vlen, uint64_t lsn);
/* Entries whose key starts with prefix, sorted by key (memcmp order), as
 * pointers into the table (valid until it changes). -1 out of memory.
 * The sort compares keys eight bytes at a time as integers, cached beside
 * the pointers (umt_sort), so most comparisons touch no key. */
int umt_collect(const umt *t, const void *prefix, size_t plen,
                umt_entry ***out, size_t *n);
/* The most that writing an entry (key and value, or a tombstone) into
 * LMDB's B-tree of page size psize can add to its pages in use, not
 * counting the copies of the pages it changes: a leaf node (an 8-byte
 * header, the key, a 2-byte pointer, and the 8-byte version and the value
 * unless they go to overflow pages of their own), where a split page keeps
 * at least half of the nodes that fit in it; a tombstone adds nothing. */
size_t umt_cost(size_t psize, size_t klen, size_t vlen, int deleted);

/* Byte order of two keys, shorter first on a common prefix. */
int umt_keycmp(const void *a, size_t al, const void *b, size_t bl);

/* Sort n entries by key (umt_keycmp's order), all of whose keys share
 * their first `skip` bytes. Keys must differ (as a table's do). -1 out of
 * memory (v is then unchanged). */
int umt_sort(umt_entry **v, size_t n, size_t skip);

/* ------------------------------------------------------------------ */
/* A table in UMT_SHARDS parts by the hash of the key: log mode's active
 * and frozen tables. Each part is a umt of its own, so writers of keys in
 * different parts may change the table at once (each holding its part's
 * latch, lmdb_int.h); the totals over the parts are kept as atomics, for
 * admission and freezing, which read them without any part's latch. */
#define UMT_SHARDS 64
typedef struct umts {
  umt part[UMT_SHARDS];
  _Atomic size_t n, bytes, cost; /* the parts' n, bytes and cost summed */
} umts;

/* The part of a key (0..UMT_SHARDS-1). */
unsigned umts_shard(const void *key, size_t klen);
/* cap: the slots of every part together to start with (umts_cap() of the
 * table before it, say); blocks from spare as umt_init_like(). 0 or -1. */
int umts_init(umts *t, size_t psize, size_t cap, umt_spare *spare);
void umts_free(umts *t);
size_t umts_cap(const umts *t);
umt_entry *umts_find(const umts *t, const void *key, size_t klen);
/* umt_put into the key's part (with its latch, or the whole table's
 * lock), the totals kept. 0, or -1 out of memory (nothing changed). */
int umts_put(umts *t, const void *key, size_t klen, uint64_t version,
             int deleted, const void *val, size_t vlen, uint64_t lsn);
/* umt_collect over every part: one array sorted by key. */
int umts_collect(const umts *t, const void *prefix, size_t plen,
                 umt_entry ***out, size_t *n);

#endif
