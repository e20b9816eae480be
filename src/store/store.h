/* store.h - the store interface: the one vtable every backend implements.
 *
 * Stores know nothing of tables or constraints: they keep byte keys and byte
 * values, each value with a version the store maintains (1 when created,
 * +1 on every change), and they honour conditions on those versions.
 *
 *   get   linearizable read of one key;
 *   cas   one conditional write (expect absent / version = n / anything);
 *   txn   several conditional writes, all or nothing (only where the store
 *         can: caps & USTORE_CAP_TXN; otherwise UNICO_EUNSUPPORTED);
 *   scan  keys with a prefix, in key order.
 *
 * Return codes are unico codes (include/unico_errors.h) plus USTORE_NOT_APPLIED
 * (a condition did not hold; nothing was written). An error that leaves the
 * outcome of a write unknown is UNICO_EUNKNOWN; one that certainly wrote
 * nothing is UNICO_EUNAVAILABLE (or another definite code).
 *
 * Every backend is in this tree (a folder of src/store/ with its
 * descriptor, store/backend.h), so the vtable carries no version: an
 * optional call is one a backend leaves NULL, and the ustore_* function of
 * the same name then gives the default written beside it in brackets.
 */
#ifndef UNICO_STORE_H
#define UNICO_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "unico_errors.h"
#include "util/buf.h"

#define USTORE_NOT_APPLIED 1

enum ustore_expect {
  USTORE_ANY = 0,     /* no condition */
  USTORE_ABSENT = 1,  /* the key must not exist */
  USTORE_VERSION = 2, /* the key must exist with version expect_version */
  USTORE_PRESENT = 3  /* the key must exist, any version */
};

enum ustore_action {
  USTORE_PUT = 1,  /* write val (version becomes old + 1, or 1) */
  USTORE_DEL = 2,  /* remove the key (no-op if absent) */
  USTORE_CHECK = 3 /* condition only, write nothing */
};

/* One conditional write. The caller fills the inputs; the store fills the
 * outputs. `cur` must be initialised (UBUF_INIT) and is freed by the caller.
 * Inputs are only read during the call. */
typedef struct ustore_op {
  const void *key;
  size_t klen;
  int expect;              /* enum ustore_expect */
  uint64_t expect_version; /* for USTORE_VERSION */
  int action;              /* enum ustore_action */
  const void *val;
  size_t vlen;
  /* outputs, set when the call returns USTORE_NOT_APPLIED: */
  int failed;           /* this op's condition did not hold */
  int exists;           /* the key exists (failed ops only) */
  uint64_t cur_version; /* its version (failed ops only) */
  ubuf cur;             /* its value (failed ops only) */
  /* input: when the store may remove the key by itself (unix ms; 0:
   * never). A store with a time to live keeps it with a PUT: DynamoDB
   * writes it as the TTL attribute exp (and a PUT without it removes an
   * earlier one), Cassandra as USING TTL on an insert of an absent key
   * (the only write it is set on there: outcomes). Stores without one
   * ignore it; unico's own sweeps remove those keys. Only keys nothing
   * will need past that time get it (outcomes, tombstones, expired
   * holds: docs/native-tables.md section 5). */
  int64_t expire_ms;
  /* input: the version a PUT that creates the key gives it (0: 1). The
   * claims protocol creates every record key at a fresh random version
   * (exec/claims.c new_incarnation), so that a key removed and made again
   * never passes through a version an earlier incarnation had: no cas
   * prepared against that one can apply to this one (docs/protocol.md,
   * "Rows that leave"); the atomic executor makes every claim key at one
   * for the same reason ("Claims whose owner is gone"). Every store
   * honours it on a PUT expecting the key absent; LMDB, sim and DynamoDB
   * on a PUT without a condition too (a constraint's build makes claims
   * so). */
  uint64_t create_version;
  /* input, a put of a live record only: the body (JSON text) of the
   * record the write was planned from, NULL when it was not planned from
   * one (a fence, a stamp). A store that keeps records in the users' own
   * tables writes only the columns whose value differs from it, on
   * condition that each still holds what was read (DynamoDB; others
   * ignore it): docs/native-tables.md, "Other writers on DynamoDB". */
  const char *prev;
} ustore_op;

/* A precise message for the error a call returned (may be left empty). */
typedef struct ustore_err {
  char msg[256];
} ustore_err;

typedef struct ustore ustore;
struct ustore_watch;

/* Called for each key of a scan; return non-zero to stop the scan (the scan
 * then returns that value). Pointers are valid only during the call. */
typedef int (*ustore_scan_cb)(void *ctx, const uint8_t *key, size_t klen,
                              const uint8_t *val, size_t vlen,
                              uint64_t version);

/* Called for each key a written() scan reads, with the time it was last
 * written in microseconds since the epoch, by the writer's clock (0: none
 * of its cells has one). Non-zero stops the scan (returned by it). */
typedef int (*ustore_written_cb)(void *ctx, const uint8_t *key, size_t klen,
                                 int64_t wt_us);

#define USTORE_CAP_TXN 0x1u     /* txn() is supported */
#define USTORE_CAP_REMOTE 0x2u  /* every call is a network round trip */
/* Runs are reproducible: the store's clock, faults and schedule follow a
 * seed (the simulated store), so whoever draws random numbers beside it
 * (attempt ids) must draw them from a fixed seed too. */
#define USTORE_CAP_DETERMINISTIC 0x4u
/* Writes may be answered before they are durable (watch_durable does
 * something): a caller that parks answers until then (an event loop) is
 * worth its while (LMDB in log mode). */
#define USTORE_CAP_DEFERS 0x8u
/* Records live in the users' own native tables (docs/native-tables.md):
 * the store maps record keys ("r", table, pk...) and stored records to
 * rows of the table named in its catalog (tables() below); every other key
 * stays in the store's own table. */
#define USTORE_CAP_ROWS 0x10u

/* A plain description of one DDL table, for stores that keep records in
 * native tables: no schema module, only names, types and the key. Column
 * types are schema/schema.h's ucol_type numbers (1 text, 2 int, 3 bigint,
 * 4 boolean, 5 uuid, 6 timestamp, 7 double). */
typedef struct ustore_column {
  const char *name;
  int type;
} ustore_column;
typedef struct ustore_tabledef {
  const char *name;
  size_t ncol;
  const ustore_column *col;
  size_t npk;
  const size_t *pk; /* the primary key's columns, indexes into col */
  size_t npart;     /* Cassandra: the partition key is the first npart of
                       them (0 or 1: the first alone); others ignore it */
} ustore_tabledef;

/* tables(): what to do with the native tables of the catalog. */
enum ustore_tables_mode {
  USTORE_TABLES_SET = 0,   /* only learn the catalog (a schema loaded) */
  USTORE_TABLES_CREATE = 1 /* also create the missing native tables and
                              check the existing ones' keys (schema apply) */
};

typedef struct ustore_vtab {
  const char *name;  /* "lmdb", ... */
  unsigned caps;     /* USTORE_CAP_* */
  /* Read one key. UNICO_OK with val/version, or UNICO_ENOTFOUND. */
  int (*get)(ustore *s, const void *key, size_t klen, ubuf *val,
             uint64_t *version, ustore_err *e);
  /* One conditional write. UNICO_OK or USTORE_NOT_APPLIED (op->cur etc.). */
  int (*cas)(ustore *s, ustore_op *op, ustore_err *e);
  /* All or nothing. UNICO_OK when every condition held and every write was
   * made; USTORE_NOT_APPLIED when any condition failed (each failed op is
   * marked and carries the current value); nothing written then. A key may
   * appear at most once in one txn. */
  int (*txn)(ustore *s, ustore_op *ops, size_t n, ustore_err *e);
  /* Keys starting with prefix, in order, starting strictly after `after`
   * when after is not NULL. */
  int (*scan)(ustore *s, const void *prefix, size_t plen, const void *after,
              size_t alen, ustore_scan_cb cb, void *ctx, ustore_err *e);
  /* Release everything. Accepts a half-opened store. */
  void (*close)(ustore *s);
  /* The longest key the store accepts, in bytes (0: no limit). */
  size_t max_key;
  /* The most ops one txn() may carry (0: no limit). */
  size_t max_txn;
  /* Optional, each (NULL: the default in brackets). */
  /* The store's clock, in ms since the epoch [the wall clock]. The
   * simulated store answers with its virtual clock. */
  int64_t (*now_ms)(ustore *s);
  /* Wait ms milliseconds [nanosleep]. */
  void (*sleep_ms)(ustore *s, int64_t ms);
  /* Independent conditional writes issued together, in parallel where the
   * store can; they apply in no particular order and not atomically. Each
   * op's own result goes to rcs[i]: UNICO_OK, USTORE_NOT_APPLIED (outputs
   * in ops[i] as for cas) or an error code (UNICO_EUNKNOWN: that write may
   * or may not have applied) with its message in errs[i] (errs may be
   * NULL). Returns UNICO_OK when every rcs[i] was filled [one cas() after
   * the other]. */
  int (*cas_many)(ustore *s, ustore_op *ops, size_t n, int *rcs,
                  ustore_err *errs);
  /* Optional. Independent conditional writes sent without
   * waiting for their answers, for writes whose result changes nothing
   * for the caller (the claims protocol's finish). Each may apply or not,
   * now or a little later; the caller learns nothing, and ops' outputs
   * are left alone [cas_many, its results dropped]. */
  void (*post_many)(ustore *s, ustore_op *ops, size_t n);
  /* Optional. Reads of ops[i].key issued together: rcs[i] is
   * UNICO_OK with the value in ops[i].cur and its version in
   * ops[i].cur_version, UNICO_ENOTFOUND, or an error (its message in
   * errs[i]; errs may be NULL). Returns UNICO_OK when every rcs[i] was
   * filled [one get() after the other]. */
  int (*get_many)(ustore *s, ustore_op *ops, size_t n, int *rcs,
                  ustore_err *errs);
  /* Optional. Deferred durability (see ustore_defer_begin):
   * arrange for w->cb to be called once every write numbered up to w->seq
   * is durable, or once syncing failed. 0: it already is (cb is not
   * called); 1: cb will be called exactly once, from the store's syncer
   * thread, or before this returns when that thread cannot be started.
   * Callers embed the watch in a struct of their own to carry context.
   * [NULL: a store that never defers; every ticket is 0.] */
  int (*watch_durable)(ustore *s, struct ustore_watch *w);
  /* Optional (only stores with USTORE_CAP_ROWS): the catalog of
   * DDL tables, handed down whenever a schema is loaded or applied (mode
   * enum ustore_tables_mode). The store copies what it keeps. A table it
   * cannot hold natively (DynamoDB: more than two key columns) or whose
   * existing native table does not match is UNICO_ESCHEMA, naming it.
   * [NULL: UNICO_OK, nothing to do] */
  int (*tables)(ustore *s, const ustore_tabledef *defs, size_t n, int mode,
                ustore_err *e);
  /* Optional. Whether the store takes writes now: UNICO_OK, or
   * the error writes get now (UNICO_EUNAVAILABLE, UNICO_EFULL...) with
   * *reason a stable word (USTORE_HEALTH_*) and the message in e; reads
   * may still be answered. A few system calls at most: a health check
   * may call it every time. [NULL: UNICO_OK] */
  int (*health)(ustore *s, const char **reason, ustore_err *e);
  /* Optional. close(), saying whether everything written was
   * left where the next open finds it: UNICO_OK, or an error with e saying
   * what was left undone (LMDB's log mode: the final checkpoint could not
   * be made; nothing acknowledged is lost, the log is replayed at the
   * next open). [NULL: close(), then UNICO_OK] */
  int (*close_checked)(ustore *s, ustore_err *e);
  /* Optional. Every key with its write time, for check --since
   * (api/since.c): each row of the native tables (the newest write time
   * of its declared regular columns and unico's bookkeeping columns) and
   * each key of the store's own table; keys and times only, no values,
   * in no order. [NULL: the store keeps no write times; the caller says
   * UNICO_EUNSUPPORTED] */
  int (*written)(ustore *s, ustore_written_cb cb, void *ctx, ustore_err *e);
} ustore_vtab;

/* The reasons health() gives. */
#define USTORE_HEALTH_REMOVED "store_removed" /* its files were removed */
#define USTORE_HEALTH_DISK_FULL "disk_full"   /* no space left on its disk */
#define USTORE_HEALTH_LOG "log_failed"        /* writing its log failed */
#define USTORE_HEALTH_CKPT "checkpoint_failed"

/* health() and close_checked() with their defaults. */
int ustore_health(ustore *s, const char **reason, ustore_err *e);
int ustore_close_checked(ustore *s, ustore_err *e);

/* Deferred durability. A store that makes writes durable with a sync of
 * their own (LMDB in log mode) may, for the calling thread between
 * ustore_defer_begin() and ustore_defer_end(), answer a write as soon as
 * its outcome is decided, before it is durable, and note the number of the
 * commit that has to be durable first. ustore_defer_end() returns the
 * highest such number (0: nothing to wait for); whoever shows the outcome
 * to anyone must first see that commit durable through watch_durable().
 * Reads never defer anything (as without deferral). */
void ustore_defer_begin(void);
uint64_t ustore_defer_end(void);
/* For backends: is the calling thread deferring; note a commit number. */
int ustore_deferring(void);
void ustore_defer_note(uint64_t seq);

typedef struct ustore_watch {
  uint64_t seq; /* the commit that must be durable */
  /* rc: UNICO_OK, or UNICO_EUNKNOWN with msg when syncing failed */
  void (*cb)(struct ustore_watch *w, int rc, const char *msg);
  struct ustore_watch *next; /* the store's */
} ustore_watch;

/* watch_durable with its default (0 when the store has none). */
int ustore_watch_durable(ustore *s, ustore_watch *w);

/* The optional calls with their defaults (a NULL entry gets the
 * default). */
int64_t ustore_now(ustore *s);
/* For tests: move the clock of every store without one of its own (the
 * wall clock, in this process) forward by ms, as time passing would
 * (tests/test_diff.c expires holds this way on LMDB and Cassandra while
 * it moves the simulated store's clock by as much). */
void ustore_clock_shift(int64_t ms);
void ustore_sleep(ustore *s, int64_t ms);
int ustore_cas_many(ustore *s, ustore_op *ops, size_t n, int *rcs,
                    ustore_err *errs);
void ustore_post_many(ustore *s, ustore_op *ops, size_t n);
int ustore_tables(ustore *s, const ustore_tabledef *defs, size_t n, int mode,
                  ustore_err *e);
int ustore_get_many(ustore *s, ustore_op *ops, size_t n, int *rcs,
                    ustore_err *errs);

struct ustore {
  const ustore_vtab *vt;
};

/* For backends whose scans come back unordered (Cassandra, DynamoDB): a
 * list of the rows gathered, then handed to the callback in key order. */
typedef struct ustore_scanitem {
  uint8_t *k, *v;
  size_t kl, vl;
  uint64_t ver;
} ustore_scanitem;
typedef struct ustore_scanbuf {
  ustore_scanitem *v;
  size_t n, cap;
} ustore_scanbuf; /* zero-initialized */
/* Byte order, a shorter key first when it is a prefix of the other. */
int ustore_key_cmp(const void *a, size_t al, const void *b, size_t bl);
/* A copy of the row; UNICO_OK or UNICO_ENOMEM. */
int ustore_scanbuf_add(ustore_scanbuf *b, const void *k, size_t kl,
                       const void *v, size_t vl, uint64_t ver);
/* Sort, then call cb for each row until it returns non-zero (returned). */
int ustore_scanbuf_deliver(ustore_scanbuf *b, ustore_scan_cb cb, void *ctx);
void ustore_scanbuf_free(ustore_scanbuf *b);

/* Fill e->msg (e may be NULL), for backends. */
void ustore_seterr(ustore_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An op with the given inputs and cleared outputs (cur: UBUF_INIT). */
static inline ustore_op ustore_op_make(const void *key, size_t klen,
                                       int expect, uint64_t version,
                                       int action, const void *val,
                                       size_t vlen) {
  ustore_op o = {key, klen, expect, version, action, val, vlen,
                 0, 0, 0, UBUF_INIT, 0, 0, NULL};
  return o;
}

/* Replace *s by a handle on the same store without transactions (caps 0,
 * txn() UNICO_EUNSUPPORTED): what the claims protocol sees of a store that
 * has only per-key compare-and-set. Closing it closes the original. On
 * failure *s is closed and NULL. */
int ustore_cas_only(ustore **s, ustore_err *e);

/* What a store URL says to the layers above the store: options every
 * store takes, read by ustore_open_with() itself. */
enum ustore_commit {
  USTORE_COMMIT_PARALLEL = 0, /* "commit=parallel" (the default) */
  USTORE_COMMIT_CLASSIC = 1   /* "commit=classic" */
};
typedef struct ustore_params {
  /* The claims protocol's commit of an insert (docs/parallel-commit.md):
   * enum ustore_commit. Ignored by the atomic executor. */
  int commit;
} ustore_params;

/* Open a store from a URL: "SCHEME:LOCATION?NAME=VALUE&..." (lmdb:PATH,
 * lmdb://PATH, dynamodb://..., dynamodbs://..., cassandra://..., sim:NAME)
 * or a bare path of the embedded store; NULL or "": "lmdb:./unico-data".
 * Options follow the rules of store/options.h. params (may be NULL)
 * receives the options meant for the layers above. On failure *out is
 * NULL and e says why. */
int ustore_open_with(ustore **out, const char *url, ustore_params *params,
                     ustore_err *e);
/* ustore_open_with(out, url, NULL, e). */
int ustore_open(ustore **out, const char *url, ustore_err *e);

/* The caps (USTORE_CAP_*) a store opened from url would have, without
 * opening it: UNICO_OK, or the error ustore_open() would give for the URL
 * itself (a bad option, an unknown scheme). */
int ustore_url_caps(const char *url, unsigned *caps, ustore_err *e);

/* The backends, their descriptors and options: store/backend.h; their
 * options, parsed: store/options.h. */
struct ustore_opts;

#endif
