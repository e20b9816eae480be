/* hold.c - reservations: a value of a unique constraint held for a while
 * by a secret token (the executor's exec/hold.c keeps it in the store).
 * Writes take a held value only when they present the token, or once the
 * hold has expired (write.c). A caller's op id makes a reservation
 * retry-safe: its outcome, token included, is kept with it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>

#include "api/internal.h"
#include "constraint/kind.h"
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

/* What a repeat under the same op id must match: the table, the
 * constraint, the normalized value and the time to live. */
static uint64_t reserve_fp(const char *table, const char *constraint,
                           const ubuf *val, uint64_t ttl_ms) {
  uint64_t h = USTORED_HASH_INIT;
  h = ustored_hash(h, table, strlen(table) + 1);
  h = ustored_hash(h, constraint, strlen(constraint) + 1);
  h = ustored_hash(h, &val->len, sizeof val->len);
  h = ustored_hash(h, val->p, val->len);
  return ustored_hash(h, &ttl_ms, sizeof ttl_ms);
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

/* Explain why the executor did not take the hold; UNICO_OK when the next
 * round should look again. */
static int explain(unico *u, const uschema *s, const utable *t, int ci,
                   const ubuf *ckey, const ubuf *val, const char *vs,
                   uexec_hold_out *o, const char *op_id, unico_result *res) {
  const uconstraint *c = &t->cons[ci];
  char when[64];
  switch (o->why) {
  case UEXEC_HOLD_TAKEN: {
    /* (a claim whose owner no longer holds the value is no conflict:
     * freed, and the next round takes it; issue 37) */
    uclaim cl = {(uint8_t *)ckey->p, ckey->len, ckey->len - val->len, ci,
                 0, 0, 0};
    usch *sc = uapi_sch_get(u);
    int gone = uapi_claim_owner_gone(u, s, t, &cl, &o->owner, o->cur_version,
                                     sc->store_ver, res);
    uapi_sch_put(sc);
    if (gone) return gone < 0 ? gone : UNICO_OK;
    return uapi_report_conflict(s, t, ci, val->p, val->len, o->owner.owner,
                                o->owner.owner_len, res);
  }
  case UEXEC_HOLD_HELD:
    uapi_format_time(o->expires_ms, when, sizeof when);
    uerr(res, UNICO_EBUSY, NULL,
         "%s = %.200s (constraint %s) is already reserved by another hold "
         "until %s",
         t->name, vs ? vs : "the value", c->name, when);
    if (res) {
      snprintf(res->constraint, sizeof res->constraint, "%s", c->name);
      free(res->value);
      res->value = vs ? strdup(vs) : NULL;
      res->retry_at_ms = (uint64_t)o->expires_ms; /* (Retry-After) */
    }
    return UNICO_EBUSY;
  case UEXEC_HOLD_IN_FLIGHT:
    return uerr(res, UNICO_EBUSY, NULL,
                "%s = %.200s (constraint %s) is being written by an "
                "operation that may still commit; try again",
                t->name, vs ? vs : "the value", c->name);
  case UEXEC_HOLD_OP_ID_USED:
    return uerr(res, UNICO_EOPID, NULL,
                "operation id \"%s\" was already used for a different "
                "request",
                op_id);
  case UEXEC_HOLD_SCHEMA:
    return uapi_sch_reload(u, res);
  case UEXEC_HOLD_MOVED:
    return UNICO_OK;
  default:
    return uerr(res, UNICO_ECORRUPT, NULL,
                "internal error: a hold was refused for no stated reason "
                "(%d)",
                o->why);
  }
}

int uapi_reserve(unico *u, const char *table, const char *constraint,
                 const char *values_json, uint64_t ttl_ms, const char *op_id,
                 unico_result *res) {
  usch *sc = uapi_schema_for(u, table, constraint);
  ubuf val = UBUF_INIT, ckey = UBUF_INIT, okey = UBUF_INIT, oval = UBUF_INIT,
       oidx = UBUF_INIT;
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
  ukind_of(c)->key_prefix(&ckey, t->name, c);
  ubuf_put(&ckey, val.p, val.len);
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
  ustored_token_hash(token, hash);
  rc = UEXEC_NOT_APPLIED;
  for (int attempt = 0; attempt < ATTEMPTS && rc == UEXEC_NOT_APPLIED;
       attempt++) {
    uexec_hold h = {.ckey = &ckey, .hash = hash, .op_id = op_id,
                    .caller_op = caller_op, .kind = uplan_kind_name(UPLAN_RESERVE),
                    .table = t->name, .fp = fp};
    h.now_ms = uexec_now(u->x);
    h.expires_ms = h.now_ms + (int64_t)ttl_ms;
    free(out);
    out = hold_output(token, t->name, c->name, vs, h.expires_ms);
    if (!out) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    if (caller_op) {
      ubuf_reset(&okey);
      ubuf_reset(&oval);
      ubuf_reset(&oidx);
      ukey_outcome(&okey, caller_op);
      ukey_outcome_index(&oidx, h.now_ms, caller_op);
      ustored_outcome_encode(&oval, h.kind, t->name, fp, UNICO_OK, out,
                             h.now_ms);
      h.okey = &okey;
      h.oval = &oval;
      h.oidx = &oidx;
    }
    usch *cursc = uapi_sch_get(u);
    h.schema_ver = cursc->store_ver;
    uapi_sch_put(cursc);
    uexec_hold_out o;
    rc = uexec_hold_take(u->x, &h, &o, res);
    if (rc == UEXEC_NOT_APPLIED && o.why == UEXEC_HOLD_ANSWERED) {
      /* a repeat (the executor's): its first answer is the answer */
      rc = uapi_answer_into(o.answer, res);
      ustored_claim_free(&o.owner);
      goto leave;
    }
    if (rc == UEXEC_NOT_APPLIED) {
      int erc = explain(u, sc->s, t, ci, &ckey, &val, vs, &o, caller_op, res);
      if (erc) rc = erc; /* refused, or an error: the answer */
    }
    ustored_claim_free(&o.owner);
  }
  if (rc == UEXEC_NOT_APPLIED)
    rc = uerr(res, UNICO_EBUSY, NULL,
              "the value kept changing under %d attempts; try again", ATTEMPTS);
  if (!rc && res) {
    res->json = out;
    out = NULL;
  }
leave:
  free(vs);
  free(out);
  ubuf_free(&val);
  ubuf_free(&ckey);
  ubuf_free(&okey);
  ubuf_free(&oval);
  ubuf_free(&oidx);
  uapi_sch_put(sc);
  return rc;
}

/* Is the hold of token hash one of a NAMESPACE that a constraint of t is
 * in? Such a hold is released through any table of its namespace (its key
 * names no table). The index names the same claim key for as long as
 * the token exists, so reading it first is safe. */
static int ns_hold_of(unico *u, const utable *t, const uint8_t hash[32]) {
  ubuf hk = UBUF_INIT, ck = UBUF_INIT, ns = UBUF_INIT;
  uint64_t ver = 0;
  size_t voff;
  int yes = 0;
  ukey_hold(&hk, hash, 32);
  if (!uexec_read(u->x, &hk, &ck, &ver, NULL) &&
      ukey_claim_shared(ck.p, ck.len) &&
      !ustored_claim_key_split(ck.p, ck.len, &voff, NULL, 0, &ns)) {
    ubuf_putc(&ns, 0);
    for (size_t i = 0; ubuf_ok(&ns) && i < t->ncons; i++)
      yes |= t->cons[i].ns && !strcmp(t->cons[i].ns, (const char *)ns.p);
  }
  ubuf_free(&hk);
  ubuf_free(&ck);
  ubuf_free(&ns);
  return yes;
}

int uapi_release_hold(unico *u, const char *table, const char *token,
                      unico_result *res) {
  uexec_release_out o = {0, UBUF_INIT, 0};
  uint8_t hash[32];
  char tname[256] = ""; /* the table's name as the schema spells it */
  int rc, shared = 0;
  ustored_token_hash(token ? token : "", hash);
  if (table) {
    usch *sc = uapi_schema_for(u, table, NULL);
    const utable *t = uapi_find_table(sc, table, res);
    if (t) snprintf(tname, sizeof tname, "%s", t->name);
    if (t) shared = ns_hold_of(u, t, hash);
    uapi_sch_put(sc);
    if (!t) return UNICO_EINVAL;
  }
  if (!token || !*token)
    return uerr(res, UNICO_EINVAL, NULL, "no hold token given");
  rc = UEXEC_NOT_APPLIED;
  for (int attempt = 0; attempt < ATTEMPTS && rc == UEXEC_NOT_APPLIED;
       attempt++)
    rc = uexec_hold_release(u->x, hash, table && !shared ? tname : NULL, &o,
                            res);
  if (rc == UEXEC_NOT_APPLIED) {
    rc = uerr(res, UNICO_EBUSY, NULL,
              "the hold kept changing under %d attempts; try again", ATTEMPTS);
  } else if (rc == UNICO_ENOTFOUND && o.why == UEXEC_RELEASE_OTHER_TABLE) {
    rc = uerr(res, UNICO_ENOTFOUND, NULL,
              "table %s has no hold with this token", table);
  } else if (rc == UNICO_ENOTFOUND) {
    rc = uerr(res, UNICO_ENOTFOUND, NULL, "%s",
              o.why == UEXEC_RELEASE_TAKEN
                  ? "no hold has this token (it expired and its value was "
                    "taken)"
                  : "no hold has this token (it was released, taken or "
                    "removed after expiring)");
  } else if (rc == UNICO_OK) {
    json_t *vj = NULL;
    char of[256] = "";
    size_t voff;
    int con;
    if (!uplan_claim_split(NULL, o.ckey.p, o.ckey.len, &voff, &con, of,
                           sizeof of))
      vj = urec_tuple_json(o.ckey.p + voff, o.ckey.len - voff);
    if (!of[0]) /* (a NAMESPACE's hold: the table it was released through) */
      snprintf(of, sizeof of, "%s", tname);
    json_t *j = json_pack("{s:b,s:s,s:o,s:b}", "released", 1, "table", of,
                          "value", vj ? vj : json_null(), "expired",
                          o.expires_ms <= uexec_now(u->x));
    if (res && j) res->json = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!j) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  ubuf_free(&o.ckey);
  return rc;
}
