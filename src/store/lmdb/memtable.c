/* memtable.c - see memtable.h. */
#include <stdlib.h>
#include <string.h>

#include "store/lmdb/memtable.h"

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

/* The bucket of t->lead a key counts in: of its first two bytes (0 for
 * those it lacks; a prefix shorter than two bytes never uses the buckets). */
static unsigned lead_of(const uint8_t *k, size_t klen) {
  unsigned a = klen > 0 ? k[0] : 0, b = klen > 1 ? k[1] : 0;
  return (a * 31u + b) & 255u;
}

int umt_spare_init(umt_spare *sp, size_t max) {
  memset(sp, 0, sizeof *sp);
  sp->max = max;
  return pthread_mutex_init(&sp->mu, NULL) ? -1 : 0;
}

void umt_spare_free(umt_spare *sp) {
  for (umt_block *b = sp->list, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
  pthread_mutex_destroy(&sp->mu);
  memset(sp, 0, sizeof *sp);
}

int umt_init_like(umt *t, size_t psize, size_t cap, umt_spare *spare) {
  memset(t, 0, sizeof *t);
  t->psize = psize;
  t->spare = spare;
  t->cap = spare ? 64 : 1024; /* (a part of a umts: a 64th of a table) */
  while (t->cap < cap && t->cap < ((size_t)1 << 40)) t->cap *= 2;
  t->tab = calloc(t->cap, sizeof *t->tab);
  return t->tab ? 0 : -1;
}

int umt_init(umt *t, size_t psize) { return umt_init_like(t, psize, 0, NULL); }

void umt_free(umt *t) {
  if (!t->tab) return;
  umt_spare *sp = t->spare;
  if (sp) pthread_mutex_lock(&sp->mu);
  for (umt_block *b = t->blocks, *nx; b; b = nx) {
    nx = b->next;
    if (sp && b->cap == UMT_BLOCK_MAX && sp->n < sp->max) {
      b->next = sp->list;
      sp->list = b;
      sp->n++;
    } else {
      free(b);
    }
  }
  if (sp) pthread_mutex_unlock(&sp->mu);
  free(t->tab);
  memset(t, 0, sizeof *t);
}

/* A full-size block from the spare ones, or NULL. */
static umt_block *spare_block(umt_spare *sp) {
  if (!sp) return NULL;
  pthread_mutex_lock(&sp->mu);
  umt_block *b = sp->list;
  if (b) {
    sp->list = b->next;
    sp->n--;
  }
  pthread_mutex_unlock(&sp->mu);
  return b;
}

/* n bytes from the table's blocks (a new block when the newest is full:
 * 64 KiB, doubling up to 1 MiB, or n when larger); NULL out of memory. */
static uint8_t *umt_alloc(umt *t, size_t n) {
  umt_block *b = t->blocks;
  n = (n + 7) & ~(size_t)7;
  if (!b || b->cap - b->used < n) {
    size_t cap = b ? b->cap * 2 : (size_t)64 << 10;
    if (cap > UMT_BLOCK_MAX) cap = UMT_BLOCK_MAX;
    if (cap < n) cap = n;
    umt_block *nb = n <= UMT_BLOCK_MAX ? spare_block(t->spare) : NULL;
    if (nb) cap = UMT_BLOCK_MAX;
    else nb = malloc(sizeof *nb + cap);
    if (!nb) return NULL;
    nb->next = b;
    nb->used = 0;
    nb->cap = cap;
    t->blocks = b = nb;
  }
  uint8_t *p = b->data + b->used;
  b->used += n;
  return p;
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
  return umt_put(t, key, klen, version, deleted, val, vlen, 0);
}

int umt_put(umt *t, const void *key, size_t klen, uint64_t version,
            int deleted, const void *val, size_t vlen, uint64_t lsn) {
  if (deleted) vlen = 0;
  if ((t->n + 1) * 10 > t->cap * 7 && grow(t)) return -1;
  uint8_t *kv = umt_alloc(t, klen + vlen + 1);
  if (!kv) return -1;
  memcpy(kv, key, klen);
  if (vlen) memcpy(kv + klen, val, vlen);
  uint64_t h = hash_key(key, klen);
  umt_entry *e = slot(t, h, key, klen);
  if (e->hash) {
    t->bytes -= e->klen + e->vlen;
    t->cost -= umt_cost(t->psize, e->klen, e->vlen, e->deleted);
  } else {
    t->n++;
    t->lead[lead_of(key, klen)]++;
  }
  e->hash = h;
  e->kv = kv;
  e->klen = (uint32_t)klen;
  e->vlen = (uint32_t)vlen;
  e->version = deleted ? 0 : version;
  e->deleted = deleted;
  e->lsn = lsn;
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

/* ------------------------------------------------------------------ */
/* Sorting entries by key: a most-significant-first sort eight bytes at a
 * time. Each level sorts by (w, m): w the key's next eight bytes as a
 * big-endian integer (zeros past its end), m how many of them the key has
 * (9: it goes on). Keys equal in both that go on are sorted again on their
 * next eight bytes; two that end there are the same key. */

typedef struct sitem {
  uint64_t w;
  uint32_t m;
  umt_entry *e;
} sitem;

static int sitem_lt(const sitem *a, const sitem *b) {
  return a->w < b->w || (a->w == b->w && a->m < b->m);
}

static void sitem_swap(sitem *a, sitem *b) {
  sitem t = *a;
  *a = *b;
  *b = t;
}

static void sift(sitem *v, size_t i, size_t n) {
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && sitem_lt(&v[c], &v[c + 1])) c++;
    if (!sitem_lt(&v[i], &v[c])) return;
    sitem_swap(&v[i], &v[c]);
    i = c;
  }
}

/* Introsort: quicksort (median of three), insertion sort for short runs,
 * heapsort when the partitions go badly. */
static void sort_items(sitem *v, size_t n, int depth) {
  while (n > 16) {
    if (depth-- == 0) {
      for (size_t i = n / 2; i-- > 0;) sift(v, i, n);
      for (size_t i = n; i-- > 1;) {
        sitem_swap(&v[0], &v[i]);
        sift(v, 0, i);
      }
      return;
    }
    size_t mid = n / 2;
    if (sitem_lt(&v[mid], &v[0])) sitem_swap(&v[mid], &v[0]);
    if (sitem_lt(&v[n - 1], &v[0])) sitem_swap(&v[n - 1], &v[0]);
    if (sitem_lt(&v[n - 1], &v[mid])) sitem_swap(&v[n - 1], &v[mid]);
    sitem pivot = v[mid];
    size_t i = 0, j = n - 1;
    for (;;) {
      while (sitem_lt(&v[i], &pivot)) i++;
      while (sitem_lt(&pivot, &v[j])) j--;
      if (i >= j) break;
      sitem_swap(&v[i], &v[j]);
      i++;
      j--;
    }
    /* [0, j] <= pivot <= [j + 1, n): recurse on the smaller side */
    size_t left = j + 1;
    if (left < n - left) {
      sort_items(v, left, depth);
      v += left;
      n -= left;
    } else {
      sort_items(v + left, n - left, depth);
      n = left;
    }
  }
  for (size_t i = 1; i < n; i++) {
    sitem x = v[i];
    size_t j = i;
    for (; j > 0 && sitem_lt(&x, &v[j - 1]); j--) v[j] = v[j - 1];
    v[j] = x;
  }
}

static void load_words(sitem *v, size_t n, size_t d) {
  for (size_t i = 0; i < n; i++) {
    /* (the keys are all over the heap: ask for them ahead) */
    if (i + 16 < n) __builtin_prefetch(v[i + 16].e);
    if (i + 8 < n) __builtin_prefetch(v[i + 8].e->kv + d);
    const umt_entry *e = v[i].e;
    size_t have = e->klen > d ? e->klen - d : 0;
    uint8_t b[8] = {0};
    memcpy(b, e->kv + d, have < 8 ? have : 8);
    uint64_t w = 0;
    for (int k = 0; k < 8; k++) w = w << 8 | b[k];
    v[i].w = w;
    v[i].m = have > 8 ? 9 : (uint32_t)have;
  }
}

static void sort_level(sitem *v, size_t n, size_t d) {
  int depth = 0;
  for (size_t k = n; k > 1; k >>= 1) depth += 2;
  load_words(v, n, d);
  sort_items(v, n, depth);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && v[j].w == v[i].w && v[j].m == v[i].m) j++;
    if (j - i > 1 && v[i].m == 9) sort_level(v + i, j - i, d + 8);
    i = j;
  }
}

int umt_sort(umt_entry **v, size_t n, size_t skip) {
  if (n < 2) return 0;
  sitem *it = malloc(n * sizeof *it);
  if (!it) return -1;
  for (size_t i = 0; i < n; i++) it[i].e = v[i];
  sort_level(it, n, skip);
  for (size_t i = 0; i < n; i++) v[i] = it[i].e;
  free(it);
  return 0;
}

/* The entries of t under prefix, appended to v at *k (v has room). */
static void gather(const umt *t, const void *prefix, size_t plen,
                   umt_entry **v, size_t *k) {
  /* no key in the table starts with the prefix's first two bytes */
  if (plen >= 2 && t->lead[lead_of(prefix, plen)] == 0) return;
  for (size_t i = 0; i < t->cap; i++) {
    umt_entry *e = &t->tab[i];
    if (e->hash && e->klen >= plen && memcmp(e->kv, prefix, plen) == 0)
      v[(*k)++] = e;
  }
}

/* v[0..k) sorted into *out, *n; or -1 (v freed) */
static int sorted(umt_entry **v, size_t k, size_t plen, umt_entry ***out,
                  size_t *n) {
  if (umt_sort(v, k, plen)) {
    free(v);
    return -1;
  }
  *out = v;
  *n = k;
  return 0;
}

int umt_collect(const umt *t, const void *prefix, size_t plen,
                umt_entry ***out, size_t *n) {
  size_t k = 0;
  *out = NULL;
  *n = 0;
  if (plen >= 2 && t->lead[lead_of(prefix, plen)] == 0) return 0;
  umt_entry **v = malloc((t->n ? t->n : 1) * sizeof *v);
  if (!v) return -1;
  gather(t, prefix, plen, v, &k);
  return sorted(v, k, plen, out, n);
}

/* ------------------------------------------------------------------ */
/* umts: the table in parts */

unsigned umts_shard(const void *key, size_t klen) {
  /* (the top bits: a part's slots are chosen by the low ones) */
  return (unsigned)(hash_key(key, klen) >> 58) % UMT_SHARDS;
}

int umts_init(umts *t, size_t psize, size_t cap, umt_spare *spare) {
  memset(t, 0, sizeof *t);
  for (int i = 0; i < UMT_SHARDS; i++)
    if (umt_init_like(&t->part[i], psize, cap / UMT_SHARDS, spare)) {
      umts_free(t);
      return -1;
    }
  return 0;
}

void umts_free(umts *t) {
  for (int i = 0; i < UMT_SHARDS; i++) umt_free(&t->part[i]);
  atomic_store(&t->n, 0);
  atomic_store(&t->bytes, 0);
  atomic_store(&t->cost, 0);
}

size_t umts_cap(const umts *t) {
  size_t c = 0;
  for (int i = 0; i < UMT_SHARDS; i++) c += t->part[i].cap;
  return c;
}

umt_entry *umts_find(const umts *t, const void *key, size_t klen) {
  return umt_find(&t->part[umts_shard(key, klen)], key, klen);
}

int umts_put(umts *t, const void *key, size_t klen, uint64_t version,
             int deleted, const void *val, size_t vlen, uint64_t lsn) {
  umt *p = &t->part[umts_shard(key, klen)];
  size_t n = p->n, bytes = p->bytes, cost = p->cost;
  if (umt_put(p, key, klen, version, deleted, val, vlen, lsn)) return -1;
  /* (unsigned: a shrinking part adds the wrapped difference, as wanted) */
  atomic_fetch_add_explicit(&t->n, p->n - n, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->bytes, p->bytes - bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->cost, p->cost - cost, memory_order_relaxed);
  return 0;
}

int umts_collect(const umts *t, const void *prefix, size_t plen,
                 umt_entry ***out, size_t *n) {
  size_t k = 0, total = 0;
  *out = NULL;
  *n = 0;
  for (int i = 0; i < UMT_SHARDS; i++) total += t->part[i].n;
  umt_entry **v = malloc((total ? total : 1) * sizeof *v);
  if (!v) return -1;
  for (int i = 0; i < UMT_SHARDS; i++) gather(&t->part[i], prefix, plen, v, &k);
  return sorted(v, k, plen, out, n);
}
