/* limit.c - LIMIT n PER (cols): at most n live records per group of
 * column values, each group one key ("l", table, constraint, group...)
 * holding its count (atomic stores) or its members (the claims
 * protocol). */
#include "constraint/kind.h"

#include <jansson.h>

#include "keys/keyspace.h"
#include "schema/schema.h"

static int64_t limit_key_limit(const uconstraint *c) { return c->limit; }

/* Atomic protocol: a group joined must have room, and is moved at the
 * version its count was read at. */
static int limit_atomic_take(const ukind_atomic *a, ustore_op *op,
                             ubuf *val) {
  const uclaim *c = a->key;
  int64_t cnt = a->count;
  uint64_t ver = a->ver;
  if (c->limit > 0 && cnt >= c->limit) return UKIND_FULL;
  ustored_group_encode(val, cnt + 1);
  *op = ukind_op(c, ver ? USTORE_VERSION : USTORE_ABSENT, ver, USTORE_PUT,
                 val);
  return UKIND_OP;
}

/* A group left goes down by one at the version read (and leaves with its
 * last member). */
static int limit_atomic_release(const ukind_atomic *a, ustore_op *op,
                                ubuf *val) {
  if (!a->ver) return UKIND_NONE; /* nothing to count down (check reports
                                     it) */
  if (a->count <= 1) {
    *op = ukind_op(a->key, USTORE_VERSION, a->ver, USTORE_DEL, NULL);
  } else {
    ustored_group_encode(val, a->count - 1);
    *op = ukind_op(a->key, USTORE_VERSION, a->ver, USTORE_PUT, val);
  }
  return UKIND_OP;
}

static int limit_over(const uconstraint *c, size_t n) {
  return (int64_t)n > c->limit;
}

static json_t *limit_report(const uconstraint *c, json_t *val, size_t n,
                            json_t *recs) {
  return json_pack("{s:s,s:o,s:I,s:I,s:o}", "constraint", c->name, "group",
                   val ? val : json_null(), "count", (json_int_t)n, "limit",
                   (json_int_t)c->limit, "records", recs);
}

/* A built group holds its members where the store keeps them, else its
 * count. */
static int limit_build_value(ubuf *out, const ukind_holders *h) {
  if (!h->members) {
    ustored_group_encode(out, (int64_t)h->n);
    return 0;
  }
  ustored_members m = {0, NULL};
  int rc = 0;
  for (size_t q = 0; q < h->n && !rc; q++) {
    size_t len;
    const uint8_t *pk = h->pk(h->ctx, q, &len);
    rc = ustored_members_add(&m, pk, len, h->op_id, h->now) ? -1 : 0;
  }
  if (!rc) ustored_members_encode(out, &m);
  ustored_members_free(&m);
  return rc;
}

static void limit_key_prefix(ubuf *k, const char *table,
                             const uconstraint *c) {
  ukey_groups(k, table, c->name);
}

static int64_t limit_audit_limit(const uconstraint *c) { return c->limit; }

const ukind_ops ukind_limit = {
    .word = "limit",
    .key_kind = UKEY_GROUP,
    .lookup = 0,
    .key_prefix = limit_key_prefix,
    .key_limit = limit_key_limit,
    .update_ops = 2,
    .counted = 1,
    .atomic_take = limit_atomic_take,
    .atomic_release = limit_atomic_release,
    .busy_reason = "the limit group is full with it",
    .over = limit_over,
    .report_slot = 1,
    .report = limit_report,
    .build_value = limit_build_value,
    .audit_limit = limit_audit_limit,
};
