/* memtable.c - see memtable.h. */
#include <stdlib.h>
#include <string.h>

#include "store/memtable.h"

static uint64_t hash_key(const void *key, size_t klen) {
  /* FNV-1a, then a final mix; never 0 (0 marks an empty slot). */
  const uint8_t *p = key;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < klen; i++) h = (h ^ p[i]) * 1099511628211ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h ? h : 1;
}

int umt_init(umt *t, size_t psize) {
  memset(t, 0, sizeof *t);
  t->psize = psize;
  t->cap = 1024;
  t->tab = calloc(t->cap, sizeof *t->tab);
  return t->tab ? 0 : -1;
}

void umt_free(umt *t) {
  if (!t->tab) return;
  for (size_t i = 0; i < t->cap; i++)
    if (t->tab[i].hash) free(t->tab[i].kv);
  free(t->tab);
  memset(t, 0, sizeof *t);
}

static umt_entry *slot(const umt *t, uint64_t h, const void *key,
                       size_t klen) {
  size_t mask = t->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    umt_entry *e = &t->tab[i];
    if (!e->hash) return e;
    if (e->hash == h && e->klen == klen && memcmp(e->kv, key, klen) == 0)
      return e;
  }
}

umt_entry *umt_find(const umt *t, const void *key, size_t klen) {
  umt_entry *e = slot(t, hash_key(key, klen), key, klen);
  return e->hash ? e : NULL;
}

static int grow(umt *t) {
  size_t ncap = t->cap * 2;
  umt_entry *ntab = calloc(ncap, sizeof *ntab);
  if (!ntab) return -1;
  for (size_t i = 0; i < t->cap; i++) {
    umt_entry *e = &t->tab[i];
    if (!e->hash) continue;
    size_t j = e->hash & (ncap - 1);
    while (ntab[j].hash) j = (j + 1) & (ncap - 1);
    ntab[j] = *e;
  }
  free(t->tab);
  t->tab = ntab;
  t->cap = ncap;
  return 0;
}

int umt_set(umt *t, const void *key, size_t klen, uint64_t version,
            int deleted, const void *val, size_t vlen) {
  if (deleted) vlen = 0;
  if ((t->n + 1) * 10 > t->cap * 7 && grow(t)) return -1;
  uint8_t *kv = malloc(klen + vlen + 1);
  if (!kv) return -1;
  memcpy(kv, key, klen);
  if (vlen) memcpy(kv + klen, val, vlen);
  uint64_t h = hash_key(key, klen);
  umt_entry *e = slot(t, h, key, klen);
  if (e->hash) {
    t->bytes -= e->klen + e->vlen;
    t->cost -= umt_cost(t->psize, e->klen, e->vlen, e->deleted);
    free(e->kv);
  } else {
    t->n++;
  }
  e->hash = h;
  e->kv = kv;
  e->klen = (uint32_t)klen;
  e->vlen = (uint32_t)vlen;
  e->version = deleted ? 0 : version;
  e->deleted = deleted;
  t->bytes += klen + vlen;
  t->cost += umt_cost(t->psize, klen, vlen, deleted);
  return 0;
}

size_t umt_cost(size_t psize, size_t klen, size_t vlen, int deleted) {
  /* LMDB: page header 16 bytes; a node larger than about half a page
   * keeps its data on overflow pages (a 16-byte header, then the data). */
  const size_t room = psize - 16, nodemax = room / 2 - 2;
  size_t data = 8 + vlen, node = 8 + klen + data, over = 0;
  if (deleted) return 0;
  if (node > nodemax) {
    over = (16 + data + psize - 1) / psize * psize;
    node = 8 + klen + 8; /* the leaf node keeps the first page's number */
  }
  size_t fit = room / (node + 2), keep = fit / 2;
  return over + (keep ? psize / keep : psize);
}

int umt_keycmp(const void *a, size_t al, const void *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  if (c) return c;
  return al < bl ? -1 : al > bl;
}

static int cmp_entries(const void *x, const void *y) {
  const umt_entry *a = *(umt_entry *const *)x, *b = *(umt_entry *const *)y;
  return umt_keycmp(a->kv, a->klen, b->kv, b->klen);
}

int umt_collect(const umt *t, const void *prefix, size_t plen,
                umt_entry ***out, size_t *n) {
  size_t k = 0;
  umt_entry **v = malloc((t->n ? t->n : 1) * sizeof *v);
  if (!v) return -1;
  for (size_t i = 0; i < t->cap; i++) {
    umt_entry *e = &t->tab[i];
    if (e->hash && e->klen >= plen && memcmp(e->kv, prefix, plen) == 0)
      v[k++] = e;
  }
  qsort(v, k, sizeof *v, cmp_entries);
  *out = v;
  *n = k;
  return 0;
}
