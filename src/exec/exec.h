/* exec.h - the executor: applies planned writes (plan/plan.h) to a store and
 * reports which condition refused them; reads, scans and the outcome sweep.
 * It knows keys, stored formats and store conditions, nothing of JSON or of
 * schemas. Executor 1, "atomic" (atomic.c): one store transaction per
 * write, for stores with txn(). Executor 2, the claims protocol
 * (claims.c): per-key compare-and-set only, for the others. */
#ifndef UNICO_EXEC_H
#define UNICO_EXEC_H

#include <stdint.h>

#include "plan/plan.h"
#include "store/store.h"
#include "unico.h"

typedef struct uexec uexec;

/* An executor call that wrote nothing because a condition did not hold
 * (why it did not is in its out-parameter): the store's code, named for
 * the callers of the executor, which never see a store operation. */
#define UEXEC_NOT_APPLIED USTORE_NOT_APPLIED

#define UEXEC_GRACE_MS 5000 /* default grace period (claims protocol) */

/* Open the store at url (store.h's ustore_open) and pick the protocol it
 * allows. retention_ms: how long outcomes are kept (0: a day). */
int uexec_open(uexec **out, const char *url, uint64_t retention_ms,
               unico_result *res);
void uexec_close(uexec *x); /* accepts NULL */
/* uexec_close(), saying whether the store was left whole (ustore.h's
 * close_checked): UNICO_OK, or the error with res saying what was left. */
int uexec_close_checked(uexec *x, unico_result *res);
/* Whether the store takes writes now (ustore.h's health): UNICO_OK, or
 * the error writes get now, *reason its stable word and res the message. */
int uexec_health(uexec *x, const char **reason, unico_result *res);

/* Why a write was not applied. */
enum uexec_refusal {
  UREFUSED_SCHEMA = 1,  /* the schema moved since the plan was made */
  UREFUSED_OUTCOME,     /* an outcome exists under the op id (a race) */
  UREFUSED_RECORD,      /* insert: the record exists; else: it moved */
  UREFUSED_CLAIM,       /* a value is taken; see claim and owner */
  UREFUSED_LIMIT,       /* a limit group is full; see claim and count */
  UREFUSED_RACE,        /* a limit group moved since it was read, or
                           (claims protocol) the write was fenced: retry */
  UREFUSED_BUSY,        /* (claims protocol) a value or a full limit group
                           is held by an operation in flight; see claim */
  UREFUSED_REPEAT,      /* (claims protocol) an insert whose op id already
                           committed to the record key (its history says;
                           the answer is there) */
  UREFUSED_GONE,        /* the hold a claim takes over (see claim) is gone
                           since (released, or expired and swept): plan
                           again, taking the value as free */
  UREFUSED_OP_ID,       /* (claims protocol) the caller's op id is held
                           by another request's write (its marker, in
                           force) */
  UREFUSED_TWICE,       /* (batch) two writes of one batch take the same
                           value (see uexec_batch_refused) */
  UREFUSED_ANSWERED     /* a repeat: the caller's op id ran this very
                           request before, and answer is its first
                           answer (uexec_apply) */
};

typedef struct uexec_refused {
  int why;           /* enum uexec_refusal */
  size_t claim;      /* UREFUSED_CLAIM, _LIMIT, _GONE: index into
                        plan->take */
  ustored_claim owner; /* UREFUSED_CLAIM: the claim that holds the value */
  uint64_t cur_version; /* UREFUSED_CLAIM: that claim's store version */
  int64_t count;     /* UREFUSED_LIMIT: the group's count */
  /* UREFUSED_RECORD of an insert: the key holds a tombstone (or an
   * intent) at or above the plan's version (tomb set), at store version
   * tomb_sver with record version tomb_version; plan the insert over it
   * (its record version continues from the tombstone's) */
  int tomb;
  uint64_t tomb_sver, tomb_version;
  /* UREFUSED_RECORD of an update or delete: the record as the store holds
   * it now, where the refusal carried it (rec.len > 0; DynamoDB's
   * ReturnValuesOnConditionCheckFailure), at store version rec_sver: the
   * write plans again from it without a read */
  ubuf rec;
  uint64_t rec_sver;
  /* (claims protocol) per take of plan->take, the store version at which
   * the undo of this refused write put back a hold the plan took over
   * (uclaim.ver set), 0 where it put back none; NULL when it put back
   * none at all. The write path takes those holds over at these versions
   * next round: a hold put back is the same hold, at a newer version. */
  uint64_t *restored;
  char *answer;      /* UREFUSED_ANSWERED: the first answer's text (the
                        caller may take it, leaving NULL) */
} uexec_refused;

/* Free what a refusal holds (its owner claim, restored, answer). */
void uexec_refused_free(uexec_refused *why);

/* Apply a plan all or nothing. UNICO_OK when applied; USTORE_NOT_APPLIED
 * when a condition failed (nothing written; *why says which, in the order
 * schema, outcome, record, claims, groups; free why with
 * uexec_refused_free); another code (res filled) on a store error, where
 * UNICO_EUNKNOWN means the write may or may not have been applied.
 * Repeats are the executor's (exec/seen.c): a plan made under the
 * caller's op id (p->req_op) whose request ran before is not applied
 * again but answered, USTORE_NOT_APPLIED with UREFUSED_ANSWERED and the
 * first answer, or refused with UNICO_EOPID when the op id was used for
 * a different request. A repeat comes before every other answer: an
 * update's or delete's before the record found absent or at another
 * version (a plan of uplan_refused: answered, or refused with
 * UREFUSED_RECORD), and before any condition that fails. Where the
 * outcome is kept with the commit (atomic protocol) the record's own
 * op id and the commit's condition on the outcome key tell; where it is
 * kept after it, the outcome key first, then the record key's history.
 * Limit groups are read first and moved with a condition on the version
 * read; a full group is refused only once a store transaction has
 * confirmed the full count is the durable state. Claims to take must be
 * absent, or at version `ver` when the plan takes over a hold. */
int uexec_apply(uexec *x, const uplan *p, uexec_refused *why,
                unico_result *res);

/* What identifies a request under its op id: the kind (plan.h's
 * UPLAN_*), the table, and the fingerprint of what it asked. */
typedef struct uexec_req {
  const char *op_id; /* the caller's (NULL: none, never a repeat) */
  int kind;
  const char *table;
  uint64_t fp;
} uexec_req;

/* ------------------------------------------------------------------ */
/* Batches (exec/batch.c): several planned writes, all or nothing. */

typedef struct uexec_batch {
  const uplan *plans; /* each planned alone, without an outcome; every
                         plan's record key distinct, all under the schema
                         version of plans[0] */
  size_t n;
  const ubuf *okey, *oval, *oidx; /* the group's outcome (NULL or empty
                                     okey: none) */
  uexec_req req;      /* the batch under the caller's op id (req.op_id
                         NULL: none): a repeat is answered first,
                         UREFUSED_ANSWERED, as uexec_apply answers one */
  int refused;        /* the caller could not plan it (plans unused): a
                         repeat is answered, else UREFUSED_RECORD */
} uexec_batch;

typedef struct uexec_batch_refused {
  uexec_refused r; /* why, and for a claim or group: r.claim indexes
                      plans[op].take */
  size_t op;       /* the plan the refusal is about (record, claim,
                      limit, twice) */
  size_t twice;    /* UREFUSED_TWICE: the earlier plan taking the value */
} uexec_batch_refused;

void uexec_batch_refused_free(uexec_batch_refused *why);

/* Apply the plans of b in one store transaction (the atomic protocol
 * only: UNICO_EINVAL on the claims protocol). Keys are judged against the
 * state after the whole group: a claim one plan releases and another
 * takes is rewritten for its new owner; one that two plans take is
 * refused (UREFUSED_TWICE); a limit group moves once, by its net change,
 * and is full only when that change does not fit. UNICO_OK,
 * UEXEC_NOT_APPLIED with *why (nothing written; order: a repeat of
 * b->req, UREFUSED_ANSWERED with its first answer, then twice, schema,
 * outcome, records, claims, groups), UNICO_EOPID (b->req's op id used by
 * a different request), UNICO_EINVAL when the transaction
 * would exceed the store's limit (uexec_max_txn), or an error. */
int uexec_apply_batch(uexec *x, const uexec_batch *b, uexec_batch_refused *why,
                      unico_result *res);

/* Read one key: UNICO_OK (val, version), UNICO_ENOTFOUND, or an error. */
int uexec_read(uexec *x, const ubuf *key, ubuf *val, uint64_t *version,
               unico_result *res);
/* A scan's callback (store.h's contract: 0 goes on, another value stops
 * the scan and is returned; no store write runs inside it). */
typedef ustore_scan_cb uexec_scan_cb;
/* Every key starting with prefix, in order. Returns what a stopping
 * callback returned, or an error code (res filled). */
int uexec_scan(uexec *x, const ubuf *prefix, uexec_scan_cb cb, void *ctx,
               unico_result *res);

/* check --since: every key with its write time (store.h's written():
 * microseconds since the epoch by the writer's clock, 0 none), in no
 * order. UNICO_EUNSUPPORTED (res says so) on a store that keeps none. */
typedef ustore_written_cb uexec_written_cb;
int uexec_written(uexec *x, uexec_written_cb cb, void *ctx, unico_result *res);

/* The same, starting strictly after key `after` (NULL: from the start). */
int uexec_scan_after(uexec *x, const ubuf *prefix, const ubuf *after,
                     uexec_scan_cb cb, void *ctx, unico_result *res);

/* Deferred durability, for the calling thread (store.h's
 * ustore_defer_begin/_end): writes between the two may be answered before
 * they are durable; _end returns the ticket of the commit to wait for (0:
 * none). */
void uexec_defer_begin(void);
uint64_t uexec_defer_end(void);
/* Call w->cb once the commit of ticket w->seq is durable (store.h's
 * watch_durable): 1 when it will be called later, 0 when it is durable
 * already (w->cb is not called). */
typedef ustore_watch uexec_watch;
int uexec_watch_durable(uexec *x, uexec_watch *w);
/* 1 when a store opened from url would defer durability as above, 0 when
 * not, or the error opening it would give for the URL itself. */
int uexec_url_defers(const char *url);
/* Whether a store URL option of that name is a secret (the stores'
 * descriptors: ustore_option_is_secret()). */
int uexec_option_is_secret(const char *name, size_t len);

/* The executor knows no schemas; where the claims protocol judges an
 * insert intent by its table's fingerprint (uplan_table_fingerprint) in
 * the stored schema, it asks this function, which the API sets at open:
 * 0 with *fp set (0: no such table in ddl), -1 when ddl does not parse. */
typedef int (*uexec_fingerprint_fn)(const char *ddl, const char *table,
                                    uint64_t *fp);
void uexec_set_fingerprint(uexec *x, uexec_fingerprint_fn fn);

/* Records in the users' native tables (USTORE_CAP_ROWS) change behind
 * unico's back: the API's judge of whether live record r's body still
 * holds claim key ck that r lists (1: it does, or it cannot be told; 0:
 * another writer changed the value or let it expire). The claims protocol
 * takes a claim whose owner no longer holds the value for an orphan, never
 * for a conflict (issue 37 item 6). Ignored on other stores, where a
 * record's claim list and body never disagree. */
typedef int (*uexec_holds_fn)(void *ctx, const ustored_record *r,
                              const uint8_t *ck, size_t cklen);
void uexec_set_holds(uexec *x, uexec_holds_fn fn, void *ctx);
/* Does the store keep records in the users' native tables? */
int uexec_native_rows(uexec *x);

/* What the protocol chosen at open means for its callers, which never ask
 * which protocol it is. */
enum uexec_trait {
  /* a write's outcome is kept after its commit, not with it; until then
   * the record key's history names the op (repeats look there too) */
  UEXEC_T_OUTCOME_APART = 0x1,
  /* an insert commits as an intent that readers settle (it carries the
   * table's fingerprint; an acknowledged insert may still be one, so its
   * record is not remembered as written) */
  UEXEC_T_INSERT_INTENTS = 0x2,
  /* reads are round trips and a record changes only by a write that
   * conditions on its version: records seen may be remembered */
  UEXEC_T_CACHE_RECORDS = 0x4,
  /* writes land key by key, not in one store transaction: a write in
   * flight, or one whose client died, leaves claims without a live owner
   * (orphans), pending records and intents, which the protocol settles by
   * its validity rule; an audit counts them, it does not report them, and
   * a rebuild fences the writers in flight before it rewrites a table */
  UEXEC_T_KEY_BY_KEY = 0x8,
  /* a limit group keeps the list of its members, not a count
   * (ustored_members, not ustored_group) */
  UEXEC_T_GROUP_MEMBERS = 0x10
};
unsigned uexec_traits(uexec *x);

/* The claims protocol's grace period (ms; 0 keeps the default). */
void uexec_set_grace(uexec *x, int64_t grace_ms);
int64_t uexec_grace(uexec *x);
uint64_t uexec_retention(uexec *x);
/* When what was written at since_ms (an outcome, a tombstone, a hold that
 * expired then) may leave by itself: since_ms + the retention period, the
 * ustore_op expire_ms of such writes. */
int64_t uexec_purge_at(uexec *x, int64_t since_ms);
/* The store's clock (ms since the epoch; virtual on the simulated store)
 * and a wait on it. */
int64_t uexec_now(uexec *x);
void uexec_sleep(uexec *x, int64_t ms);

/* What uexec_claim_state finds (distinct from USTORE_NOT_APPLIED and from
 * the negative UNICO_E* codes). */
enum {
  UEXEC_CLAIM_FREE = 0,     /* free to take over at the version read */
  UEXEC_CLAIM_IN_FORCE = 2, /* its owner record is live and holds it */
  UEXEC_CLAIM_IN_FLIGHT = 3 /* pending, younger than the grace period */
};

/* Claims protocol: the state of the claim cl read at key (version ver), by
 * the validity rule: UEXEC_CLAIM_IN_FORCE, UEXEC_CLAIM_IN_FLIGHT,
 * UEXEC_CLAIM_FREE (FREE, or an orphan whose operation this call has
 * fenced, in the name of op_id), USTORE_NOT_APPLIED when the owner record
 * moved meanwhile, or when the orphan carried a hold still in force, which
 * this call put back at the key (read again), or an error. With
 * UEXEC_CLAIM_NO_WAIT an operation in flight is settled or fenced at once
 * (never UEXEC_CLAIM_IN_FLIGHT): safe, since a fenced operation only fails
 * its commit, for a caller that must not wait (a hold's release). */
enum { UEXEC_CLAIM_NO_WAIT = 1 };
int uexec_claim_state(uexec *x, const uint8_t *key, size_t klen,
                      const ustored_claim *cl, uint64_t ver,
                      const char *op_id, int flags, unico_result *res);

/* Claims protocol, parallel commit (docs/parallel-commit.md): read the
 * record at key rk, settling an insert intent found there first: flipped
 * LIVE when it is complete (every claim it lists names it and its table's
 * definition is the one it was planned under), or, by mode, ABORTED when
 * it is not: UEXEC_SETTLE_READ never aborts, _STALE aborts one older than
 * the grace period, _NOW aborts any. fp_now: the table's fingerprint to
 * judge by (a schema change settling under its own marker), or NULL to
 * read the stored schema (a change marked: in flight, the change decides).
 * val and *ver get the record as it then is; *inflight is 1 when it is
 * still an intent. UNICO_OK, UNICO_ENOTFOUND (absent), or an error. */
enum { UEXEC_SETTLE_READ = 0, UEXEC_SETTLE_STALE = 1, UEXEC_SETTLE_NOW = 2 };
int uexec_read_record(uexec *x, const uint8_t *rk, size_t rkl, ubuf *val,
                      uint64_t *ver, const uint64_t *fp_now, int mode,
                      int *inflight, unico_result *res);
/* uexec_read_record (fp_now NULL), with the outcome key of op_id read in
 * the same round trip: *orc UNICO_OK (oval holds it) or UNICO_ENOTFOUND,
 * or -1 when it could not be read so (the executor reads it then;
 * uplan.req_oval carries what was read to it). */
int uexec_read_record_outcome(uexec *x, const uint8_t *rk, size_t rkl,
                              ubuf *val, uint64_t *ver, int mode,
                              int *inflight, const char *op_id, ubuf *oval,
                              int *orc, unico_result *res);

/* Claims protocol: another request's marker m found under op id op_id
 * (codec/stored.h, ustored_outcome_mark), judged like a claim by the
 * record it names. *verdict: UEXEC_MARK_IN_FORCE (its write committed, or
 * m is a kept outcome: the op id is used), UEXEC_MARK_IN_FLIGHT (its write
 * may still commit: younger than the grace period, or its intent is),
 * UEXEC_MARK_FENCED (its write died or was refused and left it: that
 * write is fenced now, and the op id may be taken over at the version m
 * was read at), UEXEC_MARK_MOVED (the record moved meanwhile: read m
 * again). UNICO_OK or an error. */
enum {
  UEXEC_MARK_IN_FORCE = 0,
  UEXEC_MARK_IN_FLIGHT,
  UEXEC_MARK_FENCED,
  UEXEC_MARK_MOVED
};
int uexec_mark_judge(uexec *x, const char *op_id, const ustored_outcome *m,
                     int *verdict, unico_result *res);

/* ------------------------------------------------------------------ */
/* The schema key (exec/schema.c) */

/* The stored schema (*ver: its store version) or UNICO_ENOTFOUND (*ver 0,
 * ss zeroed); free ss with ustored_schema_free. */
int uexec_schema_read(uexec *x, ustored_schema *ss, uint64_t *ver,
                      unico_result *res);
/* Put ss where the schema key is at store version ver (0: absent):
 * UNICO_OK (it is then at ver + 1, or 1), UEXEC_NOT_APPLIED when it moved,
 * or an error. */
int uexec_schema_put(uexec *x, uint64_t ver, const ustored_schema *ss,
                     unico_result *res);
/* Remove the schema key at store version ver, the same way. */
int uexec_schema_remove(uexec *x, uint64_t ver, unico_result *res);

/* ------------------------------------------------------------------ */
/* Holds (exec/hold.c): a claim with no owner record, an expiry and the
 * SHA-256 of a secret token, indexed by ("h", hash). */

typedef struct uexec_hold {
  const ubuf *ckey;      /* the claim key of the value */
  const uint8_t *hash;   /* the token's SHA-256 (32 bytes) */
  const char *op_id;     /* the hold's op id (the caller's, or generated) */
  const char *caller_op; /* the caller's op id, or NULL */
  int64_t now_ms, expires_ms;
  uint64_t schema_ver;   /* store version of ("s") it was made under (0:
                            absent): a hold lands only while it is there */
  /* caller_op: the outcome kept with the hold (key, value, index), and
   * what identifies the request in it */
  const ubuf *okey, *oval, *oidx;
  const char *kind, *table;
  uint64_t fp;
} uexec_hold;

/* Why a hold was not taken. */
enum uexec_hold_why {
  UEXEC_HOLD_TAKEN = 1,   /* a record holds the value: owner */
  UEXEC_HOLD_HELD,        /* another live hold: expires_ms */
  UEXEC_HOLD_IN_FLIGHT,   /* a write that may still commit holds it */
  UEXEC_HOLD_MOVED,       /* something moved meanwhile: look again */
  UEXEC_HOLD_SCHEMA,      /* the schema moved: reload, look again */
  UEXEC_HOLD_ANSWERED,    /* a repeat: the caller's op id ran this very
                             request before, and out->answer is its first
                             answer (looked for before the hold is taken,
                             and when its outcome is found kept first) */
  UEXEC_HOLD_OP_ID_USED   /* the caller's op id names another request */
};

typedef struct uexec_hold_out {
  int why;              /* enum uexec_hold_why */
  ustored_claim owner;  /* UEXEC_HOLD_TAKEN (free with ustored_claim_free) */
  uint64_t cur_version; /* UEXEC_HOLD_TAKEN: that claim's store version */
  int64_t expires_ms;   /* UEXEC_HOLD_HELD */
  char *answer;         /* UEXEC_HOLD_ANSWERED: the first answer's text
                           (the caller takes it, or frees it) */
} uexec_hold_out;

/* Take the value of h->ckey as a hold, with its index and (caller_op) its
 * outcome: UNICO_OK, USTORE_NOT_APPLIED with out->why (a refusal is
 * reported only on a state the store holds durably), or an error. */
int uexec_hold_take(uexec *x, const uexec_hold *h, uexec_hold_out *out,
                    unico_result *res);

enum uexec_release_why {
  UEXEC_RELEASE_NONE = 1,    /* no hold has this token */
  UEXEC_RELEASE_OTHER_TABLE, /* the hold is another table's */
  UEXEC_RELEASE_TAKEN        /* it expired and its value was taken (its
                                index is removed) */
};

typedef struct uexec_release_out {
  int why;           /* UNICO_ENOTFOUND: enum uexec_release_why */
  ubuf ckey;         /* the hold's claim key (caller inits and frees) */
  int64_t expires_ms;
} uexec_release_out;

/* Give up the hold whose token hashes to hash (table: only a hold of that
 * table; NULL: any). UNICO_OK (out->ckey names the value),
 * UNICO_ENOTFOUND with out->why, USTORE_NOT_APPLIED when it moved
 * meanwhile (look again), or an error. */
int uexec_hold_release(uexec *x, const uint8_t hash[32], const char *table,
                       uexec_release_out *out, unico_result *res);

/* The longest key the store accepts (0: no limit). */
size_t uexec_max_key(uexec *x);
/* The store's name ("lmdb", "dynamodb", ...). */
const char *uexec_store_name(uexec *x);
/* The most ops one transaction may carry (0: no limit). */
/* The DDL tables, for a store that keeps records in the users' native
 * tables (USTORE_CAP_ROWS; other stores ignore them): handed down at every
 * schema load (UEXEC_TABLES_LEARN) and before a schema is applied
 * (UEXEC_TABLES_CREATE: the native tables are created, or checked when
 * they exist). */
enum { UEXEC_TABLES_LEARN = 0, UEXEC_TABLES_CREATE = 1,
       UEXEC_TABLES_RETYPE = 2 /* CREATE, then the retyped columns of
                                  tables found without live records */ };
int uexec_tables(uexec *x, const ustore_tabledef *defs, size_t n, int mode,
                 unico_result *res);
size_t uexec_max_txn(uexec *x);

/* ------------------------------------------------------------------ */
/* Bulk writes under the schema marker (exec/bulk.c): what a schema change
 * writes while it rebuilds a table's claims and limit groups. Writes are
 * queued (a scan callback may queue, never write), then made by
 * uexec_bulk_flush in batches: one store transaction each, or (key by
 * key, where the rebuild has fenced every writer first) one key at a
 * time. Each batch first checks that the schema key is still at
 * *mark_ver, which the caller moves when it refreshes its marker. */

typedef struct uexec_bulk uexec_bulk;
/* Called after each batch (the marker's heartbeat); a non-zero return
 * stops the flush and is returned. */
typedef int (*uexec_tick_fn)(void *ctx);

int uexec_bulk_open(uexec *x, const uint64_t *mark_ver, uexec_tick_fn tick,
                    void *tick_ctx, uexec_bulk **out, unico_result *res);
void uexec_bulk_close(uexec_bulk *b); /* accepts NULL; drops the queue */
/* Queue a put of val at k: at store version ver, or whatever is there
 * (ver 0). */
int uexec_bulk_put(uexec_bulk *b, const uint8_t *k, size_t kl, uint64_t ver,
                   const ubuf *val, unico_result *res);
/* Queue the removal of the claim or limit group at k (value v as read),
 * with whatever hangs on it (a hold's index). */
int uexec_bulk_clear(uexec_bulk *b, const uint8_t *k, size_t kl,
                     const uint8_t *v, size_t vl, unico_result *res);
/* Key by key (UEXEC_T_KEY_BY_KEY), for the record at k (value v, store
 * version ver) found under the marker, by what:
 *   UEXEC_FENCE_WRITES: queue the writes that fence the write that may be
 *     in flight on it (a pending record becomes a tombstone, a live one
 *     moves its version) and note an insert intent for
 *     uexec_bulk_settle; a bare row of a native table (store version 0)
 *     is left as it is (UEXEC_FENCE_BARE, once the change is known good);
 *   UEXEC_FENCE_INTENTS: only note intents;
 *   UEXEC_FENCE_BARE: only a bare row: written back unchanged on the
 *     condition that it is still bare (it gets its bookkeeping, version
 *     1), so an update of it planned before the marker cannot apply.
 * Otherwise nothing. */
enum { UEXEC_FENCE_WRITES = 0, UEXEC_FENCE_INTENTS = 1, UEXEC_FENCE_BARE = 2 };
int uexec_bulk_fence(uexec_bulk *b, const uint8_t *k, size_t kl,
                     const uint8_t *v, size_t vl, uint64_t ver, int what,
                     unico_result *res);
/* Settle the intents noted, judged by the table fingerprint old_fp (the
 * definition being replaced): LIVE when complete, else ABORTED, without
 * waiting. UNICO_EBUSY when one cannot be settled. */
int uexec_bulk_settle(uexec_bulk *b, uint64_t old_fp, unico_result *res);
/* The number of writes queued. */
size_t uexec_bulk_queued(const uexec_bulk *b);
/* Make the queued writes: UNICO_OK, UEXEC_NOT_APPLIED when a condition
 * failed (*marker_moved: the schema key moved, else a key written moved;
 * the batches before it are made), or an error. The queue is empty
 * after. */
int uexec_bulk_flush(uexec_bulk *b, int *marker_moved, unico_result *res);

/* ------------------------------------------------------------------ */
/* Repairs (exec/repair.c): a fix an audit found, made under the
 * conditions it was found with, so that a write since is never undone. */

enum uexec_fix_kind {
  UEXEC_FIX_ORPHAN = 1, /* a claim whose owner does not hold it: freed
                           (key by key: once its operation is fenced);
                           val: the claim as read (key by key) */
  UEXEC_FIX_EXPIRED,    /* an expired hold: freed, with its index hkey */
  UEXEC_FIX_INDEX,      /* a hold index of no hold: removed */
  UEXEC_FIX_RESTORE,    /* a missing claim: val written, while the record
                           rkey is at rver (0: absent) */
  UEXEC_FIX_INTENT,     /* key by key: a stale pending record: val (ABORTED) */
  UEXEC_FIX_TOMB,       /* key by key: an old tombstone: val (shrunk) */
  UEXEC_FIX_FREE,       /* key by key: a FREE claim past use: removed */
  UEXEC_FIX_SETTLE,     /* key by key: a stale insert intent: settled */
  UEXEC_FIX_REAP,       /* key by key: a tombstone past the grace period:
                           it leaves the key (uexec_reap) */
  UEXEC_FIX_STAMP,      /* a native table's bare row (store version 0;
                           key by key also one a fence gave bookkeeping,
                           record version 0 listing nothing) holding
                           values nobody claims: val (the record listing
                           its claims) written at version ver, with tval
                           under each key of take: atomic, in one
                           transaction (each at its .ver, 0: absent); key
                           by key, as an update of the row taking them
                           (exec/repair.c), under the schema at sver */
  UEXEC_FIX_COUNT,      /* atomic: a limit group's counter that is not its
                           live records': val (the count) written at ver
                           (0: absent), or the key removed when val is
                           empty (none live) */
  UEXEC_FIX_UNLIST,     /* a live record listing claims its values do not
                           need (n of them): val (the record without them)
                           written at ver; atomic, in the same transaction,
                           those of them that name the record removed (take,
                           each at its .ver); key by key they are orphans
                           then, freed as any */
  UEXEC_FIX_KINDS
};

typedef struct uexec_fix {
  int kind;      /* enum uexec_fix_kind */
  ubuf key;      /* the key to fix */
  uint64_t ver;  /* its store version as read (0: absent) */
  ubuf rkey;     /* a record whose version must hold (empty: none) */
  uint64_t rver; /* its version as read (0: absent, unless rexists) */
  int rexists;   /* rkey exists at rver, 0 included (a native table's bare
                    row) */
  ubuf hkey;     /* a hold's index to remove with it (empty: none) */
  ubuf val;      /* the value to write (by kind) */
  uclaims take;  /* UEXEC_FIX_STAMP: the claims to write */
  ubuf tval;     /* UEXEC_FIX_STAMP: the claim written under each */
  uint64_t sver; /* UEXEC_FIX_STAMP, key by key: the schema key's store
                    version the fix was found under */
  uint64_t n;    /* UEXEC_FIX_UNLIST: the entries the list loses */
} uexec_fix;

/* Make fix f: UNICO_OK, UEXEC_NOT_APPLIED when what it was found under
 * changed since (left alone), or an error. */
int uexec_fix_apply(uexec *x, const uexec_fix *f, unico_result *res);

/* Claims protocol: the tombstone (DELETED or ABORTED) at record key rk,
 * read at store version ver, leaves the key as a delete's own does
 * (docs/protocol.md, "Rows that leave"): its history's outcomes stored,
 * the key's floor raised to its version, then removed at ver. UNICO_OK;
 * UEXEC_NOT_APPLIED when it moved, is not a tombstone, or a fence went
 * through the key (it stays); or an error. */
int uexec_reap(uexec *x, const uint8_t *rk, size_t rkl, uint64_t ver,
               const char *op_id, unico_result *res);

/* Remove outcomes created before now_ms - retention. */
int uexec_sweep(uexec *x, int64_t now_ms, uint64_t *removed,
                unico_result *res);

#endif
