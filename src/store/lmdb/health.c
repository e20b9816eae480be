/* health.c - whether the store still takes writes: its files are still the
 * ones this process opened (a directory removed under a running server
 * must not go on acknowledging writes that vanish at its stop), and its
 * disk has room (log mode refuses writes while it has none, and resumes
 * by itself once it has). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "store/lmdb/lmdb_int.h"

int lm_space_err(int err) { return err == ENOSPC || err == EDQUOT; }

uint64_t lm_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The files LMDB opened in the directory: checked like the directory. */
static const char *const lm_files[] = {"data.mdb", "lock.mdb"};

void lm_files_note(lmdb_store *s) {
  struct stat st;
  char p[4200], cwd[4096];
  /* (by path, as they are checked later: on some file systems, overlayfs
   * of older kernels, fstat() of a descriptor names another device) */
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", s->path, lm_files[i]);
    if (stat(p, &st) != 0) continue;
    *(i ? &s->lmlock_dev : &s->data_dev) = st.st_dev;
    *(i ? &s->lmlock_ino : &s->data_ino) = st.st_ino;
  }
  /* (a process may change its working directory later: the path as it
   * is now, symbolic links left as they are) */
  if (s->path[0] == '/' || !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
  size_t n = strlen(cwd) + strlen(s->path) + 2;
  if ((s->abs_path = malloc(n)))
    snprintf(s->abs_path, n, "%s%s%s", cwd, cwd[0] ? "/" : "", s->path);
  s->files_checked_ms = lm_now_ms();
}

/* Whether a file of the store is no longer the one opened: 0, or 1 with
 * what happened in msg. A few stat() calls. with_log: the log file too. */
static int files_moved(lmdb_store *s, char *msg, size_t n, int with_log) {
  struct stat st;
  char p[4200];
  const char *dir = s->abs_path ? s->abs_path : s->path;
  if ((s->dir_fd >= 0 && fstat(s->dir_fd, &st) == 0 && st.st_nlink == 0) ||
      stat(dir, &st) != 0 || st.st_dev != s->dev || st.st_ino != s->ino) {
    snprintf(msg, n, "the store's directory %.100s was removed (or "
                     "replaced) while this process had it open; what it held "
                     "is no longer on disk; writes are refused: restore the "
                     "store and restart",
             s->path);
    return 1;
  }
  for (int i = 0; i < 2; i++) {
    dev_t dev = i ? s->lmlock_dev : s->data_dev;
    ino_t ino = i ? s->lmlock_ino : s->data_ino;
    if (!ino || s->dir_fd < 0) continue; /* not noted */
    if (fstatat(s->dir_fd, lm_files[i], &st, 0) == 0 && st.st_dev == dev &&
        st.st_ino == ino)
      continue;
    snprintf(msg, n, "the store's file %.100s/%s was removed or replaced while "
                     "this process had it open; writes are refused: restore "
                     "the store and restart",
             s->path, lm_files[i]);
    return 1;
  }
  if (s->wal && with_log) { /* acknowledged writes not yet checkpointed */
    pthread_mutex_lock(&s->q_lock); /* the leader swaps wal_fd under it */
    int gone = s->wal_fd >= 0 && fstat(s->wal_fd, &st) == 0 && st.st_nlink == 0;
    uint64_t no = s->wal_no;
    pthread_mutex_unlock(&s->q_lock);
    if (gone) {
      lm_wal_path(s, no, p, sizeof p);
      snprintf(msg, n, "the log file %.120s was removed while this process "
                       "wrote it; writes are refused: stop this process "
                       "(its final checkpoint saves what the log held) and "
                       "restart",
               p);
      return 1;
    }
  }
  return 0;
}

/* Check the files now; gone is set for good when one moved. */
void lm_files_check(lmdb_store *s) {
  char msg[256];
  if (atomic_load(&s->gone) || !files_moved(s, msg, sizeof msg, 1)) return;
  pthread_mutex_lock(&s->q_lock);
  if (!atomic_load(&s->gone)) {
    memcpy(s->gone_msg, msg, sizeof msg);
    atomic_store(&s->gone, 1);
  }
  pthread_mutex_unlock(&s->q_lock);
}

int lm_files_lost(lmdb_store *s, char *msg, size_t n) {
  return files_moved(s, msg, n, 0);
}

void lm_files_tick(lmdb_store *s) {
  uint64_t now = lm_now_ms();
  if (now - s->files_checked_ms < 1000) return;
  s->files_checked_ms = now;
  lm_files_check(s);
}

int lm_refuse(lmdb_store *s, lm_req *r) {
  if (atomic_load(&s->gone)) {
    seterr(r->e, "%s", s->gone_msg);
    r->rc = UNICO_EUNAVAILABLE;
    return 1;
  }
  if (s->wal && (atomic_load(&s->nospace) & (NOSPACE_LOG | NOSPACE_CKPT))) {
    pthread_mutex_lock(&s->q_lock);
    seterr(r->e, "%s", s->nospace_msg);
    pthread_mutex_unlock(&s->q_lock);
    r->rc = UNICO_EFULL;
    return 1;
  }
  return 0;
}

void lm_nospace_set(lmdb_store *s, int bit, const char *what, int err) {
  pthread_mutex_lock(&s->q_lock);
  snprintf(s->nospace_msg, sizeof s->nospace_msg,
           "%s %.100s failed: its disk is full (%s); %s", what, s->path,
           strerror(err),
           s->wal ? "writes are refused until there is room again, then "
                    "resume by themselves; reads are answered"
                  : "writes fail until there is room again");
  atomic_fetch_or(&s->nospace, bit);
  if (s->wal) pthread_cond_broadcast(&s->ckpt_cv); /* waiters for it: go */
  pthread_mutex_unlock(&s->q_lock);
}

void lm_nospace_clear(lmdb_store *s, int bit) {
  if (atomic_load(&s->nospace) & bit) atomic_fetch_and(&s->nospace, ~bit);
}

int lm_health(ustore *base, const char **reason, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  lm_files_check(s);
  if (atomic_load(&s->gone)) {
    *reason = USTORE_HEALTH_REMOVED;
    seterr(e, "%s", s->gone_msg);
    return UNICO_EUNAVAILABLE;
  }
  if (atomic_load(&s->failed)) {
    *reason = s->failed_why;
    seterr(e, "%s", s->failed_msg);
    return s->failed_rc;
  }
  int ns = atomic_load(&s->nospace);
  if (s->wal && (ns & NOSPACE_LOG)) {
    /* The leader tries the append again when a write comes; a check of
     * health brings one (no write), so that a server nobody writes to
     * while it reports the disk full still notices the room freed. */
    ustore_err te = {{0}};
    atomic_store(&s->nospace_poke, 1);
    lm_txn(base, NULL, 0, &te);
    ns = atomic_load(&s->nospace);
  }
  if (!ns) return UNICO_OK;
  *reason = USTORE_HEALTH_DISK_FULL;
  pthread_mutex_lock(&s->q_lock);
  seterr(e, "%s", s->nospace_msg);
  pthread_mutex_unlock(&s->q_lock);
  return UNICO_EFULL;
}
