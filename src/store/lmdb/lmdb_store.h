/* lmdb.h - the embedded store on LMDB (src/store/lmdb/): "lmdb:PATH" or
 * "lmdb://PATH", options below (docs/cli.md). */
#ifndef UNICO_STORE_LMDB_H
#define UNICO_STORE_LMDB_H

#include <stdint.h>

#include "store/store.h"

/* Its options: lmdb_backend.c. */
/* Open (or share, within this process) the environment in directory loc,
 * created if missing. A directory already open in this process is shared;
 * asking for other environment options then is UNICO_EINVAL naming the
 * option (txn, a handle's own, may differ). */
int ustore_lmdb_open(ustore **out, const char *loc,
                     const struct ustore_opts *opts, ustore_err *e);
/* The caps of a store opened with these options, into *caps
 * (ustore_url_caps()); UNICO_EINVAL when an option's value is bad. */
int ustore_lmdb_caps(const struct ustore_opts *opts, unsigned *caps,
                     ustore_err *e);

/* Group-commit counters of an LMDB store since it was opened in this
 * process: write requests, the batches (write transactions, or log appends
 * in log mode) that carried them, the acknowledging syncs, and the
 * checkpoints of log mode. For tests and benchmarks. */
typedef struct ustore_lmdb_stats {
  uint64_t requests, batches, syncs, checkpoints;
  /* the syncs for deferred writes that waited first for more (sync_delay_us) */
  uint64_t gathers;
  /* the number of the last commit, and of the last one known durable */
  uint64_t committed, durable;
  /* the serial part: nanoseconds leaders spent with the writer's role,
   * where only one thread of the store can be (commit.c, lead()), or with
   * parallel writers the time in the log's and the tables' exclusive
   * sections (parallel.c); its share of each request is the floor of the
   * time per write on any number of cores */
  uint64_t serial_ns;
} ustore_lmdb_stats;
void ustore_lmdb_stats_get(ustore *s, ustore_lmdb_stats *out);
/* The same serial time summed over every LMDB store of the process since
 * it started (unico-bench reads it around a point: serial_us_per_op). */
uint64_t ustore_lmdb_serial_ns(void);

/* With sync_delay_us set, how many deferred writes the syncer waits for
 * when `pending` wait for a sync (or its last sync covered that many) and
 * `seen` were lately seen waiting at once: 0 to sync at once (syncer.c). */
size_t ustore_lmdb_gather_goal(size_t pending, size_t seen, uint64_t delay_us);

/* Test hooks (tests only: NULL otherwise; set before the store's threads
 * run). Log mode's parallel writers (writers=parallel) call it at these
 * points: LATCHED, a write checked and admitted, its latches held, before
 * its log record is appended (the return is ignored); SYNC, before a sync
 * of the log (a non-zero return is that sync's failure, an errno). */
enum { USTORE_LMDB_HOOK_LATCHED = 1, USTORE_LMDB_HOOK_SYNC = 2 };
extern int (*ustore_lmdb_hook)(ustore *s, int point);

#endif
