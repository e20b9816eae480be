/* internal.h - what the two executors share: the executor handle. */
#ifndef UNICO_EXEC_INTERNAL_H
#define UNICO_EXEC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "exec/exec.h"

/* A protocol: how writes reach the store, chosen once at open. The
 * atomic one (atomic.c) for stores with transactions, the claims protocol
 * (claims.c) for stores with per-key compare-and-set only. */
typedef struct uexec_proto {
  const char *name;
  unsigned traits; /* enum uexec_trait (UEXEC_T_CACHE_RECORDS: also the
                      store's) */
  int hold_apart; /* a hold and its outcome are written one after the
                     other (no transaction): a lost answer can be seen */
  int (*apply)(uexec *x, const uplan *p, uexec_refused *why,
               unico_result *res);
  /* the state of a claim that is not a hold (exec.h's uexec_claim_state) */
  int (*claim_state)(uexec *x, const uint8_t *key, size_t klen,
                     const ustored_claim *cl, uint64_t ver,
                     const char *op_id, int flags, unico_result *res);
  /* write hold h over the claim at cver (0: absent), removing the index
   * oldh of the hold it replaces (NULL: none) */
  int (*hold_put)(uexec *x, const uexec_hold *h, uint64_t cver,
                  const ubuf *oldh, uexec_hold_out *out, unico_result *res);
  /* remove the hold index hkey (at hver) and, cver != 0, the hold at
   * ckey (at cver) */
  int (*hold_drop)(uexec *x, const ubuf *hkey, uint64_t hver,
                   const ubuf *ckey, uint64_t cver, unico_result *res);
  /* make a repair (exec.h's uexec_fix_apply) */
  int (*fix)(uexec *x, const uexec_fix *f, unico_result *res);
} uexec_proto;

extern const uexec_proto uexec_atomic_proto;
extern const uexec_proto uexec_claims_proto;

/* The hold writes of each protocol (hold.c). */
int uexec_atomic_hold_put(uexec *x, const uexec_hold *h, uint64_t cver,
                          const ubuf *oldh, uexec_hold_out *out,
                          unico_result *res);
int uexec_atomic_hold_drop(uexec *x, const ubuf *hkey, uint64_t hver,
                           const ubuf *ckey, uint64_t cver,
                           unico_result *res);
int uexec_claims_hold_put(uexec *x, const uexec_hold *h, uint64_t cver,
                          const ubuf *oldh, uexec_hold_out *out,
                          unico_result *res);
int uexec_claims_hold_drop(uexec *x, const ubuf *hkey, uint64_t hver,
                           const ubuf *ckey, uint64_t cver,
                           unico_result *res);

/* Several conditional writes, all or nothing (store.h's txn; one op on
 * a store without transactions: its cas): UNICO_OK, UEXEC_NOT_APPLIED
 * (failed ops marked), or an error (res filled). */
int uexec_txn(uexec *x, ustore_op *ops, size_t n, unico_result *res);
/* A one-key conditional write. */
int uexec_cas(uexec *x, ustore_op *op, unico_result *res);
/* Count a committed write; every so many run the outcome sweep. */
void uexec_count_write(uexec *x);

/* Repeats (seen.c): has this op id been seen, and what was its outcome.
 * The executor alone reads a request's first answer back, for
 * uexec_apply, uexec_apply_batch and uexec_hold_take, which answer a
 * repeat themselves. */

/* Where to look: the outcome key, and (where the protocol keeps the
 * outcome after the commit, UEXEC_T_OUTCOME_APART; elsewhere ignored) the
 * history of the record key, rec as read or read at rkey. */
enum { UEXEC_SEEN_OUTCOME = 1, UEXEC_SEEN_HISTORY = 2,
       /* only when rec (not NULL) names the op id: its last write's, or
        * one in its history (a record the request may have written) */
       UEXEC_SEEN_IF_NAMED = 4 };

/* The first answer of request q, if it ran before: UNICO_OK with *answer
 * (its output text, the caller frees), UNICO_EOPID (res filled) when the
 * op id was used for a different request, UNICO_ENOTFOUND when the places
 * looked at hold no answer (not a repeat, or one in flight: a marker), or
 * an error. A marker of another request found under the op id is judged
 * (uexec_mark_judge): used by a write that committed, it is UNICO_EOPID. */
int uexec_seen(uexec *x, const uexec_req *q, int where,
               const ustored_record *rec, const ubuf *rkey, char **answer,
               unico_result *res);

/* Repeats (seen.c), for uexec_apply: before the protocol's apply, the
 * first answer of p's request where one may be found already
 * (USTORE_NOT_APPLIED with why UREFUSED_ANSWERED), UNICO_EOPID, an
 * error, or UNICO_ENOTFOUND (go on); after a refusal (why), the first
 * answer a repeat would explain it by (USTORE_NOT_APPLIED with why
 * UREFUSED_ANSWERED, or why as it was: an outcome or history found
 * moved on meanwhile becomes UREFUSED_RACE), UNICO_EOPID or an error.
 * uexec_repeat_batch: a batch's (its outcome key), as _first. */
int uexec_repeat_first(uexec *x, const uplan *p, uexec_refused *why,
                       unico_result *res);
int uexec_repeat_after(uexec *x, const uplan *p, uexec_refused *why,
                       unico_result *res);
int uexec_repeat_batch(uexec *x, const uexec_batch *b, uexec_refused *why,
                       unico_result *res);

/* The repairs of each protocol (repair.c). */
int uexec_atomic_fix(uexec *x, const uexec_fix *f, unico_result *res);
int uexec_claims_fix(uexec *x, const uexec_fix *f, unico_result *res);

/* A version to create a key at (ustore_op.create_version) that no earlier
 * incarnation of the key passed through, to any practical likelihood: a
 * 62-bit hash of this handle's random seed and a counter, at least 2^32
 * (so far above the versions a key made at 1 reaches). Atomic: every
 * claim key is made at one, so that a claim freed and taken again never
 * returns to a version it had, and a condition on the version read names
 * that one claim (docs/protocol.md, "Claims whose owner is gone"). */
uint64_t uexec_fresh_version(uexec *x);

/* A store operation on key k (value v, NULL: none): the one way the
 * executor's files make them. */
static inline ustore_op uexec_op(const ubuf *k, int expect, uint64_t ver,
                                 int action, const ubuf *v) {
  return ustore_op_make(k->p, k->len, expect, ver, action, v ? v->p : NULL,
                        v ? v->len : 0);
}

/* Read a limit group g: its count and version (0, 0 when absent)
 * (exec/atomic.c). */
int uexec_read_group(uexec *x, const uclaim *g, int64_t *count, uint64_t *ver,
                     unico_result *res);
/* res filled for a store error rc of `what` (e: the store's message, may
 * be NULL or empty); returns rc. */
int uexec_store_err(unico_result *res, int rc, const char *what,
                    const ustore_err *e);

struct uexec {
  const uexec_proto *proto;
  ustore *st;
  uint64_t retention_ms; /* outcomes (and, claims protocol, tombstones) */
  int64_t grace_ms;      /* claims protocol: how long a pending claim of
                            another operation is waited for */
  int claims;            /* 1: the claims protocol (no store transactions) */
  uexec_fingerprint_fn fingerprint; /* (exec.h) */
  uexec_holds_fn holds;             /* (exec.h; NULL: the claim list) */
  void *holds_ctx;
  atomic_uint_fast64_t writes;
  /* parallel commit (docs/parallel-commit.md) */
  int pc;                      /* 1: inserts try the two-round-trip path */
  uint64_t seed;               /* mixed into attempt ids */
  atomic_uint_fast64_t attempts;
};


#endif
