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
#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "store/memtable.h"
#include "store/lmdb.h"
#include "store/options.h"
#include "store/store.h"
#include "unico_errors.h"

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
  /* The map writes that add data may fill: max_map_size less a reserve
   * that only writes which free space (deletes, releases) may use, so a
   * full store can still be emptied (see "space" below). */
  size_t ins_map_size;
  int reserve_on; /* (leader) this batch runs with the reserve open */
  char path[4096];
  char *query; /* the options it was opened with, for the advice (owned) */
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
  int syncing;                    /* syncs running (under q_lock) */
  uint64_t sync_target;           /* the newest batch a running sync covers */
  int syncs_on[2];                /* log mode: syncs running per file parity */
  struct dwaiter *dwaiters;       /* (q_lock) callers waiting for a sync */
  /* deferred durability: watches, and the thread that syncs for them */
  ustore_watch *watches;          /* (q_lock) */
  pthread_cond_t watch_cv;        /* (q_lock) a watch came, or stop */
  int watch_cv_init;
  pthread_t syncer;
  int syncer_started, syncer_stop; /* (q_lock) */
  int sync_mode;                  /* SYNC_ON, SYNC_DATA or SYNC_OFF */
  int lock_fd; /* unico.lock: shared (plain mode) or exclusive (log mode) */
  /* log mode (wal=on; see "log mode" below) */
  int wal;
  pthread_rwlock_t mt_lock; /* guards the tables (not their immutability) */
  int mt_init;
  umt *active;              /* written since the current log file began */
  umt *frozen;              /* being checkpointed into LMDB, or NULL */
  int wal_fd;               /* current log file (q_lock for syncers) */
  uint64_t wal_no;          /* its number */
  uint64_t wal_off;         /* where the next batch goes (leader) */
  uint64_t wal_zeroed;      /* the file is zero-filled up to here (leader) */
  int old_fd;               /* the frozen table's log file, or -1 */
  uint64_t old_no;
  ubuf wal_buf;             /* the leader's batch, as log records */
  pthread_t ckpt_thread;
  int ckpt_started;
  pthread_cond_t ckpt_cv;   /* (q_lock) a table froze, a checkpoint ended */
  int ckpt_busy;            /* (q_lock) a frozen table awaits its checkpoint */
  int ckpt_stop;            /* (q_lock) the checkpointer must end */
  atomic_int failed;        /* the log failed: writes are refused */
  char failed_msg[256];
  int failed_rc;            /* what refused writes get */
  uint64_t n_checkpoints;   /* (q_lock) */
  size_t ckpt_bytes;        /* wal_size: freeze the active table past this */
  /* LMDB as the last checkpoint left it (mt_lock): the bytes of its pages
   * in use and of its branch pages; the page size */
  size_t lm_used, lm_branch, psize;
  /* The environment's options as the first open asked for them; a later
   * open of the same directory must ask for the same (reopen_differs()). */
  int opt_sync, opt_wal;
  size_t opt_map, opt_max, opt_wal_size;
} lmdb_store;

enum { SYNC_ON = 0, SYNC_DATA = 1, SYNC_OFF = 2 };

#define BATCH_MAX 512 /* requests per write transaction */
#define SYNCS_MAX 2   /* syncs in flight at once */

/* One caller's write, queued for a batch. Lives on the caller's stack; the
 * leader fills rc/err and sets done under q_lock, then signals cv. */
typedef struct lm_req {
  ustore_op *ops;
  size_t n;
  ustore_err *e;
  int rc;
  int done;
  int tries;   /* batches that had to give this request back */
  int full_tries; /* times it found the store full and was given back */
  int applied; /* its child committed into the batch */
  int deferred; /* answered before durable; seq is the commit to watch */
  uint64_t seq;
  pthread_cond_t cv;
  struct lm_req *next;
} lm_req;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static lmdb_store *registry;

#define seterr ustore_seterr

/* ------------------------------------------------------------------ */
/* space
 *
 * The map grows by doubling up to ins_map_size: max_map_size less a
 * reserve (reserve_of()). A write that finds the map full there is refused
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

#define FREEING_SLACK 4096

/* max_map_size/16, at least 256 KiB, at most 256 MiB, never more than a
 * quarter of it; whole pages. */
static size_t reserve_of(size_t max) {
  size_t r = max / 16;
  if (r < ((size_t)256 << 10)) r = (size_t)256 << 10;
  if (r > ((size_t)256 << 20)) r = (size_t)256 << 20;
  if (r > max / 4) r = max / 4;
  return r & ~(size_t)4095;
}

/* A size as the options take it: "2MiB", "3GiB", or bytes. */
static void fmt_size(size_t v, char *out, size_t n) {
  static const char *unit[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; i++) {
    size_t u = (size_t)1 << (40 - 10 * i);
    if (v >= u && v % u == 0) {
      snprintf(out, n, "%zu%s", v / u, unit[i]);
      return;
    }
  }
  snprintf(out, n, "%zu", v);
}

/* A max_map_size worth suggesting: twice the current one and at least
 * `need`, in whole MiB. */
static size_t suggest_max(const lmdb_store *s, size_t need) {
  size_t mib = (size_t)1 << 20, v = s->max_map_size * 2;
  if (v < need) v = need;
  return (v + mib - 1) / mib * mib;
}

/* The URL to reopen the store with: its options, max_map_size set to max
 * (map_size, when given, is no larger than the old limit, so it stays). */
static void advice_url(const lmdb_store *s, size_t max, char *out, size_t n) {
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
  fmt_size(max, sz, sizeof sz);
  if (at < n) snprintf(out + at, n - at, "max_map_size=%s", sz);
}

/* The answer to a write the store cannot hold. */
static int full_err(const lmdb_store *s, size_t need, ustore_err *e) {
  char url[4400], max[32], res[32];
  fmt_size(s->max_map_size, max, sizeof max);
  fmt_size(s->max_map_size - s->ins_map_size, res, sizeof res);
  advice_url(s, suggest_max(s, need), url, sizeof url);
  seterr(e, "the store is full (max_map_size=%s, of which %s is kept so "
            "deletes can free space); delete records, or reopen it as %s",
         max, res, url);
  return UNICO_EFULL;
}

static int map_rc(lmdb_store *s, int rc, const char *what, ustore_err *e) {
  switch (rc) {
  case 0:
    return UNICO_OK;
  case MDB_NOTFOUND:
    return UNICO_ENOTFOUND;
  case MDB_MAP_FULL:
    return full_err(s, 0, e);
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

/* Adopt a map size another process set (want 0; but no more than
 * ins_map_size unless the reserve is open), grow ours to want, or with
 * exact set it to want even if smaller (LMDB keeps it at least as large as
 * the pages in use); called with no transaction of ours running. */
static int lm_remap(lmdb_store *s, size_t want, int exact, ustore_err *e) {
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
  return map_rc(s, rc, "resizing the map", e);
}

/* Open or close the reserve for the next batch (lm_remap() reads it). */
static void set_reserve(lmdb_store *s, int on) {
  pthread_rwlock_wrlock(&s->resize);
  s->reserve_on = on;
  pthread_rwlock_unlock(&s->resize);
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
    int r = lm_remap(s, 0, 0, e); /* another process grew the map */
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
  int rc;
  if (s->wal) {
    /* Log mode: the tables first. LMDB's snapshot is taken before the lock
     * is released, so a checkpoint dropping the frozen table cannot fall
     * between the two looks. */
    pthread_rwlock_rdlock(&s->mt_lock);
    umt_entry *me = umt_find(s->active, key, klen);
    if (!me && s->frozen) me = umt_find(s->frozen, key, klen);
    if (me) {
      rc = me->deleted ? UNICO_ENOTFOUND : UNICO_OK;
      if (rc == UNICO_OK && version) *version = me->version;
      if (rc == UNICO_OK && val) {
        ubuf_reset(val);
        ubuf_put(val, me->kv + me->klen, me->vlen);
        if (!ubuf_ok(val)) rc = UNICO_ENOMEM;
      }
      pthread_rwlock_unlock(&s->mt_lock);
      return rc;
    }
    rc = lm_begin(s, MDB_RDONLY, &txn, e);
    pthread_rwlock_unlock(&s->mt_lock);
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

/* What a write adds and removes, to tell whether it frees space. */
typedef struct space_acc {
  long long net; /* bytes added less bytes removed */
  int dels;      /* keys that exist and are deleted, or shrink */
} space_acc;

/* Count op, whose key exists (with a value of old_vlen bytes) or not. */
static void space_add(space_acc *a, const ustore_op *op, int exists,
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
static int space_frees(const space_acc *a) {
  return a->dels > 0 && a->net <= FREEING_SLACK;
}

/* mdb_put with MDB_RESERVE of nv at k, where a value that shrinks to half
 * or less is deleted first: LMDB rebalances a page when a key leaves it,
 * never when a value shrinks, so without this the pages of records
 * replaced by small tombstones would stay in use, sparse, and a full store
 * would get no room back from deletes. */
static int lm_put_reserve(MDB_txn *txn, MDB_dbi dbi, MDB_val *k, MDB_val *nv) {
  MDB_val old;
  int rc = mdb_get(txn, dbi, k, &old);
  if (rc == 0 && old.mv_size >= 2 * nv->mv_size &&
      old.mv_size - nv->mv_size >= 64)
    rc = mdb_del(txn, dbi, k, NULL);
  else if (rc == MDB_NOTFOUND)
    rc = 0;
  return rc ? rc : mdb_put(txn, dbi, k, nv, MDB_RESERVE);
}

#define LM_LATER 2 /* apply_ops: not a freeing write; nothing written */
#define LM_FULL 3  /* log_apply: the store has no room; nothing written */

/* Apply ops inside txn: first evaluate every condition (so all failures are
 * reported), then write. Returns UNICO_OK, USTORE_NOT_APPLIED or an error
 * (MDB code through *mrc); with freeing_only, LM_LATER for a write that
 * does not free space. */
static int apply_ops(lmdb_store *s, MDB_txn *txn, ustore_op *ops, size_t n,
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
    if (freeing_only) space_add(&acc, op, exists, exists ? v.mv_size - VHDR : 0);
    if (op->expect == USTORE_ANY) continue;
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
  if (freeing_only && !space_frees(&acc)) return LM_LATER;
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
  int rc = apply_ops(s, child, r->ops, r->n, s->reserve_on, mrc);
  if (rc == UNICO_OK) {
    *mrc = mdb_txn_commit(child); /* a failed child commit aborts it */
    return *mrc ? -1 : UNICO_OK;
  }
  mdb_txn_abort(child);
  return rc;
}

/* Why a request goes back to the queue instead of being answered
 * (RETRY_LATER: kept out of a batch with the reserve open, not counted). */
enum { RETRY_NO = 0, RETRY_FULL = 1, RETRY_AGAIN = 2, RETRY_LATER = 3 };

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
    } else if (x == LM_LATER) {
      retry_of[i] = RETRY_LATER;
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

/* ------------------------------------------------------------------ */
/* log mode (wal=on)
 *
 * LMDB copies every page a transaction touches to a new place, so a commit
 * writes whole 4 KiB pages scattered over the file: about one page per key
 * written (a unique insert writes four keys), each a random write, plus two
 * syncs. In log mode a batch is appended to a log file instead (about 60
 * bytes plus the keys and values per key written) and synced once; the
 * latest version of each key written lives in an in-memory table (the
 * active table) that reads consult before LMDB. When the table is large
 * enough it is frozen, a new log file begins, and a checkpointer thread
 * writes the frozen table into LMDB in one synced transaction that also
 * records the log file's number; then that file is deleted. On open, log
 * files newer than the recorded number are replayed into LMDB. The price:
 * one process owns the store (an exclusive lock on unico.lock); processes
 * in plain mode hold it shared.
 *
 * A log record is one request: u32 payload length, u32 CRC-32 of the
 * payload, then the payload: u32 op count, and per op u8 action (1 put,
 * 2 delete), u16 key length, u32 value length, u64 version, key, value.
 * All integers little-endian. A torn last record (short or bad CRC) ends
 * replay: it was never acknowledged, since answers wait for its sync. */

#define CKPT_BYTES ((size_t)64 << 20) /* default wal_size */
#define CKPT_KEY "\x00unico-log-checkpoint" /* outside the tuple key space */
#define CKPT_KLEN (sizeof CKPT_KEY - 1)

static void put_le(ubuf *b, uint64_t v, int n) {
  uint8_t x[8];
  for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
  ubuf_put(b, x, (size_t)n);
}

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void wal_path(const lmdb_store *s, uint64_t no, char *out, size_t n) {
  snprintf(out, n, "%s/log-%016" PRIx64 ".unico", s->path, no);
}

static void fail_log(lmdb_store *s, const char *what, int err) {
  if (atomic_exchange(&s->failed, 1)) return;
  s->failed_rc = UNICO_EUNAVAILABLE;
  snprintf(s->failed_msg, sizeof s->failed_msg,
           "%s the log of %.80s failed (%s); writes are refused until the "
           "store is reopened",
           what, s->path, strerror(err));
}

/* The checkpointer failed with rc and message msg. */
static void fail_ckpt(lmdb_store *s, int rc, const char *msg) {
  if (atomic_exchange(&s->failed, 1)) return;
  s->failed_rc = rc;
  snprintf(s->failed_msg, sizeof s->failed_msg,
           "checkpointing the log failed: %.170s; writes are refused until "
           "the store is reopened",
           msg);
}

/* What the checkpoints of tables of `n` entries whose umt_cost() is
 * `cost` may take from the map, at most: that cost, a copy of every page
 * they change (LMDB copies on write, and frees the old copy only after the
 * commit: a leaf per entry and the branch pages, never more than the pages
 * in use), the free list's record of those copies, and a few pages. With
 * mt_lock. */
static size_t ckpt_estimate(const lmdb_store *s, size_t cost, size_t n) {
  size_t copies = n * s->psize + 2 * s->lm_branch;
  if (copies > s->lm_used) copies = s->lm_used;
  return cost + copies + copies / 256 + 16 * s->psize;
}

/* Log mode: whether a write adding `dn` entries of umt_cost() `dc` to the
 * active table may be acknowledged: LMDB's pages in use and what the
 * checkpoints of both tables will need must fit in ins_map_size, or in
 * max_map_size for a write that frees space. With mt_lock. */
static int log_admit(const lmdb_store *s, size_t dc, size_t dn, int frees,
                     size_t *need) {
  size_t cost = s->active->cost + dc, n = s->active->n + dn;
  if (s->frozen) {
    cost += s->frozen->cost;
    n += s->frozen->n;
  }
  *need = s->lm_used + ckpt_estimate(s, cost, n);
  return *need <= (frees ? s->max_map_size : s->ins_map_size);
}

/* LMDB's pages in use (its pages less the free ones) and its branch pages,
 * in bytes, as the newest commit left them. */
static int lm_measure(lmdb_store *s, size_t *used, size_t *branch,
                      ustore_err *e) {
  MDB_txn *txn;
  MDB_cursor *c = NULL;
  MDB_val k, v;
  MDB_stat st;
  MDB_envinfo info;
  size_t freep = 0;
  int rc = lm_begin(s, MDB_RDONLY, &txn, e);
  if (rc) return rc;
  mdb_env_info(s->env, &info);
  int mrc = mdb_stat(txn, s->dbi, &st);
  if (!mrc) mrc = mdb_cursor_open(txn, 0, &c); /* the free list */
  /* Pages the newest commit freed still belong to the snapshot before it,
   * which LMDB keeps: the next write cannot use them. */
  while (!mrc && (mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) == 0) {
    size_t id = 0; /* the freeing transaction */
    if (k.mv_size == sizeof id) memcpy(&id, k.mv_data, sizeof id);
    if (id < (size_t)info.me_last_txnid)
      freep += v.mv_size / sizeof(size_t) - 1; /* a count, page numbers */
  }
  if (c) mdb_cursor_close(c);
  lm_abort(s, txn);
  if (mrc && mrc != MDB_NOTFOUND) return map_rc(s, mrc, "measuring", e);
  size_t pages = (size_t)info.me_last_pgno + 1;
  *used = (pages > freep ? pages - freep : 0) * s->psize;
  *branch = (size_t)st.ms_branch_pages * s->psize;
  return UNICO_OK;
}

/* The current state of key across the active table, the frozen table and
 * LMDB (txn): 1 exists (version, value), 0 absent, -1 with *mrc an error.
 * The value pointer is valid while mt_lock and txn are held. */
static int log_lookup(lmdb_store *s, MDB_txn *txn, const void *key,
                      size_t klen, uint64_t *ver, const uint8_t **val,
                      size_t *vlen, int *mrc) {
  umt_entry *e = umt_find(s->active, key, klen);
  if (!e && s->frozen) e = umt_find(s->frozen, key, klen);
  if (e) {
    if (e->deleted) return 0;
    *ver = e->version;
    *val = e->kv + e->klen;
    *vlen = e->vlen;
    return 1;
  }
  MDB_val k = {klen, (void *)key}, v;
  int rc = mdb_get(txn, s->dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc == 0 && v.mv_size < VHDR) rc = MDB_CORRUPTED;
  if (rc) {
    *mrc = rc;
    return -1;
  }
  *ver = get_ver(&v);
  *val = (uint8_t *)v.mv_data + VHDR;
  *vlen = v.mv_size - VHDR;
  return 1;
}

/* Apply one request to the active table and append its log record to
 * s->wal_buf. Called with mt_lock held for writing. */
static int log_apply(lmdb_store *s, MDB_txn *txn, lm_req *r) {
  int mrc = 0, failed = 0;
  space_acc acc = {0, 0};
  size_t dc = 0, dn = 0, need;
  for (size_t i = 0; i < r->n; i++) {
    ustore_op *op = &r->ops[i];
    op->failed = 0;
    op->exists = 0;
    op->cur_version = 0;
    uint64_t ver = 0;
    const uint8_t *val = NULL;
    size_t vlen = 0;
    int ex = 0;
    if (op->expect == USTORE_ANY && op->action == USTORE_CHECK) continue;
    ex = log_lookup(s, txn, op->key, op->klen, &ver, &val, &vlen, &mrc);
    if (ex < 0) return map_rc(s, mrc, "reading", r->e);
    op->exists = ex;
    op->cur_version = ex ? ver : 0;
    space_add(&acc, op, ex, ex ? vlen : 0);
    if (op->action != USTORE_CHECK && (ex || op->action == USTORE_PUT)) {
      dc += umt_cost(s->psize, op->klen, op->vlen, op->action == USTORE_DEL);
      dn++;
    }
    int ok = 1;
    switch (op->expect) {
    case USTORE_ABSENT: ok = !ex; break;
    case USTORE_VERSION: ok = ex && ver == op->expect_version; break;
    case USTORE_PRESENT: ok = ex; break;
    default: break;
    }
    if (!ok) {
      op->failed = 1;
      ubuf_reset(&op->cur);
      if (ex) ubuf_put(&op->cur, val, vlen);
      if (!ubuf_ok(&op->cur)) return UNICO_ENOMEM;
      failed = 1;
    }
  }
  if (failed) return USTORE_NOT_APPLIED;
  if (!log_admit(s, dc, dn, space_frees(&acc), &need)) {
    full_err(s, need, r->e);
    return LM_FULL;
  }
  size_t at = s->wal_buf.len, nops = 0;
  put_le(&s->wal_buf, 0, 4); /* length and CRC, filled below */
  put_le(&s->wal_buf, 0, 4);
  put_le(&s->wal_buf, 0, 4); /* op count */
  for (size_t i = 0; i < r->n; i++) {
    ustore_op *op = &r->ops[i];
    if (op->action == USTORE_CHECK) continue;
    if (op->action == USTORE_DEL && !op->exists) continue; /* nothing to do */
    int del = op->action == USTORE_DEL;
    uint64_t ver = op->exists ? op->cur_version + 1 : 1;
    if (umt_set(s->active, op->key, op->klen, ver, del, op->val, op->vlen)) {
      fail_log(s, "memory ran out while writing to", ENOMEM);
      return UNICO_ENOMEM;
    }
    uint8_t act = del ? 2 : 1;
    ubuf_put(&s->wal_buf, &act, 1);
    put_le(&s->wal_buf, op->klen, 2);
    put_le(&s->wal_buf, del ? 0 : op->vlen, 4);
    put_le(&s->wal_buf, del ? 0 : ver, 8);
    ubuf_put(&s->wal_buf, op->key, op->klen);
    if (!del && op->vlen) ubuf_put(&s->wal_buf, op->val, op->vlen);
    nops++;
  }
  if (!ubuf_ok(&s->wal_buf)) {
    fail_log(s, "memory ran out while writing to", ENOMEM);
    return UNICO_ENOMEM;
  }
  uint8_t *p = s->wal_buf.p + at;
  size_t plen = s->wal_buf.len - at - 8;
  for (int j = 0; j < 4; j++) p[8 + j] = (uint8_t)(nops >> (8 * j));
  uint32_t crc = (uint32_t)crc32(0L, p + 8, (uInt)plen);
  for (int j = 0; j < 4; j++) p[j] = (uint8_t)(plen >> (8 * j));
  for (int j = 0; j < 4; j++) p[4 + j] = (uint8_t)(crc >> (8 * j));
  return UNICO_OK;
}

#define LOG_EXTEND ((uint64_t)8 << 20) /* zero-fill the log this far ahead */

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off) {
  while (n) {
    ssize_t w = pwrite(fd, p, n, (off_t)off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
    off += (uint64_t)w;
  }
  return 0;
}

/* Append the batch at wal_off. The file is zero-filled (and that synced)
 * ahead of the writes: overwriting written blocks lets fdatasync skip the
 * file system's journal, which an append would need for the new size
 * (measured here: 0.13 ms against 0.35 ms per sync). Zeros also end
 * replay cleanly. */
static int log_write(lmdb_store *s, const uint8_t *p, size_t n) {
  if (s->wal_off + n > s->wal_zeroed) {
    static const uint8_t zeros[65536];
    uint64_t to = s->wal_off + n + LOG_EXTEND;
    for (uint64_t at = s->wal_zeroed; at < to; at += sizeof zeros)
      if (pwrite_all(s->wal_fd, zeros, sizeof zeros, at)) return -1;
    if (s->sync_mode != SYNC_OFF && fsync(s->wal_fd)) return -1;
    s->wal_zeroed = to;
  }
  if (pwrite_all(s->wal_fd, p, n, s->wal_off)) return -1;
  s->wal_off += n;
  return 0;
}

/* The log-mode batch: every request against the tables, then one append.
 * Returns 1 when something was appended. */
static int log_batch_apply(lmdb_store *s, lm_req *batch, int *retry_of) {
  lm_req *r;
  size_t i = 0;
  int applied = 0;
  ubuf_reset(&s->wal_buf);
  for (r = batch; r; r = r->next, i++) {
    retry_of[i] = RETRY_NO;
    r->applied = 0;
    if (atomic_load(&s->failed)) {
      seterr(r->e, "%s", s->failed_msg);
      r->rc = s->failed_rc;
      continue;
    }
    MDB_txn *txn;
    pthread_rwlock_wrlock(&s->mt_lock);
    int rc = lm_begin(s, MDB_RDONLY, &txn, r->e);
    if (rc == UNICO_OK) {
      size_t before = s->wal_buf.len;
      rc = log_apply(s, txn, r);
      lm_abort(s, txn);
      if (rc == UNICO_OK) {
        r->applied = 1;
        applied++;
      } else if (rc == LM_FULL) {
        retry_of[i] = RETRY_FULL; /* after a checkpoint (lead()) */
        rc = UNICO_EFULL;
      } else if (rc != USTORE_NOT_APPLIED) {
        s->wal_buf.len = before;
      }
    }
    pthread_rwlock_unlock(&s->mt_lock);
    r->rc = rc;
  }
  if (!applied || !s->wal_buf.len) return 0;
  if (log_write(s, s->wal_buf.p, s->wal_buf.len)) {
    int err = errno;
    fail_log(s, "appending to", err);
    for (r = batch; r; r = r->next) {
      if (!r->applied) continue;
      seterr(r->e, "%s; the write may or may not have been applied: retry "
                   "it with the same operation id once reopened",
             s->failed_msg);
      r->rc = UNICO_EUNKNOWN;
    }
  }
  return 1;
}

/* Write a table into LMDB in one synced transaction that also records the
 * number of the log file it came from. */
static int checkpoint_table(lmdb_store *s, umt *t, uint64_t no,
                            ustore_err *e) {
  umt_entry **v = NULL;
  size_t n = 0;
  if (umt_collect(t, "", 0, &v, &n)) return UNICO_ENOMEM;
  int rc = UNICO_OK;
  for (int tries = 0;; tries++) {
    MDB_txn *txn;
    rc = lm_begin(s, 0, &txn, e);
    if (rc) break;
    int mrc = 0;
    for (size_t i = 0; i < n && !mrc; i++) {
      MDB_val k = {v[i]->klen, v[i]->kv}, val;
      if (v[i]->deleted) {
        mrc = mdb_del(txn, s->dbi, &k, NULL);
        if (mrc == MDB_NOTFOUND) mrc = 0;
        continue;
      }
      val.mv_size = v[i]->vlen + VHDR;
      mrc = lm_put_reserve(txn, s->dbi, &k, &val);
      if (mrc) break;
      uint8_t *p = val.mv_data;
      for (int j = 0; j < VHDR; j++) p[j] = (uint8_t)(v[i]->version >> (56 - 8 * j));
      memcpy(p + VHDR, v[i]->kv + v[i]->klen, v[i]->vlen);
    }
    if (!mrc) {
      uint8_t nb[8 + VHDR] = {0};
      for (int j = 0; j < 8; j++) nb[VHDR + j] = (uint8_t)(no >> (8 * j));
      nb[VHDR - 1] = 1;
      MDB_val k = {CKPT_KLEN, (void *)CKPT_KEY}, val = {sizeof nb, nb};
      mrc = mdb_put(txn, s->dbi, &k, &val, 0);
    }
    if (mrc) {
      lm_abort(s, txn);
    } else {
      mrc = lm_commit(s, txn);
      if (!mrc && s->sync_mode != SYNC_OFF) mrc = mdb_env_sync(s->env, 1);
      if (!mrc) break;
    }
    if (mrc == MDB_MAP_FULL && tries < 40) {
      size_t want = s->map_size * 2;
      if (want > s->max_map_size) want = s->max_map_size;
      if (want > s->map_size) {
        rc = lm_remap(s, want, 0, e);
        if (rc) break;
        continue;
      }
    }
    rc = map_rc(s, mrc, "checkpointing", e);
    break;
  }
  free(v);
  return rc;
}

/* After a checkpoint: one more (tiny) commit, so that the pages the
 * checkpoint freed, which the snapshot before it still held, can be used
 * by the next one (lm_measure() then counts them free). */
static int ckpt_settle(lmdb_store *s, ustore_err *e) {
  MDB_txn *txn;
  MDB_val k = {CKPT_KLEN, (void *)CKPT_KEY}, v;
  int rc = lm_begin(s, 0, &txn, e);
  if (rc) return rc;
  int mrc = mdb_get(txn, s->dbi, &k, &v);
  uint8_t copy[64];
  if (mrc == 0 && v.mv_size <= sizeof copy) {
    memcpy(copy, v.mv_data, v.mv_size);
    v.mv_data = copy;
    mrc = mdb_put(txn, s->dbi, &k, &v, 0);
  }
  if (mrc) {
    lm_abort(s, txn);
  } else {
    mrc = lm_commit(s, txn);
  }
  return mrc == MDB_NOTFOUND ? UNICO_OK : map_rc(s, mrc, "checkpointing", e);
}

/* Freeze the active table and start a new log file; the checkpointer takes
 * it from there. Called by the leader, between batches. */
static void log_rotate(lmdb_store *s) {
  char path[4200];
  wal_path(s, s->wal_no + 1, path, sizeof path);
  if (s->sync_mode != SYNC_OFF && fdatasync(s->wal_fd)) {
    fail_log(s, "syncing", errno);
    return;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0664);
  umt *t = malloc(sizeof *t);
  if (fd < 0 || !t || umt_init(t, s->psize)) {
    int err = fd < 0 ? errno : ENOMEM;
    if (fd >= 0) close(fd);
    free(t);
    fail_log(s, "starting a new file for", err);
    return;
  }
  pthread_rwlock_wrlock(&s->mt_lock);
  s->frozen = s->active;
  s->active = t;
  pthread_rwlock_unlock(&s->mt_lock);
  pthread_mutex_lock(&s->q_lock);
  s->old_fd = s->wal_fd;
  s->old_no = s->wal_no;
  s->wal_fd = fd;
  s->wal_no++;
  s->wal_off = s->wal_zeroed = 0;
  s->ckpt_busy = 1;
  pthread_cond_broadcast(&s->ckpt_cv);
  pthread_mutex_unlock(&s->q_lock);
}

/* Log mode: checkpoint both tables now, so that the estimate gives way to
 * what LMDB really holds. Called by the leader, between batches. Returns 0
 * when there was nothing to checkpoint; sets *rotated when it froze the
 * active table (whose log it synced). */
static int log_flush(lmdb_store *s, int *rotated) {
  pthread_mutex_lock(&s->q_lock);
  int had = s->ckpt_busy || s->active->n; /* the leader alone adds to it */
  while (s->ckpt_busy && !atomic_load(&s->failed))
    pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
  pthread_mutex_unlock(&s->q_lock);
  if (s->active->n && !atomic_load(&s->failed)) {
    log_rotate(s);
    if (!atomic_load(&s->failed)) *rotated = 1;
    pthread_mutex_lock(&s->q_lock);
    while (s->ckpt_busy && !atomic_load(&s->failed))
      pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
    pthread_mutex_unlock(&s->q_lock);
  }
  return had;
}

/* The checkpointer thread: writes each frozen table into LMDB, then drops
 * it and its log file. */
static void *ckpt_main(void *arg) {
  lmdb_store *s = arg;
  pthread_mutex_lock(&s->q_lock);
  for (;;) {
    while (!s->ckpt_busy && !s->ckpt_stop)
      pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
    if (!s->ckpt_busy) break;
    pthread_mutex_unlock(&s->q_lock);
    ustore_err e = {{0}};
    int rc = checkpoint_table(s, s->frozen, s->old_no, &e);
    size_t used = 0, branch = 0;
    if (rc == UNICO_OK) { /* best effort: a map too full for it is no error */
      ustore_err se = {{0}};
      ckpt_settle(s, &se);
    }
    if (rc == UNICO_OK) rc = lm_measure(s, &used, &branch, &e);
    if (rc == UNICO_OK) {
      char path[4200];
      pthread_rwlock_wrlock(&s->mt_lock);
      umt_free(s->frozen);
      free(s->frozen);
      s->frozen = NULL;
      s->lm_used = used;
      s->lm_branch = branch;
      pthread_rwlock_unlock(&s->mt_lock);
      pthread_mutex_lock(&s->q_lock);
      while (s->syncs_on[s->old_no & 1]) { /* not under a sync */
        pthread_mutex_unlock(&s->q_lock);
        usleep(100);
        pthread_mutex_lock(&s->q_lock);
      }
      close(s->old_fd);
      s->old_fd = -1;
      pthread_mutex_unlock(&s->q_lock);
      wal_path(s, s->old_no, path, sizeof path);
      unlink(path);
    } else {
      fail_ckpt(s, rc, e.msg); /* the frozen table stays readable */
    }
    pthread_mutex_lock(&s->q_lock);
    s->ckpt_busy = 0;
    s->n_checkpoints++;
    pthread_cond_broadcast(&s->ckpt_cv);
  }
  pthread_mutex_unlock(&s->q_lock);
  return NULL;
}

/* Replay log files newer than the last checkpoint into LMDB, then delete
 * every log file. Needs the exclusive lock. Sets s->wal_no to the number
 * after the newest file seen. */
static int log_recover(lmdb_store *s, ustore_err *e) {
  uint64_t ckpt = 0, newest = 0;
  MDB_txn *txn;
  int rc = lm_begin(s, MDB_RDONLY, &txn, e);
  if (rc) return rc;
  MDB_val k = {CKPT_KLEN, (void *)CKPT_KEY}, v;
  if (mdb_get(txn, s->dbi, &k, &v) == 0 && v.mv_size == VHDR + 8)
    ckpt = get_le((uint8_t *)v.mv_data + VHDR, 8);
  lm_abort(s, txn);
  DIR *d = opendir(s->path);
  if (!d) {
    seterr(e, "cannot list %s: %s", s->path, strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  uint64_t *nos = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    uint64_t no;
    char tail[16];
    if (sscanf(de->d_name, "log-%16" SCNx64 ".%15s", &no, tail) != 2 ||
        strcmp(tail, "unico") != 0)
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      uint64_t *nn = realloc(nos, cap * sizeof *nn);
      if (!nn) {
        closedir(d);
        free(nos);
        return UNICO_ENOMEM;
      }
      nos = nn;
    }
    nos[n++] = no;
    if (no > newest) newest = no;
  }
  closedir(d);
  for (size_t i = 1; i < n; i++) /* few files: insertion sort */
    for (size_t j = i; j > 0 && nos[j - 1] > nos[j]; j--) {
      uint64_t t = nos[j];
      nos[j] = nos[j - 1];
      nos[j - 1] = t;
    }
  for (size_t i = 0; i < n && rc == UNICO_OK; i++) {
    if (nos[i] <= ckpt) continue;
    char path[4200];
    wal_path(s, nos[i], path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
      seterr(e, "cannot read the log file %s: %s", path, strerror(errno));
      rc = UNICO_EUNAVAILABLE;
      break;
    }
    umt t;
    if (umt_init(&t, s->psize)) {
      fclose(f);
      rc = UNICO_ENOMEM;
      break;
    }
    /* Later records of a key replace earlier ones, so the table ends with
     * the state the file leads to; versions are absolute. */
    ubuf rec = UBUF_INIT;
    for (;;) {
      uint8_t hdr[8];
      if (fread(hdr, 1, 8, f) != 8) break;
      uint32_t plen = (uint32_t)get_le(hdr, 4), crc = (uint32_t)get_le(hdr + 4, 4);
      if (plen < 4 || plen > (1u << 30)) break; /* zeros: the end */
      ubuf_reset(&rec);
      if (ubuf_reserve(&rec, plen)) {
        rc = UNICO_ENOMEM;
        break;
      }
      if (fread(rec.p, 1, plen, f) != plen) break; /* torn tail */
      rec.len = plen;
      if ((uint32_t)crc32(0L, rec.p, plen) != crc) break;
      const uint8_t *p = rec.p, *end = rec.p + plen;
      uint32_t nops = (uint32_t)get_le(p, 4);
      p += 4;
      for (uint32_t j = 0; j < nops && rc == UNICO_OK; j++) {
        if (end - p < 15) break;
        int act = p[0];
        size_t kl = (size_t)get_le(p + 1, 2), vl = (size_t)get_le(p + 3, 4);
        uint64_t ver = get_le(p + 7, 8);
        p += 15;
        if ((size_t)(end - p) < kl + vl) break;
        if (umt_set(&t, p, kl, ver, act == 2, p + kl, vl)) rc = UNICO_ENOMEM;
        p += kl + vl;
      }
    }
    ubuf_free(&rec);
    fclose(f);
    if (rc == UNICO_OK) rc = checkpoint_table(s, &t, nos[i], e);
    if (rc == UNICO_EFULL) { /* a log an older version let grow too large */
      char url[4400], max[32];
      size_t need = 0;
      if (lm_measure(s, &s->lm_used, &s->lm_branch, e) == UNICO_OK)
        need = s->lm_used + ckpt_estimate(s, t.cost, t.n);
      need += reserve_of(need) + need / 4;
      fmt_size(s->max_map_size, max, sizeof max);
      advice_url(s, suggest_max(s, need), url, sizeof url);
      seterr(e, "the log holds writes that do not fit in max_map_size=%s "
                "(left by a version that did not count them); nothing is "
                "lost: open the store as %s to replay it",
             max, url);
    }
    umt_free(&t);
  }
  if (rc == UNICO_OK) {
    for (size_t i = 0; i < n; i++) {
      char path[4200];
      wal_path(s, nos[i], path, sizeof path);
      unlink(path);
    }
  }
  free(nos);
  s->wal_no = (newest > ckpt ? newest : ckpt) + 1;
  return rc;
}

/* Start log mode: the tables, the first log file, the checkpointer. */
static int log_start(lmdb_store *s, ustore_err *e) {
  char path[4200];
  if (pthread_rwlock_init(&s->mt_lock, NULL)) return UNICO_ENOMEM;
  s->mt_init = 1;
  s->active = malloc(sizeof *s->active);
  if (!s->active || umt_init(s->active, s->psize)) {
    free(s->active);
    s->active = NULL;
    return UNICO_ENOMEM;
  }
  int rc = lm_measure(s, &s->lm_used, &s->lm_branch, e);
  if (rc) return rc;
  wal_path(s, s->wal_no, path, sizeof path);
  s->wal_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0664);
  if (s->wal_fd < 0) {
    seterr(e, "cannot create the log file %s: %s", path, strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  if (pthread_cond_init(&s->ckpt_cv, NULL)) return UNICO_ENOMEM;
  if (pthread_create(&s->ckpt_thread, NULL, ckpt_main, s)) return UNICO_ENOMEM;
  s->ckpt_started = 1;
  return UNICO_OK;
}

/* Stop log mode: end the checkpointer, write both tables into LMDB, and
 * delete the log files. What cannot be checkpointed stays in the log. */
static void log_stop(lmdb_store *s) {
  if (s->ckpt_started) {
    pthread_mutex_lock(&s->q_lock);
    s->ckpt_stop = 1;
    pthread_cond_broadcast(&s->ckpt_cv);
    pthread_mutex_unlock(&s->q_lock);
    pthread_join(s->ckpt_thread, NULL);
    pthread_cond_destroy(&s->ckpt_cv);
  }
  ustore_err e = {{0}};
  char path[4200];
  /* In order: a checkpoint records its file's number, and replay skips the
   * files up to it, so the active table may go only after the frozen one. */
  int ok = !atomic_load(&s->failed);
  if (s->frozen && ok) {
    ok = checkpoint_table(s, s->frozen, s->old_no, &e) == UNICO_OK;
    if (ok) {
      wal_path(s, s->old_no, path, sizeof path);
      unlink(path);
    }
  }
  if (s->old_fd >= 0) close(s->old_fd);
  if (ok && s->active && s->wal_fd >= 0 &&
      (s->active->n == 0 ||
       checkpoint_table(s, s->active, s->wal_no, &e) == UNICO_OK)) {
    wal_path(s, s->wal_no, path, sizeof path);
    unlink(path);
  }
  if (s->wal_fd >= 0) close(s->wal_fd);
  for (umt **t = &s->active; t <= &s->frozen; t++) {
    if (*t) umt_free(*t);
    free(*t);
    *t = NULL;
  }
  ubuf_free(&s->wal_buf);
  if (s->mt_init) pthread_rwlock_destroy(&s->mt_lock);
}

/* A caller waiting in make_durable(): on its own condition variable, so a
 * sync that ends wakes exactly the callers it covers. */
typedef struct dwaiter {
  uint64_t seq;
  pthread_cond_t cv;
  struct dwaiter *next;
} dwaiter;

/* After a sync: wake the waiters now durable, and one of the others to
 * start the next sync if a slot is free. With q_lock. */
static void wake_waiters(lmdb_store *s) {
  dwaiter **pp = &s->dwaiters, *w;
  int elected = s->syncing >= SYNCS_MAX;
  while ((w = *pp)) {
    if (w->seq <= s->durable) {
      *pp = w->next;
      w->next = w; /* marks it off the list */
      pthread_cond_signal(&w->cv);
    } else {
      if (!elected && s->sync_target < w->seq) {
        pthread_cond_signal(&w->cv);
        elected = 1;
      }
      pp = &w->next;
    }
  }
}

/* Take w off the waiters' list if it is on it. With q_lock. */
static void unlist(lmdb_store *s, dwaiter *w) {
  if (w->next == w) return;
  for (dwaiter **pp = &s->dwaiters; *pp; pp = &(*pp)->next)
    if (*pp == w) {
      *pp = w->next;
      break;
    }
  w->next = w;
}

/* Make every batch up to `seq` durable. At most SYNCS_MAX syncs run at a
 * time (two in flight overlap well on the disks measured); each covers every
 * commit made before it starts. A caller a running sync covers waits for
 * it; the others start one when a slot is free. A plain-mode commit's own
 * data sync also covers the meta pages of the commits before it (lead()). */
static int make_durable(lmdb_store *s, uint64_t seq, ustore_err *e) {
  int rc = 0;
  dwaiter w;
  w.seq = seq;
  w.next = &w; /* not on the list */
  int have_cv = 0;
  pthread_mutex_lock(&s->q_lock);
  while (s->durable < seq && !rc) {
    if (s->syncing < SYNCS_MAX && s->sync_target < seq) {
      unlist(s, &w); /* this caller syncs */
      s->syncing++;
      uint64_t target = s->committed;
      if (s->sync_target < target) s->sync_target = target;
      int fd = s->wal_fd; /* log mode: the file the batch went to (or later) */
      uint64_t no = s->wal_no;
      s->syncs_on[no & 1]++;
      pthread_mutex_unlock(&s->q_lock);
      if (s->wal) {
        rc = fdatasync(fd) ? errno : 0;
        if (rc) fail_log(s, "syncing", rc);
      } else {
        rc = mdb_env_sync(s->env, 1);
      }
      pthread_mutex_lock(&s->q_lock);
      s->n_syncs++;
      s->syncing--;
      s->syncs_on[no & 1]--;
      if (rc == 0 && s->durable < target) s->durable = target;
      if (rc) s->sync_target = s->durable; /* let others try again */
      wake_waiters(s);
      continue;
    }
    if (!have_cv) {
      if (pthread_cond_init(&w.cv, NULL)) {
        rc = ENOMEM;
        break;
      }
      have_cv = 1;
    }
    if (w.next == &w) { /* join the list */
      w.next = s->dwaiters;
      s->dwaiters = &w;
    }
    pthread_cond_wait(&w.cv, &s->q_lock);
  }
  unlist(s, &w);
  pthread_mutex_unlock(&s->q_lock);
  if (have_cv) pthread_cond_destroy(&w.cv);
  if (rc) {
    seterr(e, "syncing %s failed (%s); the write may or may not have been "
              "applied: retry it with the same operation id",
           s->path, s->wal ? strerror(rc) : mdb_strerror(rc));
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

  int wrote = s->wal ? log_batch_apply(s, batch, retry_of)
                     : batch_apply(s, batch, retry_of);
  /* Log mode: freeze a full table (its log synced first, so the batches in
   * it are durable), or wait for the checkpointer if it fell far behind. */
  int rotated = 0;
  /* A table's size: its keys and values plus ~100 bytes per entry; and the
   * log file counts too, since rewriting the same keys grows the log, not
   * the table (replay time and disk stay bounded). */
  if (s->wal && !atomic_load(&s->failed) &&
      (s->active->bytes + 100 * s->active->n >= s->ckpt_bytes ||
       s->wal_off >= 2 * (uint64_t)s->ckpt_bytes)) {
    pthread_mutex_lock(&s->q_lock);
    while (s->ckpt_busy && !atomic_load(&s->failed) &&
           (s->active->bytes + 100 * s->active->n >= 4 * s->ckpt_bytes ||
            s->wal_off >= 8 * (uint64_t)s->ckpt_bytes))
      pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
    int busy = s->ckpt_busy;
    pthread_mutex_unlock(&s->q_lock);
    if (!busy) {
      log_rotate(s);
      rotated = !atomic_load(&s->failed);
    }
  }
  int full = 0;
  size_t i = 0;
  for (r = batch; r; r = r->next, i++) full |= retry_of[i] == RETRY_FULL;
  if (s->reserve_on) { /* close the reserve again (see "space") */
    ustore_err ge = {{0}};
    set_reserve(s, 0);
    lm_remap(s, s->ins_map_size, 1, &ge);
  }
  if (full && s->wal) {
    /* The estimate refused them: checkpoint, then try once more. */
    int again = log_flush(s, &rotated);
    i = 0;
    for (r = batch; r; r = r->next, i++) {
      if (retry_of[i] != RETRY_FULL || (again && r->full_tries++ == 0))
        continue;
      retry_of[i] = RETRY_NO; /* r->rc and *r->e say full */
    }
  } else if (full) {
    /* Grow the map (no transaction of ours runs now); at its limit, give
     * writes found full for the first time one batch with the reserve
     * open, where only those that free space run. */
    ustore_err ge = {{0}};
    size_t want = s->map_size * 2;
    if (want > s->ins_map_size) want = s->ins_map_size;
    int grown = want > s->map_size && lm_remap(s, want, 0, &ge) == UNICO_OK;
    int reserve = 0;
    i = 0;
    for (r = batch; r && !grown; r = r->next, i++)
      reserve |= retry_of[i] == RETRY_FULL && r->full_tries == 0;
    if (reserve) set_reserve(s, 1);
    if (reserve && lm_remap(s, s->max_map_size, 0, &ge) != UNICO_OK) {
      set_reserve(s, 0);
      reserve = 0;
    }
    i = 0;
    for (r = batch; r; r = r->next, i++) {
      if (retry_of[i] != RETRY_FULL || grown ||
          (reserve && r->full_tries++ == 0))
        continue;
      retry_of[i] = RETRY_NO;
      r->rc = map_rc(s, MDB_MAP_FULL, "writing", r->e);
    }
  }

  pthread_mutex_lock(&s->q_lock);
  if (wrote) {
    s->committed++;
    /* this commit's data sync made the earlier meta pages durable */
    if (!s->wal && s->sync_mode == SYNC_ON && s->durable < s->committed - 1)
      s->durable = s->committed - 1;
  }
  if (rotated) s->durable = s->committed; /* log_rotate synced the log */
  if (s->dwaiters) wake_waiters(s);
  s->n_batches++;
  s->n_requests += n;
  uint64_t seq = s->committed; /* the state every request of the batch saw */
  /* Requests given back go first in the queue, in their order. */
  lm_req *keep = NULL, **kt = &keep, *back = NULL, *back_last = NULL, *nx;
  i = 0;
  for (r = batch; r; r = nx, i++) {
    nx = r->next;
    r->next = NULL;
    if (retry_of[i] != RETRY_NO && retry_of[i] != RETRY_LATER &&
        ++r->tries > 40) {
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
  /* Deferred requests are answered now; their callers watch for seq. */
  int need_sync = s->sync_mode == SYNC_ON || (s->wal && s->sync_mode == SYNC_DATA);
  for (lm_req **pp = &keep; need_sync && (r = *pp);) {
    if (r->deferred && (r->rc == UNICO_OK || r->rc == USTORE_NOT_APPLIED)) {
      *pp = r->next; /* read before done: r may be gone after the unlock */
      r->seq = seq;
      r->done = 1;
      pthread_cond_signal(&r->cv);
    } else {
      pp = &r->next;
    }
  }
  /* The writer's role passes to the next request while this batch syncs. */
  s->leading = 0;
  if (s->q_head) pthread_cond_signal(&s->q_head->cv);
  pthread_mutex_unlock(&s->q_lock);

  if (keep && need_sync) {
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
  r.deferred = ustore_deferring();
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
  if (r.seq) ustore_defer_note(r.seq);
  return r.rc;
}

/* ---- deferred durability ---- */

/* Call a watch back with the outcome of the sync that was to cover it. */
static void watch_fire(ustore_watch *w, int rc, const ustore_err *se) {
  w->next = NULL;
  w->cb(w, rc ? UNICO_EUNKNOWN : UNICO_OK, rc ? se->msg : NULL);
}

/* The syncer: while watches wait, make the newest commit they need durable
 * (one sync covers every commit before it), then call back the watches it
 * covers. On failure the covered watches hear UNICO_EUNKNOWN. At stop it
 * ends once no watch is left. */
static void *syncer_main(void *arg) {
  lmdb_store *s = arg;
  pthread_mutex_lock(&s->q_lock);
  for (;;) {
    while (!s->watches && !s->syncer_stop)
      pthread_cond_wait(&s->watch_cv, &s->q_lock);
    if (!s->watches) break;
    uint64_t target = 0;
    for (ustore_watch *w = s->watches; w; w = w->next)
      if (w->seq > target) target = w->seq;
    pthread_mutex_unlock(&s->q_lock);
    ustore_err se = {{0}};
    int rc = make_durable(s, target, &se);
    pthread_mutex_lock(&s->q_lock);
    ustore_watch *fire = NULL, **pp = &s->watches, *w;
    while ((w = *pp)) {
      if (w->seq <= s->durable || (rc && w->seq <= target)) {
        *pp = w->next;
        w->next = fire;
        fire = w;
      } else {
        pp = &w->next;
      }
    }
    pthread_mutex_unlock(&s->q_lock);
    while ((w = fire)) {
      fire = w->next;
      watch_fire(w, rc, &se);
    }
    pthread_mutex_lock(&s->q_lock);
  }
  pthread_mutex_unlock(&s->q_lock);
  return NULL;
}

static int lm_watch(ustore *base, ustore_watch *w) {
  lmdb_store *s = (lmdb_store *)base;
  pthread_mutex_lock(&s->q_lock);
  if (w->seq <= s->durable) {
    pthread_mutex_unlock(&s->q_lock);
    return 0;
  }
  if (!s->syncer_started && !s->syncer_stop &&
      pthread_create(&s->syncer, NULL, syncer_main, s) == 0)
    s->syncer_started = 1;
  if (!s->syncer_started) { /* no thread: sync here, then call back */
    pthread_mutex_unlock(&s->q_lock);
    ustore_err se = {{0}};
    watch_fire(w, make_durable(s, w->seq, &se), &se);
    return 1;
  }
  w->next = s->watches;
  s->watches = w;
  pthread_cond_signal(&s->watch_cv);
  pthread_mutex_unlock(&s->q_lock);
  return 1;
}

void ustore_lmdb_stats_get(ustore *base, ustore_lmdb_stats *out) {
  lmdb_store *s = (lmdb_store *)base;
  memset(out, 0, sizeof *out);
  if (!s || strcmp(s->base.vt->name, "lmdb") != 0) return;
  pthread_mutex_lock(&s->q_lock);
  out->requests = s->n_requests;
  out->batches = s->n_batches;
  out->syncs = s->n_syncs;
  out->checkpoints = s->n_checkpoints;
  out->committed = s->committed;
  out->durable = s->durable;
  pthread_mutex_unlock(&s->q_lock);
}

static int lm_cas(ustore *base, ustore_op *op, ustore_err *e) {
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
  if (umt_collect(s->active, prefix, plen, &a, &na)) goto out;
  if (s->frozen && umt_collect(s->frozen, prefix, plen, &f, &nf)) goto out;
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

static int lm_scan(ustore *base, const void *prefix, size_t plen,
                   const void *after, size_t alen, ustore_scan_cb cb,
                   void *ctx, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  MDB_txn *txn;
  MDB_cursor *cur = NULL;
  mem_snap m;
  size_t mi = 0;
  int rc;
  memset(&m, 0, sizeof m);
  if (s->wal) {
    /* The tables' entries and LMDB's snapshot, taken under one lock, form
     * one consistent view; the scan merges them, the tables winning. */
    pthread_rwlock_rdlock(&s->mt_lock);
    if (mem_snapshot(s, prefix, plen, after, alen, &m)) {
      pthread_rwlock_unlock(&s->mt_lock);
      ubuf_free(&m.blob);
      free(m.it);
      return UNICO_ENOMEM;
    }
    rc = lm_begin(s, MDB_RDONLY, &txn, e);
    pthread_rwlock_unlock(&s->mt_lock);
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
                 memcmp(k.mv_data, prefix, plen) == 0;
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
      if (k.mv_size && ((uint8_t *)k.mv_data)[0] != 0) /* not ours */
        r = cb(ctx, k.mv_data, k.mv_size, (uint8_t *)v.mv_data + VHDR,
               v.mv_size - VHDR, get_ver(&v));
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
  if (mrc && mrc != MDB_NOTFOUND) rc = map_rc(s, mrc, "scanning", e);
out:
  if (cur) mdb_cursor_close(cur);
  lm_abort(s, txn);
  ubuf_free(&m.blob);
  free(m.it);
  return rc;
}

static void lm_free(lmdb_store *s) {
  if (s->syncer_started) { /* it calls back every watch left first */
    pthread_mutex_lock(&s->q_lock);
    s->syncer_stop = 1;
    pthread_cond_signal(&s->watch_cv);
    pthread_mutex_unlock(&s->q_lock);
    pthread_join(s->syncer, NULL);
  }
  if (s->watch_cv_init) pthread_cond_destroy(&s->watch_cv);
  if (s->wal) log_stop(s);
  if (s->env) mdb_env_close(s->env);
  if (s->lock_fd >= 0) close(s->lock_fd); /* releases the flock */
  if (s->q_init) {
    pthread_mutex_destroy(&s->q_lock);
  }
  if (s->resize_init) pthread_rwlock_destroy(&s->resize);
  free(s->query);
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
    lm_scan, lm_close, 511 /* LMDB's default MDB_MAXKEYSIZE */, 0,
    NULL, NULL, NULL, NULL, NULL, lm_watch};

/* The store's lock: any process takes it exclusive first and replays what
 * a log-mode process left behind; log mode keeps it exclusive, plain mode
 * turns it shared. Plain processes share the store; a log-mode process
 * owns it alone (its recent writes live in its memory). */
static int take_lock(lmdb_store *s, int wal, ustore_err *e) {
  char path[4200];
  snprintf(path, sizeof path, "%s/unico.lock", s->path);
  s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (s->lock_fd < 0) {
    seterr(e, "cannot open %s: %s", path, strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  int excl = 0;
  for (int i = 0; i < 2000; i++) { /* up to ~2 s while others open */
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0) {
      excl = 1;
      break;
    }
    if (!wal && flock(s->lock_fd, LOCK_SH | LOCK_NB) == 0) break;
    usleep(1000);
  }
  if (!excl && wal) {
    seterr(e, "the store at %s is in use by another process; log mode "
              "(wal=on) needs it alone",
           s->path);
    return UNICO_EBUSY;
  }
  if (!excl && flock(s->lock_fd, LOCK_SH | LOCK_NB) != 0) {
    seterr(e, "the store at %s is owned by a process in log mode (wal=on); "
              "reach it through that process (unico serve) or stop it",
           s->path);
    return UNICO_EBUSY;
  }
  if (excl) {
    int rc = log_recover(s, e);
    if (rc) return rc;
    if (!wal && flock(s->lock_fd, LOCK_SH) != 0) {
      seterr(e, "cannot share the lock of %s: %s", s->path, strerror(errno));
      return UNICO_EUNAVAILABLE;
    }
  }
  return UNICO_OK;
}

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

/* The options of an open (docs/cli.md), with their defaults. */
typedef struct lm_config {
  size_t map_size, max_map; /* the map to start with, and its limit */
  int sync_mode;            /* SYNC_* */
  int wal, txn_off;
  size_t wal_size;          /* log mode: freeze the active table past this */
} lm_config;

static const char *const sync_names[] = {"on", "data", "off", NULL};
static const char *const on_off[] = {"off", "on", NULL};

/* The options as NAME=VALUE&..., malloc'd (NULL: out of memory). */
static char *join_options(const ustore_opts *o) {
  size_t n = 1;
  for (size_t i = 0; i < o->n; i++)
    n += strlen(o->v[i].name) + strlen(o->v[i].value) + 2;
  char *q = malloc(n), *at = q;
  if (!q) return NULL;
  *q = 0;
  for (size_t i = 0; i < o->n; i++)
    at += sprintf(at, "%s%s=%s", i ? "&" : "", o->v[i].name, o->v[i].value);
  return q;
}

static int read_options(const ustore_opts *o, lm_config *c, ustore_err *e) {
  int rc, txn = 1;
  size_t max = 0, map = 0;
  memset(c, 0, sizeof *c);
  c->map_size = (size_t)1 << 30; /* 1 GiB to start */
  c->max_map = (size_t)1 << 40;  /* grows up to 1 TiB */
  c->sync_mode = SYNC_ON;
  c->wal_size = CKPT_BYTES;
  if ((rc = ustore_opt_size(o, "wal_size", 4096, &c->wal_size, e)) ||
      (rc = ustore_opt_size(o, "map_size", (size_t)1 << 20, &map, e)) ||
      (rc = ustore_opt_size(o, "max_map_size", (size_t)1 << 20, &max, e)) ||
      (rc = ustore_opt_word(o, "wal", on_off, &c->wal, e)) ||
      (rc = ustore_opt_word(o, "txn", on_off, &txn, e)) ||
      (rc = ustore_opt_word(o, "sync", sync_names, &c->sync_mode, e)))
    return rc;
  c->txn_off = !txn;
  if (map) c->map_size = map;
  if (max) c->max_map = max;
  /* max_map_size alone below the default start: start at the limit. */
  if (c->map_size > c->max_map && max && !map) c->map_size = c->max_map;
  if (c->map_size > c->max_map) {
    if (max) {
      seterr(e, "lmdb store: map_size is larger than max_map_size");
      return UNICO_EINVAL;
    }
    c->max_map = c->map_size;
  }
  return UNICO_OK;
}

/* Whether an open asking for these options may share r, opened before:
 * 0, or 1 with e naming the first option that differs. Options of the
 * environment cannot change while it is open, and handing back r as it is
 * would ignore them silently. */
static int reopen_differs(const lmdb_store *r, int sync_mode, int wal,
                          size_t map, size_t max, size_t wal_size,
                          ustore_err *e) {
  char was[64], now[64];
  const char *name = NULL;
  if (r->opt_wal != wal) {
    name = "wal";
    snprintf(was, sizeof was, "%s", r->opt_wal ? "on" : "off");
    snprintf(now, sizeof now, "%s", wal ? "on" : "off");
  } else if (r->opt_sync != sync_mode) {
    name = "sync";
    snprintf(was, sizeof was, "%s", sync_names[r->opt_sync]);
    snprintf(now, sizeof now, "%s", sync_names[sync_mode]);
  } else if (r->opt_max != max || r->opt_map != map ||
             r->opt_wal_size != wal_size) {
    name = r->opt_max != max   ? "max_map_size"
           : r->opt_map != map ? "map_size"
                               : "wal_size";
    size_t a = r->opt_max != max ? r->opt_max
               : r->opt_map != map ? r->opt_map : r->opt_wal_size;
    size_t b = r->opt_max != max ? max : r->opt_map != map ? map : wal_size;
    fmt_size(a, was, sizeof was);
    fmt_size(b, now, sizeof now);
  }
  if (!name) return 0;
  seterr(e, "the store at %s is already open in this process with %s=%s; "
            "it cannot be opened again with %s=%s (open it with the same "
            "options, or close it first)",
         r->path, name, was, name, now);
  return 1;
}

int ustore_lmdb_open(ustore **out, const char *path, const ustore_opts *opts,
                     ustore_err *e) {
  int rc = UNICO_OK, mrc;
  unsigned envflags = MDB_NOTLS;
  size_t map_size, max_map;
  int sync_mode, wal, txn_off;
  size_t ckpt_bytes;
  lm_config cfg;
  lmdb_store *s = NULL;
  *out = NULL;

  if (!path || !*path) {
    seterr(e, "lmdb store: empty path");
    return UNICO_EINVAL;
  }
  if (strlen(path) >= sizeof s->path) {
    seterr(e, "lmdb store: path too long");
    return UNICO_EINVAL;
  }
  if ((rc = read_options(opts, &cfg, e)) != UNICO_OK) goto leave;
  map_size = cfg.map_size;
  max_map = cfg.max_map;
  sync_mode = cfg.sync_mode;
  wal = cfg.wal;
  txn_off = cfg.txn_off;
  ckpt_bytes = cfg.wal_size;

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
      if (reopen_differs(r, sync_mode, wal, map_size, max_map, ckpt_bytes,
                         e)) {
        pthread_mutex_unlock(&registry_lock);
        rc = UNICO_EINVAL;
        goto leave;
      }
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
  s->lock_fd = s->wal_fd = s->old_fd = -1;
  s->ckpt_bytes = ckpt_bytes;
  s->opt_sync = sync_mode;
  s->opt_wal = wal;
  s->opt_map = map_size;
  s->opt_max = max_map;
  s->opt_wal_size = ckpt_bytes;
  s->base.vt = &lmdb_vtab;
  snprintf(s->path, sizeof s->path, "%s", path);
  if (!(s->query = join_options(opts))) {
    pthread_mutex_unlock(&registry_lock);
    rc = UNICO_ENOMEM;
    goto leave;
  }
  s->max_map_size = max_map;
  s->ins_map_size = max_map - reserve_of(max_map);
  if (map_size > s->ins_map_size) map_size = s->ins_map_size;
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
  s->q_init = 1;
  if (pthread_cond_init(&s->watch_cv, NULL)) {
    pthread_mutex_unlock(&registry_lock);
    rc = UNICO_ENOMEM;
    goto leave;
  }
  s->watch_cv_init = 1;
  s->sync_mode = sync_mode;
  if ((mrc = mdb_env_create(&s->env))) goto mdb_fail;
  if ((mrc = mdb_env_set_maxreaders(s->env, 1022))) goto mdb_fail;
  if ((mrc = mdb_env_set_mapsize(s->env, map_size))) goto mdb_fail;
  if ((mrc = mdb_env_open(s->env, path, envflags, 0664))) goto mdb_fail;
  {
    /* A larger file made by an earlier, larger map: adopt its size. */
    /* (LMDB keeps the map at least as large as the pages in use: when
     * they are more than ins_map_size, writes that add data are full and
     * the reserve comes on top.) */
    MDB_envinfo info;
    MDB_stat pst;
    mdb_env_info(s->env, &info);
    mdb_env_stat(s->env, &pst);
    s->psize = pst.ms_psize;
    s->map_size = info.me_mapsize;
    if (s->map_size > s->ins_map_size) {
      s->ins_map_size = s->map_size;
      if (s->max_map_size < s->map_size + reserve_of(s->map_size))
        s->max_map_size = s->map_size + reserve_of(s->map_size);
    }
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
  if ((rc = take_lock(s, wal, e)) != UNICO_OK) {
    pthread_mutex_unlock(&registry_lock);
    goto leave;
  }
  if (wal) {
    s->wal = 1;
    if ((rc = log_start(s, e)) != UNICO_OK) {
      pthread_mutex_unlock(&registry_lock);
      goto leave;
    }
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
  /* txn=off: the same store seen through compare-and-set only, so the
   * claims protocol runs on it (tests and simulations). */
  if (rc == UNICO_OK && txn_off) rc = ustore_cas_only(out, e);
  return rc;
}
