/* hold.c - reservations: a hold is a claim with no owner record, an expiry
 * and the SHA-256 of a secret token; ("h", hash) indexes it by token so it
 * can be released. Writes take a held value only when they present the
 * token, or once the hold has expired (write.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>

#include "api/internal.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "util/err.h"

#define MAX_TTL_MS (30ULL * 24 * 3600 * 1000) /* 30 days */
#define ATTEMPTS 100

/* A new token: "uh_" and 32 random bytes in hex. */
static int new_token(char out[3 + 64 + 1], unico_result *res) {
  uint8_t b[32];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0)
      return uerr(res, UNICO_EUNAVAILABLE, NULL,
                  "no randomness available for a hold token");
    got += (size_t)n;
  }
  memcpy(out, "uh_", 3);
  for (size_t i = 0; i < sizeof b; i++)
    snprintf(out + 3 + 2 * i, 3, "%02x", b[i]);
  return UNICO_OK;
}

static ustore_op op_of(const ubuf *k, int expect, uint64_t ver, int action,
                       const ubuf *v) {
  return ustore_op_make(k->p, k->len, expect, ver, action, v ? v->p : NULL,
                        v ? v->len : 0);
}

/* Run ops as one transaction: UNICO_OK, USTORE_NOT_APPLIED or an error. */
static int run_txn(unico *u, ustore_op *ops, size_t n, unico_result *res) {
  int rc = uexec_txn(u->x, ops, n, res);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  return rc;
}

/* Claims protocol: give back a claim we took as a hold (op claim, just
 * applied): it goes FREE at the version it moved to. Best effort: a claim
 * left held expires. */
static void give_back(unico *u, const ustore_op *claim, const char *op_id) {
  ubuf fv = UBUF_INIT;
  ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, op_id, uexec_now(u->x));
  ustore_op undo = ustore_op_make(
      claim->key, claim->klen, USTORE_VERSION,
      claim->expect == USTORE_ABSENT ? 1 : claim->expect_version + 1,
      USTORE_PUT, fv.p, fv.len);
  uexec_cas(u->x, &undo, NULL);
  ubuf_free(&undo.cur);
  ubuf_free(&fv);
}

/* Claims protocol: the reservation's writes one by one. The claim is the
 * commit point; a schema that moved meanwhile gives it back. ops: schema
 * check, claim, index, [old index]. */
static int reserve_cas(unico *u, ustore_op *ops, size_t n, const char *op_id,
                       int *schema_failed, unico_result *res) {
  int rc = uexec_cas(u->x, &ops[1], res);
  if (rc) return rc;
  rc = uexec_cas(u->x, &ops[0], res);
  if (rc == USTORE_NOT_APPLIED) {
    give_back(u, &ops[1], op_id);
    *schema_failed = 1;
    return USTORE_NOT_APPLIED;
  }
  if (rc) return rc;
  for (size_t i = 2; i < n; i++) {
    rc = uexec_cas(u->x, &ops[i], res);
    if (rc && rc != USTORE_NOT_APPLIED) return rc;
  }
  return UNICO_OK;
}

/* What a repeat under the same op id must match: the table, the
 * constraint, the normalized value and the time to live. */
static uint64_t reserve_fp(const char *table, const char *constraint,
                           const ubuf *val, uint64_t ttl_ms) {
  uint64_t h = UPLAN_HASH_INIT;
  h = uplan_hash(h, table, strlen(table) + 1);
  h = uplan_hash(h, constraint, strlen(constraint) + 1);
  h = uplan_hash(h, &val->len, sizeof val->len);
  h = uplan_hash(h, val->p, val->len);
  return uplan_hash(h, &ttl_ms, sizeof ttl_ms);
}

/* The answer to a reservation: {"token":..,"table":..,"constraint":..,
 * "value":[..],"expires_ms":N,"expires":".."}, or NULL (out of memory). */
static char *hold_output(const char *token, const char *table,
                         const char *constraint, const char *vs,
                         int64_t expires) {
  char when[64];
  uapi_format_time(expires, when, sizeof when);
  json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:I,s:s}", "token", token, "table",
                        table, "constraint", constraint, "value",
                        json_loads(vs ? vs : "null", JSON_DECODE_ANY, NULL),
                        "expires_ms", (json_int_t)expires, "expires", when);
  char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return out;
}

/* Claims protocol, a caller's op id: keep the outcome once the hold is in
 * (its index first, so that an index left alone is swept). A repeat
 * already kept one: that is the answer (UNICO_OK with res->json filled,
 * *answered set), and our claim goes back if the op id was another
 * request's. */
static int keep_outcome_cas(unico *u, ustore_op *claim, const char *op_id,
                            const ubuf *okey, const ubuf *oval,
                            const ubuf *oidx, const char *table, uint64_t fp,
                            int *answered, unico_result *res) {
  ustore_op ix = op_of(oidx, USTORE_ANY, 0, USTORE_PUT, NULL);
  int rc = uexec_cas(u->x, &ix, res);
  ubuf_free(&ix.cur);
  if (rc) return rc;
  ustore_op o = op_of(okey, USTORE_ABSENT, 0, USTORE_PUT, oval);
  rc = uexec_cas(u->x, &o, res);
  ubuf_free(&o.cur);
  if (rc != USTORE_NOT_APPLIED) return rc;
  rc = uapi_outcome_find(u, op_id, UPLAN_RESERVE, table, fp, res);
  if (rc == UNICO_OK) *answered = 1;
  else if (rc == UNICO_ENOTFOUND) rc = USTORE_NOT_APPLIED; /* look again */
  if (rc != UNICO_OK) give_back(u, claim, op_id);
  return rc;
}

int uapi_reserve(unico *u, const char *table, const char *constraint,
                 const char *values_json, uint64_t ttl_ms, const char *op_id,
                 unico_result *res) {
  usch *sc = uapi_schema_for(u, table, constraint);
  ubuf val = UBUF_INIT, ckey = UBUF_INIT, cur = UBUF_INIT, hkey = UBUF_INIT,
       hval = UBUF_INIT, oldh = UBUF_INIT, skey = UBUF_INIT, okey = UBUF_INIT,
       oval = UBUF_INIT, oidx = UBUF_INIT;
  char token[3 + 64 + 1], gen[64];
  uint8_t hash[32];
  char *vs = NULL, *out = NULL;
  const char *caller_op = op_id; /* a repeat under it returns the first answer */
  uint64_t fp = 0;
  int rc;
  int ci;
  const utable *t = uapi_find_unique(sc, table, constraint, &ci, res);
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  if (ttl_ms == 0 || ttl_ms > MAX_TTL_MS) {
    rc = uerr(res, UNICO_EINVAL, NULL,
              "a hold's time to live must be between 1 ms and 30 days, not "
              "%" PRIu64 " ms",
              ttl_ms);
    goto leave;
  }
  if (caller_op) {
    rc = uapi_check_op_id(caller_op, res);
    if (rc) goto leave;
  }
  const uconstraint *c = &t->cons[ci];
  rc = urec_values_parse(t, c, values_json, &val, res);
  if (rc) goto leave;
  json_t *vj = urec_tuple_json(val.p, val.len);
  vs = vj ? json_dumps(vj, JSON_COMPACT) : NULL;
  json_decref(vj);
  ukey_claim(&ckey, t->name, c->name, val.p, val.len);
  if (uexec_max_key(u->x) && ckey.len > uexec_max_key(u->x)) {
    rc = uerr(res, UNICO_EINVAL, t->cols[c->cols[0]].name,
              "the value of constraint %s is too long for this store",
              c->name);
    goto leave;
  }
  rc = new_token(token, res);
  if (rc) goto leave;
  if (!op_id) {
    snprintf(gen, sizeof gen, "hold-%.16s", token + 3);
    op_id = gen;
  } else {
    fp = reserve_fp(t->name, c->name, &val, ttl_ms);
  }
  uplan_token_hash(token, hash);
  ukey_hold(&hkey, hash, 32);
  ukey_schema(&skey);
  int64_t now = 0, expires = 0;
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    uint64_t cver = 0;
    ustored_claim cl;
    memset(&cl, 0, sizeof cl);
    if (caller_op) {
      /* Seen this request before? Its first answer is the answer. */
      rc = uapi_outcome_find(u, caller_op, UPLAN_RESERVE, t->name, fp, res);
      if (rc != UNICO_ENOTFOUND) goto leave;
    }
    now = uexec_now(u->x);
    expires = now + (int64_t)ttl_ms;
    rc = uexec_read(u->x, &ckey, &cur, &cver, res);
    if (rc == UNICO_ENOTFOUND) {
      cver = 0;
    } else if (rc) {
      goto leave;
    } else if (ustored_claim_decode(cur.p, cur.len, &cl)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
      goto leave;
    }
    ubuf_reset(&oldh);
    /* Claims protocol: a hold of this very op id with no outcome kept
     * (and young enough that none was swept) lost its answer between the
     * claim and the outcome: nobody knows its token, so it is taken over
     * with a new one. (On a transactional store the two land together.) */
    int own_lost = cver && caller_op && uexec_is_claims(u->x) &&
                   cl.state == UCLAIM_HELD && cl.op_id &&
                   !strcmp(cl.op_id, caller_op) &&
                   cl.since_ms > now - (int64_t)uexec_retention(u->x);
    if (cver && uexec_is_claims(u->x) && cl.state != UCLAIM_HELD) {
      /* Claims protocol: the validity rule says whether it is taken. */
      int st = uexec_claim_state(u->x, ckey.p, ckey.len, &cl, op_id, res);
      if (st == UEXEC_CLAIM_IN_FORCE) {
        rc = uapi_report_conflict(t, ci, val.p, val.len, cl.owner,
                                  cl.owner_len, res);
        ustored_claim_free(&cl);
        goto leave;
      }
      ustored_claim_free(&cl);
      if (st == UEXEC_CLAIM_IN_FLIGHT) {
        rc = uerr(res, UNICO_EBUSY, NULL,
                  "%s = %.200s (constraint %s) is being written by an "
                  "operation that may still commit; try again",
                  t->name, vs ? vs : "the value", c->name);
        goto leave;
      }
      if (st == USTORE_NOT_APPLIED) continue;
      if (st) {
        rc = st;
        goto leave;
      }
      /* free to take at cver */
    } else if (cver && cl.state == UCLAIM_HELD && cl.expires_ms > now &&
               !own_lost) {
      char when[64];
      uapi_format_time(cl.expires_ms, when, sizeof when);
      ustore_op chk = op_of(&ckey, USTORE_VERSION, cver, USTORE_CHECK, NULL);
      ustored_claim_free(&cl);
      rc = run_txn(u, &chk, 1, res); /* refuse only on a durable state */
      if (rc == USTORE_NOT_APPLIED) continue;
      if (rc) goto leave;
      rc = uerr(res, UNICO_EBUSY, NULL,
                "%s = %.200s (constraint %s) is already reserved by another "
                "hold until %s",
                t->name, vs ? vs : "the value", c->name, when);
      if (res) {
        snprintf(res->constraint, sizeof res->constraint, "%s", c->name);
        free(res->value);
        res->value = vs ? strdup(vs) : NULL;
      }
      goto leave;
    }
    if (cver && cl.state != UCLAIM_HELD) {
      /* Taken by a record: a conflict, once the state read is durable. */
      ustore_op chk = op_of(&ckey, USTORE_VERSION, cver, USTORE_CHECK, NULL);
      int crc = run_txn(u, &chk, 1, res);
      if (crc == USTORE_NOT_APPLIED) {
        ustored_claim_free(&cl);
        continue;
      }
      rc = crc ? crc
               : uapi_report_conflict(t, ci, val.p, val.len, cl.owner,
                                      cl.owner_len, res);
      ustored_claim_free(&cl);
      goto leave;
    }
    if (cver) ukey_hold(&oldh, cl.token_hash, 32); /* expired, or own_lost */
    ustored_claim_free(&cl);
    free(out);
    out = hold_output(token, t->name, c->name, vs, expires);
    if (!out) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    if (caller_op) {
      ubuf_reset(&okey);
      ubuf_reset(&oval);
      ubuf_reset(&oidx);
      ukey_outcome(&okey, caller_op);
      ukey_outcome_index(&oidx, now, caller_op);
      ustored_outcome_encode(&oval, uplan_kind_name(UPLAN_RESERVE), t->name,
                             fp, UNICO_OK, out, now);
    }
    ubuf hold = UBUF_INIT;
    ustored_hold_encode(&hold, op_id, now, expires, hash);
    ubuf_reset(&hval);
    ubuf_put(&hval, ckey.p, ckey.len);
    usch *cursc = uapi_sch_get(u);
    ustore_op ops[6];
    size_t n = 0;
    ops[n++] = op_of(&skey, cursc->store_ver ? USTORE_VERSION : USTORE_ABSENT,
                     cursc->store_ver, USTORE_CHECK, NULL);
    ops[n++] = op_of(&ckey, cver ? USTORE_VERSION : USTORE_ABSENT, cver,
                     USTORE_PUT, &hold);
    ops[n++] = op_of(&hkey, USTORE_ABSENT, 0, USTORE_PUT, &hval);
    if (oldh.len) ops[n++] = op_of(&oldh, USTORE_ANY, 0, USTORE_DEL, NULL);
    int schema_failed = 0, answered = 0;
    if (uexec_is_claims(u->x)) {
      rc = reserve_cas(u, ops, n, op_id, &schema_failed, res);
      if (rc == UNICO_OK && caller_op)
        rc = keep_outcome_cas(u, &ops[1], caller_op, &okey, &oval, &oidx,
                              t->name, fp, &answered, res);
    } else {
      /* (the outcome must be absent: a repeat racing us wins or loses
       * whole, and the next round returns its answer) */
      if (caller_op) {
        ops[n++] = op_of(&okey, USTORE_ABSENT, 0, USTORE_PUT, &oval);
        ops[n++] = op_of(&oidx, USTORE_ANY, 0, USTORE_PUT, NULL);
      }
      rc = uexec_txn(u->x, ops, n, res);
      if (rc == USTORE_NOT_APPLIED) schema_failed = ops[0].failed;
    }
    for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
    ubuf_free(&hold);
    uapi_sch_put(cursc);
    if (rc == USTORE_NOT_APPLIED) {
      if (schema_failed) {
        rc = uapi_sch_reload(u, res);
        if (rc) goto leave;
      }
      continue; /* something moved: look again */
    }
    if (answered) goto leave; /* (a repeat's answer, in res) */
    break;
  }
  if (rc == USTORE_NOT_APPLIED) {
    rc = uerr(res, UNICO_EBUSY, NULL,
              "the value kept changing under %d attempts; try again", ATTEMPTS);
    goto leave;
  }
  if (rc) goto leave;
  if (res) {
    res->json = out;
    out = NULL;
  }
leave:
  free(vs);
  free(out);
  ubuf_free(&val);
  ubuf_free(&ckey);
  ubuf_free(&cur);
  ubuf_free(&hkey);
  ubuf_free(&hval);
  ubuf_free(&oldh);
  ubuf_free(&skey);
  ubuf_free(&okey);
  ubuf_free(&oval);
  ubuf_free(&oidx);
  uapi_sch_put(sc);
  return rc;
}

int uapi_release_hold(unico *u, const char *table, const char *token,
                      unico_result *res) {
  ubuf hkey = UBUF_INIT, ckey = UBUF_INIT, cur = UBUF_INIT;
  uint8_t hash[32];
  char tname[256] = ""; /* the table's name as the schema spells it */
  int rc;
  if (table) {
    usch *sc = uapi_schema_for(u, table, NULL);
    const utable *t = uapi_find_table(sc, table, res);
    if (t) snprintf(tname, sizeof tname, "%s", t->name);
    uapi_sch_put(sc);
    if (!t) return UNICO_EINVAL;
  }
  if (!token || !*token)
    return uerr(res, UNICO_EINVAL, NULL, "no hold token given");
  uplan_token_hash(token, hash);
  ukey_hold(&hkey, hash, 32);
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    uint64_t cver = 0, hver = 0;
    ustored_claim cl;
    memset(&cl, 0, sizeof cl);
    rc = uexec_read(u->x, &hkey, &ckey, &hver, res);
    if (rc == UNICO_ENOTFOUND) {
      rc = uerr(res, UNICO_ENOTFOUND, NULL,
                "no hold has this token (it was released, taken or removed "
                "after expiring)");
      goto leave;
    }
    if (rc) goto leave;
    if (table) { /* the index names the claim, and the claim its table */
      char of[256] = "";
      size_t voff;
      int con;
      if (uplan_claim_split(NULL, ckey.p, ckey.len, &voff, &con, of, sizeof of) ||
          strcmp(of, tname)) {
        rc = uerr(res, UNICO_ENOTFOUND, NULL,
                  "table %s has no hold with this token", table);
        goto leave;
      }
    }
    rc = uexec_read(u->x, &ckey, &cur, &cver, res);
    if (rc && rc != UNICO_ENOTFOUND) goto leave;
    int ours = rc == UNICO_OK && !ustored_claim_decode(cur.p, cur.len, &cl) &&
               cl.state == UCLAIM_HELD && !memcmp(cl.token_hash, hash, 32);
    int64_t expires = cl.expires_ms;
    ustored_claim_free(&cl);
    ustore_op ops[2];
    size_t n = 0;
    if (uexec_is_claims(u->x)) {
      /* the claim goes FREE (the claims protocol keeps claim keys), then
       * the index */
      ubuf fv = UBUF_INIT;
      rc = UNICO_OK;
      if (ours) {
        ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, "release",
                             uexec_now(u->x));
        ops[0] = op_of(&ckey, USTORE_VERSION, cver, USTORE_PUT, &fv);
        rc = run_txn(u, ops, 1, res);
      }
      ubuf_free(&fv);
      if (!rc) {
        ops[0] = op_of(&hkey, USTORE_VERSION, hver, USTORE_DEL, NULL);
        rc = run_txn(u, ops, 1, res);
      }
    } else {
      ops[n++] = op_of(&hkey, USTORE_VERSION, hver, USTORE_DEL, NULL);
      if (ours) ops[n++] = op_of(&ckey, USTORE_VERSION, cver, USTORE_DEL, NULL);
      rc = run_txn(u, ops, n, res);
    }
    if (rc == USTORE_NOT_APPLIED) continue;
    if (rc) goto leave;
    if (!ours) {
      rc = uerr(res, UNICO_ENOTFOUND, NULL,
                "no hold has this token (it expired and its value was "
                "taken)");
      goto leave;
    }
    json_t *vj = NULL;
    char of[256] = "";
    size_t voff;
    int con;
    if (!uplan_claim_split(NULL, ckey.p, ckey.len, &voff, &con, of,
                           sizeof of))
      vj = urec_tuple_json(ckey.p + voff, ckey.len - voff);
    json_t *o = json_pack("{s:b,s:s,s:o,s:b}", "released", 1, "table", of,
                          "value", vj ? vj : json_null(), "expired",
                          expires <= uexec_now(u->x));
    if (res && o) res->json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    goto leave;
  }
  rc = uerr(res, UNICO_EBUSY, NULL,
            "the hold kept changing under %d attempts; try again", ATTEMPTS);
leave:
  ubuf_free(&hkey);
  ubuf_free(&ckey);
  ubuf_free(&cur);
  return rc;
}
