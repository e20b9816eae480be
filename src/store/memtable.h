/* memtable.h - the in-memory table of the LMDB store's log mode: the latest
 * version of every key written since the last checkpoint, deletions
 * included (a tombstone shadows the key in LMDB). An open-addressing hash
 * table; not thread-safe (the store locks around it). */
#ifndef UNICO_MEMTABLE_H
#define UNICO_MEMTABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct umt_entry {
  uint64_t hash;    /* 0: empty slot */
  uint64_t version; /* of the value (0 for a tombstone) */
  uint8_t *kv;      /* key bytes, then value bytes (one allocation) */
  uint32_t klen, vlen;
  int deleted; /* a tombstone */
} umt_entry;

typedef struct umt {
  umt_entry *tab;
  size_t cap;   /* a power of two */
  size_t n;     /* entries in use */
  size_t bytes; /* keys and values held */
} umt;

/* 0, or -1 out of memory. */
int umt_init(umt *t);
void umt_free(umt *t);
/* The entry of key, or NULL. */
umt_entry *umt_find(const umt *t, const void *key, size_t klen);
/* Set key to (version, value) or to a tombstone (deleted, value ignored).
 * 0, or -1 out of memory (the table is then unchanged). */
int umt_set(umt *t, const void *key, size_t klen, uint64_t version,
            int deleted, const void *val, size_t vlen);
/* Entries whose key starts with prefix, sorted by key (memcmp order), as
 * pointers into the table (valid until it changes). -1 out of memory. */
int umt_collect(const umt *t, const void *prefix, size_t plen,
                umt_entry ***out, size_t *n);
/* Byte order of two keys, shorter first on a common prefix. */
int umt_keycmp(const void *a, size_t al, const void *b, size_t bl);

#endif
