/* commit.c - group commit: requests queue, a leader applies a batch in one
 * write transaction (or one log append) and syncs it while the next batch
 * runs (see lmdb_int.h). */
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
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "store/lmdb/lmdb_int.h"

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
  int rc = lm_apply_ops(s, child, r->ops, r->n, s->reserve_on, mrc);
  if (rc == UNICO_OK) {
    *mrc = mdb_txn_commit(child); /* a failed child commit aborts it */
    return *mrc ? -1 : UNICO_OK;
  }
  mdb_txn_abort(child);
  return rc;
}


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
  return lm_map_rc(s, mrc, "writing", e);
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
    if (lm_refuse(s, r)) continue;
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
  if (mrc == 0) {
    lm_nospace_clear(s, NOSPACE_PLAIN);
    return 1;
  }
  if (lm_space_err(mrc)) lm_nospace_set(s, NOSPACE_PLAIN, "committing to", mrc);
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

/* A caller waiting in lm_make_durable(): on its own condition variable, so a
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
/* One sync of the log (log mode) or of LMDB, outside q_lock: 0 or an
 * error (an errno, an LMDB code). */
static int sync_once(lmdb_store *s, int fd) {
  int rc = 0;
  if (!s->wal) return mdb_env_sync(s->env, 1);
  if (s->par && ustore_lmdb_hook) /* (tests: stall it, or fail it) */
    rc = ustore_lmdb_hook(&s->base, USTORE_LMDB_HOOK_SYNC);
  if (!rc) rc = fdatasync(fd) ? errno : 0;
  if (rc) lm_fail_log(s, "syncing", rc);
  return rc;
}

/* Parallel writers: whether seq can no longer become durable (with
 * q_lock): a sync failed (*rc its error), or the append of the records
 * up to seq failed (*lost). */
static int par_doomed(lmdb_store *s, uint64_t seq, int *rc, int *lost) {
  if (!s->par) return 0;
  if (seq > s->committed && seq <= s->lost_lsn) *lost = 1;
  else if (s->sync_err) *rc = s->sync_err; /* (another sync may not fail) */
  return *lost || *rc;
}

/* Make every batch up to `seq` durable. At most SYNCS_MAX syncs run at a
 * time (two in flight overlap well on the disks measured); each covers every
 * commit made before it starts. A caller a running sync covers waits for
 * it; the others start one when a slot is free. A plain-mode commit's own
 * data sync also covers the meta pages of the commits before it (lead()).
 * With parallel writers seq is a log position, written to the file
 * first. */
int lm_make_durable(lmdb_store *s, uint64_t seq, ustore_err *e) {
  int rc = 0, lost = 0;
  dwaiter w;
  w.seq = seq;
  w.next = &w; /* not on the list */
  int have_cv = 0;
  pthread_mutex_lock(&s->q_lock);
  while (s->durable < seq && !rc && !par_doomed(s, seq, &rc, &lost)) {
    if (s->syncing < SYNCS_MAX && s->sync_target < seq) {
      unlist(s, &w); /* this caller syncs */
      s->syncing++;
      if (s->par) { /* first, every record appended into the file: one
                     * write per sync (a failure: lost_lsn says so); the
                     * callers it will cover wait for it meanwhile */
        uint64_t to = lm_par_appended(s);
        if (s->sync_target < to) s->sync_target = to;
        pthread_mutex_unlock(&s->q_lock);
        lm_par_write(s, UINT64_MAX);
        pthread_mutex_lock(&s->q_lock);
      }
      uint64_t target = s->committed;
      if (s->sync_target < target) s->sync_target = target;
      int fd = s->wal_fd; /* log mode: the file the batch went to (or later) */
      uint64_t no = s->wal_no;
      s->syncs_on[no & 1]++;
      pthread_mutex_unlock(&s->q_lock);
      rc = sync_once(s, fd);
      pthread_mutex_lock(&s->q_lock);
      s->n_syncs++;
      s->syncing--;
      s->syncs_on[no & 1]--;
      if (rc == 0 && s->durable < target) s->durable = target;
      if (rc) s->sync_target = s->durable; /* let others try again */
      if (rc && s->par) s->sync_err = rc;
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
  if (lost) {
    lm_par_lost(s, seq, e);
    return UNICO_EUNKNOWN;
  }
  if (rc) {
    seterr(e, "syncing %s failed (%s); the write may or may not have been "
              "applied: retry it with the same operation id",
           s->path, s->wal ? strerror(rc) : mdb_strerror(rc));
    return UNICO_EUNKNOWN;
  }
  return UNICO_OK;
}

void lm_durable_to(lmdb_store *s, uint64_t seq) {
  if (s->durable < seq) s->durable = seq;
  if (s->dwaiters) wake_waiters(s);
}

void lm_wake_all(lmdb_store *s) {
  for (dwaiter *w = s->dwaiters; w; w = w->next) pthread_cond_signal(&w->cv);
}

/* Take up to BATCH_MAX requests off the queue as this leader's batch; n
 * receives how many. With q_lock, which it releases. */
static lm_req *take_batch(lmdb_store *s, size_t *n) {
  lm_req *batch = s->q_head, *last = NULL, *r;
  *n = 0;
  s->leading = 1;
  for (r = batch; r && *n < BATCH_MAX; r = r->next) {
    last = r;
    (*n)++;
  }
  s->q_head = last->next;
  if (!s->q_head) s->q_tail = NULL;
  last->next = NULL;
  pthread_mutex_unlock(&s->q_lock);
  return batch;
}

/* Log mode, after a batch: freeze a full table (its log synced first, so
 * the batches in it are durable), or wait for the checkpointer if it fell
 * far behind. A table's size: its keys and values plus ~100 bytes per
 * entry; and the log file counts too, since rewriting the same keys grows
 * the log, not the table (replay time and disk stay bounded). Returns 1
 * when it froze the table (and so synced the log). */
static int maybe_rotate(lmdb_store *s) {
  if (!s->wal || lm_log_stuck(s) ||
      (s->active->bytes + 100 * s->active->n < s->ckpt_bytes &&
       s->wal_off < 2 * (uint64_t)s->ckpt_bytes))
    return 0;
  pthread_mutex_lock(&s->q_lock);
  while (s->ckpt_busy && !lm_log_stuck(s) &&
         (s->active->bytes + 100 * s->active->n >= 4 * s->ckpt_bytes ||
          s->wal_off >= 8 * (uint64_t)s->ckpt_bytes))
    pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
  int busy = s->ckpt_busy;
  pthread_mutex_unlock(&s->q_lock);
  if (busy) return 0;
  lm_log_rotate(s, 0);
  return !lm_log_stuck(s);
}

/* Plain mode, after a batch some of whose requests found the map full:
 * grow the map (no transaction of ours runs now); at its limit, give
 * writes found full for the first time one batch with the reserve open,
 * where only those that free space run. The others are answered full. */
static void grow_for_full(lmdb_store *s, lm_req *batch, int *retry_of) {
  ustore_err ge = {{0}};
  lm_req *r;
  size_t i = 0, want = s->map_size * 2;
  if (want > s->ins_map_size) want = s->ins_map_size;
  int grown = want > s->map_size && lm_remap(s, want, 0, &ge) == UNICO_OK;
  int reserve = 0;
  for (r = batch; r && !grown; r = r->next, i++)
    reserve |= retry_of[i] == RETRY_FULL && r->full_tries == 0;
  if (reserve) lm_set_reserve(s, 1);
  if (reserve && lm_remap(s, s->max_map_size, 0, &ge) != UNICO_OK) {
    lm_set_reserve(s, 0);
    reserve = 0;
  }
  i = 0;
  for (r = batch; r; r = r->next, i++) {
    if (retry_of[i] != RETRY_FULL || grown ||
        (reserve && r->full_tries++ == 0))
      continue;
    retry_of[i] = RETRY_NO;
    r->rc = lm_map_rc(s, MDB_MAP_FULL, "writing", r->e);
  }
}

/* After a batch: close the reserve if it was open (see "space"), and deal
 * with the requests that found the store full: in log mode, checkpoint
 * and let them try once more (their rc and *e already say full); in plain
 * mode, grow_for_full(). */
static void after_full(lmdb_store *s, lm_req *batch, int *retry_of,
                       int *rotated) {
  int full = 0;
  size_t i = 0;
  lm_req *r;
  for (r = batch; r; r = r->next, i++) full |= retry_of[i] == RETRY_FULL;
  if (s->reserve_on) {
    ustore_err ge = {{0}};
    lm_set_reserve(s, 0);
    lm_remap(s, s->ins_map_size, 1, &ge);
  }
  if (!full) return;
  if (!s->wal) {
    grow_for_full(s, batch, retry_of);
    return;
  }
  int again = lm_log_flush(s, rotated);
  i = 0;
  for (r = batch; r; r = r->next, i++) {
    if (retry_of[i] != RETRY_FULL || (again && r->full_tries++ == 0))
      continue;
    retry_of[i] = RETRY_NO;
  }
}

/* Put the requests to retry back at the head of the queue, in their order
 * (a request given back too often is answered unavailable instead), and
 * return the others: the ones to answer. With q_lock. */
static lm_req *requeue(lmdb_store *s, lm_req *batch, int *retry_of) {
  lm_req *keep = NULL, **kt = &keep, *back = NULL, *back_last = NULL, *r, *nx;
  size_t i = 0;
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
  return keep;
}

/* Answer the deferred requests of *keep now (their callers watch for seq)
 * and take them off the list. With q_lock. */
static void answer_deferred(lm_req **keep, uint64_t seq) {
  lm_req *r;
  for (lm_req **pp = keep; (r = *pp);) {
    if (r->deferred && (r->rc == UNICO_OK || r->rc == USTORE_NOT_APPLIED)) {
      *pp = r->next; /* read before done: r may be gone after the unlock */
      r->seq = seq;
      r->done = 1;
      pthread_cond_signal(&r->cv);
    } else {
      pp = &r->next;
    }
  }
}

/* The serial part of the write path: the time leaders spent between taking
 * a batch and passing the writer's role on (checks, table or transaction
 * updates, the log append, a rotation or a wait for the checkpointer),
 * where no other writer of the store can be. Summed per store (serial_ns)
 * and over every store of the process (ustore_lmdb_serial_ns()): two
 * clock reads and an add per batch, not per request. */
static _Atomic uint64_t serial_ns_all;

uint64_t ustore_lmdb_serial_ns(void) {
  return atomic_load_explicit(&serial_ns_all, memory_order_relaxed);
}

void lm_serial_add(lmdb_store *s, uint64_t dt) {
  atomic_fetch_add_explicit(&s->par_serial_ns, dt, memory_order_relaxed);
  atomic_fetch_add_explicit(&serial_ns_all, dt, memory_order_relaxed);
}

uint64_t lm_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Run one batch as the leader. Called and returns with q_lock held. */
static void lead(lmdb_store *s) {
  int retry_of[BATCH_MAX];
  size_t n;
  uint64_t t0 = lm_mono_ns(); /* the serial part begins (see serial_ns_all) */
  lm_req *batch = take_batch(s, &n), *r, *nx;
  lm_files_tick(s); /* at most once a second: still our files? */
  int wrote = s->wal ? lm_log_batch_apply(s, batch, retry_of)
                     : batch_apply(s, batch, retry_of);
  int rotated = maybe_rotate(s);
  after_full(s, batch, retry_of, &rotated);

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
  lm_req *keep = requeue(s, batch, retry_of);
  int need_sync = s->sync_mode == SYNC_ON || (s->wal && s->sync_mode == SYNC_DATA);
  if (need_sync) answer_deferred(&keep, seq);
  /* The writer's role passes to the next request while this batch syncs. */
  s->leading = 0;
  uint64_t dt = lm_mono_ns() - t0;
  s->serial_ns += dt;
  atomic_fetch_add_explicit(&serial_ns_all, dt, memory_order_relaxed);
  if (s->q_head) pthread_cond_signal(&s->q_head->cv);
  pthread_mutex_unlock(&s->q_lock);

  if (keep && need_sync) {
    ustore_err se = {{0}};
    if (lm_make_durable(s, seq, &se)) {
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

int lm_txn(ustore *base, ustore_op *ops, size_t n, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  for (size_t i = 0; i < n; i++) {
    if (ops[i].klen == 0 || ops[i].klen > 511) {
      seterr(e, "key of %zu bytes is outside LMDB's 1..511", ops[i].klen);
      return UNICO_EINVAL;
    }
  }
  if (s->par) return lm_par_txn(s, ops, n, e);
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
