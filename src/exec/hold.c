/* hold.c - holds in the store: a hold is a claim with no owner record, an
 * expiry and the SHA-256 of a secret token; ("h", hash) indexes it by
 * token. The decisions both protocols share live here; how a hold is
 * written and given up is the protocol's (x->proto). */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

/* Is the claim still at version ver, read back through a transaction (so
 * that a refusal is made only on a durable state)? UNICO_OK, or
 * USTORE_NOT_APPLIED when it moved, or an error. */
static int still_at(uexec *x, const ubuf *key, uint64_t ver,
                    unico_result *res) {
  ustore_op chk = uexec_op(key, USTORE_VERSION, ver, USTORE_CHECK, NULL);
  int rc = uexec_txn(x, &chk, 1, res);
  ubuf_free(&chk.cur);
  return rc;
}

static int hold_take(uexec *x, const uexec_hold *h, uexec_hold_out *out,
                     unico_result *res) {
  ubuf cur = UBUF_INIT, oldh = UBUF_INIT;
  uint64_t cver = 0;
  ustored_claim cl;
  int rc;
  memset(&cl, 0, sizeof cl);
  memset(out, 0, sizeof *out);
  rc = uexec_read(x, h->ckey, &cur, &cver, res);
  if (rc == UNICO_ENOTFOUND) {
    cver = 0;
    rc = UNICO_OK;
  } else if (rc) {
    goto leave;
  } else if (ustored_claim_decode(cur.p, cur.len, &cl)) {
    rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
    goto leave;
  }
  /* A hold of this very op id with no outcome kept (and young enough
   * that none was swept) lost its answer between its claim and its
   * outcome, which only a protocol writing them apart can do: nobody
   * knows its token, so it is taken over with the new one. */
  int own_lost = cver && h->caller_op && x->proto->hold_apart &&
                 cl.state == UCLAIM_HELD && cl.op_id &&
                 !strcmp(cl.op_id, h->caller_op) &&
                 cl.since_ms > h->now_ms - (int64_t)x->retention_ms;
  if (cver && cl.state == UCLAIM_HELD && cl.expires_ms > h->now_ms &&
      !own_lost) {
    rc = still_at(x, h->ckey, cver, res);
    if (rc == USTORE_NOT_APPLIED) {
      out->why = UEXEC_HOLD_MOVED;
    } else if (rc == UNICO_OK) {
      rc = USTORE_NOT_APPLIED;
      out->why = UEXEC_HOLD_HELD;
      out->expires_ms = cl.expires_ms;
    }
    goto leave;
  }
  if (cver && cl.state != UCLAIM_HELD) {
    /* A record's claim (or a FREE one): taken by the validity rule of
     * the protocol, on a durable state. */
    int st = x->proto->claim_state(x, h->ckey->p, h->ckey->len, &cl, cver,
                                   h->op_id, 0, res);
    if (st == UEXEC_CLAIM_IN_FORCE) {
      rc = still_at(x, h->ckey, cver, res);
      if (rc == USTORE_NOT_APPLIED) {
        out->why = UEXEC_HOLD_MOVED;
      } else if (rc == UNICO_OK) {
        rc = USTORE_NOT_APPLIED;
        out->why = UEXEC_HOLD_TAKEN;
        out->cur_version = cver;
        out->owner = cl;
        memset(&cl, 0, sizeof cl);
      }
      goto leave;
    }
    if (st == UEXEC_CLAIM_IN_FLIGHT) {
      rc = USTORE_NOT_APPLIED;
      out->why = UEXEC_HOLD_IN_FLIGHT;
      goto leave;
    }
    if (st == USTORE_NOT_APPLIED) {
      out->why = UEXEC_HOLD_MOVED;
      rc = USTORE_NOT_APPLIED;
      goto leave;
    }
    if (st != UEXEC_CLAIM_FREE) {
      rc = st;
      goto leave;
    }
  } else if (cver) {
    ukey_hold(&oldh, cl.token_hash, 32); /* expired, or own_lost */
  }
  rc = x->proto->hold_put(x, h, cver, oldh.len ? &oldh : NULL, out, res);
leave:
  ustored_claim_free(&cl);
  ubuf_free(&cur);
  ubuf_free(&oldh);
  return rc;
}

/* A reserve under the caller's op id is the executor's to answer when
 * it ran before (seen.c): looked for first, and again where the take
 * finds its outcome kept meanwhile (the same request racing us). */
int uexec_hold_take(uexec *x, const uexec_hold *h, uexec_hold_out *out,
                    unico_result *res) {
  uexec_req q = {h->caller_op, UPLAN_RESERVE, h->table, h->fp};
  char *answer = NULL;
  memset(out, 0, sizeof *out);
  int rc = uexec_seen(x, &q, UEXEC_SEEN_OUTCOME, NULL, NULL, &answer, res);
  if (rc == UNICO_ENOTFOUND) {
    rc = hold_take(x, h, out, res);
    if (rc != USTORE_NOT_APPLIED || out->why != UEXEC_HOLD_ANSWERED)
      return rc;
    rc = uexec_seen(x, &q, UEXEC_SEEN_OUTCOME, NULL, NULL, &answer, res);
    if (rc == UNICO_ENOTFOUND) { /* (gone meanwhile: look again) */
      out->why = UEXEC_HOLD_MOVED;
      return USTORE_NOT_APPLIED;
    }
  }
  if (rc) return rc;
  out->why = UEXEC_HOLD_ANSWERED;
  out->answer = answer;
  return USTORE_NOT_APPLIED;
}

/* Does the PENDING claim cl carry the hold with this token hash? */
static int carries(const ustored_claim *cl, const uint8_t hash[32]) {
  ustored_claim h;
  int yes = !ustored_claim_decode(cl->hold, cl->hold_len, &h) &&
            h.state == UCLAIM_HELD && !memcmp(h.token_hash, hash, 32);
  ustored_claim_free(&h);
  return yes;
}

int uexec_hold_release(uexec *x, const uint8_t hash[32], const char *table,
                       uexec_release_out *out, unico_result *res) {
  ubuf hkey = UBUF_INIT, cur = UBUF_INIT;
  uint64_t cver = 0, hver = 0;
  ustored_claim cl;
  int rc;
  memset(&cl, 0, sizeof cl);
  out->why = 0;
  out->expires_ms = 0;
  ubuf_reset(&out->ckey);
  ukey_hold(&hkey, hash, 32);
  rc = uexec_read(x, &hkey, &out->ckey, &hver, res);
  if (rc == UNICO_ENOTFOUND) {
    out->why = UEXEC_RELEASE_NONE;
    goto leave;
  }
  if (rc) goto leave;
  if (table) { /* the index names the claim, and the claim its table */
    char of[256] = "";
    size_t voff;
    int con;
    if (uplan_claim_split(NULL, out->ckey.p, out->ckey.len, &voff, &con, of,
                          sizeof of) ||
        strcmp(of, table)) {
      out->why = UEXEC_RELEASE_OTHER_TABLE;
      rc = UNICO_ENOTFOUND;
      goto leave;
    }
  }
  rc = uexec_read(x, &out->ckey, &cur, &cver, res);
  if (rc && rc != UNICO_ENOTFOUND) goto leave;
  int ok = rc == UNICO_OK && !ustored_claim_decode(cur.p, cur.len, &cl);
  if (ok && cl.state == UCLAIM_PENDING && cl.hold_len &&
      carries(&cl, hash)) {
    /* A write took the hold over: committed, the hold is used (taken);
     * else the release wins over it, as only the token's bearer can have
     * made it: fenced at once, the claim holds the hold again (read
     * again, then release it). */
    int st = x->proto->claim_state(x, out->ckey.p, out->ckey.len, &cl, cver,
                                   "release", UEXEC_CLAIM_NO_WAIT, res);
    if (st == UEXEC_CLAIM_IN_FLIGHT || st == USTORE_NOT_APPLIED) {
      rc = UEXEC_NOT_APPLIED;
      goto leave;
    }
    if (st < 0) {
      rc = st;
      goto leave;
    }
  }
  int ours = ok && cl.state == UCLAIM_HELD && !memcmp(cl.token_hash, hash, 32);
  out->expires_ms = cl.expires_ms;
  rc = x->proto->hold_drop(x, &hkey, hver, &out->ckey, ours ? cver : 0, res);
  if (rc == UNICO_OK && !ours) {
    out->why = UEXEC_RELEASE_TAKEN; /* (its index is gone now too) */
    rc = UNICO_ENOTFOUND;
  }
leave:
  if (rc == UNICO_ENOTFOUND && !out->why) out->why = UEXEC_RELEASE_NONE;
  ustored_claim_free(&cl);
  ubuf_free(&hkey);
  ubuf_free(&cur);
  return rc;
}

/* What both protocols write for hold h: the claim value, the index ("h",
 * token hash) and its value (the claim key), and the schema key. */
typedef struct hold_vals {
  ubuf hold, hval, skey, hkey;
} hold_vals;

static void hold_vals_make(hold_vals *v, const uexec_hold *h) {
  memset(v, 0, sizeof *v);
  ustored_hold_encode(&v->hold, h->op_id, h->now_ms, h->expires_ms, h->hash);
  ubuf_put(&v->hval, h->ckey->p, h->ckey->len);
  ukey_schema(&v->skey);
  ukey_hold(&v->hkey, h->hash, 32);
}

static void hold_vals_free(hold_vals *v) {
  ubuf_free(&v->hold);
  ubuf_free(&v->hval);
  ubuf_free(&v->skey);
  ubuf_free(&v->hkey);
}

/* ------------------------------------------------------------------ */
/* Atomic: the hold, its index, the old hold's index and the outcome in
 * one transaction under the schema check. */

int uexec_atomic_hold_put(uexec *x, const uexec_hold *h, uint64_t cver,
                          const ubuf *oldh, uexec_hold_out *out,
                          unico_result *res) {
  hold_vals v;
  ustore_op ops[6];
  size_t n = 0;
  hold_vals_make(&v, h);
  ops[n++] = uexec_op(&v.skey, h->schema_ver ? USTORE_VERSION : USTORE_ABSENT,
                      h->schema_ver, USTORE_CHECK, NULL);
  ops[n++] = uexec_op(h->ckey, cver ? USTORE_VERSION : USTORE_ABSENT, cver,
                      USTORE_PUT, &v.hold);
  if (!cver) ops[n - 1].create_version = uexec_fresh_version(x);
  ops[n++] = uexec_op(&v.hkey, USTORE_ABSENT, 0, USTORE_PUT, &v.hval);
  /* (a hold and its index leave by themselves a retention period after
   * the hold expires; taking its value over rewrites the claim without) */
  ops[n - 2].expire_ms = ops[n - 1].expire_ms =
      uexec_purge_at(x, h->expires_ms);
  if (oldh) ops[n++] = uexec_op(oldh, USTORE_ANY, 0, USTORE_DEL, NULL);
  size_t o_at = SIZE_MAX;
  if (h->okey) {
    /* (the outcome must be absent: a repeat racing us wins or loses
     * whole, and the caller's next look returns its answer) */
    o_at = n;
    ops[n++] = uexec_op(h->okey, USTORE_ABSENT, 0, USTORE_PUT, h->oval);
    ops[n++] = uexec_op(h->oidx, USTORE_ANY, 0, USTORE_PUT, NULL);
    ops[n - 2].expire_ms = ops[n - 1].expire_ms =
        uexec_purge_at(x, h->now_ms);
  }
  int rc = uexec_txn(x, ops, n, res);
  if (rc == USTORE_NOT_APPLIED)
    out->why = ops[0].failed ? UEXEC_HOLD_SCHEMA
               : o_at != SIZE_MAX && ops[o_at].failed ? UEXEC_HOLD_ANSWERED
                                                      : UEXEC_HOLD_MOVED;
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  hold_vals_free(&v);
  return rc;
}

int uexec_atomic_hold_drop(uexec *x, const ubuf *hkey, uint64_t hver,
                           const ubuf *ckey, uint64_t cver,
                           unico_result *res) {
  ustore_op ops[2];
  size_t n = 0;
  ops[n++] = uexec_op(hkey, USTORE_VERSION, hver, USTORE_DEL, NULL);
  if (cver) ops[n++] = uexec_op(ckey, USTORE_VERSION, cver, USTORE_DEL, NULL);
  int rc = uexec_txn(x, ops, n, res);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Claims protocol: the writes one by one. The claim is the commit point;
 * a schema that moved meanwhile gives it back; the outcome (a caller's op
 * id) comes last, after its index, so that an index left alone is swept.
 * Claim keys are never deleted: a hold given up goes FREE. */

/* Give back the hold just put at the claim (version ver): FREE. Best
 * effort: a hold left behind expires. */
static void give_back(uexec *x, const ubuf *ckey, uint64_t ver,
                      const char *op_id) {
  ubuf fv = UBUF_INIT;
  ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, op_id, uexec_now(x));
  ustore_op undo = uexec_op(ckey, USTORE_VERSION, ver, USTORE_PUT, &fv);
  uexec_cas(x, &undo, NULL);
  ubuf_free(&undo.cur);
  ubuf_free(&fv);
}

/* The outcome under op id found where ours was to go: 1 when it is the
 * same request's (kind, table and fingerprint of h), 0 when another's, -1
 * when it cannot be read (gone again, or corrupt). */
static int same_request(uexec *x, const uexec_hold *h) {
  ubuf v = UBUF_INIT;
  ustored_outcome o;
  int same = -1;
  if (uexec_read(x, h->okey, &v, NULL, NULL) == UNICO_OK &&
      !ustored_outcome_decode(v.p, v.len, &o)) {
    same = !strcmp(o.kind, h->kind) && !strcmp(o.table, h->table) &&
           o.fingerprint == h->fp;
    ustored_outcome_free(&o);
  }
  ubuf_free(&v);
  return same;
}

int uexec_claims_hold_put(uexec *x, const uexec_hold *h, uint64_t cver,
                          const ubuf *oldh, uexec_hold_out *out,
                          unico_result *res) {
  hold_vals v;
  ustore_op o;
  int rc;
  hold_vals_make(&v, h);
  uint64_t at = cver + 1; /* the claim's version once ours */
  o = uexec_op(h->ckey, cver ? USTORE_VERSION : USTORE_ABSENT, cver, USTORE_PUT,
            &v.hold);
  rc = uexec_cas(x, &o, res);
  ubuf_free(&o.cur);
  if (rc == USTORE_NOT_APPLIED) out->why = UEXEC_HOLD_MOVED;
  if (rc) goto leave;
  o = uexec_op(&v.skey, h->schema_ver ? USTORE_VERSION : USTORE_ABSENT,
            h->schema_ver, USTORE_CHECK, NULL);
  rc = uexec_cas(x, &o, res);
  ubuf_free(&o.cur);
  if (rc == USTORE_NOT_APPLIED) {
    give_back(x, h->ckey, at, h->op_id);
    out->why = UEXEC_HOLD_SCHEMA;
  }
  if (rc) goto leave;
  o = uexec_op(&v.hkey, USTORE_ABSENT, 0, USTORE_PUT, &v.hval);
  rc = uexec_cas(x, &o, res);
  ubuf_free(&o.cur);
  if (rc == USTORE_NOT_APPLIED) rc = UNICO_OK; /* (a token is new) */
  if (!rc && oldh) {
    o = uexec_op(oldh, USTORE_ANY, 0, USTORE_DEL, NULL);
    rc = uexec_cas(x, &o, res);
    ubuf_free(&o.cur);
    if (rc == USTORE_NOT_APPLIED) rc = UNICO_OK;
  }
  if (rc || !h->okey) goto leave;
  o = uexec_op(h->oidx, USTORE_ANY, 0, USTORE_PUT, NULL);
  o.expire_ms = uexec_purge_at(x, h->now_ms);
  rc = uexec_cas(x, &o, res);
  ubuf_free(&o.cur);
  if (rc) goto leave;
  o = uexec_op(h->okey, USTORE_ABSENT, 0, USTORE_PUT, h->oval);
  o.expire_ms = uexec_purge_at(x, h->now_ms);
  rc = uexec_cas(x, &o, res);
  for (int round = 0; rc == USTORE_NOT_APPLIED && o.exists && round < 8;
       round++) {
    /* Another write's marker (codec/stored.h) left by a write that died
     * or was refused is no use of the op id: fenced, then ours. */
    ustored_outcome m;
    int verdict = UEXEC_MARK_IN_FORCE;
    if (ustored_outcome_decode(o.cur.p, o.cur.len, &m)) break;
    int mark = ustored_outcome_is_mark(&m);
    if (mark && uexec_mark_judge(x, h->caller_op, &m, &verdict, res))
      verdict = UEXEC_MARK_IN_FLIGHT;
    ustored_outcome_free(&m);
    if (!mark || verdict == UEXEC_MARK_IN_FORCE) break;
    if (verdict == UEXEC_MARK_IN_FLIGHT) {
      give_back(x, h->ckey, at, h->op_id);
      out->why = UEXEC_HOLD_IN_FLIGHT;
      ubuf_free(&o.cur);
      goto leave;
    }
    uint64_t mv = o.cur_version;
    ubuf_free(&o.cur);
    o = uexec_op(h->okey, verdict == UEXEC_MARK_FENCED ? USTORE_VERSION
                                                       : USTORE_ABSENT,
                 verdict == UEXEC_MARK_FENCED ? mv : 0, USTORE_PUT, h->oval);
    o.expire_ms = uexec_purge_at(x, h->now_ms);
    rc = uexec_cas(x, &o, res);
    if (rc == USTORE_NOT_APPLIED && !o.exists) { /* (gone: absent again) */
      ubuf_free(&o.cur);
      o = uexec_op(h->okey, USTORE_ABSENT, 0, USTORE_PUT, h->oval);
      o.expire_ms = uexec_purge_at(x, h->now_ms);
      rc = uexec_cas(x, &o, res);
    }
  }
  ubuf_free(&o.cur);
  if (rc == USTORE_NOT_APPLIED) {
    /* A repeat answered first: its answer is ours (it took our claim
     * over). An op id of another request: our claim goes back. */
    int same = same_request(x, h);
    if (same != 1) give_back(x, h->ckey, at, h->op_id);
    out->why = same == 1 ? UEXEC_HOLD_ANSWERED
               : same == 0 ? UEXEC_HOLD_OP_ID_USED
                           : UEXEC_HOLD_MOVED;
  }
leave:
  hold_vals_free(&v);
  return rc;
}

int uexec_claims_hold_drop(uexec *x, const ubuf *hkey, uint64_t hver,
                           const ubuf *ckey, uint64_t cver,
                           unico_result *res) {
  ustore_op o;
  int rc = UNICO_OK;
  if (cver) { /* the claim goes FREE first, then the index */
    ubuf fv = UBUF_INIT;
    ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, "release", uexec_now(x));
    o = uexec_op(ckey, USTORE_VERSION, cver, USTORE_PUT, &fv);
    rc = uexec_cas(x, &o, res);
    ubuf_free(&o.cur);
    ubuf_free(&fv);
  }
  if (!rc) {
    o = uexec_op(hkey, USTORE_VERSION, hver, USTORE_DEL, NULL);
    rc = uexec_cas(x, &o, res);
    ubuf_free(&o.cur);
  }
  return rc;
}
