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
  UREFUSED_REPEAT       /* (claims protocol) an insert whose op id already
                           committed to the record key (its history says;
                           the answer is there) */
};

typedef struct uexec_refused {
  int why;           /* enum uexec_refusal */
  size_t claim;      /* UREFUSED_CLAIM, _LIMIT: index into plan->take */
  ustored_claim owner; /* UREFUSED_CLAIM: the claim that holds the value */
  uint64_t cur_version; /* UREFUSED_CLAIM: that claim's store version */
  int64_t count;     /* UREFUSED_LIMIT: the group's count */
  /* UREFUSED_RECORD of an insert: the key holds a tombstone (or an
   * intent) at or above the plan's version (tomb set), at store version
   * tomb_sver with record version tomb_version; plan the insert over it
   * (its record version continues from the tombstone's) */
  int tomb;
  uint64_t tomb_sver, tomb_version;
} uexec_refused;

/* Apply a plan all or nothing. UNICO_OK when applied; USTORE_NOT_APPLIED
 * when a condition failed (nothing written; *why says which, in the order
 * schema, outcome, record, claims, groups; free why->owner with
 * ustored_claim_free); another code (res filled) on a store error, where
 * UNICO_EUNKNOWN means the write may or may not have been applied.
 * Limit groups are read first and moved with a condition on the version
 * read; a full group is refused only once a store transaction has
 * confirmed the full count is the durable state. Claims to take must be
 * absent, or at version `ver` when the plan takes over a hold. */
int uexec_apply(uexec *x, const uplan *p, uexec_refused *why,
                unico_result *res);

/* Read one key: UNICO_OK (val, version), UNICO_ENOTFOUND, or an error. */
int uexec_read(uexec *x, const ubuf *key, ubuf *val, uint64_t *version,
               unico_result *res);
/* Several conditional writes, all or nothing (store.h's txn): UNICO_OK,
 * USTORE_NOT_APPLIED (failed ops marked), or an error (res filled). */
int uexec_txn(uexec *x, ustore_op *ops, size_t n, unico_result *res);
/* A one-key conditional write (for the schema key). */
int uexec_cas(uexec *x, ustore_op *op, unico_result *res);
/* Every key starting with prefix, in order; cb as in store.h. Returns what
 * a stopping callback returned, or an error code (res filled). */
int uexec_scan(uexec *x, const ubuf *prefix, ustore_scan_cb cb, void *ctx,
               unico_result *res);

/* The same, starting strictly after key `after` (NULL: from the start). */
int uexec_scan_after(uexec *x, const ubuf *prefix, const ubuf *after,
                     ustore_scan_cb cb, void *ctx, unico_result *res);

/* The executor knows no schemas; where the claims protocol judges an
 * insert intent by its table's fingerprint (uplan_table_fingerprint) in
 * the stored schema, it asks this function, which the API sets at open:
 * 0 with *fp set (0: no such table in ddl), -1 when ddl does not parse. */
typedef int (*uexec_fingerprint_fn)(const char *ddl, const char *table,
                                    uint64_t *fp);
void uexec_set_fingerprint(uexec *x, uexec_fingerprint_fn fn);

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
  UEXEC_T_CACHE_RECORDS = 0x4
};
unsigned uexec_traits(uexec *x);

/* The claims protocol's grace period (ms; 0 keeps the default). */
void uexec_set_grace(uexec *x, int64_t grace_ms);
/* 1 when this executor runs the claims protocol. */
int uexec_is_claims(uexec *x);
int64_t uexec_grace(uexec *x);
uint64_t uexec_retention(uexec *x);
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

/* Claims protocol: the state of the claim cl read at key, by the
 * validity rule: UEXEC_CLAIM_IN_FORCE, UEXEC_CLAIM_IN_FLIGHT,
 * UEXEC_CLAIM_FREE (FREE, or an orphan whose operation this call has
 * fenced, in the name of op_id), USTORE_NOT_APPLIED when the owner record
 * moved meanwhile (read again), or an error. */
int uexec_claim_state(uexec *x, const uint8_t *key, size_t klen,
                      const ustored_claim *cl, const char *op_id,
                      unico_result *res);

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
  UEXEC_HOLD_ANSWERED,    /* a repeat of this request kept its outcome
                             first: that is the answer */
  UEXEC_HOLD_OP_ID_USED   /* the caller's op id names another request */
};

typedef struct uexec_hold_out {
  int why;              /* enum uexec_hold_why */
  ustored_claim owner;  /* UEXEC_HOLD_TAKEN (free with ustored_claim_free) */
  int64_t expires_ms;   /* UEXEC_HOLD_HELD */
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
ustore *uexec_store(uexec *x);
/* The most ops one transaction may carry (0: no limit). */
size_t uexec_max_txn(uexec *x);

/* Remove outcomes created before now_ms - retention. */
int uexec_sweep(uexec *x, int64_t now_ms, uint64_t *removed,
                unico_result *res);

#endif
