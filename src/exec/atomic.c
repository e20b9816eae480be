/* atomic.c - executor 1, for stores with transactions: a planned write
 * becomes one store transaction holding the schema check, the record's
 * condition, every claim taken and released, and the outcome. */
#include <stdlib.h>
#include <string.h>

#include "constraint/kind.h"
#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

static ustore_op mkop_claim(const uclaim *c, int expect, int action,
                            const ubuf *val) {
  ubuf k = {c->key, c->klen, c->klen, 0};
  return uexec_op(&k, expect, 0, action, val);
}

/* Read a limit group: its count and version (0, 0 when absent). */
int uexec_read_group(uexec *x, const uclaim *g, int64_t *count, uint64_t *ver,
                     unico_result *res) {
  ubuf k = {g->key, g->klen, g->klen, 0}, v = UBUF_INIT;
  ustore_err e = {{0}};
  *count = 0;
  *ver = 0;
  int rc = x->st->vt->get(x->st, k.p, k.len, &v, ver, &e);
  if (rc == UNICO_ENOTFOUND) {
    *ver = 0;
    rc = UNICO_OK;
  } else if (rc) {
    rc = uexec_store_err(res, rc, "reading a limit group", &e);
  } else if (ustored_group_decode(v.p, v.len, count)) {
    rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored limit group is corrupt");
  }
  ubuf_free(&v);
  return rc;
}

/* A full group refuses the write only when the store confirms, in a
 * transaction (so after the state is durable), that it is still at the
 * version read, under the schema the write was planned with. Not applied:
 * *why says which moved (the schema: the caller reloads it; a write planned
 * with a stale schema would otherwise retry against it until it gave up). */
static int confirm_full(uexec *x, const uplan *p, const uclaim *g,
                        uint64_t ver, int *why, unico_result *res) {
  ubuf gk = {g->key, g->klen, g->klen, 0};
  ustore_op ops[2];
  ustore_err e = {{0}};
  ops[0] = uexec_op(&p->skey, p->schema_ver ? USTORE_VERSION : USTORE_ABSENT,
                p->schema_ver, USTORE_CHECK, NULL);
  ops[1] = uexec_op(&gk, USTORE_VERSION, ver, USTORE_CHECK, NULL);
  int rc = x->st->vt->txn(x->st, ops, 2, &e);
  *why = ops[0].failed ? UREFUSED_SCHEMA : UREFUSED_RACE;
  ubuf_free(&ops[0].cur);
  ubuf_free(&ops[1].cur);
  if (rc == UNICO_OK || rc == USTORE_NOT_APPLIED) return rc;
  return uexec_store_err(res, rc, "reading a limit group", &e);
}

/* Atomic: a claim that is not a hold is in force unless FREE (records and
 * their claims change in one transaction). */
static int atomic_claim_state(uexec *x, const uint8_t *key, size_t klen,
                              const ustored_claim *cl, uint64_t ver,
                              const char *op_id, int flags,
                              unico_result *res) {
  (void)x, (void)key, (void)klen, (void)ver, (void)op_id, (void)flags;
  (void)res;
  return cl->state == UCLAIM_FREE ? UEXEC_CLAIM_FREE : UEXEC_CLAIM_IN_FORCE;
}

/* Which condition refused the transaction ops (the schema check at s_at,
 * the record at r_at, the outcome at o_at, claim k at op_of[k]): *why. */
static int explain(const uplan *p, const ustore_op *ops, size_t s_at,
                   size_t r_at, size_t o_at, const size_t *op_of,
                   uexec_refused *why, unico_result *res) {
  int rc = USTORE_NOT_APPLIED;
  if (ops[s_at].failed) {
    why->why = UREFUSED_SCHEMA;
  } else if (o_at != SIZE_MAX && ops[o_at].failed) {
    why->why = UREFUSED_OUTCOME;
  } else if (ops[r_at].failed) {
    why->why = UREFUSED_RECORD;
    ustored_record t;
    if (p->kind == UPLAN_INSERT && ops[r_at].exists &&
        !ustored_record_decode(ops[r_at].cur.p, ops[r_at].cur.len, &t)) {
      why->tomb = t.state != UREC_LIVE;
      why->tomb_sver = ops[r_at].cur_version;
      why->tomb_version = t.version;
      ustored_record_free(&t);
    } else if (p->kind != UPLAN_INSERT && ops[r_at].exists) {
      /* (where it came with the refusal: out of memory, a read instead) */
      ubuf_put(&why->rec, ops[r_at].cur.p, ops[r_at].cur.len);
      why->rec_sver = ops[r_at].cur_version;
      if (!ubuf_ok(&why->rec)) ubuf_free(&why->rec);
    }
  } else {
    for (size_t k = 0; k < p->take.n; k++) {
      const ustore_op *o = &ops[op_of[k]];
      if (p->take.v[k].kind != UKEY_CLAIM || !o->failed) continue;
      if (!o->exists) { /* a hold taken over at its version, gone since */
        why->why = UREFUSED_GONE;
        why->claim = k;
        break;
      }
      why->why = UREFUSED_CLAIM;
      why->claim = k;
      why->cur_version = o->cur_version;
      if (ustored_claim_decode(o->cur.p, o->cur.len, &why->owner))
        rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
      break;
    }
    /* Otherwise a group moved since it was read. */
    if (!why->why && rc == USTORE_NOT_APPLIED) why->why = UREFUSED_RACE;
  }
  return rc;
}

/* atomic_apply found take `full` a full group (count cnt at version ver):
 * it refuses the write only where nothing before it in the order of
 * refusals (schema, outcome, record, claims: explain) does, as the claims
 * protocol finds them in that order too (test_diff): every condition of
 * ops[0..n) checked in one transaction that writes nothing, then the
 * group confirmed full. USTORE_NOT_APPLIED with why, or an error. */
static int refuse_full(uexec *x, const uplan *p, ustore_op *ops, size_t n,
                       size_t s_at, size_t r_at, size_t o_at,
                       const size_t *op_of, size_t full, int64_t cnt,
                       uint64_t ver, uexec_refused *why, unico_result *res) {
  ustore_err e = {{0}};
  for (size_t k = 0; k < n; k++) ops[k].action = USTORE_CHECK;
  int moved;
  int rc = x->st->vt->txn(x->st, ops, n, &e);
  if (rc == USTORE_NOT_APPLIED)
    rc = explain(p, ops, s_at, r_at, o_at, op_of, why, res);
  else if (rc)
    rc = uexec_store_err(res, rc, "writing", &e);
  if (rc == USTORE_NOT_APPLIED && why->why != UREFUSED_RACE) return rc;
  if (rc && rc != USTORE_NOT_APPLIED) return rc;
  memset(why, 0, sizeof *why);
  rc = confirm_full(x, p, &p->take.v[full], ver, &moved, res);
  if (rc == UNICO_OK) {
    rc = USTORE_NOT_APPLIED;
    why->why = UREFUSED_LIMIT;
    why->claim = full;
    why->count = cnt;
  } else if (rc == USTORE_NOT_APPLIED) {
    why->why = moved;
  }
  return rc;
}

static int atomic_apply(uexec *x, const uplan *p, uexec_refused *why,
                        unico_result *res) {
  size_t n = 2 + p->take.n + p->release.n + p->drop.n + (p->okey.len ? 2 : 0);
  size_t nk = p->take.n + p->release.n + 1;
  /* (on the stack for the usual few keys: no allocation) */
  enum { SMALL = 16 };
  ustore_op ops_s[SMALL];
  size_t op_of_s[SMALL];
  ubuf gvals_s[SMALL];
  int small = n <= SMALL && nk <= SMALL;
  ustore_op *ops = small ? ops_s : calloc(n, sizeof *ops);
  size_t *op_of = small ? op_of_s : calloc(nk, sizeof *op_of);
  ubuf *gvals = small ? gvals_s : calloc(nk, sizeof *gvals);
  if (small) {
    memset(ops_s, 0, n * sizeof *ops);
    memset(op_of_s, 0, nk * sizeof *op_of);
    memset(gvals_s, 0, nk * sizeof *gvals);
  }
  ustore_err e = {{0}};
  int rc = UNICO_OK;
  size_t i = 0;
  memset(why, 0, sizeof *why);
  if (!ops || !op_of || !gvals) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  const size_t s_at = i;
  ops[i++] = uexec_op(&p->skey, p->schema_ver ? USTORE_VERSION : USTORE_ABSENT,
                  p->schema_ver, USTORE_CHECK, NULL);
  const size_t r_at = i;
  /* (an insert over a tombstone expects it; a delete leaves one, so that
   * the key's versions go on counting) */
  ops[i++] = uexec_op(&p->rkey,
                      p->rver || p->rbare ? USTORE_VERSION : USTORE_ABSENT,
                      p->rver, USTORE_PUT, &p->rval);
  ops[r_at].prev = p->rprev;
  /* (a tombstone leaves by itself once the retention period is over, where
   * the store has a time to live: the key's versions may then restart) */
  const int64_t purge_at = uexec_purge_at(x, uexec_now(x));
  if (p->kind == UPLAN_DELETE) ops[r_at].expire_ms = purge_at;
  /* Taking a key: as its kind judges it (constraint/: a claim must be
   * absent or the hold taken over; a group joined must have room, at the
   * version read). */
  size_t full = SIZE_MAX; /* a group found full: judged after the claims */
  int64_t full_cnt = 0;
  uint64_t full_ver = 0;
  for (size_t k = 0; k < p->take.n; k++) {
    const uclaim *c = &p->take.v[k];
    const ukind_ops *kd = ukind_of_key(c->kind);
    ukind_atomic a = {c, &p->claim_val, 0, 0};
    if (ukey_claim_shared(c->key, c->klen)) a.claim_val = &p->claim_val_ns;
    if (kd->counted) {
      rc = uexec_read_group(x, c, &a.count, &a.ver, res);
      if (rc) goto leave;
    }
    if (kd->atomic_take(&a, &ops[i], &gvals[k]) == UKIND_FULL) {
      if (full == SIZE_MAX) full = k, full_cnt = a.count, full_ver = a.ver;
      continue;
    }
    /* (a key made here is made at a version no earlier one of it had: a
     * fix that frees a claim at the version it read can never free this
     * one; api/write.c uapi_claim_owner_gone) */
    if (ops[i].expect == USTORE_ABSENT)
      ops[i].create_version = uexec_fresh_version(x);
    op_of[k] = i++;
  }
  /* Leaving a key: as its kind says (a claim is deleted without
   * condition, a group counted down at the version read). */
  for (size_t k = 0; k < p->release.n; k++) {
    const uclaim *c = &p->release.v[k];
    const ukind_ops *kd = ukind_of_key(c->kind);
    ukind_atomic a = {c, &p->claim_val, 0, 0};
    size_t g = p->take.n + k;
    if (kd->counted) {
      rc = uexec_read_group(x, c, &a.count, &a.ver, res);
      if (rc) goto leave;
    }
    if (kd->atomic_release(&a, &ops[i], &gvals[g]) == UKIND_NONE) continue;
    op_of[g] = i++;
  }
  for (size_t k = 0; k < p->drop.n; k++)
    ops[i++] = mkop_claim(&p->drop.v[k], USTORE_ANY, USTORE_DEL, NULL);
  size_t o_at = SIZE_MAX;
  if (p->okey.len) {
    o_at = i;
    ops[i++] = uexec_op(&p->okey, USTORE_ABSENT, 0, USTORE_PUT, &p->oval);
    ops[i++] = uexec_op(&p->oidx, USTORE_ANY, 0, USTORE_PUT, NULL);
    ops[i - 2].expire_ms = ops[i - 1].expire_ms = purge_at;
  }
  if (full != SIZE_MAX) {
    rc = refuse_full(x, p, ops, i, s_at, r_at, o_at, op_of, full, full_cnt,
                     full_ver, why, res);
    goto leave;
  }
  rc = x->st->vt->txn(x->st, ops, i, &e);
  if (rc == UNICO_OK)
    uexec_count_write(x);
  else if (rc == USTORE_NOT_APPLIED)
    rc = explain(p, ops, s_at, r_at, o_at, op_of, why, res);
  else
    rc = uexec_store_err(res, rc, "writing", &e);
leave:
  for (size_t k = 0; ops && k < i; k++) ubuf_free(&ops[k].cur);
  for (size_t k = 0; gvals && k < p->take.n + p->release.n; k++)
    ubuf_free(&gvals[k]);
  if (!small) {
    free(ops);
    free(op_of);
    free(gvals);
  }
  return rc;
}

const uexec_proto uexec_atomic_proto = {
    .name = "atomic",
    .traits = UEXEC_T_CACHE_RECORDS,
    .hold_apart = 0,
    .apply = atomic_apply,
    .claim_state = atomic_claim_state,
    .hold_put = uexec_atomic_hold_put,
    .hold_drop = uexec_atomic_hold_drop,
    .fix = uexec_atomic_fix,
};
