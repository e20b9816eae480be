/* open.c - opening an LMDB store: options, the process registry (one
 * environment per directory and process), the store's lock file, closing. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "store/lmdb/lmdb_int.h"

/* LMDB forbids opening one environment twice in a process (closing one
 * copy would drop the other's locks), so the opens of one directory share
 * one lmdb_store: the registry, under its lock. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static lmdb_store *registry;

/* Release s; UNICO_OK, or what lm_log_stop() left undone (e). */
static int lm_free(lmdb_store *s, ustore_err *e) {
  int rc = UNICO_OK;
  if (s->syncer_started) { /* it calls back every watch left first */
    pthread_mutex_lock(&s->q_lock);
    s->syncer_stop = 1;
    pthread_cond_signal(&s->watch_cv);
    pthread_mutex_unlock(&s->q_lock);
    pthread_join(s->syncer, NULL);
  }
  if (s->watch_cv_init) pthread_cond_destroy(&s->watch_cv);
  if (s->wal) rc = lm_log_stop(s, e);
  /* Written into files no longer there (a plain commit, or the final
   * checkpoint): say so. */
  if (rc == UNICO_OK && atomic_load(&s->gone) &&
      lm_files_lost(s, e->msg, sizeof e->msg))
    rc = UNICO_EUNAVAILABLE;
  if (s->env) mdb_env_close(s->env);
  if (s->lock_fd >= 0) close(s->lock_fd); /* releases the flocks */
  if (s->dir_fd >= 0) close(s->dir_fd);
  if (s->q_init) {
    pthread_mutex_destroy(&s->q_lock);
  }
  if (s->resize_init) pthread_rwlock_destroy(&s->resize);
  free(s->query);
  free(s->abs_path);
  free(s);
  return rc;
}

static int lm_close_checked(ustore *base, ustore_err *e) {
  lmdb_store *s = (lmdb_store *)base;
  if (!s) return UNICO_OK;
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
  return last ? lm_free(s, e) : UNICO_OK;
}

static void lm_close(ustore *base) {
  ustore_err e;
  lm_close_checked(base, &e);
}

static const ustore_vtab lmdb_vtab = {
    "lmdb", USTORE_CAP_TXN, lm_get, lm_cas, lm_txn,
    lm_scan, lm_close, 511 /* LMDB's default MDB_MAXKEYSIZE */, 0,
    NULL, NULL, NULL, NULL, NULL, lm_watch, NULL, lm_health, lm_close_checked,
    NULL};

/* Log mode: the same calls; writes are answered before their sync when
 * the caller defers (USTORE_CAP_DEFERS). */
static const ustore_vtab lmdb_log_vtab = {
    "lmdb", USTORE_CAP_TXN | USTORE_CAP_DEFERS, lm_get,
    lm_cas, lm_txn, lm_scan, lm_close, 511, 0,
    NULL, NULL, NULL, NULL, NULL, lm_watch, NULL, lm_health, lm_close_checked,
    NULL};

/* Both locks of the store in mode `how` (LOCK_EX or LOCK_SH), without
 * waiting: 0, or -1 with errno (EWOULDBLOCK: another process holds one)
 * and neither held. unico.lock first, as every version takes it; then the
 * directory itself, the lock that counts: unico.lock can be unlinked (a
 * cleaner of old files in /tmp does it) and a new file of that name locked
 * by a second process, while the directory cannot be replaced without the
 * data going with it. (A failed conversion drops the lock it had: flock()
 * converts by releasing first.) */
static int lock_both(lmdb_store *s, int how) {
  if (flock(s->lock_fd, how | LOCK_NB) != 0) return -1;
  if (flock(s->dir_fd, how | LOCK_NB) == 0) return 0;
  int err = errno;
  flock(s->lock_fd, LOCK_UN);
  errno = err;
  return -1;
}

/* Try lock_both(how), and with also_shared LOCK_SH when that fails, for up
 * to ~2 s while others open: 1 when held as asked, 2 when held shared, 0
 * when another process holds the store, -1 (errno) when locking fails. */
static int lock_wait(lmdb_store *s, int how, int also_shared) {
  for (int i = 0; i < 2000; i++) { /* up to ~2 s while others open */
    if (lock_both(s, how) == 0) return 1;
    if (errno != EWOULDBLOCK && errno != EINTR) return -1;
    if (also_shared && lock_both(s, LOCK_SH) == 0) return 2;
    if (errno != EWOULDBLOCK && errno != EINTR) return -1;
    usleep(1000);
  }
  return 0;
}

/* The store's lock: any process takes it exclusive first and replays what
 * a log-mode process left behind; log mode keeps it exclusive, plain mode
 * turns it shared. Plain processes share the store; a log-mode process
 * owns it alone (its recent writes live in its memory). The lock is held
 * on unico.lock and on the directory (lock_both()). */
static int take_lock(lmdb_store *s, int wal, ustore_err *e) {
  char path[4200];
  snprintf(path, sizeof path, "%s/unico.lock", s->path);
  s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (s->lock_fd < 0) {
    seterr(e, "cannot open %s: %s", path, strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  s->dir_fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s->dir_fd < 0) {
    seterr(e, "cannot open the store directory %s: %s", s->path,
           strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  int got = lock_wait(s, LOCK_EX, !wal);
  if (got == 1) { /* exclusive: replay what a log-mode process left */
    int rc = lm_log_recover(s, e);
    if (rc) return rc;
    if (!wal && (got = lock_wait(s, LOCK_SH, 0)) > 0) got = 2;
  }
  if (got < 0) {
    seterr(e, "cannot lock the store at %s: %s", s->path, strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  if (got == 0 && wal) {
    seterr(e, "the store at %s is in use by another process; log mode "
              "(wal=on) needs it alone",
           s->path);
    return UNICO_EBUSY;
  }
  if (got == 0) {
    seterr(e, "the store at %s is owned by a process in log mode (wal=on); "
              "reach it through that process (unico serve) or stop it",
           s->path);
    return UNICO_EBUSY;
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

static const char *const sync_names[] = {"on", "data", "off", NULL};
static const char *const on_off[] = {"off", "on", NULL};
static const char *const writer_names[] = {"leader", "parallel", NULL};

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
  long delay = 0;
  if ((rc = ustore_opt_size(o, "wal_size", 4096, &c->wal_size, e)) ||
      (rc = ustore_opt_size(o, "map_size", (size_t)1 << 20, &map, e)) ||
      (rc = ustore_opt_size(o, "max_map_size", (size_t)1 << 20, &max, e)) ||
      (rc = ustore_opt_word(o, "wal", on_off, &c->wal, e)) ||
      (rc = ustore_opt_word(o, "txn", on_off, &txn, e)) ||
      (rc = ustore_opt_word(o, "sync", sync_names, &c->sync_mode, e)) ||
      (rc = ustore_opt_long(o, "sync_delay_us", 0, SYNC_DELAY_MAX_US, &delay, e)) ||
      (rc = ustore_opt_word(o, "writers", writer_names, &c->par, e)))
    return rc;
  if (c->par < 0) { /* not given: parallel in log mode, unless the
                     * environment's UNICO_LMDB_WRITERS says leader */
    const char *env = getenv("UNICO_LMDB_WRITERS");
    c->par = c->wal && !(env && strcmp(env, "leader") == 0);
  }
  if (c->par && !c->wal) {
    seterr(e, "lmdb store: writers=parallel needs wal=on (plain mode keeps "
              "its leader)");
    return UNICO_EINVAL;
  }
  c->sync_delay_us = delay;
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

/* Whether an open asking for c may share r, opened before: 0, or 1 with e
 * naming the first option that differs. The environment's options cannot
 * change while it is open, and handing back r as it is would ignore them
 * silently. (txn belongs to each handle: ustore_cas_only().) */
static int reopen_differs(const lmdb_store *r, const lm_config *c,
                          ustore_err *e) {
  const lm_config *o = &r->cfg;
  const char *name = NULL;
  char was[64], now[64];
  if (o->wal != c->wal) {
    name = "wal";
    snprintf(was, sizeof was, "%s", on_off[o->wal]);
    snprintf(now, sizeof now, "%s", on_off[c->wal]);
  } else if (o->sync_mode != c->sync_mode) {
    name = "sync";
    snprintf(was, sizeof was, "%s", sync_names[o->sync_mode]);
    snprintf(now, sizeof now, "%s", sync_names[c->sync_mode]);
  } else if (o->par != c->par) {
    name = "writers";
    snprintf(was, sizeof was, "%s", writer_names[o->par]);
    snprintf(now, sizeof now, "%s", writer_names[c->par]);
  } else if (o->sync_delay_us != c->sync_delay_us) {
    name = "sync_delay_us";
    snprintf(was, sizeof was, "%ld", o->sync_delay_us);
    snprintf(now, sizeof now, "%ld", c->sync_delay_us);
  } else {
    static const struct {
      const char *name;
      size_t off;
    } sizes[] = {{"max_map_size", offsetof(lm_config, max_map)},
                 {"map_size", offsetof(lm_config, map_size)},
                 {"wal_size", offsetof(lm_config, wal_size)}};
    for (size_t i = 0; i < 3 && !name; i++) {
      size_t a = *(const size_t *)((const char *)o + sizes[i].off);
      size_t b = *(const size_t *)((const char *)c + sizes[i].off);
      if (a == b) continue;
      name = sizes[i].name;
      ustore_fmt_size(a, was, sizeof was);
      ustore_fmt_size(b, now, sizeof now);
    }
  }
  if (!name) return 0;
  seterr(e, "the store at %s is already open in this process with %s=%s; "
            "it cannot be opened again with %s=%s (open it with the same "
            "options, or close it first)",
         r->path, name, was, name, now);
  return 1;
}

/* The directory path, created if missing; its identity in *st. */
static int make_dir(const char *path, struct stat *st, ustore_err *e) {
  if (!path || !*path) {
    seterr(e, "lmdb store: empty path");
    return UNICO_EINVAL;
  }
  if (strlen(path) >= sizeof ((lmdb_store *)0)->path) {
    seterr(e, "lmdb store: path too long");
    return UNICO_EINVAL;
  }
  if (mkdir_p(path)) {
    seterr(e, "cannot create the store directory %s: %s", path,
           strerror(errno));
    return UNICO_EUNAVAILABLE;
  }
  if (stat(path, st) != 0 || !S_ISDIR(st->st_mode)) {
    seterr(e, "the store path %s is not a directory", path);
    return UNICO_EUNAVAILABLE;
  }
  return UNICO_OK;
}

/* A new store for path, its locks initialised, nothing opened yet; lm_free()
 * takes it half-built. */
static int lm_new(lmdb_store **out, const char *path, const struct stat *st,
                  const lm_config *c, const ustore_opts *o) {
  lmdb_store *s = calloc(1, sizeof *s);
  *out = s;
  if (!s) return UNICO_ENOMEM;
  s->dev = st->st_dev;
  s->ino = st->st_ino;
  s->refs = 1;
  s->lock_fd = s->dir_fd = s->wal_fd = s->old_fd = -1;
  s->cfg = *c;
  s->ckpt_bytes = c->wal_size;
  s->sync_mode = c->sync_mode;
  s->base.vt = c->wal ? &lmdb_log_vtab : &lmdb_vtab;
  snprintf(s->path, sizeof s->path, "%s", path);
  s->max_map_size = c->max_map;
  s->ins_map_size = c->max_map - lm_reserve_of(c->max_map);
  if (!(s->query = join_options(o))) return UNICO_ENOMEM;
  /* Default (reader-preferring) kind on purpose: a scan callback may take
   * the lock again for a get, which a writer-preferring lock could deadlock
   * while a resize waits. */
  if (pthread_rwlock_init(&s->resize, NULL)) return UNICO_ENOMEM;
  s->resize_init = 1;
  if (pthread_mutex_init(&s->q_lock, NULL)) return UNICO_ENOMEM;
  s->q_init = 1;
  pthread_condattr_t ca; /* the syncer's gathering waits on the monotonic clock */
  if (pthread_condattr_init(&ca)) return UNICO_ENOMEM;
  int crc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (!crc) crc = pthread_cond_init(&s->watch_cv, &ca);
  pthread_condattr_destroy(&ca);
  if (crc) return UNICO_ENOMEM;
  s->watch_cv_init = 1;
  return UNICO_OK;
}

/* Open the LMDB environment of s and its database. */
static int env_open(lmdb_store *s, const lm_config *c, ustore_err *e) {
  /* sync=on: the commit syncs the data pages, and the batch's own sync
   * (lm_make_durable) the meta page, before anyone is answered. */
  unsigned flags =
      MDB_NOTLS | (c->sync_mode == SYNC_OFF ? MDB_NOSYNC : MDB_NOMETASYNC);
  size_t map_size = c->map_size;
  MDB_txn *txn;
  MDB_envinfo info;
  MDB_stat pst;
  int dead, mrc;
  if (map_size > s->ins_map_size) map_size = s->ins_map_size;
  if ((mrc = mdb_env_create(&s->env)) ||
      (mrc = mdb_env_set_maxreaders(s->env, 1022)) ||
      (mrc = mdb_env_set_mapsize(s->env, map_size)) ||
      (mrc = mdb_env_open(s->env, s->path, flags, 0664)))
    goto leave;
  /* A larger file made by an earlier, larger map: adopt its size. (LMDB
   * keeps the map at least as large as the pages in use: when they are
   * more than ins_map_size, writes that add data are full and the reserve
   * comes on top.) */
  mdb_env_info(s->env, &info);
  mdb_env_stat(s->env, &pst);
  s->psize = pst.ms_psize;
  s->map_size = info.me_mapsize;
  if (s->map_size > s->ins_map_size) {
    s->ins_map_size = s->map_size;
    if (s->max_map_size < s->map_size + lm_reserve_of(s->map_size))
      s->max_map_size = s->map_size + lm_reserve_of(s->map_size);
  }
  lm_files_note(s); /* what to compare with later (health.c) */
  mdb_reader_check(s->env, &dead); /* free slots of killed processes */
  if ((mrc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn))) goto leave;
  mrc = mdb_dbi_open(txn, NULL, 0, &s->dbi);
  mdb_txn_abort(txn);
leave:
  if (!mrc) return UNICO_OK;
  if (mrc == EACCES || mrc == ENOENT || mrc == ENOTDIR)
    seterr(e, "cannot open the store at %s: %s", s->path, mdb_strerror(mrc));
  else
    seterr(e, "cannot open the LMDB store at %s: %s", s->path,
           mdb_strerror(mrc));
  return mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH
             ? UNICO_ECORRUPT
             : UNICO_EUNAVAILABLE;
}

#define LM_CONFIG_INIT                                                    \
  {(size_t)1 << 30 /* 1 GiB to start */, (size_t)1 << 40 /* up to 1 TiB */, \
   SYNC_ON, 0, 0, CKPT_BYTES, 0, -1}

int ustore_lmdb_caps(const ustore_opts *opts, unsigned *caps,
                     ustore_err *e) {
  lm_config cfg = LM_CONFIG_INIT;
  int rc = read_options(opts, &cfg, e);
  if (rc) return rc;
  *caps = cfg.wal ? lmdb_log_vtab.caps : lmdb_vtab.caps;
  if (cfg.txn_off) *caps &= ~USTORE_CAP_TXN; /* ustore_cas_only() */
  return UNICO_OK;
}

int ustore_lmdb_open(ustore **out, const char *path, const ustore_opts *opts,
                     ustore_err *e) {
  lm_config cfg = LM_CONFIG_INIT;
  lmdb_store *s = NULL, *r;
  struct stat st;
  int rc, locked = 0;
  *out = NULL;
  if ((rc = read_options(opts, &cfg, e)) || (rc = make_dir(path, &st, e)))
    goto leave;
  pthread_mutex_lock(&registry_lock);
  locked = 1;
  for (r = registry; r; r = r->next)
    if (r->dev == st.st_dev && r->ino == st.st_ino) break;
  if (r) { /* open in this process already: share it, if it may be */
    if (reopen_differs(r, &cfg, e)) {
      rc = UNICO_EINVAL;
      goto leave;
    }
    r->refs++;
    *out = &r->base;
    goto leave;
  }
  if ((rc = lm_new(&s, path, &st, &cfg, opts)) ||
      (rc = env_open(s, &cfg, e)) || (rc = take_lock(s, cfg.wal, e)))
    goto leave;
  s->wal = cfg.wal;
  s->par = cfg.wal && cfg.par;
  if (s->wal && (rc = lm_log_start(s, e))) goto leave;
  s->next = registry;
  registry = s;
  *out = &s->base;
  s = NULL;
leave:
  if (locked) pthread_mutex_unlock(&registry_lock);
  if (s) {
    ustore_err fe;
    lm_free(s, &fe); /* (a half-opened store: e keeps why) */
  }
  if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
  /* txn=off: the same store seen through compare-and-set only, so the
   * claims protocol runs on it (tests and simulations). */
  if (rc == UNICO_OK && cfg.txn_off) rc = ustore_cas_only(out, e);
  return rc;
}
