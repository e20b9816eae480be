/* unique.c - UNIQUE (cols): one claim per value, naming its owner record
 * ("u", table, constraint, value...). */
#include "constraint/kind.h"

#include <jansson.h>

#include "keys/keyspace.h"
#include "schema/schema.h"

/* A NAMESPACE's claims are the namespace's, whichever table holds them:
 * ("u", "", ns, value...); the others ("u", table, constraint, ...). */
static void unique_key_prefix(ubuf *k, const char *table,
                              const uconstraint *c) {
  if (c->ns)
    ukey_shared_claims(k, c->ns);
  else
    ukey_claims(k, table, c->name);
}

static int64_t unique_key_limit(const uconstraint *c) {
  (void)c;
  return 0;
}

/* Atomic protocol: a value is taken only where it is absent, or where the
 * write takes over a hold at the version it read (key->ver). */
static int unique_atomic_take(const ukind_atomic *a, ustore_op *op,
                              ubuf *val) {
  (void)val;
  *op = ukind_op(a->key, a->key->ver ? USTORE_VERSION : USTORE_ABSENT,
                 a->key->ver, USTORE_PUT, a->claim_val);
  return UKIND_OP;
}

/* Releases need no condition: only writes that hold the record's own
 * condition ever touch its claims, and the one releasing holds it. */
static int unique_atomic_release(const ukind_atomic *a, ustore_op *op,
                                 ubuf *val) {
  (void)val;
  *op = ukind_op(a->key, USTORE_ANY, 0, USTORE_DEL, NULL);
  return UKIND_OP;
}

static int unique_over(const uconstraint *c, size_t n) {
  (void)c;
  return n > 1;
}

static json_t *unique_report(const uconstraint *c, json_t *val, size_t n,
                             json_t *recs) {
  return json_pack("{s:s,s:o,s:I,s:o}", "constraint", c->name, "value",
                   val ? val : json_null(), "count", (json_int_t)n, "records",
                   recs);
}

/* A built claim names the first of its holders (a value with more is a
 * duplicate: the build does not get this far). */
static int unique_build_value(ubuf *out, const ukind_holders *h) {
  size_t len;
  const uint8_t *pk = h->pk(h->ctx, 0, &len);
  ustored_claim_encode(out, UCLAIM_COMMITTED, pk, len, h->op_id, h->now);
  return 0;
}

static int64_t unique_audit_limit(const uconstraint *c) {
  (void)c;
  return -1;
}

const ukind_ops ukind_unique = {
    .word = "unique",
    .key_kind = UKEY_CLAIM,
    .lookup = 1,
    .key_prefix = unique_key_prefix,
    .key_limit = unique_key_limit,
    .update_ops = 3,
    .counted = 0,
    .atomic_take = unique_atomic_take,
    .atomic_release = unique_atomic_release,
    .busy_reason = "a pending claim",
    .over = unique_over,
    .report_slot = 0,
    .report = unique_report,
    .build_value = unique_build_value,
    .audit_limit = unique_audit_limit,
};
