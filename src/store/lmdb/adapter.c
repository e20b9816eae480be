/* adapter.c - the LMDB adapter: transactions under the resize lock, the map
 * and its reserve ("space"), get, the conditional writes of one request
 * (apply_ops) and scans (merged with the tables of log mode). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "store/lmdb/lmdb_int.h"

/* ------------------------------------------------------------------ */
/* space
 *
 * The map grows by doubling up to ins_map_size: max_map_size less a
 * reserve (lm_reserve_of()). A write that finds the map full there is refused
 * with UNICO_EFULL, unless it frees space: it deletes (or shrinks) at least
 * one key that exists and adds at most FREEING_SLACK bytes more than it
 * removes (a delete, whose record becomes a small tombstone, with its
 * outcome record; an update that releases a value). LMDB
 * copies every page it changes, so even a delete needs free pages; such a
 * write is tried once more in a batch of its own kind with the map opened
 * to max_map_size, which is then closed again (LMDB keeps the map at least
 * as large as the pages in use). In log mode nothing reaches LMDB before a
 * checkpoint, so a write is admitted only when an estimate of what the
 * checkpoints of the tables will need still fits (log_admit()). */


/* max_map_size/16, at least 256 KiB, at most 256 MiB, never more than a
 * quarter of it; whole pages. */
size_t lm_reserve_of(size_t max) {
  size_t r = max / 16;
  if (r < ((size_t)256 << 10)) r = (size_t)256 << 10;
  if (r > ((size_t)256 << 20)) r = (size_t)256 << 20;
  if (r > max / 4) r = max / 4;
  return r & ~(size_t)4095;
}

/* A max_map_size worth suggesting: twice the current one and at least
 * `need`, in whole MiB. */
size_t lm_suggest_max(const lmdb_store *s, size_t need) {
  size_t mib = (size_t)1 << 20, v = s->max_map_size * 2;
  if (v < need) v = need;
  return (v + mib - 1) / mib * mib;
}

/* The URL to reopen the store with: its options, max_map_size set to max
 * (map_size, when given, is no larger than the old limit, so it stays). */
void lm_advice_url(const lmdb_store *s, size_t max, char *out, size_t n) {
  char sz[32];
  size_t at = 0;
  at += (size_t)snprintf(out, n, "lmdb:%s?", s->path);
  for (const char *kv = s->query; kv && *kv && at < n;) {
    const char *amp = strchr(kv, '&');
    int len = amp ? (int)(amp - kv) : (int)strlen(kv);
    if (strncmp(kv, "max_map_size=", 13))
      at += (size_t)snprintf(out + at, n - at, "%.*s&", len, kv);
    kv = amp ? amp + 1 : NULL;
  }
  ustore_fmt_size(max, sz, sizeof sz);
  if (at < n) snprintf(out + at, n - at, "max_map_size=%s", sz);
}

/* The answer to a write the store cannot hold. */
int lm_full_err(const lmdb_store *s, size_t need, ustore_err *e) {
  char url[4400], max[32], res[32];
  ustore_fmt_size(s->max_map_size, max, sizeof max);
  ustore_fmt_size(s->max_map_size - s->ins_map_size, res, sizeof res);
  lm_advice_url(s, lm_suggest_max(s, need), url, sizeof url);
  seterr(e, "the store is full (max_map_size=%s, of which %s is kept so "
            "deletes can free space); delete records, or reopen it as %s",
         max, res, url);
  return UNICO_EFULL;
}

int lm_map_rc(lmdb_store *s, int rc, const char *what, ustore_err *e) {
  switch (rc) {
  case 0:
    return UNICO_OK;
  case MDB_NOTFOUND:
    return UNICO_ENOTFOUND;
  case MDB_MAP_FULL:
    return lm_full_err(s, 0, e);
  case ENOMEM:
    seterr(e, "%s: out of memory", what);
    return UNICO_ENOMEM;
  case MDB_CORRUPTED:
  case MDB_PAGE_NOTFOUND:
  case MDB_INVALID:
  case MDB_VERSION_MISMATCH:
    seterr(e, "%s on %s: %s", what, s->path, mdb_strerror(rc));
    return UNICO_ECORRUPT;
  default:
    seterr(e, "%s on %s: %s", what, s->path, mdb_strerror(rc));
    return UNICO_EUNAVAILABLE;
  }
}

uint64_t lm_get_ver(const MDB_val *v) {
  const uint8_t *p = v->mv_data;
  uint64_t u = 0;
  for (int i = 0; i < VHDR; i++) u = (u << 8) | p[i];
  return u;
}

/* Adopt a map size another process set (want 0; but no more than
 * ins_map_size unless the reserve is open), grow ours to want, or with
 * exact set it to want even if smaller (LMDB keeps it at least as large as
 * the pages in use); called with no transaction of ours running. */
int lm_remap(lmdb_store *s, size_t want, int exact, ustore_err *e) {
  int rc = 0;
  pthread_rwlock_wrlock(&s->resize);
  if (want == 0) {
    rc = mdb_env_set_mapsize(s->env, 0);
    MDB_envinfo info;
    mdb_env_info(s->env, &info);
    if (rc == 0 && !s->reserve_on && info.me_mapsize > s->ins_map_size)
      rc = mdb_env_set_mapsize(s->env, s->ins_map_size);
  } else if (s->map_size < want || (exact && s->map_size != want)) {
    rc = mdb_env_set_mapsize(s->env, want);
  }
  if (rc == 0) {
    MDB_envinfo info;
    mdb_env_info(s->env, &info);
    s->map_size = info.me_mapsize;
  }
  pthread_rwlock_unlock(&s->resize);
  return lm_map_rc(s, rc, "resizing the map", e);
}

/* Open or close the reserve for the next batch (lm_remap() reads it). */
void lm_set_reserve(lmdb_store *s, int on) {
  pthread_rwlock_wrlock(&s->resize);
  s->reserve_on = on;
  pthread_rwlock_unlock(&s->resize);
}

/* One try at a transaction: begun, or for a kept read handle (keep not
 * NULL) renewed, or begun into *keep when there is none or it cannot be
 * renewed. An LMDB code. */
int lm_begin_once(lmdb_store *s, unsigned flags, MDB_txn **keep,
                  MDB_txn **txn) {
  if (!keep) return mdb_txn_begin(s->env, NULL, flags, txn);
  int rc = MDB_BAD_TXN;
  if (*keep && (rc = mdb_txn_renew(*keep)) != 0) {
    mdb_txn_abort(*keep); /* (begin a new one instead) */
    *keep = NULL;
  }
  if (!*keep && (rc = mdb_txn_begin(s->env, NULL, flags, keep)) != 0)
    *keep = NULL;
  if (rc == 0) *txn = *keep;
  return rc;
}

/* Begin a transaction holding the resize lock shared, remapping when
 * another process grew the map. */
static int begin_held(lmdb_store *s, unsigned flags, MDB_txn **keep,
                      MDB_txn **txn, ustore_err *e) {
  for (int tries = 0; tries < 8; tries++) {
    pthread_rwlock_rdlock(&s->resize);
    int rc = lm_begin_once(s, flags, keep, txn);
    if (rc == 0) return UNICO_OK;
    pthread_rwlock_unlock(&s->resize);
    if (rc != MDB_MAP_RESIZED) return lm_map_rc(s, rc, "beginning a transaction", e);
    int r = lm_remap(s, 0, 0, e); /* another process grew the map */
    if (r) return r;
  }
  seterr(e, "the map of %s keeps changing size", s->path);
  return UNICO_EUNAVAILABLE;
}

/* Begin a transaction holding the resize lock shared. On success the caller
 * must end it with lm_end(). */
int lm_begin(lmdb_store *s, unsigned flags, MDB_txn **txn,
                    ustore_err *e) {
  return begin_held(s, flags, NULL, txn, e);
}

int lm_begin_read(lmdb_store *s, MDB_txn **keep, MDB_txn **txn,
                  ustore_err *e) {
  return begin_held(s, MDB_RDONLY, keep, txn, e);
}

void lm_tables_lock(lmdb_store *s, int excl) {
  pthread_rwlock_rdlock(&s->resize);
  if (excl) pthread_rwlock_wrlock(&s->mt_lock);
  else pthread_rwlock_rdlock(&s->mt_lock);
}

void lm_tables_unlock(lmdb_store *s) {
  pthread_rwlock_unlock(&s->mt_lock);
  pthread_rwlock_unlock(&s->resize);
}

int lm_tables_begin(lmdb_store *s, MDB_txn **keep, MDB_txn **txn, int *tries,
                    ustore_err *e) {
  int rc = lm_begin_once(s, MDB_RDONLY, keep, txn);
  if (rc == 0) return UNICO_OK;
  lm_tables_unlock(s);
  if (rc != MDB_MAP_RESIZED) return lm_map_rc(s, rc, "beginning a transaction", e);
  if (++*tries >= 8) {
    seterr(e, "the map of %s keeps changing size", s->path);
    return UNICO_EUNAVAILABLE;
  }
  int r = lm_remap(s, 0, 0, e); /* another process grew the map */
  return r ? r : LM_RETRY;
}

void lm_end_read(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_reset(txn);
  pthread_rwlock_unlock(&s->resize);
}

void lm_abort(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_abort(txn);
  pthread_rwlock_unlock(&s->resize);
}

int lm_commit(lmdb_store *s, MDB_txn *txn) {
  int rc = mdb_txn_commit(txn);
  pthread_rwlock_unlock(&s->resize);
  return rc;
}

int lm_get(ustore *base, const void *key, size_t klen, ubuf *val,
                  uint64_t *version, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  MDB_txn *txn;
  if (klen == 0 || klen > 511) return UNICO_ENOTFOUND; /* cannot be stored */
  int rc;
  if (s->wal) {
    /* Log mode: the tables first. LMDB's snapshot is taken before the lock
     * is released, so a checkpoint dropping the frozen table cannot fall
     * between the two looks. */
    int tries = 0;
  again:
    lm_tables_lock(s, 0);
    /* (parallel writers: the key's part, under its latch, shared) */
    pthread_rwlock_t *latch = s->par ? &s->latch[umts_shard(key, klen)] : NULL;
    if (latch) pthread_rwlock_rdlock(latch);
    umt_entry *me = umts_find(s->active, key, klen);
    if (!me && s->frozen) me = umts_find(s->frozen, key, klen);
    if (me) {
      rc = me->deleted ? UNICO_ENOTFOUND : UNICO_OK;
      if (rc == UNICO_OK && version) *version = me->version;
      if (rc == UNICO_OK && val) {
        ubuf_reset(val);
        ubuf_put(val, me->kv + me->klen, me->vlen);
        if (!ubuf_ok(val)) rc = UNICO_ENOMEM;
      }
      if (latch) pthread_rwlock_unlock(latch);
      lm_tables_unlock(s);
      return rc;
    }
    if (latch) pthread_rwlock_unlock(latch);
    rc = lm_tables_begin(s, NULL, &txn, &tries, e);
    if (rc == LM_RETRY) goto again;
    if (rc == UNICO_OK) pthread_rwlock_unlock(&s->mt_lock);
  } else {
    rc = lm_begin(s, MDB_RDONLY, &txn, e);
  }
  if (rc) return rc;
  MDB_val k = {klen, (void *)key}, v;
  int mrc = mdb_get(txn, s->dbi, &k, &v);
  if (mrc == 0) {
    if (v.mv_size < VHDR) {
      rc = UNICO_ECORRUPT;
      seterr(e, "value shorter than its version header in %s", s->path);
    } else {
      if (version) *version = lm_get_ver(&v);
      if (val) {
        ubuf_reset(val);
        ubuf_put(val, (uint8_t *)v.mv_data + VHDR, v.mv_size - VHDR);
        if (!ubuf_ok(val)) rc = UNICO_ENOMEM;
      }
    }
  } else {
    rc = lm_map_rc(s, mrc, "reading", e);
  }
  lm_abort(s, txn);
  return rc;
}

/* Count op, whose key exists (with a value of old_vlen bytes) or not. */
void lm_space_add(space_acc *a, const ustore_op *op, int exists,
                      size_t old_vlen) {
  if (op->action == USTORE_CHECK) return;
  if (exists) {
    a->net -= (long long)(op->klen + old_vlen + VHDR);
    /* (a delete, or a value replaced by a smaller one: a record's
     * tombstone) */
    if (op->action == USTORE_DEL ||
        (op->action == USTORE_PUT && op->vlen < old_vlen))
      a->dels++;
  }
  if (op->action == USTORE_PUT) a->net += (long long)(op->klen + op->vlen + VHDR);
}

/* A write that may use the reserve (see "space"). */
int lm_space_frees(const space_acc *a) {
  return a->dels > 0 && a->net <= FREEING_SLACK;
}

/* mdb_put with MDB_RESERVE of nv at k, where a value that shrinks to half
 * or less is deleted first: LMDB rebalances a page when a key leaves it,
 * never when a value shrinks, so without this the pages of records
 * replaced by small tombstones would stay in use, sparse, and a full store
 * would get no room back from deletes. */
int lm_put_reserve(MDB_txn *txn, MDB_dbi dbi, MDB_val *k, MDB_val *nv) {
  /* A new key (most puts: claims, records, outcomes) costs one descent of
   * the tree: MDB_NOOVERWRITE reserves it, or hands back the value in
   * place, whose size decides. */
  MDB_val d = *nv;
  int rc = mdb_put(txn, dbi, k, &d, MDB_NOOVERWRITE | MDB_RESERVE);
  if (rc == 0) {
    *nv = d;
    return 0;
  }
  if (rc != MDB_KEYEXIST) return rc;
  if (d.mv_size >= 2 * nv->mv_size && d.mv_size - nv->mv_size >= 64) {
    rc = mdb_del(txn, dbi, k, NULL);
    if (rc) return rc;
  }
  return mdb_put(txn, dbi, k, nv, MDB_RESERVE);
}


/* Apply ops inside txn: first evaluate every condition (so all failures are
 * reported), then write. Returns UNICO_OK, USTORE_NOT_APPLIED or an error
 * (MDB code through *mrc); with freeing_only, LM_LATER for a write that
 * does not free space. */
int lm_apply_ops(lmdb_store *s, MDB_txn *txn, ustore_op *ops, size_t n,
                     int freeing_only, int *mrc) {
  int failed = 0;
  space_acc acc = {0, 0};
  *mrc = 0;
  for (size_t i = 0; i < n; i++) {
    ustore_op *op = &ops[i];
    MDB_val k = {op->klen, (void *)op->key}, v;
    op->failed = 0;
    if (op->expect == USTORE_ANY &&
        (!freeing_only || op->action == USTORE_CHECK))
      continue;
    int rc = mdb_get(txn, s->dbi, &k, &v);
    if (rc && rc != MDB_NOTFOUND) {
      *mrc = rc;
      return -1;
    }
    int exists = rc == 0;
    if (exists && v.mv_size < VHDR) {
      *mrc = MDB_CORRUPTED;
      return -1;
    }
    if (freeing_only) lm_space_add(&acc, op, exists, exists ? v.mv_size - VHDR : 0);
    if (op->expect == USTORE_ANY) continue;
    uint64_t ver = exists ? lm_get_ver(&v) : 0;
    op->exists = exists; /* remembered for the write pass below */
    op->cur_version = ver;
    int ok;
    switch (op->expect) {
    case USTORE_ABSENT: ok = !exists; break;
    case USTORE_VERSION: ok = exists && ver == op->expect_version; break;
    case USTORE_PRESENT: ok = exists; break;
    default: ok = 0; break;
    }
    if (!ok) {
      op->failed = 1;
      ubuf_reset(&op->cur);
      if (exists) ubuf_put(&op->cur, (uint8_t *)v.mv_data + VHDR, v.mv_size - VHDR);
      failed = 1;
    }
  }
  if (failed) return USTORE_NOT_APPLIED;
  if (freeing_only && !lm_space_frees(&acc)) return LM_LATER;
  for (size_t i = 0; i < n; i++) {
    ustore_op *op = &ops[i];
    MDB_val k = {op->klen, (void *)op->key}, v;
    int rc;
    if (op->action == USTORE_CHECK) continue;
    if (op->action == USTORE_DEL) {
      rc = mdb_del(txn, s->dbi, &k, NULL);
      if (rc == MDB_NOTFOUND) rc = 0;
    } else {
      /* A conditioned op already read the key; others read it now. */
      uint64_t ver = op->create_version ? op->create_version : 1;
      if (op->expect != USTORE_ANY) {
        ver = op->exists ? op->cur_version + 1 : ver;
      } else {
        rc = mdb_get(txn, s->dbi, &k, &v);
        if (rc == 0) ver = lm_get_ver(&v) + 1;
        else if (rc != MDB_NOTFOUND) goto err;
      }
      MDB_val nv = {op->vlen + VHDR, NULL};
      rc = lm_put_reserve(txn, s->dbi, &k, &nv);
      if (rc == 0) {
        uint8_t *p = nv.mv_data;
        for (int j = 0; j < VHDR; j++) p[j] = (uint8_t)(ver >> (56 - 8 * j));
        if (op->vlen) memcpy(p + VHDR, op->val, op->vlen);
      }
    }
  err:
    if (rc) {
      *mrc = rc;
      return -1;
    }
  }
  return UNICO_OK;
}

int lm_cas(ustore *base, ustore_op *op, ustore_err *e) {
  return lm_txn(base, op, 1, e);
}

/* Log mode: a scan's copy of the table entries under its prefix. */
typedef struct mem_item {
  size_t koff, kl, voff, vl; /* into the blob */
  uint64_t ver;
  int deleted;
} mem_item;

typedef struct mem_snap {
  ubuf blob;
  mem_item *it;
  size_t n;
} mem_snap;

static int snap_add(mem_snap *m, const umt_entry *x) {
  mem_item *t = &m->it[m->n++];
  t->koff = m->blob.len;
  t->kl = x->klen;
  ubuf_put(&m->blob, x->kv, x->klen + x->vlen);
  t->voff = t->koff + x->klen;
  t->vl = x->vlen;
  t->ver = x->version;
  t->deleted = x->deleted;
  return ubuf_ok(&m->blob) ? 0 : -1;
}

/* Copy the entries of both tables under prefix and after `after`, in key
 * order, the active table's winning over the frozen one's. With mt_lock. */
static int mem_snapshot(lmdb_store *s, const void *prefix, size_t plen,
                        const void *after, size_t alen, mem_snap *m) {
  umt_entry **a = NULL, **f = NULL;
  size_t na = 0, nf = 0, i = 0, j = 0;
  int rc = -1;
  memset(m, 0, sizeof *m);
  if (umts_collect(s->active, prefix, plen, &a, &na)) goto out;
  if (s->frozen && umts_collect(s->frozen, prefix, plen, &f, &nf)) goto out;
  m->it = malloc((na + nf + 1) * sizeof *m->it);
  if (!m->it) goto out;
  while (i < na || j < nf) {
    const umt_entry *x;
    int c = i == na ? 1 : j == nf ? -1
                      : umt_keycmp(a[i]->kv, a[i]->klen, f[j]->kv, f[j]->klen);
    if (c <= 0) {
      x = a[i++];
      if (c == 0) j++;
    } else {
      x = f[j++];
    }
    if (after && umt_keycmp(x->kv, x->klen, after, alen) <= 0) continue;
    if (snap_add(m, x)) goto out;
  }
  rc = 0;
out:
  free(a);
  free(f);
  return rc;
}

int lm_scan(ustore *base, const void *prefix, size_t plen,
                   const void *after, size_t alen, ustore_scan_cb cb,
                   void *ctx, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  MDB_txn *txn;
  MDB_cursor *cur = NULL;
  mem_snap m;
  size_t mi = 0;
  int rc;
  memset(&m, 0, sizeof m);
  /* Every key with the prefix sorts at or after it: an `after` before the
   * prefix rules nothing out (and must not start the cursor before the
   * prefix, where the first key outside it would end the scan). */
  if (after && ustore_key_cmp(after, alen, prefix, plen) < 0) after = NULL;
  if (s->wal) {
    /* The tables' entries and LMDB's snapshot, taken under one lock, form
     * one consistent view; the scan merges them, the tables winning.
     * (Parallel writers change the tables holding it shared: exclusive.) */
    int tries = 0;
  again:
    lm_tables_lock(s, s->par);
    rc = lm_tables_begin(s, NULL, &txn, &tries, e);
    if (rc == LM_RETRY) goto again;
    uint64_t t0 = lm_mono_ns(); /* (parallel writers: they wait: serial) */
    int bad = rc == UNICO_OK && mem_snapshot(s, prefix, plen, after, alen, &m);
    if (rc == UNICO_OK && s->par) lm_serial_add(s, lm_mono_ns() - t0);
    if (rc == UNICO_OK) pthread_rwlock_unlock(&s->mt_lock);
    if (bad) {
      lm_abort(s, txn);
      ubuf_free(&m.blob);
      free(m.it);
      return UNICO_ENOMEM;
    }
  } else {
    rc = lm_begin(s, MDB_RDONLY, &txn, e);
  }
  if (rc) {
    ubuf_free(&m.blob);
    free(m.it);
    return rc;
  }
  int mrc = mdb_cursor_open(txn, s->dbi, &cur);
  if (mrc) goto done;
  MDB_val k, v;
  if (after) {
    k.mv_size = alen;
    k.mv_data = (void *)after;
  } else {
    k.mv_size = plen;
    k.mv_data = (void *)prefix;
  }
  if (k.mv_size == 0) {
    mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  } else {
    mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (mrc == 0 && after && k.mv_size == alen &&
        memcmp(k.mv_data, after, alen) == 0)
      mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  for (;;) {
    int have_l = mrc == 0 && k.mv_size >= plen &&
                 (!plen || memcmp(k.mv_data, prefix, plen) == 0);
    if (mrc && mrc != MDB_NOTFOUND) break;
    if (!have_l && mi == m.n) {
      mrc = 0;
      break;
    }
    if (have_l && v.mv_size < VHDR) {
      mrc = MDB_CORRUPTED;
      break;
    }
    const mem_item *t = mi < m.n ? &m.it[mi] : NULL;
    int c = !have_l ? 1 : !t ? -1
            : umt_keycmp(k.mv_data, k.mv_size, m.blob.p + t->koff, t->kl);
    int r = 0;
    if (c < 0) { /* LMDB's key, untouched since the last checkpoint */
      /* all but the log's checkpoint record (keys led by NUL are the
       * caller's like any other) */
      if (k.mv_size != CKPT_KLEN || memcmp(k.mv_data, CKPT_KEY, CKPT_KLEN))
        r = cb(ctx, k.mv_data, k.mv_size, (uint8_t *)v.mv_data + VHDR,
               v.mv_size - VHDR, lm_get_ver(&v));
    } else if (!t->deleted) {
      r = cb(ctx, m.blob.p + t->koff, t->kl, m.blob.p + t->voff, t->vl, t->ver);
    }
    if (r) {
      rc = r;
      goto out;
    }
    if (c >= 0) mi++;
    if (c <= 0) mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
done:
  if (mrc && mrc != MDB_NOTFOUND) rc = lm_map_rc(s, mrc, "scanning", e);
out:
  if (cur) mdb_cursor_close(cur);
  lm_abort(s, txn);
  ubuf_free(&m.blob);
  free(m.it);
  return rc;
}
