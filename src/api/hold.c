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

/* Claims protocol: the reservation's writes one by one. The claim is the
 * commit point; a schema that moved meanwhile gives it back. ops: schema
 * check, claim, index, [old index]. */
static int reserve_cas(unico *u, ustore_op *ops, size_t n, const char *op_id,
                       int *schema_failed, unico_result *res) {
  int rc = uexec_cas(u->x, &ops[1], res);
  if (rc) return rc;
  rc = uexec_cas(u->x, &ops[0], res);
  if (rc == USTORE_NOT_APPLIED) {
    ubuf fv = UBUF_INIT;
    ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, op_id, uexec_now(u->x));
    ustore_op undo = ustore_op_make(
        ops[1].key, ops[1].klen, USTORE_VERSION,
        ops[1].expect == USTORE_ABSENT ? 1 : ops[1].expect_version + 1,
        USTORE_PUT, fv.p, fv.len);
    uexec_cas(u->x, &undo, NULL);
    ubuf_free(&undo.cur);
    ubuf_free(&fv);
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

int uapi_reserve(unico *u, const char *table, const char *constraint,
                 const char *values_json, uint64_t ttl_ms, const char *op_id,
                 unico_result *res) {
  usch *sc = uapi_schema_for(u, table, constraint);
  ubuf val = UBUF_INIT, ckey = UBUF_INIT, cur = UBUF_INIT, hkey = UBUF_INIT,
       hval = UBUF_INIT, oldh = UBUF_INIT, skey = UBUF_INIT;
  char token[3 + 64 + 1], gen[64];
  uint8_t hash[32];
  char *vs = NULL;
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
  }
  uplan_token_hash(token, hash);
  ukey_hold(&hkey, hash, 32);
  ukey_schema(&skey);
  int64_t now = 0, expires = 0;
  for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
    uint64_t cver = 0;
    ustored_claim cl;
    memset(&cl, 0, sizeof cl);
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
    if (cver && uexec_is_claims(u->x) && cl.state != UCLAIM_HELD) {
      /* Claims protocol: the validity rule says whether it is taken. */
      int st = uexec_claim_state(u->x, ckey.p, ckey.len, &cl, op_id, res);
      if (st == 1) {
        rc = uapi_report_conflict(t, ci, val.p, val.len, cl.owner,
                                  cl.owner_len, res);
        ustored_claim_free(&cl);
        goto leave;
      }
      ustored_claim_free(&cl);
      if (st == 2) {
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
    } else if (cver && cl.state == UCLAIM_HELD && cl.expires_ms > now) {
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
    if (cver) ukey_hold(&oldh, cl.token_hash, 32); /* an expired hold */
    ustored_claim_free(&cl);
    ubuf hold = UBUF_INIT;
    ustored_hold_encode(&hold, op_id, now, expires, hash);
    ubuf_reset(&hval);
    ubuf_put(&hval, ckey.p, ckey.len);
    usch *cursc = uapi_sch_get(u);
    ustore_op ops[4];
    size_t n = 0;
    ops[n++] = op_of(&skey, cursc->store_ver ? USTORE_VERSION : USTORE_ABSENT,
                     cursc->store_ver, USTORE_CHECK, NULL);
    ops[n++] = op_of(&ckey, cver ? USTORE_VERSION : USTORE_ABSENT, cver,
                     USTORE_PUT, &hold);
    ops[n++] = op_of(&hkey, USTORE_ABSENT, 0, USTORE_PUT, &hval);
    if (oldh.len) ops[n++] = op_of(&oldh, USTORE_ANY, 0, USTORE_DEL, NULL);
    int schema_failed = 0;
    if (uexec_is_claims(u->x))
      rc = reserve_cas(u, ops, n, op_id, &schema_failed, res);
    else
      rc = uexec_txn(u->x, ops, n, res);
    if (rc == USTORE_NOT_APPLIED) schema_failed = ops[0].failed;
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
    break;
  }
  if (rc == USTORE_NOT_APPLIED) {
    rc = uerr(res, UNICO_EBUSY, NULL,
              "the value kept changing under %d attempts; try again", ATTEMPTS);
    goto leave;
  }
  if (rc) goto leave;
  {
    char when[64];
    uapi_format_time(expires, when, sizeof when);
    json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:I,s:s}", "token", token, "table",
                          t->name, "constraint", c->name, "value",
                          json_loads(vs ? vs : "null", JSON_DECODE_ANY, NULL),
                          "expires_ms", (json_int_t)expires, "expires", when);
    if (res && o) res->json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!o) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
leave:
  free(vs);
  ubuf_free(&val);
  ubuf_free(&ckey);
  ubuf_free(&cur);
  ubuf_free(&hkey);
  ubuf_free(&hval);
  ubuf_free(&oldh);
  ubuf_free(&skey);
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
