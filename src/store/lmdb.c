/* lmdb.c - the embedded store on LMDB: one environment in a directory,
 * safe for many threads (MDB_NOTLS) and for several processes at once (LMDB's
 * own lock file and robust mutexes). Every stored value is prefixed with its
 * 8-byte big-endian version. The map grows by doubling up to max_map_size.
 *
 * Group commit. LMDB has one writer at a time and syncs at every commit, so
 * a write costs a sync (two fdatasync() calls, ~0.3 ms here) however small
 * it is. Writers of one process therefore queue their requests; whichever
 * finds no batch running becomes the leader, takes the queue, and applies
 * every request in its own nested transaction of one write transaction (a
 * refused or failed request aborts only its child), then commits once. The
 * commit syncs the data pages and writes the meta page (MDB_NOMETASYNC);
 * the leader then hands the writer's role to the next queued request and,
 * while that batch runs, makes its own batch durable with one more
 * fdatasync (coalesced: one sync covers every commit made before it, and a
 * later commit's data sync covers the earlier meta pages). No request is
 * answered before the sync that covers the state it saw. */
#include <errno.h>
#include <stdarg.h>
#include <strings.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "store/store.h"
#include "unico.h"

#define VHDR 8 /* bytes of version in front of every value */

typedef struct lmdb_store {
  ustore base;
  MDB_env *env;
  MDB_dbi dbi;
  /* Transactions hold this shared; a map resize holds it exclusive, since
   * LMDB allows mdb_env_set_mapsize() only with no transaction running in
   * this process. */
  pthread_rwlock_t resize;
  int resize_init;
  size_t map_size;
  size_t max_map_size;
  char path[4096];
  /* LMDB forbids opening one environment twice in a process (closing one
   * copy would drop the other's locks), so opens of the same directory share
   * one lmdb_store: registry link, identity and reference count. */
  struct lmdb_store *next;
  dev_t dev;
  ino_t ino;
  int refs;
  /* group commit (see the top of the file) */
  pthread_mutex_t q_lock;
  int q_init;
  struct lm_req *q_head, *q_tail; /* requests waiting for a batch */
  int leading;                    /* a batch is being applied */
  uint64_t committed;             /* batches committed (under q_lock) */
  uint64_t durable;               /* batches known durable (under q_lock) */
  uint64_t n_requests, n_batches, n_syncs; /* counters (under q_lock) */
  pthread_mutex_t sync_lock;      /* held across the acknowledging sync */
  int sync_mode;                  /* SYNC_ON, SYNC_DATA or SYNC_OFF */
} lmdb_store;

enum { SYNC_ON = 0, SYNC_DATA = 1, SYNC_OFF = 2 };

#define BATCH_MAX 512 /* requests per write transaction */

/* One caller's write, queued for a batch. Lives on the caller's stack; the
 * leader fills rc/err and sets done under q_lock, then signals cv. */
typedef struct lm_req {
  ustore_op *ops;
  size_t n;
  ustore_err *e;
  int rc;
  int done;
  int tries;   /* batches that had to give this request back */
  int applied; /* its child committed into the batch */
  pthread_cond_t cv;
  struct lm_req *next;
} lm_req;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static lmdb_store *registry;

static void seterr(ustore_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void seterr(ustore_err *e, const char *fmt, ...) {
  if (!e) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

static int map_rc(lmdb_store *s, int rc, const char *what, ustore_err *e) {
  switch (rc) {
  case 0:
    return UNICO_OK;
  case MDB_NOTFOUND:
    return UNICO_ENOTFOUND;
  case MDB_MAP_FULL:
    seterr(e,
           "the store at %s is full: its map reached max_map_size=%zu bytes; "
           "reopen it with lmdb:%s?max_map_size=BYTES (a larger value)",
           s->path, s->max_map_size, s->path);
    return UNICO_EFULL;
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

static uint64_t get_ver(const MDB_val *v) {
  const uint8_t *p = v->mv_data;
  uint64_t u = 0;
  for (int i = 0; i < VHDR; i++) u = (u << 8) | p[i];
  return u;
}

/* Adopt a map size another process set, or grow ours; called with no
 * transaction of ours running. */
static int lm_remap(lmdb_store *s, size_t want, ustore_err *e) {
  int rc = 0;
  pthread_rwlock_wrlock(&s->resize);
  if (want == 0) {
    rc = mdb_env_set_mapsize(s->env, 0);
  } else if (s->map_size < want) {
    rc = mdb_env_set_mapsize(s->env, want);
  }
  if (rc == 0) {
    MDB_envinfo info;
    mdb_env_info(s->env, &info);
    s->map_size = info.me_mapsize;
  }
  pthread_rwlock_unlock(&s->resize);
  return map_rc(s, rc, "resizing the map", e);
}

/* Begin a transaction holding the resize lock shared. On success the caller
 * must end it with lm_end(). */
static int lm_begin(lmdb_store *s, unsigned flags, MDB_txn **txn,
                    ustore_err *e) {
  for (int tries = 0; tries < 8; tries++) {
    pthread_rwlock_rdlock(&s->resize);
    int rc = mdb_txn_begin(s->env, NULL, flags, txn);
    if (rc == 0) return UNICO_OK;
    pthread_rwlock_unlock(&s->resize);
    if (rc != MDB_MAP_RESIZED) return map_rc(s, rc, "beginning a transaction", e);
    int r = lm_remap(s, 0, e); /* another process grew the map */
    if (r) return r;
  }
  seterr(e, "the map of %s keeps changing size", s->path);
  return UNICO_EUNAVAILABLE;
}

static void lm_abort(lmdb_store *s, MDB_txn *txn) {
  mdb_txn_abort(txn);
  pthread_rwlock_unlock(&s->resize);
}

static int lm_commit(lmdb_store *s, MDB_txn *txn) {
  int rc = mdb_txn_commit(txn);
  pthread_rwlock_unlock(&s->resize);
  return rc;
}

static int lm_get(ustore *base, const void *key, size_t klen, ubuf *val,
                  uint64_t *version, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  MDB_txn *txn;
  if (klen == 0 || klen > 511) return UNICO_ENOTFOUND; /* cannot be stored */
  int rc = lm_begin(s, MDB_RDONLY, &txn, e);
  if (rc) return rc;
  MDB_val k = {klen, (void *)key}, v;
  int mrc = mdb_get(txn, s->dbi, &k, &v);
  if (mrc == 0) {
    if (v.mv_size < VHDR) {
      rc = UNICO_ECORRUPT;
      seterr(e, "value shorter than its version header in %s", s->path);
    } else {
      if (version) *version = get_ver(&v);
      if (val) {
        ubuf_reset(val);
        ubuf_put(val, (uint8_t *)v.mv_data + VHDR, v.mv_size - VHDR);
        if (!ubuf_ok(val)) rc = UNICO_ENOMEM;
      }
    }
  } else {
    rc = map_rc(s, mrc, "reading", e);
  }
  lm_abort(s, txn);
  return rc;
}

/* Apply ops inside txn: first evaluate every condition (so all failures are
 * reported), then write. Returns UNICO_OK, USTORE_NOT_APPLIED or an error
 * (MDB code through *mrc). */
static int apply_ops(lmdb_store *s, MDB_txn *txn, ustore_op *ops, size_t n,
                     int *mrc) {
  int failed = 0;
  *mrc = 0;
  for (size_t i = 0; i < n; i++) {
    ustore_op *op = &ops[i];
    MDB_val k = {op->klen, (void *)op->key}, v;
    op->failed = 0;
    if (op->expect == USTORE_ANY) continue;
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
    uint64_t ver = exists ? get_ver(&v) : 0;
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
      uint64_t ver = 1;
      if (op->expect != USTORE_ANY) {
        ver = op->exists ? op->cur_version + 1 : 1;
      } else {
        rc = mdb_get(txn, s->dbi, &k, &v);
        if (rc == 0) ver = get_ver(&v) + 1;
        else if (rc != MDB_NOTFOUND) goto err;
      }
      MDB_val nv = {op->vlen + VHDR, NULL};
      rc = mdb_put(txn, s->dbi, &k, &nv, MDB_RESERVE);
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

/* ------------------------------------------------------------------ */
/* group commit */

/* Apply one request in a child transaction of parent: UNICO_OK (applied,
 * child merged into parent), USTORE_NOT_APPLIED (a condition failed, nothing
 * of it in parent) or -1 with the LMDB error in *mrc (nothing of it in
 * parent either: the child is aborted). */
static int apply_child(lmdb_store *s, MDB_txn *parent, lm_req *r, int *mrc) {
  MDB_txn *child;
  *mrc = mdb_txn_begin(s->env, parent, 0, &child);
  if (*mrc) return -1;
  int rc = apply_ops(s, child, r->ops, r->n, mrc);
  if (rc == UNICO_OK) {
    *mrc = mdb_txn_commit(child); /* a failed child commit aborts it */
    return *mrc ? -1 : UNICO_OK;
  }
  mdb_txn_abort(child);
  return rc;
}

/* Why a request goes back to the queue instead of being answered. */
enum { RETRY_NO = 0, RETRY_FULL = 1, RETRY_AGAIN = 2 };

/* An error from LMDB while applying one request: its own answer. */
static int child_error(lmdb_store *s, int mrc, ustore_err *e) {
  if (mrc == MDB_BAD_VALSIZE) {
    seterr(e, "a key or value is too large for LMDB");
    return UNICO_EINVAL;
  }
  if (mrc == MDB_TXN_FULL) {
    seterr(e, "one write touches more pages than an LMDB transaction holds");
    return UNICO_EINVAL;
  }
  return map_rc(s, mrc, "writing", e);
}

/* Apply a batch in one write transaction and commit it. Each request gets
 * rc (and *e), or retry != RETRY_NO to go back to the queue. Returns 1 when
 * the transaction committed writes, 0 otherwise. */
static int batch_apply(lmdb_store *s, lm_req *batch, int *retry_of) {
  MDB_txn *txn;
  ustore_err be = {{0}};
  int rc = lm_begin(s, 0, &txn, &be);
  lm_req *r;
  size_t i = 0;
  if (rc) {
    for (r = batch; r; r = r->next, i++) {
      r->rc = rc;
      if (r->e) *r->e = be;
    }
    return 0;
  }
  int applied = 0, stop = 0;
  for (r = batch; r; r = r->next, i++) {
    int mrc;
    retry_of[i] = RETRY_NO;
    r->applied = 0;
    if (stop) {
      retry_of[i] = RETRY_AGAIN; /* not tried: its turn comes next batch */
      continue;
    }
    int x = apply_child(s, txn, r, &mrc);
    if (x == UNICO_OK) {
      r->applied = 1;
      r->rc = UNICO_OK;
      applied++;
    } else if (x == USTORE_NOT_APPLIED) {
      r->rc = USTORE_NOT_APPLIED;
    } else if (mrc == MDB_MAP_FULL || (mrc == MDB_TXN_FULL && applied)) {
      /* The map (or the batch) is full: commit what fits, then grow the
       * map or start a new batch for the rest. */
      retry_of[i] = mrc == MDB_MAP_FULL ? RETRY_FULL : RETRY_AGAIN;
      stop = 1;
    } else {
      r->rc = child_error(s, mrc, r->e);
    }
  }
  if (!applied) { /* refusals and errors only: nothing to commit */
    lm_abort(s, txn);
    return 0;
  }
  int mrc = lm_commit(s, txn);
  if (mrc == 0) return 1;
  /* Nothing reached the store if the commit failed for want of space or
   * memory: everyone tries again. Any other failure (EIO, ENOSPC...) may
   * have written part of it: the applied requests' outcome is unknown;
   * the refused ones are judged again on what the store really holds. */
  int definite = mrc == MDB_MAP_FULL || mrc == ENOMEM || mrc == MDB_TXN_FULL;
  i = 0;
  for (r = batch; r; r = r->next, i++) {
    if (retry_of[i]) continue;
    if (definite || !r->applied) {
      retry_of[i] = mrc == MDB_MAP_FULL ? RETRY_FULL : RETRY_AGAIN;
    } else {
      seterr(r->e, "committing to %s failed (%s); the write may or may not "
                   "have been applied: retry it with the same operation id",
             s->path, mdb_strerror(mrc));
      r->rc = UNICO_EUNKNOWN;
    }
    r->applied = 0;
  }
  return 0;
}

/* Make every batch up to `seq` durable. One fdatasync covers every commit
 * made before it starts, so concurrent callers share it; and a commit's own
 * data sync covers the meta pages of the commits before it (see lead()).
 * Waiting for the next batch's commit instead of syncing was measured
 * slower: two syncs in flight overlap well. */
static int make_durable(lmdb_store *s, uint64_t seq, ustore_err *e) {
  int rc = 0;
  pthread_mutex_lock(&s->q_lock);
  int need = s->durable < seq;
  pthread_mutex_unlock(&s->q_lock);
  if (!need) return UNICO_OK;
  pthread_mutex_lock(&s->sync_lock);
  pthread_mutex_lock(&s->q_lock);
  need = s->durable < seq;
  uint64_t target = s->committed;
  pthread_mutex_unlock(&s->q_lock);
  if (need) {
    rc = mdb_env_sync(s->env, 1);
    pthread_mutex_lock(&s->q_lock);
    s->n_syncs++;
    if (rc == 0 && s->durable < target) s->durable = target;
    pthread_mutex_unlock(&s->q_lock);
  }
  pthread_mutex_unlock(&s->sync_lock);
  if (rc) {
    seterr(e, "syncing %s failed (%s); the write may or may not have been "
              "applied: retry it with the same operation id",
           s->path, mdb_strerror(rc));
    return UNICO_EUNKNOWN;
  }
  return UNICO_OK;
}

/* Run one batch as the leader. Called and returns with q_lock held. */
static void lead(lmdb_store *s) {
  lm_req *batch = s->q_head, *last = NULL, *r;
  int retry_of[BATCH_MAX];
  size_t n = 0;
  s->leading = 1;
  for (r = batch; r && n < BATCH_MAX; r = r->next) {
    last = r;
    n++;
  }
  s->q_head = last->next;
  if (!s->q_head) s->q_tail = NULL;
  last->next = NULL;
  pthread_mutex_unlock(&s->q_lock);

  int wrote = batch_apply(s, batch, retry_of);
  int full = 0;
  size_t i = 0;
  for (r = batch; r; r = r->next, i++) full |= retry_of[i] == RETRY_FULL;
  if (full) { /* grow the map (no transaction of ours runs now) */
    ustore_err ge = {{0}};
    size_t want = s->map_size * 2;
    if (want > s->max_map_size) want = s->max_map_size;
    int grown = want > s->map_size && lm_remap(s, want, &ge) == UNICO_OK;
    i = 0;
    for (r = batch; r; r = r->next, i++) {
      if (retry_of[i] != RETRY_FULL || grown) continue;
      retry_of[i] = RETRY_NO;
      r->rc = map_rc(s, MDB_MAP_FULL, "writing", r->e);
    }
  }

  pthread_mutex_lock(&s->q_lock);
  if (wrote) {
    s->committed++;
    /* this commit's data sync made the earlier meta pages durable */
    if (s->sync_mode == SYNC_ON && s->durable < s->committed - 1)
      s->durable = s->committed - 1;
  }
  s->n_batches++;
  s->n_requests += n;
  uint64_t seq = s->committed; /* the state every request of the batch saw */
  /* Requests given back go first in the queue, in their order. */
  lm_req *keep = NULL, **kt = &keep, *back = NULL, *back_last = NULL, *nx;
  i = 0;
  for (r = batch; r; r = nx, i++) {
    nx = r->next;
    r->next = NULL;
    if (retry_of[i] != RETRY_NO && ++r->tries > 40) {
      seterr(r->e, "the write to %s could not be fitted in a transaction",
             s->path);
      r->rc = UNICO_EUNAVAILABLE;
      retry_of[i] = RETRY_NO;
    }
    if (retry_of[i] != RETRY_NO) {
      if (back_last) back_last->next = r;
      else back = r;
      back_last = r;
    } else {
      *kt = r;
      kt = &r->next;
    }
  }
  if (back) {
    back_last->next = s->q_head;
    if (!s->q_head) s->q_tail = back_last;
    s->q_head = back;
  }
  /* The writer's role passes to the next request while this batch syncs. */
  s->leading = 0;
  if (s->q_head) pthread_cond_signal(&s->q_head->cv);
  pthread_mutex_unlock(&s->q_lock);

  if (keep && s->sync_mode == SYNC_ON) {
    ustore_err se = {{0}};
    if (make_durable(s, seq, &se)) {
      for (r = keep; r; r = r->next) {
        if (r->rc != UNICO_OK && r->rc != USTORE_NOT_APPLIED) continue;
        r->rc = UNICO_EUNKNOWN;
        if (r->e) *r->e = se;
      }
    }
  }

  pthread_mutex_lock(&s->q_lock);
  for (r = keep; r; r = nx) {
    nx = r->next; /* r may be gone once done is seen, but not before unlock */
    r->done = 1;
    pthread_cond_signal(&r->cv);
  }
}

static int lm_txn(ustore *base, ustore_op *ops, size_t n, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  for (size_t i = 0; i < n; i++) {
    if (ops[i].klen == 0 || ops[i].klen > 511) {
      seterr(e, "key of %zu bytes is outside LMDB's 1..511", ops[i].klen);
      return UNICO_EINVAL;
    }
  }
  lm_req r;
  memset(&r, 0, sizeof r);
  r.ops = ops;
  r.n = n;
  r.e = e;
  if (pthread_cond_init(&r.cv, NULL)) return UNICO_ENOMEM;
  pthread_mutex_lock(&s->q_lock);
  if (s->q_tail) s->q_tail->next = &r;
  else s->q_head = &r;
  s->q_tail = &r;
  while (!r.done) {
    if (!s->leading && s->q_head) lead(s);
    else pthread_cond_wait(&r.cv, &s->q_lock);
  }
  pthread_mutex_unlock(&s->q_lock);
  pthread_cond_destroy(&r.cv);
  return r.rc;
}

void ustore_lmdb_stats_get(ustore *base, ustore_lmdb_stats *out) {
  lmdb_store *s = (lmdb_store *)base;
  memset(out, 0, sizeof *out);
  if (!s || strcmp(s->base.vt->name, "lmdb") != 0) return;
  pthread_mutex_lock(&s->q_lock);
  out->requests = s->n_requests;
  out->batches = s->n_batches;
  out->syncs = s->n_syncs;
  pthread_mutex_unlock(&s->q_lock);
}

static int lm_cas(ustore *base, ustore_op *op, ustore_err *e) {
  return lm_txn(base, op, 1, e);
}

static int lm_scan(ustore *base, const void *prefix, size_t plen,
                   const void *after, size_t alen, ustore_scan_cb cb,
                   void *ctx, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  MDB_txn *txn;
  MDB_cursor *cur = NULL;
  int rc = lm_begin(s, MDB_RDONLY, &txn, e);
  if (rc) return rc;
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
  while (mrc == 0) {
    if (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0) break;
    if (v.mv_size < VHDR) {
      mrc = MDB_CORRUPTED;
      break;
    }
    int r = cb(ctx, k.mv_data, k.mv_size, (uint8_t *)v.mv_data + VHDR,
               v.mv_size - VHDR, get_ver(&v));
    if (r) {
      rc = r;
      goto out;
    }
    mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
done:
  if (mrc && mrc != MDB_NOTFOUND) rc = map_rc(s, mrc, "scanning", e);
out:
  if (cur) mdb_cursor_close(cur);
  lm_abort(s, txn);
  return rc;
}

static void lm_free(lmdb_store *s) {
  if (s->env) mdb_env_close(s->env);
  if (s->q_init) {
    pthread_mutex_destroy(&s->q_lock);
    pthread_mutex_destroy(&s->sync_lock);
  }
  if (s->resize_init) pthread_rwlock_destroy(&s->resize);
  free(s);
}

static void lm_close(ustore *base) {
  lmdb_store *s = (lmdb_store *)base;
  if (!s) return;
  pthread_mutex_lock(&registry_lock);
  int last = --s->refs <= 0;
  if (last) {
    for (lmdb_store **pp = &registry; *pp; pp = &(*pp)->next)
      if (*pp == s) {
        *pp = s->next;
        break;
      }
  }
  pthread_mutex_unlock(&registry_lock);
  if (last) lm_free(s);
}

static const ustore_vtab lmdb_vtab = {
    USTORE_VTAB_VERSION, "lmdb", USTORE_CAP_TXN, lm_get, lm_cas, lm_txn,
    lm_scan, lm_close, 511 /* LMDB's default MDB_MAXKEYSIZE */};

/* mkdir -p: create path and its missing parents. 0 or -1 with errno. */
static int mkdir_p(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    buf[i] = c;
  }
  return 0;
}

/* "64GiB", "1048576", "512MiB", "2g": a size in bytes. */
static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  unsigned long long mul = 1;
  if (!strcasecmp(end, "") || !strcasecmp(end, "b")) mul = 1;
  else if (!strcasecmp(end, "k") || !strcasecmp(end, "kib") || !strcasecmp(end, "kb")) mul = 1ULL << 10;
  else if (!strcasecmp(end, "m") || !strcasecmp(end, "mib") || !strcasecmp(end, "mb")) mul = 1ULL << 20;
  else if (!strcasecmp(end, "g") || !strcasecmp(end, "gib") || !strcasecmp(end, "gb")) mul = 1ULL << 30;
  else if (!strcasecmp(end, "t") || !strcasecmp(end, "tib") || !strcasecmp(end, "tb")) mul = 1ULL << 40;
  else return -1;
  if (v > SIZE_MAX / mul) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

int ustore_lmdb_open(ustore **out, const char *path, const char *query,
                     ustore_err *e) {
  int rc = UNICO_OK, mrc;
  unsigned envflags = MDB_NOTLS;
  size_t map_size = (size_t)1 << 30;     /* 1 GiB to start */
  size_t max_map = (size_t)1 << 40;      /* grows up to 1 TiB */
  int max_map_given = 0;
  int sync_mode = SYNC_ON;
  lmdb_store *s = NULL;
  char *q = NULL;
  *out = NULL;

  if (!path || !*path) {
    seterr(e, "lmdb store: empty path");
    return UNICO_EINVAL;
  }
  if (strlen(path) >= sizeof s->path) {
    seterr(e, "lmdb store: path too long");
    return UNICO_EINVAL;
  }
  if (query && *query) {
    q = strdup(query);
    if (!q) return UNICO_ENOMEM;
    char *save = NULL;
    for (char *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
      char *eq = strchr(kv, '=');
      if (!eq) {
        seterr(e, "lmdb store option \"%s\" has no value (expected NAME=VALUE)", kv);
        rc = UNICO_EINVAL;
        goto leave;
      }
      *eq = 0;
      const char *val = eq + 1;
      if (!strcmp(kv, "map_size") || !strcmp(kv, "max_map_size")) {
        size_t v;
        if (parse_size(val, &v) || v < ((size_t)1 << 20)) {
          seterr(e, "lmdb store option %s=%s: expected a size of at least 1MiB such as 4GiB", kv, val);
          rc = UNICO_EINVAL;
          goto leave;
        }
        if (!strcmp(kv, "map_size")) map_size = v;
        else { max_map = v; max_map_given = 1; }
      } else if (!strcmp(kv, "sync")) {
        if (!strcmp(val, "on")) sync_mode = SYNC_ON;
        else if (!strcmp(val, "off")) sync_mode = SYNC_OFF;
        else if (!strcmp(val, "data")) sync_mode = SYNC_DATA;
        else {
          seterr(e, "lmdb store option sync=%s: expected on, data or off", val);
          rc = UNICO_EINVAL;
          goto leave;
        }
      } else {
        seterr(e, "unknown lmdb store option \"%s\" (known: map_size, max_map_size, sync)", kv);
        rc = UNICO_EINVAL;
        goto leave;
      }
    }
  }
  if (map_size > max_map) {
    if (max_map_given) {
      seterr(e, "lmdb store: map_size is larger than max_map_size");
      rc = UNICO_EINVAL;
      goto leave;
    }
    max_map = map_size;
  }

  /* sync=on: the commit syncs the data pages, and the batch's own sync
   * (make_durable) the meta page, before anyone is answered. */
  envflags |= sync_mode == SYNC_OFF ? MDB_NOSYNC : MDB_NOMETASYNC;

  if (mkdir_p(path)) {
    seterr(e, "cannot create the store directory %s: %s", path, strerror(errno));
    rc = UNICO_EUNAVAILABLE;
    goto leave;
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    seterr(e, "the store path %s is not a directory", path);
    rc = UNICO_EUNAVAILABLE;
    goto leave;
  }
  pthread_mutex_lock(&registry_lock);
  for (lmdb_store *r = registry; r; r = r->next) {
    if (r->dev == st.st_dev && r->ino == st.st_ino) {
      r->refs++;
      *out = &r->base;
      pthread_mutex_unlock(&registry_lock);
      goto leave;
    }
  }
  s = calloc(1, sizeof *s);
  if (!s) {
    pthread_mutex_unlock(&registry_lock);
    rc = UNICO_ENOMEM;
    goto leave;
  }
  s->dev = st.st_dev;
  s->ino = st.st_ino;
  s->refs = 1;
  s->base.vt = &lmdb_vtab;
  snprintf(s->path, sizeof s->path, "%s", path);
  s->max_map_size = max_map;
  /* Default (reader-preferring) kind on purpose: a scan callback may take
   * the lock again for a get, which a writer-preferring lock could deadlock
   * while a resize waits. */
  if (pthread_rwlock_init(&s->resize, NULL)) {
    pthread_mutex_unlock(&registry_lock);
    rc = UNICO_ENOMEM;
    goto leave;
  }
  s->resize_init = 1;
  if (pthread_mutex_init(&s->q_lock, NULL)) {
    pthread_mutex_unlock(&registry_lock);
    rc = UNICO_ENOMEM;
    goto leave;
  }
  if (pthread_mutex_init(&s->sync_lock, NULL)) {
    pthread_mutex_destroy(&s->q_lock);
    pthread_mutex_unlock(&registry_lock);
    rc = UNICO_ENOMEM;
    goto leave;
  }
  s->q_init = 1;
  s->sync_mode = sync_mode;
  if ((mrc = mdb_env_create(&s->env))) goto mdb_fail;
  if ((mrc = mdb_env_set_maxreaders(s->env, 1022))) goto mdb_fail;
  if ((mrc = mdb_env_set_mapsize(s->env, map_size))) goto mdb_fail;
  if ((mrc = mdb_env_open(s->env, path, envflags, 0664))) goto mdb_fail;
  {
    /* A larger file made by an earlier, larger map: adopt its size. */
    MDB_envinfo info;
    mdb_env_info(s->env, &info);
    s->map_size = info.me_mapsize;
    if (s->map_size > s->max_map_size) s->max_map_size = s->map_size;
    int dead;
    mdb_reader_check(s->env, &dead); /* free slots of killed processes */
  }
  {
    MDB_txn *txn;
    if ((mrc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))) goto mdb_fail;
    mrc = mdb_dbi_open(txn, NULL, 0, &s->dbi);
    mdb_txn_abort(txn);
    if (mrc) goto mdb_fail;
  }
  s->next = registry;
  registry = s;
  pthread_mutex_unlock(&registry_lock);
  *out = &s->base;
  s = NULL;
  goto leave;
mdb_fail:
  pthread_mutex_unlock(&registry_lock);
  if (mrc == EACCES || mrc == ENOENT || mrc == ENOTDIR)
    seterr(e, "cannot open the store at %s: %s", path, mdb_strerror(mrc));
  else
    seterr(e, "cannot open the LMDB store at %s: %s", path, mdb_strerror(mrc));
  rc = mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH ? UNICO_ECORRUPT
                                                         : UNICO_EUNAVAILABLE;
leave:
  if (s) lm_free(s);
  free(q);
  return rc;
}
