/* parallel.c - log mode's write path without a leader (writers=parallel;
 * docs/architecture.md, "Parallel writers").
 *
 * Each writer does its own request, in parallel with the others:
 *   1. it latches the parts of the tables its keys fall in (UMT_SHARDS
 *      read-write locks, taken in ascending order: no deadlock; exclusive
 *      where it writes a key, shared where it only checks one, as every
 *      write checks its table's schema key), under mt_lock
 *      shared (a freeze or a checkpoint's end takes it exclusive);
 *   2. checks its conditions against the tables, else LMDB (a read handle
 *      from a pool, renewed: no allocation, no reader-table lock);
 *   3. appends its log record to the shared buffer (log_mu: a memcpy and
 *      a counter: the only serial step of a write), which gives it its
 *      log position (LSN: the bytes appended since the open, up to its
 *      record's end), and applies it to the tables, entries noting the
 *      LSN; all still latched, so conflicting writes enter the log in the
 *      order they were applied;
 *   4. releases its latches (early lock release), and waits until the log
 *      is durable up to the newest LSN it depends on: its own record's,
 *      and those of the entries it read (a refusal judged on a write not
 *      yet synced waits for that write's sync). One writer at a time
 *      takes the buffer and writes it to the file (wr_mu); syncs cover
 *      every record written before them (lm_make_durable()).
 * Committed and durable count LSNs here, so deferred writes' tickets are
 * LSNs. A freeze drains the buffer into the old file and syncs it under
 * mt_lock exclusive: records after it go to the new file. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/lmdb/lmdb_int.h"

int (*ustore_lmdb_hook)(ustore *s, int point);

/* ---- read handles: a pool, each taken by one writer at a time ---- */

#define RPOOL 256 /* (of LMDB's 1022 readers: open.c) */
typedef struct lm_rpool {
  atomic_int busy[RPOOL];
  MDB_txn *txn[RPOOL];
} lm_rpool;

static atomic_uint next_slot;
static _Thread_local unsigned my_slot; /* 0: none yet; else a slot + 1 */

/* A free handle's place (*slot its index), or NULL (*slot -1): every one is
 * taken, begin a transaction of its own. Lock-free. */
static MDB_txn **rpool_take(lmdb_store *s, int *slot) {
  if (!my_slot) my_slot = atomic_fetch_add(&next_slot, 1) % RPOOL + 1;
  for (unsigned k = 0; k < RPOOL; k++) {
    unsigned i = (my_slot - 1 + k) % RPOOL;
    if (!atomic_exchange(&s->rpool->busy[i], 1)) {
      *slot = (int)i;
      return &s->rpool->txn[i];
    }
  }
  *slot = -1;
  return NULL;
}

static void rpool_give(lmdb_store *s, int slot) {
  if (slot >= 0) atomic_store(&s->rpool->busy[slot], 0);
}

/* ---- latches ---- */

/* A request's latches: the parts its writes fall in (taken exclusive) and
 * those only its conditions read (shared). Every write of a table checks
 * the table's schema key: were that part taken exclusive, all of them
 * would pass through its latch one at a time. */
typedef struct lm_latches {
  uint64_t x, sh;
} lm_latches;

static void latch(lmdb_store *s, lm_latches m) {
  for (int i = 0; i < UMT_SHARDS; i++) {
    if (m.x >> i & 1) pthread_rwlock_wrlock(&s->latch[i]);
    else if (m.sh >> i & 1) pthread_rwlock_rdlock(&s->latch[i]);
  }
}

static void unlatch(lmdb_store *s, lm_latches m) {
  for (int i = UMT_SHARDS; i-- > 0;)
    if ((m.x | m.sh) >> i & 1) pthread_rwlock_unlock(&s->latch[i]);
}

/* The parts of the tables a request's keys fall in. */
static lm_latches mask_of(const ustore_op *ops, size_t n) {
  lm_latches m = {0, 0};
  for (size_t i = 0; i < n; i++) {
    uint64_t bit = (uint64_t)1 << umts_shard(ops[i].key, ops[i].klen);
    if (ops[i].action != USTORE_CHECK) m.x |= bit;
    else m.sh |= bit;
  }
  m.sh &= ~m.x;
  return m;
}

/* A request whose keys fall in more than LATCH_WIDE parts (a big batch,
 * an import's) takes the whole table instead: mt_lock exclusive, which
 * no other writer holds its latches without (they take it shared), and
 * no latch. One lock in place of dozens; and ThreadSanitizer tracks at
 * most 64 locks held by a thread at once, which the resize lock, mt_lock,
 * 64 latches and log_mu passed. Serial while held (counted so). */
#define LATCH_WIDE 32

static int wide(lm_latches m) {
  return __builtin_popcountll(m.x | m.sh) > LATCH_WIDE;
}

/* Take the tables for m (with the resize lock): the time it began, for a
 * wide request, else 0. */
static uint64_t tables_take(lmdb_store *s, lm_latches m) {
  if (wide(m)) {
    pthread_rwlock_wrlock(&s->mt_lock);
    return lm_mono_ns();
  }
  pthread_rwlock_rdlock(&s->mt_lock);
  latch(s, m);
  return 0;
}

static void tables_give(lmdb_store *s, lm_latches m, uint64_t t0) {
  if (!wide(m)) unlatch(s, m);
  uint64_t dt = t0 ? lm_mono_ns() - t0 : 0;
  pthread_rwlock_unlock(&s->mt_lock);
  if (t0) lm_serial_add(s, dt);
}

/* ---- start, stop ---- */

int lm_par_start(lmdb_store *s) {
  for (int i = 0; i < UMT_SHARDS; i++)
    if (pthread_rwlock_init(&s->latch[i], NULL)) return UNICO_ENOMEM;
  s->latch_init = 1;
  if (pthread_mutex_init(&s->log_mu, NULL) ||
      pthread_mutex_init(&s->wr_mu, NULL) ||
      pthread_mutex_init(&s->rot_mu, NULL) ||
      pthread_cond_init(&s->ext_cv, NULL))
    return UNICO_ENOMEM;
  s->ext_fd = -1;
  s->par_init = 1;
  if (!(s->rpool = calloc(1, sizeof *s->rpool))) return UNICO_ENOMEM;
  atomic_store(&s->files_at_ms, lm_now_ms());
  return UNICO_OK;
}

void lm_par_stop(lmdb_store *s) {
  if (s->rpool)
    for (int i = 0; i < RPOOL; i++)
      if (s->rpool->txn[i]) mdb_txn_abort(s->rpool->txn[i]);
  free(s->rpool);
  s->rpool = NULL;
  if (s->latch_init)
    for (int i = 0; i < UMT_SHARDS; i++) pthread_rwlock_destroy(&s->latch[i]);
  s->latch_init = 0;
  if (s->par_init) {
    pthread_mutex_destroy(&s->log_mu);
    pthread_mutex_destroy(&s->wr_mu);
    pthread_mutex_destroy(&s->rot_mu);
    pthread_cond_destroy(&s->ext_cv);
  }
  s->par_init = 0;
  ubuf_free(&s->lbuf);
  ubuf_free(&s->wbuf);
}

/* ---- the log: the buffer, the file ---- */

/* Append a request's record to the buffer: *lsn its end. UNICO_OK (*lsn
 * 0 when it changes nothing: no record), or UNICO_ENOMEM (nothing
 * appended). */
static int log_append(lmdb_store *s, const ustore_op *ops, size_t n,
                      uint64_t *lsn, ustore_err *e) {
  ubuf rec = UBUF_INIT;
  *lsn = 0;
  lm_log_record(&rec, ops, n);
  int bad = !ubuf_ok(&rec);
  if (!bad && rec.len > 12) { /* (12: no op, nothing to log) */
    pthread_mutex_lock(&s->log_mu);
    uint64_t t0 = lm_mono_ns(); /* the serial part: from here... */
    bad = ubuf_reserve(&s->lbuf, rec.len);
    if (!bad) {
      ubuf_put(&s->lbuf, rec.p, rec.len);
      *lsn = s->lsn_next += rec.len;
    }
    s->lbuf.oom = 0; /* (a failed reserve left the buffer as it was) */
    uint64_t dt = lm_mono_ns() - t0; /* ...to here */
    pthread_mutex_unlock(&s->log_mu);
    lm_serial_add(s, dt);
  }
  ubuf_free(&rec);
  if (bad) seterr(e, "out of memory writing to the log of %s", s->path);
  return bad ? UNICO_ENOMEM : UNICO_OK;
}

/* The disk is full: keep the records taken (b) behind those already
 * kept, in order, for lm_log_space_retry(). With wr_mu. */
static void keep_for_room(lmdb_store *s, const ubuf *b, int err) {
  ubuf_put(&s->nospace_buf, b->p, b->len);
  if (!ubuf_ok(&s->nospace_buf)) lm_fail_log(s, "appending to", ENOMEM);
  if (!(atomic_load(&s->nospace) & NOSPACE_LOG)) {
    s->nospace_try_ms = lm_now_ms();
    lm_nospace_set(s, NOSPACE_LOG, "appending to the log of", err);
  }
}

/* Zero-filling ahead (lm_log_write()) costs a write of 8 MiB and a sync:
 * done under wr_mu, every writer would wait for it. So once less than half
 * of the filled part is left, a writer plans the next fill (with wr_mu)
 * and does it after, outside wr_mu (extend()), on a copy of the file's
 * descriptor, beyond every record; a record that would pass the filled
 * part meanwhile waits for it. */
static void extend_plan(lmdb_store *s) {
  uint64_t ext = lm_log_extend(s);
  if (s->ext_busy || s->wal_zeroed - s->wal_off >= ext / 2) return;
  int fd = dup(s->wal_fd);
  if (fd < 0) return; /* (lm_log_write() fills when it must) */
  s->ext_busy = 1;
  s->ext_fd = fd;
  s->ext_from = s->wal_zeroed;
  s->ext_to = s->wal_zeroed + ext;
  s->ext_no = s->wal_no;
}

/* Do the planned fill, if this thread planned one (with no lock). */
static void extend(lmdb_store *s, int planned) {
  if (!planned) return;
  pthread_mutex_lock(&s->wr_mu);
  int fd = s->ext_fd;
  uint64_t from = s->ext_from, to = s->ext_to, no = s->ext_no;
  pthread_mutex_unlock(&s->wr_mu);
  int ok = lm_log_zero(s, fd, from, to) == 0;
  close(fd);
  pthread_mutex_lock(&s->wr_mu);
  if (ok && s->wal_no == no && s->wal_zeroed == from) s->wal_zeroed = to;
  s->ext_busy = 0;
  s->ext_fd = -1;
  pthread_cond_broadcast(&s->ext_cv);
  pthread_mutex_unlock(&s->wr_mu);
}

/* Write what the buffer holds to the file (may_plan: and plan the next
 * zero-filling, which the caller then does). With wr_mu. 0, or the errno
 * that left the records taken unwritten (their outcome unknown: lost_lsn,
 * and every waiter is woken to hear it). */
static int write_locked(lmdb_store *s, int may_plan) {
  uint64_t t0 = lm_mono_ns(); /* (counted by the callers of may_plan 0) */
  pthread_mutex_lock(&s->log_mu);
  ubuf t = s->lbuf;
  s->lbuf = s->wbuf;
  s->wbuf = t;
  uint64_t end = s->lsn_next;
  pthread_mutex_unlock(&s->log_mu);
  int err = 0;
  if (s->wbuf.len) {
    if (atomic_load(&s->failed)) err = EIO; /* behind a failed append */
    else if (atomic_load(&s->nospace) & NOSPACE_LOG) err = ENOSPC; /* order */
    else {
      while (s->ext_busy && s->wal_off + s->wbuf.len > s->wal_zeroed)
        pthread_cond_wait(&s->ext_cv, &s->wr_mu); /* (it fills this far) */
      if (lm_log_write(s, s->wbuf.p, s->wbuf.len)) err = errno ? errno : EIO;
      if (!err && may_plan) extend_plan(s);
    }
    if (err && lm_space_err(err)) keep_for_room(s, &s->wbuf, err);
    else if (err) lm_fail_log(s, "appending to", err);
  }
  ubuf_reset(&s->wbuf);
  pthread_mutex_lock(&s->q_lock);
  if (err) {
    s->lost_lsn = end;
    s->lost_err = err;
    lm_wake_all(s);
  } else if (s->committed < end) {
    s->committed = end;
    s->n_batches++;
  }
  pthread_mutex_unlock(&s->q_lock);
  if (!err) atomic_store(&s->written, end);
  if (may_plan) lm_serial_add(s, lm_mono_ns() - t0);
  return err;
}

int lm_par_write(lmdb_store *s, uint64_t lsn) {
  if (lsn != UINT64_MAX && atomic_load(&s->written) >= lsn) return 0;
  pthread_mutex_lock(&s->wr_mu);
  int busy = s->ext_busy;
  int err = atomic_load(&s->written) < lsn ? write_locked(s, 1) : 0;
  int planned = !busy && s->ext_busy;
  pthread_mutex_unlock(&s->wr_mu);
  extend(s, planned);
  return err;
}

/* The disk was full: lm_log_space_retry() under wr_mu; once the kept
 * records are appended and synced, they are durable. */
static void space_retry(lmdb_store *s) {
  pthread_mutex_lock(&s->wr_mu);
  while (s->ext_busy) /* (its zeros must not land on the records) */
    pthread_cond_wait(&s->ext_cv, &s->wr_mu);
  lm_log_space_retry(s);
  if (!(atomic_load(&s->nospace) & NOSPACE_LOG)) {
    pthread_mutex_lock(&s->q_lock);
    if (s->committed < s->lost_lsn) s->committed = s->lost_lsn;
    if (s->sync_mode != SYNC_OFF && s->durable < s->lost_lsn)
      lm_durable_to(s, s->lost_lsn);
    pthread_mutex_unlock(&s->q_lock);
    if (atomic_load(&s->written) < s->lost_lsn)
      atomic_store(&s->written, s->lost_lsn);
  }
  pthread_mutex_unlock(&s->wr_mu);
}

void lm_par_lost(lmdb_store *s, uint64_t lsn, ustore_err *e) {
  (void)lsn;
  pthread_mutex_lock(&s->q_lock);
  int err = s->lost_err;
  pthread_mutex_unlock(&s->q_lock);
  if (lm_space_err(err))
    seterr(e, "appending to the log of %.100s failed: its disk is full (%s); "
              "the write may or may not have been applied: retry it with the "
              "same operation id once there is room",
           s->path, strerror(err));
  else
    seterr(e, "%s; the write may or may not have been applied: retry it "
              "with the same operation id once reopened",
           atomic_load(&s->failed) ? s->failed_msg : "appending to the log failed");
}

void lm_par_drain(lmdb_store *s) {
  pthread_mutex_lock(&s->wr_mu);
  write_locked(s, 0);
  pthread_mutex_unlock(&s->wr_mu);
}

/* ---- freezing ---- */

/* Whether the active table is `times` over the size where it is frozen,
 * counted as maybe_rotate() does, the log file's size up to log position
 * pos too. With mt_lock. */
static int table_big(lmdb_store *s, size_t times, uint64_t pos) {
  size_t sz = atomic_load(&s->active->bytes) + 100 * atomic_load(&s->active->n);
  uint64_t at = atomic_load(&s->file_lsn), log = pos > at ? pos - at : 0;
  return sz >= times * s->ckpt_bytes || log >= 2 * times * s->ckpt_bytes;
}

uint64_t lm_par_appended(lmdb_store *s) {
  pthread_mutex_lock(&s->log_mu);
  uint64_t v = s->lsn_next;
  pthread_mutex_unlock(&s->log_mu);
  return v;
}

/* Freeze the active table (with rot_mu, no checkpoint running): when any,
 * if it holds anything, else if it is big. Returns 1 when it froze it. */
static int freeze(lmdb_store *s, int any) {
  pthread_rwlock_wrlock(&s->mt_lock);
  uint64_t t0 = lm_mono_ns(); /* (no writer meanwhile: serial) */
  pthread_mutex_lock(&s->wr_mu);
  int did = 0;
  pthread_mutex_lock(&s->q_lock);
  int busy = s->ckpt_busy;
  pthread_mutex_unlock(&s->q_lock);
  int want = any ? atomic_load(&s->active->n) > 0 : table_big(s, 1, lm_par_appended(s));
  if (!busy && want && !write_locked(s, 0) && !lm_log_stuck(s)) {
    lm_log_rotate(s, 1); /* (syncs the old file first) */
    if (!lm_log_stuck(s)) {
      did = 1;
      atomic_store(&s->file_lsn, atomic_load(&s->written));
      pthread_mutex_lock(&s->q_lock);
      if (s->sync_mode != SYNC_OFF) lm_durable_to(s, s->committed);
      pthread_mutex_unlock(&s->q_lock);
    }
  }
  pthread_mutex_unlock(&s->wr_mu);
  lm_serial_add(s, lm_mono_ns() - t0);
  pthread_rwlock_unlock(&s->mt_lock);
  return did;
}

/* Wait for the checkpointer (while busy, and the log not stuck). */
static void ckpt_wait(lmdb_store *s, int huge) {
  pthread_mutex_lock(&s->q_lock);
  while (s->ckpt_busy && huge && !lm_log_stuck(s))
    pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
  pthread_mutex_unlock(&s->q_lock);
}

/* After a write that found the table big (huge: four times over, the
 * checkpointer far behind: wait for it, as the leader does). */
static void maybe_freeze(lmdb_store *s, int huge) {
  if (lm_log_stuck(s)) return;
  ckpt_wait(s, huge);
  pthread_mutex_lock(&s->q_lock);
  int busy = s->ckpt_busy; /* (the table freezes once the last is in) */
  pthread_mutex_unlock(&s->q_lock);
  if (busy || pthread_mutex_trylock(&s->rot_mu)) return; /* another does */
  freeze(s, 0);
  pthread_mutex_unlock(&s->rot_mu);
}

/* A write found the store full: checkpoint both tables, so that the
 * estimate gives way to what LMDB holds. 0 when there was nothing to. */
static int make_room(lmdb_store *s) {
  pthread_mutex_lock(&s->rot_mu);
  pthread_rwlock_rdlock(&s->mt_lock);
  int had = atomic_load(&s->active->n) > 0;
  pthread_rwlock_unlock(&s->mt_lock);
  pthread_mutex_lock(&s->q_lock);
  had |= s->ckpt_busy;
  pthread_mutex_unlock(&s->q_lock);
  ckpt_wait(s, 1);
  if (!lm_log_stuck(s) && freeze(s, 1)) ckpt_wait(s, 1);
  pthread_mutex_unlock(&s->rot_mu);
  return had;
}

/* ---- a write ---- */

/* With the latches: check, append, apply. *big: the table wants freezing
 * (2: four times over). */
static int apply_latched(lmdb_store *s, MDB_txn *txn, ustore_op *ops,
                         size_t n, ustore_err *e, uint64_t *dep, int *big) {
  lm_req r;
  memset(&r, 0, sizeof r);
  r.e = e;
  if (atomic_load(&s->failed)) {
    seterr(e, "%s", s->failed_msg);
    return s->failed_rc;
  }
  if (lm_refuse(s, &r)) return r.rc;
  size_t dc, dn;
  uint64_t lsn;
  int rc = lm_log_check(s, txn, ops, n, e, dep, &dc, &dn);
  if (rc != UNICO_OK) return rc;
  if (ustore_lmdb_hook) ustore_lmdb_hook(&s->base, USTORE_LMDB_HOOK_LATCHED);
  rc = log_append(s, ops, n, &lsn, e);
  if (rc == UNICO_OK && lm_log_set(s, ops, n, lsn)) {
    lm_fail_log(s, "memory ran out while writing to", ENOMEM);
    seterr(e, "%s; the write may or may not have been applied: retry it "
              "with the same operation id once reopened", s->failed_msg);
    rc = UNICO_EUNKNOWN; /* (its record is in the log) */
  }
  lm_log_admitted(s, dc, dn);
  if (lsn > *dep) *dep = lsn;
  if (lsn) *big = table_big(s, 4, lsn) ? 2 : table_big(s, 1, lsn);
  return rc;
}

/* Latch, take a read handle, apply_latched(), release. */
static int apply(lmdb_store *s, ustore_op *ops, size_t n, ustore_err *e,
                 uint64_t *dep, int *big) {
  lm_latches mask = mask_of(ops, n);
  for (int tries = 0;; tries++) {
    int slot, rc;
    MDB_txn **keep, *txn;
    pthread_rwlock_rdlock(&s->resize); /* (the order of lmdb_int.h) */
    uint64_t t0 = tables_take(s, mask);
    keep = rpool_take(s, &slot);
    int mrc = lm_begin_once(s, MDB_RDONLY, keep, &txn);
    if (mrc == 0) {
      rc = apply_latched(s, txn, ops, n, e, dep, big);
      if (keep) mdb_txn_reset(txn);
      else mdb_txn_abort(txn);
    }
    rpool_give(s, slot);
    tables_give(s, mask, t0);
    pthread_rwlock_unlock(&s->resize);
    if (mrc == 0) return rc;
    if (mrc != MDB_MAP_RESIZED)
      return lm_map_rc(s, mrc, "beginning a transaction", e);
    if (tries >= 7) {
      seterr(e, "the map of %s keeps changing size", s->path);
      return UNICO_EUNAVAILABLE;
    }
    if ((rc = lm_remap(s, 0, 0, e))) return rc; /* another process grew it */
  }
}

/* The files still ours? At most once a second, one writer looks. */
static void files_tick(lmdb_store *s) {
  uint64_t now = lm_now_ms(), last = atomic_load(&s->files_at_ms);
  if (now - last < 1000 ||
      !atomic_compare_exchange_strong(&s->files_at_ms, &last, now))
    return;
  lm_files_check(s);
}

/* The answer to a write applied or refused (rc), judged on the log up to
 * dep: given once that is durable (sync=off: written to the file; a
 * deferred write: now, its ticket dep). */
static int answer(lmdb_store *s, int rc, uint64_t dep, ustore_err *e) {
  ustore_err se = {{0}};
  if (s->sync_mode == SYNC_OFF) {
    /* Other writers are applying theirs: let them append first, so that
     * one write to the file takes all (with 16 writers a core, each
     * wrote its own otherwise: 0.7 writes a signup against the leader's
     * 0.14). Alone, no wait. */
    if (atomic_load(&s->written) < dep && atomic_load(&s->par_applying) > 0)
      sched_yield();
    if (!lm_par_write(s, dep)) return rc;
    lm_par_lost(s, dep, &se);
  } else if (ustore_deferring()) {
    if (dep) ustore_defer_note(dep);
    return rc;
  } else if (!lm_make_durable(s, dep, &se)) {
    return rc;
  }
  if (e) *e = se;
  return UNICO_EUNKNOWN;
}

int lm_par_txn(lmdb_store *s, ustore_op *ops, size_t n, ustore_err *e) {
  atomic_fetch_add_explicit(&s->par_requests, 1, memory_order_relaxed);
  if (atomic_load(&s->nospace) & NOSPACE_LOG) space_retry(s);
  if (n == 0) return UNICO_OK; /* (lm_health()'s: the retry above) */
  files_tick(s);
  uint64_t dep = 0;
  int rc, big = 0;
  atomic_fetch_add(&s->par_applying, 1);
  for (int tries = 0;; tries++) {
    dep = 0;
    rc = apply(s, ops, n, e, &dep, &big);
    if (rc != LM_FULL) break;
    rc = UNICO_EFULL; /* (e says so) */
    if (tries || !make_room(s)) break;
  }
  atomic_fetch_sub(&s->par_applying, 1);
  if (big) maybe_freeze(s, big == 2);
  if (rc != UNICO_OK && rc != USTORE_NOT_APPLIED) return rc;
  return answer(s, rc, dep, e);
}
