/* log.c - log mode's write path: a batch checked against the tables,
 * appended to the log file and synced once; freezing a full table. */
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
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "store/lmdb/lmdb_int.h"

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


static void put_le(ubuf *b, uint64_t v, int n) {
  uint8_t x[8];
  for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
  ubuf_put(b, x, (size_t)n);
}

uint64_t lm_get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

void lm_wal_path(const lmdb_store *s, uint64_t no, char *out, size_t n) {
  snprintf(out, n, "%s/log-%016" PRIx64 ".unico", s->path, no);
}

void lm_wal_name(uint64_t no, char *out, size_t n) {
  snprintf(out, n, "log-%016" PRIx64 ".unico", no);
}

/* (the message is written before failed is set: whoever sees failed may
 * read it, from any thread) */
void lm_fail_log(lmdb_store *s, const char *what, int err) {
  if (atomic_exchange(&s->fail_claim, 1)) return;
  s->failed_rc = UNICO_EUNAVAILABLE;
  s->failed_why = USTORE_HEALTH_LOG;
  snprintf(s->failed_msg, sizeof s->failed_msg,
           "%s the log of %.80s failed (%s); writes are refused until the "
           "store is reopened",
           what, s->path, strerror(err));
  atomic_store(&s->failed, 1);
}

/* The checkpointer failed with rc and message msg. */
void lm_fail_ckpt(lmdb_store *s, int rc, const char *msg) {
  if (atomic_exchange(&s->fail_claim, 1)) return;
  s->failed_rc = rc;
  s->failed_why = USTORE_HEALTH_CKPT;
  snprintf(s->failed_msg, sizeof s->failed_msg,
           "checkpointing the log failed: %.170s; writes are refused until "
           "the store is reopened",
           msg);
  atomic_store(&s->failed, 1);
}

/* What the checkpoints of tables of `n` entries whose umt_cost() is
 * `cost` may take from the map, at most: that cost, a copy of every page
 * they change (LMDB copies on write, and frees the old copy only after the
 * commit: a leaf per entry and the branch pages, never more than the pages
 * in use), the free list's record of those copies, and a few pages. With
 * mt_lock. */
size_t lm_ckpt_estimate(const lmdb_store *s, size_t cost, size_t n) {
  size_t copies = n * s->psize + 2 * s->lm_branch;
  if (copies > s->lm_used) copies = s->lm_used;
  return cost + copies + copies / 256 + 16 * s->psize;
}

/* Log mode: whether a write adding `dn` entries of umt_cost() `dc` to the
 * active table may be acknowledged: LMDB's pages in use and what the
 * checkpoints of both tables will need must fit in ins_map_size, or in
 * max_map_size for a write that frees space. With mt_lock (shared, with
 * parallel writers). The write's share is counted (adm_cost, adm_n) before
 * the check, so that writers admitted at once all fit together: an
 * admitted write gives it back (lm_log_admitted()) once it is in the
 * table, a refused one at once. */
static int log_admit(lmdb_store *s, size_t dc, size_t dn, int frees,
                     size_t *need) {
  size_t cost = atomic_fetch_add(&s->adm_cost, dc) + dc;
  size_t n = atomic_fetch_add(&s->adm_n, dn) + dn;
  cost += atomic_load(&s->active->cost);
  n += atomic_load(&s->active->n);
  if (s->frozen) {
    cost += atomic_load(&s->frozen->cost);
    n += atomic_load(&s->frozen->n);
  }
  *need = s->lm_used + lm_ckpt_estimate(s, cost, n);
  int ok = *need <= (frees ? s->max_map_size : s->ins_map_size);
  if (!ok) lm_log_admitted(s, dc, dn);
  return ok;
}

void lm_log_admitted(lmdb_store *s, size_t dc, size_t dn) {
  atomic_fetch_sub(&s->adm_cost, dc);
  atomic_fetch_sub(&s->adm_n, dn);
}

/* The current state of key across the active table, the frozen table and
 * LMDB (txn): 1 exists (version, value), 0 absent, -1 with *mrc an error.
 * The value pointer is valid while mt_lock (the key's latch) and txn are
 * held. *lsn: the active table's entry's log position (0 if none). */
static int log_lookup(lmdb_store *s, MDB_txn *txn, const void *key,
                      size_t klen, uint64_t *ver, const uint8_t **val,
                      size_t *vlen, int *mrc, uint64_t *lsn) {
  umt_entry *e = umts_find(s->active, key, klen);
  if (e && e->lsn > *lsn) *lsn = e->lsn;
  if (!e && s->frozen) e = umts_find(s->frozen, key, klen);
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
  *ver = lm_get_ver(&v);
  *val = (uint8_t *)v.mv_data + VHDR;
  *vlen = v.mv_size - VHDR;
  return 1;
}

/* Check one op against the current state; 1 when its condition holds. */
static int op_check(ustore_op *op, int ex, uint64_t ver) {
  switch (op->expect) {
  case USTORE_ABSENT: return !ex;
  case USTORE_VERSION: return ex && ver == op->expect_version;
  case USTORE_PRESENT: return ex;
  default: return 1;
  }
}

/* Check the ops of a request against the tables and LMDB (txn), and admit
 * it: UNICO_OK (admitted: *dc and *dn to give back with
 * lm_log_admitted()), USTORE_NOT_APPLIED, LM_FULL (e set) or an error.
 * *dep: the newest log position of an active-table entry it read. With
 * mt_lock (shared, and the keys' latches, with parallel writers). */
int lm_log_check(lmdb_store *s, MDB_txn *txn, ustore_op *ops, size_t nops,
                 ustore_err *e, uint64_t *dep, size_t *dc, size_t *dn) {
  int mrc = 0, failed = 0;
  space_acc acc = {0, 0};
  size_t need;
  *dc = *dn = 0;
  for (size_t i = 0; i < nops; i++) {
    ustore_op *op = &ops[i];
    op->failed = 0;
    op->exists = 0;
    op->cur_version = 0;
    uint64_t ver = 0;
    const uint8_t *val = NULL;
    size_t vlen = 0;
    if (op->expect == USTORE_ANY && op->action == USTORE_CHECK) continue;
    int ex = log_lookup(s, txn, op->key, op->klen, &ver, &val, &vlen, &mrc, dep);
    if (ex < 0) return lm_map_rc(s, mrc, "reading", e);
    op->exists = ex;
    op->cur_version = ex ? ver : 0;
    lm_space_add(&acc, op, ex, ex ? vlen : 0);
    if (op->action != USTORE_CHECK && (ex || op->action == USTORE_PUT)) {
      *dc += umt_cost(s->psize, op->klen, op->vlen, op->action == USTORE_DEL);
      (*dn)++;
    }
    if (!op_check(op, ex, ver)) {
      op->failed = 1;
      ubuf_reset(&op->cur);
      if (ex) ubuf_put(&op->cur, val, vlen);
      if (!ubuf_ok(&op->cur)) return UNICO_ENOMEM;
      failed = 1;
    }
  }
  if (failed) return USTORE_NOT_APPLIED;
  if (!log_admit(s, *dc, *dn, lm_space_frees(&acc), &need)) {
    lm_full_err(s, need, e);
    return LM_FULL;
  }
  return UNICO_OK;
}

/* Whether op changes the table, and to which version. */
static int op_writes(const ustore_op *op, uint64_t *ver) {
  if (op->action == USTORE_CHECK) return 0;
  if (op->action == USTORE_DEL && !op->exists) return 0; /* nothing to do */
  *ver = op->exists ? op->cur_version + 1
         : op->create_version ? op->create_version : 1;
  return 1;
}

void lm_log_record(ubuf *b, const ustore_op *ops, size_t nops) {
  size_t at = b->len, n = 0;
  put_le(b, 0, 4); /* length and CRC, filled below */
  put_le(b, 0, 4);
  put_le(b, 0, 4); /* op count */
  for (size_t i = 0; i < nops; i++) {
    const ustore_op *op = &ops[i];
    uint64_t ver;
    if (!op_writes(op, &ver)) continue;
    int del = op->action == USTORE_DEL;
    uint8_t act = del ? 2 : 1;
    ubuf_put(b, &act, 1);
    put_le(b, op->klen, 2);
    put_le(b, del ? 0 : op->vlen, 4);
    put_le(b, del ? 0 : ver, 8);
    ubuf_put(b, op->key, op->klen);
    if (!del && op->vlen) ubuf_put(b, op->val, op->vlen);
    n++;
  }
  if (!ubuf_ok(b)) return;
  uint8_t *p = b->p + at;
  size_t plen = b->len - at - 8;
  for (int j = 0; j < 4; j++) p[8 + j] = (uint8_t)(n >> (8 * j));
  uint32_t crc = (uint32_t)crc32(0L, p + 8, (uInt)plen);
  for (int j = 0; j < 4; j++) p[j] = (uint8_t)(plen >> (8 * j));
  for (int j = 0; j < 4; j++) p[4 + j] = (uint8_t)(crc >> (8 * j));
}

int lm_log_set(lmdb_store *s, const ustore_op *ops, size_t nops,
               uint64_t lsn) {
  for (size_t i = 0; i < nops; i++) {
    const ustore_op *op = &ops[i];
    uint64_t ver;
    if (!op_writes(op, &ver)) continue;
    if (umts_put(s->active, op->key, op->klen, ver,
                 op->action == USTORE_DEL, op->val, op->vlen, lsn))
      return -1;
  }
  return 0;
}

/* Apply one request to the active table and append its log record to
 * s->wal_buf. Called with mt_lock held for writing. */
static int log_apply(lmdb_store *s, MDB_txn *txn, lm_req *r) {
  uint64_t dep = 0;
  size_t dc, dn;
  int rc = lm_log_check(s, txn, r->ops, r->n, r->e, &dep, &dc, &dn);
  if (rc != UNICO_OK) return rc;
  lm_log_record(&s->wal_buf, r->ops, r->n);
  rc = lm_log_set(s, r->ops, r->n, 0);
  lm_log_admitted(s, dc, dn);
  if (rc || !ubuf_ok(&s->wal_buf)) {
    lm_fail_log(s, "memory ran out while writing to", ENOMEM);
    return UNICO_ENOMEM;
  }
  return UNICO_OK;
}

#define LOG_EXTEND ((uint64_t)8 << 20) /* zero-fill the log this far ahead */
#define LOG_EXTEND_MIN ((uint64_t)64 << 10) /* on a small file system */

/* How far ahead to zero-fill: LOG_EXTEND, or on a file system with less
 * than 8 times that free, an eighth of what is free (at least 64 KiB), so
 * that a small one (an 8 MiB tmpfs) is not filled by zeros at the first
 * write. */
uint64_t lm_log_extend(const lmdb_store *s) {
  struct statvfs v;
  uint64_t ext = LOG_EXTEND;
  if (fstatvfs(s->wal_fd, &v) == 0) {
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (avail / 8 < ext) ext = avail / 8;
  }
  return ext < LOG_EXTEND_MIN ? LOG_EXTEND_MIN : ext;
}

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
int lm_log_zero(const lmdb_store *s, int fd, uint64_t from, uint64_t to) {
  static const uint8_t zeros[65536];
  for (uint64_t at = from; at < to; at += sizeof zeros)
    if (pwrite_all(fd, zeros, sizeof zeros, at)) return -1;
  return s->sync_mode != SYNC_OFF && fsync(fd) ? -1 : 0;
}

int lm_log_write(lmdb_store *s, const uint8_t *p, size_t n) {
  if (s->wal_off + n > s->wal_zeroed) {
    uint64_t to = s->wal_off + n + lm_log_extend(s);
    if (lm_log_zero(s, s->wal_fd, s->wal_zeroed, to)) return -1;
    s->wal_zeroed = to;
  }
  if (pwrite_all(s->wal_fd, p, n, s->wal_off)) return -1;
  s->wal_off += n;
  return 0;
}

/* The disk was full: append the records whose append failed (their
 * requests were answered unknown; the table holds them) once there is
 * room, and take writes again. At most every 200 ms. The leader. */
void lm_log_space_retry(lmdb_store *s) {
  uint64_t now = lm_now_ms();
  if (!(atomic_load(&s->nospace) & NOSPACE_LOG) ||
      (now - s->nospace_try_ms < 200 && !atomic_exchange(&s->nospace_poke, 0)))
    return;
  s->nospace_try_ms = now;
  ubuf *b = &s->nospace_buf;
  if (b->len && lm_log_write(s, b->p, b->len)) {
    int err = errno;
    if (!lm_space_err(err)) lm_fail_log(s, "appending to", err);
    return; /* still full */
  }
  /* (a failed sync may have dropped the pages: for good) */
  if (b->len && s->sync_mode != SYNC_OFF && fdatasync(s->wal_fd)) {
    lm_fail_log(s, "syncing", errno);
    return;
  }
  ubuf_reset(b);
  lm_nospace_clear(s, NOSPACE_LOG);
}

/* The log-mode batch: every request against the tables, then one append.
 * Returns 1 when something was appended. */
int lm_log_batch_apply(lmdb_store *s, lm_req *batch, int *retry_of) {
  lm_req *r;
  size_t i = 0;
  int applied = 0;
  ubuf_reset(&s->wal_buf);
  lm_log_space_retry(s);
  for (r = batch; r; r = r->next, i++) {
    retry_of[i] = RETRY_NO;
    r->applied = 0;
    if (r->n == 0) { /* lm_health()'s, to bring lm_log_space_retry() */
      r->rc = UNICO_OK;
      continue;
    }
    if (atomic_load(&s->failed)) {
      seterr(r->e, "%s", s->failed_msg);
      r->rc = s->failed_rc;
      continue;
    }
    if (lm_refuse(s, r)) continue;
    MDB_txn *txn;
    int rc, tries = 0;
    do {
      lm_tables_lock(s, 1); /* (the order of lmdb_int.h) */
      rc = lm_tables_begin(s, &s->lead_rtxn, &txn, &tries, r->e);
    } while (rc == LM_RETRY);
    if (rc == UNICO_OK) {
      size_t before = s->wal_buf.len;
      rc = log_apply(s, txn, r);
      lm_end_read(s, txn);
      if (rc == UNICO_OK) {
        r->applied = 1;
        applied++;
      } else if (rc == LM_FULL) {
        retry_of[i] = RETRY_FULL; /* after a checkpoint (lead()) */
        rc = UNICO_EFULL;
      } else if (rc != USTORE_NOT_APPLIED) {
        s->wal_buf.len = before;
      }
      pthread_rwlock_unlock(&s->mt_lock);
    }
    r->rc = rc;
  }
  if (!applied || !s->wal_buf.len) return 0;
  if (lm_log_write(s, s->wal_buf.p, s->wal_buf.len)) {
    int err = errno;
    const char *msg = s->failed_msg, *when = "once reopened";
    char m[256];
    if (lm_space_err(err)) { /* kept, to append once there is room */
      ubuf_reset(&s->nospace_buf);
      ubuf_put(&s->nospace_buf, s->wal_buf.p, s->wal_buf.len);
      if (!ubuf_ok(&s->nospace_buf)) lm_fail_log(s, "appending to", ENOMEM);
      s->nospace_try_ms = lm_now_ms();
      lm_nospace_set(s, NOSPACE_LOG, "appending to the log of", err);
      snprintf(m, sizeof m, "appending to the log of %.100s failed: its disk "
               "is full (%s)", s->path, strerror(err));
      msg = m;
      when = "once there is room";
    } else {
      lm_fail_log(s, "appending to", err);
    }
    for (r = batch; r; r = r->next) {
      if (!r->applied) continue;
      seterr(r->e, "%s; the write may or may not have been applied: retry "
                   "it with the same operation id %s",
             msg, when);
      r->rc = UNICO_EUNKNOWN;
    }
  }
  return 1;
}

/* Freeze the active table and start a new log file; the checkpointer takes
 * it from there. Called by the leader, between batches, or with parallel
 * writers by the one freezer (held: with mt_lock for writing, every
 * record written to the file). */
void lm_log_rotate(lmdb_store *s, int held) {
  char path[4200];
  lm_wal_name(s->wal_no + 1, path, sizeof path);
  if (s->sync_mode != SYNC_OFF && fdatasync(s->wal_fd)) {
    lm_fail_log(s, "syncing", errno);
    return;
  }
  /* (in the directory opened, even if a path to it now leads elsewhere) */
  int fd = openat(s->dir_fd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0664);
  umts *t = malloc(sizeof *t);
  /* (the new table starts at the size this one reached, and takes the
   * blocks the last checkpointed one gave back) */
  if (fd < 0 || !t ||
      umts_init(t, s->psize, umts_cap(s->active), &s->spare)) {
    int err = fd < 0 ? errno : ENOMEM;
    if (fd >= 0) close(fd);
    free(t);
    if (lm_space_err(err)) /* nothing lost: tried again once there is room */
      lm_nospace_set(s, NOSPACE_LOG, "starting a new file for the log of", err);
    else
      lm_fail_log(s, "starting a new file for", err);
    return;
  }
  if (!held) pthread_rwlock_wrlock(&s->mt_lock);
  s->frozen = s->active;
  s->active = t;
  if (!held) pthread_rwlock_unlock(&s->mt_lock);
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
int lm_log_flush(lmdb_store *s, int *rotated) {
  pthread_mutex_lock(&s->q_lock);
  int had = s->ckpt_busy || s->active->n; /* the leader alone adds to it */
  while (s->ckpt_busy && !lm_log_stuck(s))
    pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
  pthread_mutex_unlock(&s->q_lock);
  if (s->active->n && !lm_log_stuck(s)) {
    lm_log_rotate(s, 0);
    if (!lm_log_stuck(s)) *rotated = 1;
    pthread_mutex_lock(&s->q_lock);
    while (s->ckpt_busy && !lm_log_stuck(s))
      pthread_cond_wait(&s->ckpt_cv, &s->q_lock);
    pthread_mutex_unlock(&s->q_lock);
  }
  return had;
}
