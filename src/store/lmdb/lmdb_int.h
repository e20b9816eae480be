/* lmdb_int.h - private to src/store/lmdb/: the store's state and what
 * its files call of each other.
 *
 * The embedded store on LMDB: one environment in a directory, safe for
 * many threads (MDB_NOTLS) and for several processes at once (LMDB's own
 * lock file and robust mutexes). Every stored value is prefixed with its
 * 8-byte big-endian version. The map grows by doubling up to max_map_size.
 *
 * Group commit (commit.c). LMDB has one writer at a time and syncs at
 * every commit, so a write costs a sync (two fdatasync() calls, ~0.3 ms
 * here) however small it is. Writers of one process therefore queue their
 * requests; whichever finds no batch running becomes the leader, takes the
 * queue, and applies every request in its own nested transaction of one
 * write transaction (a refused or failed request aborts only its child),
 * then commits once. The commit syncs the data pages and writes the meta
 * page (MDB_NOMETASYNC); the leader then hands the writer's role to the
 * next queued request and, while that batch runs, makes its own batch
 * durable with one more fdatasync (coalesced: one sync covers every commit
 * made before it, and a later commit's data sync covers the earlier meta
 * pages). No request is answered before the sync that covers the state it
 * saw.
 *
 * The files:
 *   adapter.c     get, the conditional writes of one request (apply_ops),
 *                 scans, transactions under the resize lock, the map and
 *                 its reserve ("space");
 *   commit.c      the queue, the leader and its batch, make_durable;
 *   log.c         log mode's write path (wal=on): a batch against the
 *                 in-memory tables, one append, freezing a full table;
 *   parallel.c    log mode without a leader (writers=parallel): each
 *                 writer latches its keys' parts of the tables, appends
 *                 its record to a shared buffer and waits for the log
 *                 position it depends on;
 *   checkpoint.c  log mode's checkpointer, recovery at open, start, stop;
 *   syncer.c      deferred durability (watch_durable) and the counters;
 *   open.c        options, the process registry (one environment per
 *                 directory and process), the lock file, close. */
#ifndef UNICO_STORE_LMDB_INT_H
#define UNICO_STORE_LMDB_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/lmdb/lmdb_store.h"
#include "store/lmdb/memtable.h"
#include "store/options.h"
#include "store/store.h"
#include "unico_errors.h"

#define VHDR 8 /* bytes of version in front of every value */

/* The options of an open (docs/cli.md), with their defaults (open.c). */
typedef struct lm_config {
  size_t map_size, max_map; /* the map to start with, and its limit */
  int sync_mode;            /* SYNC_* */
  int wal;                  /* log mode */
  int txn_off;              /* a handle without transactions (its own) */
  size_t wal_size;          /* log mode: freeze the active table past this */
  long sync_delay_us;       /* deferred writes: the syncer's gathering */
  int par;                  /* log mode: writers=parallel (parallel.c) */
} lm_config;

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
  uint64_t serial_ns; /* (q_lock) time spent leading: see lead() */
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
  size_t nwatches;                /* (q_lock) watches waiting */
  size_t gather_goal;             /* (q_lock) the syncer waits for this many */
  size_t watches_seen;            /* (q_lock) the most lately waiting at once */
  uint64_t n_gathers;             /* (q_lock) syncs that waited for more */
  int sync_mode;                  /* SYNC_ON, SYNC_DATA or SYNC_OFF */
  /* unico.lock and the directory, both locked: shared (plain mode) or
   * exclusive (log mode); see take_lock() in open.c */
  int lock_fd, dir_fd;
  /* log mode (wal=on; see "log mode" below) */
  int wal;
  pthread_rwlock_t mt_lock; /* guards the tables (not their immutability) */
  int mt_init;
  umts *active;             /* written since the current log file began */
  umts *frozen;             /* being checkpointed into LMDB, or NULL */
  umt_spare spare;          /* blocks the tables hand on (memtable.h) */
  MDB_txn *lead_rtxn;       /* the leader's read handle (lm_begin_read) */
  int spare_init;
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
  atomic_int fail_claim;    /* the first failure writes failed_msg */
  char failed_msg[256];
  int failed_rc;            /* what refused writes get */
  const char *failed_why;   /* its reason for health: "log_failed", ... */
  /* The disk is full (ENOSPC, EDQUOT): NOSPACE_* bits. Log mode refuses
   * writes while LOG or CKPT is set and clears them once space returns:
   * the leader writes the batch whose append failed (nospace_buf) again,
   * the checkpointer retries its table (health.c, checkpoint.c). PLAIN:
   * plain mode's last commit failed for want of space. */
  atomic_int nospace;
  char nospace_msg[256];    /* (q_lock) */
  ubuf nospace_buf;         /* (leader) log records not yet appended */
  uint64_t nospace_try_ms;  /* (leader) the last try to append them */
  atomic_int nospace_poke;  /* lm_health(): try now, whenever the last was */
  /* What was opened, to notice it removed or replaced (health.c): the
   * data file and LMDB's lock file; the directory is dev/ino above. */
  dev_t data_dev, lmlock_dev;
  ino_t data_ino, lmlock_ino;
  char *abs_path; /* path, from the working directory of the open (owned) */
  uint64_t files_checked_ms; /* (leader) the last check */
  /* The store's files were removed or replaced while open: writes are
   * refused for good (set once, under q_lock, gone_msg first). */
  atomic_int gone;
  char gone_msg[256];
  uint64_t n_checkpoints;   /* (q_lock) */
  size_t ckpt_bytes;        /* wal_size: freeze the active table past this */
  /* LMDB as the last checkpoint left it (mt_lock): the bytes of its pages
   * in use and of its branch pages; the page size */
  size_t lm_used, lm_branch, psize;
  /* The options the first open asked for; a later open of the same
   * directory must ask for the same (open.c). */
  lm_config cfg;
  /* log mode, writers=parallel (parallel.c): no leader. Committed and
   * durable above count log positions (bytes appended since the open)
   * instead of batches. */
  int par;
  /* one per part of the tables: exclusive to change the part, shared to
   * read it (a write's conditions on keys it does not change, a get) */
  pthread_rwlock_t latch[UMT_SHARDS];
  int latch_init;
  pthread_mutex_t log_mu;   /* the log's critical section: lbuf, lsn_next */
  ubuf lbuf;                /* (log_mu) records not yet written to the file */
  uint64_t lsn_next;        /* (log_mu) the position after the last record */
  pthread_mutex_t wr_mu;    /* the one writer of the log file: wal_off... */
  ubuf wbuf;                /* (wr_mu) the records being written */
  _Atomic uint64_t written; /* records up to here are in the file */
  _Atomic uint64_t file_lsn; /* the position where wal_fd began */
  /* (wr_mu) zero-filling ahead, outside wr_mu (parallel.c: extend()): a
   * dup of the log file, the range, the file's number */
  int ext_busy, ext_fd;
  uint64_t ext_from, ext_to, ext_no;
  pthread_cond_t ext_cv;    /* (wr_mu) the zero-filling ended */
  uint64_t lost_lsn;        /* (q_lock) writes up to here: outcome unknown */
  int lost_err;             /* (q_lock) why: the errno of the append */
  int sync_err;             /* (q_lock) a sync of the log failed: errno */
  pthread_mutex_t rot_mu;   /* one freezer (or room-maker) at a time */
  int par_init;
  _Atomic size_t adm_cost, adm_n; /* admitted, not yet in the table */
  _Atomic uint64_t par_requests, par_serial_ns;
  _Atomic int par_applying; /* writers between their latches and answer */
  _Atomic uint64_t files_at_ms; /* the last lm_files_tick() */
  struct lm_rpool *rpool;   /* read handles for the writers (parallel.c) */
} lmdb_store;

enum { SYNC_ON = 0, SYNC_DATA = 1, SYNC_OFF = 2 };
enum { NOSPACE_LOG = 1, NOSPACE_CKPT = 2, NOSPACE_PLAIN = 4 };

#define BATCH_MAX 512 /* requests per write transaction */
#define SYNCS_MAX 2   /* syncs in flight at once */
#define SYNC_DELAY_MAX_US 100000 /* sync_delay_us: at most 100 ms */

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

#define seterr ustore_seterr

#define FREEING_SLACK 4096
#define LM_LATER 2 /* apply_ops: not a freeing write; nothing written */
#define LM_FULL 3  /* log_apply: the store has no room; nothing written */
#define LM_RETRY 4 /* lm_tables_begin: locks released, start over */

#define CKPT_BYTES ((size_t)64 << 20) /* default wal_size */
#define CKPT_KEY "\x00unico-log-checkpoint" /* outside the tuple key space */
#define CKPT_KLEN (sizeof CKPT_KEY - 1)

/* Why a request goes back to the queue instead of being answered
 * (RETRY_LATER: kept out of a batch with the reserve open, not counted). */
enum { RETRY_NO = 0, RETRY_FULL = 1, RETRY_AGAIN = 2, RETRY_LATER = 3 };

/* What a write adds and removes, to tell whether it frees space. */
typedef struct space_acc {
  long long net; /* bytes added less bytes removed */
  int dels;      /* keys that exist and are deleted, or shrink */
} space_acc;

/* adapter.c */
size_t lm_reserve_of(size_t max);
size_t lm_suggest_max(const lmdb_store *s, size_t need);
void lm_advice_url(const lmdb_store *s, size_t max, char *out, size_t n);
int lm_full_err(const lmdb_store *s, size_t need, ustore_err *e);
int lm_map_rc(lmdb_store *s, int rc, const char *what, ustore_err *e);
uint64_t lm_get_ver(const MDB_val *v);
int lm_remap(lmdb_store *s, size_t want, int exact, ustore_err *e);
void lm_set_reserve(lmdb_store *s, int on);
int lm_begin(lmdb_store *s, unsigned flags, MDB_txn **txn, ustore_err *e);
/* A read transaction from the handle *keep (renewed; begun into *keep
 * when it is NULL), so that a thread reading again and again allocates
 * none: end it with lm_end_read(), which resets it for the next time. The
 * owner of *keep aborts it when done. */
int lm_begin_read(lmdb_store *s, MDB_txn **keep, MDB_txn **txn, ustore_err *e);
void lm_end_read(lmdb_store *s, MDB_txn *txn);
/* One try at a transaction (keep as above), the resize lock already held
 * by the caller: an LMDB code (MDB_MAP_RESIZED: remap, try again). */
int lm_begin_once(lmdb_store *s, unsigned flags, MDB_txn **keep,
                  MDB_txn **txn);
/* Log mode: the resize lock (shared) and then the tables' lock (mt_lock;
 * exclusive when excl), the one order every path that holds both takes
 * them (a scan holds the resize lock through its callbacks, which may
 * get() and so take the tables' lock). lm_tables_unlock() releases both. */
void lm_tables_lock(lmdb_store *s, int excl);
void lm_tables_unlock(lmdb_store *s);
/* With lm_tables_lock(): begin a read transaction (keep as in
 * lm_begin_read(), or NULL). UNICO_OK: both locks still held, the
 * transaction's end (lm_end_read(), lm_abort()) releases the resize lock
 * and the caller the tables' lock. Otherwise both are released: LM_RETRY
 * when the map, grown by another process, was adopted (lock again and
 * start over; *tries counts), or an error. */
int lm_tables_begin(lmdb_store *s, MDB_txn **keep, MDB_txn **txn, int *tries,
                    ustore_err *e);
void lm_abort(lmdb_store *s, MDB_txn *txn);
int lm_commit(lmdb_store *s, MDB_txn *txn);
void lm_space_add(space_acc *a, const ustore_op *op, int exists,
                  size_t old_vlen);
int lm_space_frees(const space_acc *a);
int lm_put_reserve(MDB_txn *txn, MDB_dbi dbi, MDB_val *k, MDB_val *nv);
int lm_apply_ops(lmdb_store *s, MDB_txn *txn, ustore_op *ops, size_t n,
                 int freeing_only, int *mrc);
int lm_get(ustore *base, const void *key, size_t klen, ubuf *val,
           uint64_t *version, ustore_err *e);
int lm_cas(ustore *base, ustore_op *op, ustore_err *e);
int lm_scan(ustore *base, const void *prefix, size_t plen, const void *after,
            size_t alen, ustore_scan_cb cb, void *ctx, ustore_err *e);

/* commit.c */
int lm_txn(ustore *base, ustore_op *ops, size_t n, ustore_err *e);
int lm_make_durable(lmdb_store *s, uint64_t seq, ustore_err *e);

/* log.c */
uint64_t lm_get_le(const uint8_t *p, int n);
void lm_wal_path(const lmdb_store *s, uint64_t no, char *out, size_t n);
/* The log file's name in the directory (for openat(dir_fd), unlinkat()). */
void lm_wal_name(uint64_t no, char *out, size_t n);
/* The log failed at `what` with errno err, or the checkpointer with rc:
 * writes are refused from then on. */
void lm_fail_log(lmdb_store *s, const char *what, int err);
void lm_fail_ckpt(lmdb_store *s, int rc, const char *msg);
size_t lm_ckpt_estimate(const lmdb_store *s, size_t cost, size_t n);
int lm_log_batch_apply(lmdb_store *s, lm_req *batch, int *retry_of);
/* The pieces of a write, for the leader and for parallel writers: check
 * and admit (lm_log_check), the log record (lm_log_record, appended to
 * b), the tables (lm_log_set: 0 or -1 out of memory; lsn into the
 * entries), the admitted share given back (lm_log_admitted). */
int lm_log_check(lmdb_store *s, MDB_txn *txn, ustore_op *ops, size_t nops,
                 ustore_err *e, uint64_t *dep, size_t *dc, size_t *dn);
void lm_log_record(ubuf *b, const ustore_op *ops, size_t nops);
int lm_log_set(lmdb_store *s, const ustore_op *ops, size_t nops, uint64_t lsn);
void lm_log_admitted(lmdb_store *s, size_t dc, size_t dn);
/* Append n bytes at wal_off (zero-filling ahead): 0 or -1 with errno. */
int lm_log_write(lmdb_store *s, const uint8_t *p, size_t n);
/* How far ahead to zero-fill; zero-fill fd's [from, to) and sync it: 0 or
 * -1 with errno. */
uint64_t lm_log_extend(const lmdb_store *s);
int lm_log_zero(const lmdb_store *s, int fd, uint64_t from, uint64_t to);
/* held: the caller holds the tables exclusive (lm_mt_excl). */
void lm_log_rotate(lmdb_store *s, int held);
int lm_log_flush(lmdb_store *s, int *rotated);
/* The disk was full: append what could not be, at most every 200 ms, and
 * clear NOSPACE_LOG once done. The leader (or the store's closing). */
void lm_log_space_retry(lmdb_store *s);

/* checkpoint.c */
int lm_log_recover(lmdb_store *s, ustore_err *e);
int lm_log_start(lmdb_store *s, ustore_err *e);
int lm_log_stop(lmdb_store *s, ustore_err *e);

/* health.c */
/* Whether err (an errno) says the disk is out of space. */
int lm_space_err(int err);
uint64_t lm_now_ms(void); /* monotonic */
/* Note the identity of the files just opened (after env_open). */
void lm_files_note(lmdb_store *s);
/* Check, at most once a second, that the store's files are still the ones
 * opened; sets gone when not. The leader, between batches. */
void lm_files_tick(lmdb_store *s);
/* Whether the directory, the data file or LMDB's lock file is no longer
 * the one opened (the log file aside): 0, or 1 with msg saying which. */
int lm_files_lost(lmdb_store *s, char *msg, size_t n);
/* Whether the writes of a batch must be refused now: 1 with r->rc and
 * r->e set (the store is gone, or log mode is out of space), else 0. */
int lm_refuse(lmdb_store *s, lm_req *r);
/* Log mode: the log failed, or the disk is full: no freezing, no waiting
 * for the checkpointer. */
static inline int lm_log_stuck(lmdb_store *s) {
  return atomic_load(&s->failed) ||
         (atomic_load(&s->nospace) & (NOSPACE_LOG | NOSPACE_CKPT));
}
/* Log mode, disk full: set (bits, with its message) or clear NOSPACE_*. */
void lm_nospace_set(lmdb_store *s, int bit, const char *what, int err);
void lm_nospace_clear(lmdb_store *s, int bit);
int lm_health(ustore *base, const char **reason, ustore_err *e);

/* parallel.c: log mode's write path without a leader (writers=parallel) */
int lm_par_start(lmdb_store *s);
void lm_par_stop(lmdb_store *s);
int lm_par_txn(lmdb_store *s, ustore_op *ops, size_t n, ustore_err *e);
/* Records up to lsn (UINT64_MAX: all) written to the log file (not
 * synced): 0, or an errno (their outcome is then unknown). */
int lm_par_write(lmdb_store *s, uint64_t lsn);
/* The log position after the last record appended (log_mu). */
uint64_t lm_par_appended(lmdb_store *s);
/* Everything appended written to the file (at close). */
void lm_par_drain(lmdb_store *s);
/* Why the writes up to lsn have an unknown outcome (an append failed),
 * into e. With or without q_lock (lock: whether to take it). */
void lm_par_lost(lmdb_store *s, uint64_t lsn, ustore_err *e);
/* Test hooks: ustore_lmdb_hook in lmdb_store.h. */
/* The serial part: dt nanoseconds where one thread alone could be. */
void lm_serial_add(lmdb_store *s, uint64_t dt);
uint64_t lm_mono_ns(void);

/* commit.c: with q_lock, the log durable up to seq (parallel writers):
 * durable raised, the waiters it covers woken; every waiter woken (to
 * hear of a failure). */
void lm_durable_to(lmdb_store *s, uint64_t seq);
void lm_wake_all(lmdb_store *s);

/* health.c: check the store's files now (lm_files_tick() without its
 * once a second). */
void lm_files_check(lmdb_store *s);

/* syncer.c */
int lm_watch(ustore *base, ustore_watch *w);

#endif
