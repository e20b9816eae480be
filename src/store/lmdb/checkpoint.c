/* checkpoint.c - log mode's checkpointer and recovery: frozen tables
 * written into LMDB, log files replayed at open, log mode started and
 * stopped. */
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
  if (mrc && mrc != MDB_NOTFOUND) return lm_map_rc(s, mrc, "measuring", e);
  size_t pages = (size_t)info.me_last_pgno + 1;
  *used = (pages > freep ? pages - freep : 0) * s->psize;
  *branch = (size_t)st.ms_branch_pages * s->psize;
  return UNICO_OK;
}

/* Write a table into LMDB in one synced transaction that also records the
 * number of the log file it came from. */
static int checkpoint_table(lmdb_store *s, umts *t, uint64_t no,
                            ustore_err *e, int *raw) {
  umt_entry **v = NULL;
  size_t n = 0;
  *raw = 0;
  if (umts_collect(t, "", 0, &v, &n)) return UNICO_ENOMEM;
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
    *raw = mrc;
    rc = lm_map_rc(s, mrc, "checkpointing", e);
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
  return mrc == MDB_NOTFOUND ? UNICO_OK : lm_map_rc(s, mrc, "checkpointing", e);
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
    int raw;
    int rc = checkpoint_table(s, s->frozen, s->old_no, &e, &raw);
    if (rc != UNICO_OK && lm_space_err(raw)) {
      /* The disk is full: writes are refused meanwhile (health says so);
       * try again every second, until there is room or the store closes
       * (lm_log_stop() then tries once more). */
      lm_nospace_set(s, NOSPACE_CKPT, "checkpointing the log into", raw);
      pthread_mutex_lock(&s->q_lock);
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      if (!s->ckpt_stop) pthread_cond_timedwait(&s->ckpt_cv, &s->q_lock, &ts);
      if (s->ckpt_stop) break;
      continue;
    }
    lm_nospace_clear(s, NOSPACE_CKPT);
    size_t used = 0, branch = 0;
    if (rc == UNICO_OK) { /* best effort: a map too full for it is no error */
      ustore_err se = {{0}};
      ckpt_settle(s, &se);
    }
    if (rc == UNICO_OK) rc = lm_measure(s, &used, &branch, &e);
    if (rc == UNICO_OK) {
      char path[64];
      pthread_rwlock_wrlock(&s->mt_lock);
      uint64_t t0 = lm_mono_ns(); /* (no writer meanwhile: serial) */
      umts *gone = s->frozen;
      s->frozen = NULL;
      s->lm_used = used;
      s->lm_branch = branch;
      if (s->par) lm_serial_add(s, lm_mono_ns() - t0);
      pthread_rwlock_unlock(&s->mt_lock);
      umts_free(gone); /* (no reader left: it is no longer reachable) */
      free(gone);
      pthread_mutex_lock(&s->q_lock);
      while (s->syncs_on[s->old_no & 1]) { /* not under a sync */
        pthread_mutex_unlock(&s->q_lock);
        usleep(100);
        pthread_mutex_lock(&s->q_lock);
      }
      close(s->old_fd);
      s->old_fd = -1;
      pthread_mutex_unlock(&s->q_lock);
      lm_wal_name(s->old_no, path, sizeof path);
      unlinkat(s->dir_fd, path, 0); /* the directory opened, not a new one */
    } else {
      lm_fail_ckpt(s, rc, e.msg); /* the frozen table stays readable */
    }
    pthread_mutex_lock(&s->q_lock);
    s->ckpt_busy = 0;
    s->n_checkpoints++;
    pthread_cond_broadcast(&s->ckpt_cv);
  }
  pthread_mutex_unlock(&s->q_lock);
  return NULL;
}

/* The numbers of the log files in the store's directory, sorted, into
 * *out (malloc'd) and *n. */
static int list_logs(lmdb_store *s, uint64_t **out, size_t *n, ustore_err *e) {
  uint64_t *nos = NULL;
  size_t cap = 0;
  struct dirent *de;
  int rc = UNICO_OK;
  *n = 0;
  int fd = openat(s->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    seterr(e, "cannot list %s: %s", s->path, strerror(errno));
    if (fd >= 0) close(fd);
    return UNICO_EUNAVAILABLE;
  }
  while ((de = readdir(d))) {
    uint64_t no;
    char tail[16];
    if (sscanf(de->d_name, "log-%16" SCNx64 ".%15s", &no, tail) != 2 ||
        strcmp(tail, "unico") != 0)
      continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      uint64_t *nn = realloc(nos, cap * sizeof *nn);
      if (!nn) {
        rc = UNICO_ENOMEM;
        break;
      }
      nos = nn;
    }
    nos[(*n)++] = no;
  }
  closedir(d);
  for (size_t i = 1; i < *n; i++) /* few files: insertion sort */
    for (size_t j = i; j > 0 && nos[j - 1] > nos[j]; j--) {
      uint64_t t = nos[j];
      nos[j] = nos[j - 1];
      nos[j - 1] = t;
    }
  if (rc) {
    free(nos);
    nos = NULL;
    *n = 0;
  }
  *out = nos;
  return rc;
}

/* Read the records of log file f into t until its end (zeros) or a torn
 * or damaged record. Later records of a key replace earlier ones, so the
 * table ends with the state the file leads to; versions are absolute.
 * *good receives the offset after the last whole record. */
static int read_log(FILE *f, umts *t, long *good) {
  ubuf rec = UBUF_INIT;
  int rc = UNICO_OK;
  *good = 0;
  for (;;) {
    uint8_t hdr[8];
    if (fread(hdr, 1, 8, f) != 8) break;
    uint32_t plen = (uint32_t)lm_get_le(hdr, 4), crc = (uint32_t)lm_get_le(hdr + 4, 4);
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
    uint32_t nops = (uint32_t)lm_get_le(p, 4);
    p += 4;
    for (uint32_t j = 0; j < nops && rc == UNICO_OK; j++) {
      if (end - p < 15) break;
      int act = p[0];
      size_t kl = (size_t)lm_get_le(p + 1, 2), vl = (size_t)lm_get_le(p + 3, 4);
      uint64_t ver = lm_get_le(p + 7, 8);
      p += 15;
      if ((size_t)(end - p) < kl + vl) break;
      if (umts_put(t, p, kl, ver, act == 2, p + kl, vl, 0)) rc = UNICO_ENOMEM;
      p += kl + vl;
    }
    if (rc) break;
    *good = ftell(f);
  }
  ubuf_free(&rec);
  return rc;
}

/* Replay log file number no into LMDB (one checkpoint). */
static int replay_log(lmdb_store *s, uint64_t no, ustore_err *e) {
  char path[4200], name[64];
  umts *t = malloc(sizeof *t);
  int raw = 0;
  long end = 0;
  lm_wal_path(s, no, path, sizeof path);
  lm_wal_name(no, name, sizeof name);
  int fd = openat(s->dir_fd, name, O_RDWR | O_CLOEXEC), rw = fd >= 0;
  if (!rw) fd = openat(s->dir_fd, name, O_RDONLY | O_CLOEXEC); /* no cut */
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    seterr(e, "cannot read the log file %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    free(t);
    return UNICO_EUNAVAILABLE;
  }
  if (!t || umts_init(t, s->psize, 0, NULL)) {
    fclose(f);
    free(t);
    return UNICO_ENOMEM;
  }
  int rc = read_log(f, t, &end);
  /* The zeros written ahead (and a torn record, never acknowledged) go
   * first: on a full disk they are the room the checkpoint needs. */
  struct stat st;
  if (rc == UNICO_OK && rw && fstat(fd, &st) == 0 && st.st_size > end)
    (void)!ftruncate(fd, end);
  fclose(f);
  /* (a log with no record needs no checkpoint: it is deleted after) */
  if (rc == UNICO_OK && t->n) rc = checkpoint_table(s, t, no, e, &raw);
  if (rc != UNICO_OK && lm_space_err(raw))
    seterr(e, "replaying the log of %.100s needs room on its disk, which is "
              "full (%s): free some space there and open the store again; "
              "nothing is lost (%.60s keeps %ld bytes of writes until then)",
           s->path, strerror(raw), name, end);
  if (rc == UNICO_EFULL) { /* a log an older version let grow too large */
    char url[4400], max[32];
    size_t need = 0;
    if (lm_measure(s, &s->lm_used, &s->lm_branch, e) == UNICO_OK)
      need = s->lm_used + lm_ckpt_estimate(s, t->cost, t->n);
    need += lm_reserve_of(need) + need / 4;
    ustore_fmt_size(s->max_map_size, max, sizeof max);
    lm_advice_url(s, lm_suggest_max(s, need), url, sizeof url);
    seterr(e, "the log holds writes that do not fit in max_map_size=%s "
              "(left by a version that did not count them); nothing is "
              "lost: open the store as %s to replay it",
           max, url);
  }
  umts_free(t);
  free(t);
  return rc;
}

/* Replay log files newer than the last checkpoint into LMDB, then delete
 * every log file. Needs the exclusive lock. Sets s->wal_no to the number
 * after the newest file seen. */
int lm_log_recover(lmdb_store *s, ustore_err *e) {
  uint64_t ckpt = 0, newest = 0, *nos = NULL;
  size_t n = 0;
  MDB_txn *txn;
  int rc = lm_begin(s, MDB_RDONLY, &txn, e);
  if (rc) return rc;
  MDB_val k = {CKPT_KLEN, (void *)CKPT_KEY}, v;
  if (mdb_get(txn, s->dbi, &k, &v) == 0 && v.mv_size == VHDR + 8)
    ckpt = lm_get_le((uint8_t *)v.mv_data + VHDR, 8);
  lm_abort(s, txn);
  if ((rc = list_logs(s, &nos, &n, e))) return rc;
  if (n) newest = nos[n - 1];
  for (size_t i = 0; i < n && rc == UNICO_OK; i++)
    if (nos[i] > ckpt) rc = replay_log(s, nos[i], e);
  for (size_t i = 0; i < n && rc == UNICO_OK; i++) {
    char name[64];
    lm_wal_name(nos[i], name, sizeof name);
    unlinkat(s->dir_fd, name, 0);
  }
  free(nos);
  s->wal_no = (newest > ckpt ? newest : ckpt) + 1;
  return rc;
}

/* Start log mode: the tables, the first log file, the checkpointer. */
int lm_log_start(lmdb_store *s, ustore_err *e) {
  char path[4200], name[64];
  /* Parallel writers hold mt_lock shared all the time: a freeze (which
   * takes it exclusive) must not wait behind them for ever. */
  pthread_rwlockattr_t ra;
  if (pthread_rwlockattr_init(&ra)) return UNICO_ENOMEM;
  if (s->par)
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  int lrc = pthread_rwlock_init(&s->mt_lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  if (lrc) return UNICO_ENOMEM;
  s->mt_init = 1;
  if (s->par && lm_par_start(s)) return UNICO_ENOMEM;
  /* (enough full blocks for one table: it is checkpointed at about
   * ckpt_bytes of keys and values) */
  if (umt_spare_init(&s->spare, s->ckpt_bytes / UMT_BLOCK_MAX + 2))
    return UNICO_ENOMEM;
  s->spare_init = 1;
  s->active = malloc(sizeof *s->active);
  if (!s->active || umts_init(s->active, s->psize, 0, &s->spare)) {
    free(s->active);
    s->active = NULL;
    return UNICO_ENOMEM;
  }
  int rc = lm_measure(s, &s->lm_used, &s->lm_branch, e);
  if (rc) return rc;
  lm_wal_name(s->wal_no, name, sizeof name);
  s->wal_fd = openat(s->dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0664);
  if (s->wal_fd < 0) {
    lm_wal_path(s, s->wal_no, path, sizeof path);
    seterr(e, "cannot create the log file %s: %s", path, strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  if (pthread_cond_init(&s->ckpt_cv, NULL)) return UNICO_ENOMEM;
  if (pthread_create(&s->ckpt_thread, NULL, ckpt_main, s)) return UNICO_ENOMEM;
  s->ckpt_started = 1;
  return UNICO_OK;
}

/* Stop log mode: end the checkpointer, write both tables into LMDB, and
 * delete the log files. What cannot be checkpointed stays in the log (the
 * next open replays it): UNICO_OK when everything was, else the error with
 * e saying what was left. */
int lm_log_stop(lmdb_store *s, ustore_err *e) {
  if (s->ckpt_started) {
    pthread_mutex_lock(&s->q_lock);
    s->ckpt_stop = 1;
    pthread_cond_broadcast(&s->ckpt_cv);
    pthread_mutex_unlock(&s->q_lock);
    pthread_join(s->ckpt_thread, NULL);
    pthread_cond_destroy(&s->ckpt_cv);
  }
  ustore_err ce = {{0}};
  char name[64];
  int rc = UNICO_OK, raw = 0;
  if (s->par && s->par_init && s->wal_fd >= 0) lm_par_drain(s); /* (sync=off, deferred) */
  /* Records whose append found the disk full: once more (their requests
   * were answered unknown; the checkpoint below may save them anyway). */
  if (s->nospace_buf.len && s->wal_fd >= 0) {
    s->nospace_try_ms = 0; /* now */
    lm_log_space_retry(s);
  }
  /* In order: a checkpoint records its file's number, and replay skips the
   * files up to it, so the active table may go only after the frozen one. */
  if (atomic_load(&s->failed)) {
    rc = s->failed_rc;
    seterr(&ce, "%s", s->failed_msg);
  }
  if (s->frozen && rc == UNICO_OK) {
    rc = checkpoint_table(s, s->frozen, s->old_no, &ce, &raw);
    if (rc == UNICO_OK) {
      lm_wal_name(s->old_no, name, sizeof name);
      unlinkat(s->dir_fd, name, 0);
    }
  }
  if (s->old_fd >= 0) close(s->old_fd);
  if (rc == UNICO_OK && s->active && s->wal_fd >= 0 && s->active->n)
    rc = checkpoint_table(s, s->active, s->wal_no, &ce, &raw);
  if (rc == UNICO_OK && s->active && s->wal_fd >= 0) {
    lm_wal_name(s->wal_no, name, sizeof name);
    unlinkat(s->dir_fd, name, 0);
  }
  if (s->wal_fd >= 0) close(s->wal_fd);
  if (rc != UNICO_OK) {
    seterr(e, "the final checkpoint of %.100s was not made (%.180s); the "
              "log keeps the writes and the next open replays it",
           s->path, ce.msg);
  }
  for (umts **t = &s->active; t <= &s->frozen; t++) {
    if (*t) umts_free(*t);
    free(*t);
    *t = NULL;
  }
  if (s->lead_rtxn) mdb_txn_abort(s->lead_rtxn);
  s->lead_rtxn = NULL;
  if (s->spare_init) umt_spare_free(&s->spare);
  s->spare_init = 0;
  ubuf_free(&s->wal_buf);
  ubuf_free(&s->nospace_buf);
  if (s->par) lm_par_stop(s);
  if (s->mt_init) pthread_rwlock_destroy(&s->mt_lock);
  return rc;
}
