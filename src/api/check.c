/* check.c - whole-store audit of the invariants: records and claims agree,
 * no value has two owners. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/internal.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "util/err.h"

#define MAX_REPORTED 100

typedef struct pair {
  uint8_t *claim; /* claim key recomputed from a record */
  size_t clen;
  uint8_t *owner; /* that record's key */
  size_t olen;
} pair;

typedef struct chk {
  unico *u;
  const uschema *s;
  json_t *violations;
  uint64_t nviol, records, claims, outcomes;
  pair *pairs;
  size_t npairs, cap;
  int err;
  unico_result *res;
} chk;

static char *hexkey(const uint8_t *k, size_t n) {
  /* A readable form of a key: the tuple as JSON, else hex. */
  json_t *j = urec_tuple_json(k, n);
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

static void violation(chk *c, const char *kind, const uint8_t *key, size_t kl,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void violation(chk *c, const char *kind, const uint8_t *key, size_t kl,
                      const char *fmt, ...) {
  c->nviol++;
  if (json_array_size(c->violations) >= MAX_REPORTED) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *ks = hexkey(key, kl);
  json_array_append_new(c->violations,
                        json_pack("{s:s,s:s,s:s}", "kind", kind, "key",
                                  ks ? ks : "?", "detail", msg));
  free(ks);
}

static int record_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  chk *c = ctx;
  ustored_record r;
  char table[256];
  size_t pkoff;
  uclaims want = {0, NULL};
  ubuf cv = UBUF_INIT;
  (void)ver;
  if (ukey_split_table(k, kl, "r", table, sizeof table, &pkoff) ||
      ustored_record_decode(v, vl, &r)) {
    violation(c, "corrupt_record", k, kl, "the record cannot be decoded");
    return 0;
  }
  if (r.state != UREC_LIVE) goto leave;
  c->records++;
  const utable *t = uschema_table(c->s, table);
  if (!t) {
    violation(c, "unknown_table", k, kl, "record of table %s, which is not in the schema", table);
    goto leave;
  }
  json_t *body = json_loads(r.body, 0, NULL);
  unico_result tmp = UNICO_RESULT_INIT;
  if (!body || urec_validate(t, body, &tmp) || uplan_claims(t, body, &want, &tmp)) {
    violation(c, "invalid_record", k, kl, "the record does not fit its table: %s",
              tmp.message[0] ? tmp.message : "bad JSON");
    json_decref(body);
    unico_result_clear(&tmp);
    goto leave;
  }
  json_decref(body);
  unico_result_clear(&tmp);
  /* Claims the record says it holds must be exactly those its values need. */
  for (size_t i = 0; i < want.n; i++)
    if (uclaims_find(&r.claims, want.v[i].key, want.v[i].klen) < 0)
      violation(c, "missing_claim", want.v[i].key, want.v[i].klen,
                "the record's value is not listed among its claims");
  for (size_t i = 0; i < r.claims.n; i++)
    if (uclaims_find(&want, r.claims.v[i].key, r.claims.v[i].klen) < 0)
      violation(c, "stale_claim", r.claims.v[i].key, r.claims.v[i].klen,
                "the record lists a claim its values do not need");
  /* Each needed claim must exist and name this record (invariant 5). */
  for (size_t i = 0; i < want.n; i++) {
    ustored_claim cl;
    ubuf ck = {want.v[i].key, want.v[i].klen, want.v[i].klen, 0};
    int rc = uexec_read(c->u->x, &ck, &cv, NULL, c->res);
    if (rc == UNICO_ENOTFOUND) {
      violation(c, "missing_claim", want.v[i].key, want.v[i].klen,
                "no claim exists for a value the record holds");
    } else if (rc) {
      c->err = rc;
      ustored_record_free(&r);
      uclaims_free(&want);
      ubuf_free(&cv);
      return 1;
    } else if (ustored_claim_decode(cv.p, cv.len, &cl)) {
      violation(c, "corrupt_claim", want.v[i].key, want.v[i].klen, "the claim cannot be decoded");
    } else {
      if (cl.owner_len != kl - pkoff || memcmp(cl.owner, k + pkoff, cl.owner_len))
        violation(c, "claim_owner_mismatch", want.v[i].key, want.v[i].klen,
                  "the claim names another record than the one holding the value");
      ustored_claim_free(&cl);
    }
    /* Remember (claim, owner) to find values with two owners. */
    if (c->npairs == c->cap) {
      size_t cap = c->cap ? c->cap * 2 : 1024;
      pair *p = realloc(c->pairs, cap * sizeof *p);
      if (!p) {
        c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
        break;
      }
      c->pairs = p;
      c->cap = cap;
    }
    pair *p = &c->pairs[c->npairs];
    p->claim = malloc(want.v[i].klen);
    p->owner = malloc(kl);
    if (!p->claim || !p->owner) {
      free(p->claim);
      free(p->owner);
      c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
      break;
    }
    memcpy(p->claim, want.v[i].key, want.v[i].klen);
    p->clen = want.v[i].klen;
    memcpy(p->owner, k, kl);
    p->olen = kl;
    c->npairs++;
  }
leave:
  ustored_record_free(&r);
  uclaims_free(&want);
  ubuf_free(&cv);
  return c->err ? 1 : 0;
}

static int claim_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  chk *c = ctx;
  ustored_claim cl;
  ustored_record r;
  ubuf rk = UBUF_INIT, rv = UBUF_INIT;
  char table[256];
  size_t voff;
  int con;
  (void)ver;
  c->claims++;
  if (uplan_claim_split(NULL, k, kl, &voff, &con, table, sizeof table) ||
      ustored_claim_decode(v, vl, &cl)) {
    violation(c, "corrupt_claim", k, kl, "the claim cannot be decoded");
    return 0;
  }
  ukey_record(&rk, table, cl.owner, cl.owner_len);
  int rc = uexec_read(c->u->x, &rk, &rv, NULL, c->res);
  if (rc == UNICO_ENOTFOUND) {
    violation(c, "orphan_claim", k, kl, "the claim's owner record does not exist");
  } else if (rc) {
    c->err = rc;
  } else if (ustored_record_decode(rv.p, rv.len, &r)) {
    violation(c, "corrupt_record", rk.p, rk.len, "the record cannot be decoded");
  } else {
    if (r.state != UREC_LIVE)
      violation(c, "orphan_claim", k, kl, "the claim's owner record is not live");
    else if (uclaims_find(&r.claims, k, kl) < 0)
      violation(c, "orphan_claim", k, kl, "the claim's owner record does not hold the value");
    ustored_record_free(&r);
  }
  ustored_claim_free(&cl);
  ubuf_free(&rk);
  ubuf_free(&rv);
  return c->err ? 1 : 0;
}

static int count_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  (void)k, (void)kl, (void)v, (void)vl, (void)ver;
  ((chk *)ctx)->outcomes++;
  return 0;
}

static int pair_cmp(const void *a, const void *b) {
  const pair *x = a, *y = b;
  size_t n = x->clen < y->clen ? x->clen : y->clen;
  int r = memcmp(x->claim, y->claim, n);
  if (r) return r;
  return x->clen < y->clen ? -1 : x->clen > y->clen;
}

static int scan_kind(chk *c, const char *kind, ustore_scan_cb cb) {
  ubuf p = UBUF_INIT;
  ukey_kind(&p, kind);
  int rc = uexec_scan(c->u->x, &p, cb, c, c->res);
  ubuf_free(&p);
  if (c->err) return c->err;
  return rc < 0 ? rc : UNICO_OK;
}

int uapi_check(unico *u, unico_result *res) {
  usch *sc = NULL;
  chk c;
  int rc = uapi_sch_load(u, &sc, res);
  if (rc) return rc;
  memset(&c, 0, sizeof c);
  c.u = u;
  c.s = sc->s;
  c.res = res;
  c.violations = json_array();
  if (!c.violations) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  if ((rc = scan_kind(&c, "r", record_cb))) goto leave;
  if ((rc = scan_kind(&c, "u", claim_cb))) goto leave;
  if ((rc = scan_kind(&c, "o", count_cb))) goto leave;
  /* Invariant 1: no normalized value held by two live records. */
  if (c.npairs) qsort(c.pairs, c.npairs, sizeof *c.pairs, pair_cmp);
  for (size_t i = 1; i < c.npairs; i++)
    if (!pair_cmp(&c.pairs[i - 1], &c.pairs[i]))
      violation(&c, "duplicate_value", c.pairs[i].claim, c.pairs[i].clen,
                "two live records hold this value");
  json_t *o = json_pack("{s:b,s:I,s:I,s:I,s:I,s:O}", "ok", c.nviol == 0,
                        "records", (json_int_t)c.records, "claims",
                        (json_int_t)c.claims, "outcomes", (json_int_t)c.outcomes,
                        "violations_total", (json_int_t)c.nviol, "violations",
                        c.violations);
  if (res && o) res->json = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (c.nviol)
    rc = uerr(res, UNICO_ECORRUPT, NULL,
              "check found %" PRIu64 " violation%s of the invariants", c.nviol,
              c.nviol == 1 ? "" : "s");
leave:
  for (size_t i = 0; i < c.npairs; i++) {
    free(c.pairs[i].claim);
    free(c.pairs[i].owner);
  }
  free(c.pairs);
  json_decref(c.violations);
  uapi_sch_put(sc);
  return rc;
}
