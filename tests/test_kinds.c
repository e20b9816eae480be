/* test_kinds.c - the table of constraint kinds (src/constraint/kind.h):
 * every kind the parser makes has a table with every entry filled, found
 * again by its key namespace; the plan files a record's keys under the
 * kind's prefix with its limit; and each kind's atomic judge, build value
 * and build verdict say what unique.c and limit.c promise. A new kind
 * adds its DDL to SCHEMA and its cases here (docs/architecture.md,
 * "Adding a constraint kind"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_main.h"

#include <jansson.h>

#include "constraint/kind.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "schema/schema.h"

/* One constraint of every kind. */
static const char *SCHEMA =
    "CREATE TABLE subs (id text PRIMARY KEY, poll text, name text, opt text,"
    " UNIQUE (poll, name), LIMIT 3 PER (poll, opt));";

static uschema *parse(void) {
  uschema *s = NULL;
  uparse_error e;
  assert_int_equal(uschema_parse(SCHEMA, &s, &e), 0);
  return s;
}

static void test_every_entry_filled(void **state) {
  (void)state;
  uschema *s = parse();
  const utable *t = &s->tables[0];
  int seen_claim = 0, seen_group = 0;
  for (size_t i = 0; i < t->ncons; i++) {
    const ukind_ops *kd = ukind_of(&t->cons[i]);
    assert_non_null(kd);
    assert_true(kd->word && kd->word[0]);
    assert_true(kd->busy_reason && kd->busy_reason[0]);
    assert_true(kd->update_ops > 0);
    assert_non_null(kd->key_prefix);
    assert_non_null(kd->key_limit);
    assert_non_null(kd->atomic_take);
    assert_non_null(kd->atomic_release);
    assert_non_null(kd->over);
    assert_non_null(kd->report);
    assert_non_null(kd->build_value);
    assert_non_null(kd->audit_limit);
    /* the executor finds the same table by the key's namespace */
    assert_ptr_equal(ukind_of_key(kd->key_kind), kd);
    seen_claim |= kd->key_kind == UKEY_CLAIM;
    seen_group |= kd->key_kind == UKEY_GROUP;
  }
  assert_true(seen_claim && seen_group);
  assert_ptr_not_equal(ukind_of(&t->cons[0]), ukind_of(&t->cons[1]));
  uschema_free(s);
}

/* The plan files each key under its kind's prefix, with its limit. */
static void test_plan_keys(void **state) {
  (void)state;
  uschema *s = parse();
  const utable *t = &s->tables[0];
  json_t *body = json_pack("{s:s,s:s,s:s,s:s}", "id", "r1", "poll", "p",
                           "name", "ann", "opt", "a");
  uclaims cl = UCLAIMS_INIT;
  unico_result res = UNICO_RESULT_INIT;
  assert_int_equal(uplan_claims(t, body, &cl, &res), UNICO_OK);
  assert_int_equal(cl.n, 2);
  for (size_t i = 0; i < cl.n; i++) {
    const uconstraint *c = &t->cons[cl.v[i].con];
    const ukind_ops *kd = ukind_of(c);
    ubuf pre = UBUF_INIT;
    kd->key_prefix(&pre, t->name, c);
    assert_int_equal(cl.v[i].voff, pre.len);
    assert_memory_equal(cl.v[i].key, pre.p, pre.len);
    assert_int_equal(cl.v[i].kind, kd->key_kind);
    assert_int_equal(cl.v[i].limit, kd->key_limit(c));
    ubuf_free(&pre);
  }
  assert_int_equal(ukind_limit.key_limit(&t->cons[1]), 3);
  assert_int_equal(ukind_unique.key_limit(&t->cons[0]), 0);
  uclaims_free(&cl);
  unico_result_clear(&res);
  json_decref(body);
  uschema_free(s);
}

static uclaim key_of(int kind, int64_t limit, uint64_t ver) {
  static uint8_t k[] = "key";
  uclaim c = {k, 3, 0, 0, kind, limit, ver};
  return c;
}

static void test_unique_atomic(void **state) {
  (void)state;
  ubuf cv = UBUF_INIT, val = UBUF_INIT;
  ubuf_put(&cv, "claim", 5);
  ustore_op op;
  /* a value is taken only where absent ... */
  uclaim c = key_of(UKEY_CLAIM, 0, 0);
  ukind_atomic a = {&c, &cv, 0, 0};
  assert_int_equal(ukind_unique.atomic_take(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.expect, USTORE_ABSENT);
  assert_int_equal(op.action, USTORE_PUT);
  assert_int_equal(op.vlen, 5);
  /* ... or where a hold is taken over, at its version */
  c.ver = 9;
  assert_int_equal(ukind_unique.atomic_take(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.expect, USTORE_VERSION);
  assert_int_equal(op.expect_version, 9);
  /* released without condition */
  assert_int_equal(ukind_unique.atomic_release(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.expect, USTORE_ANY);
  assert_int_equal(op.action, USTORE_DEL);
  ubuf_free(&cv);
  ubuf_free(&val);
}

static void test_limit_atomic(void **state) {
  (void)state;
  ubuf val = UBUF_INIT;
  ustore_op op;
  int64_t n;
  uclaim g = key_of(UKEY_GROUP, 3, 0);
  /* a new group: created absent, with a count of 1 */
  ukind_atomic a = {&g, NULL, 0, 0};
  assert_int_equal(ukind_limit.atomic_take(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.expect, USTORE_ABSENT);
  assert_int_equal(ustored_group_decode(val.p, val.len, &n), 0);
  assert_int_equal(n, 1);
  /* room for one more: moved at the version read */
  ubuf_reset(&val);
  a.count = 2, a.ver = 7;
  assert_int_equal(ukind_limit.atomic_take(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.expect, USTORE_VERSION);
  assert_int_equal(op.expect_version, 7);
  assert_int_equal(ustored_group_decode(val.p, val.len, &n), 0);
  assert_int_equal(n, 3);
  /* full at its limit */
  a.count = 3;
  assert_int_equal(ukind_limit.atomic_take(&a, &op, &val), UKIND_FULL);
  /* leaving: counted down, deleted with its last member, nothing when
   * absent */
  ubuf_reset(&val);
  assert_int_equal(ukind_limit.atomic_release(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.action, USTORE_PUT);
  assert_int_equal(op.expect_version, 7);
  assert_int_equal(ustored_group_decode(val.p, val.len, &n), 0);
  assert_int_equal(n, 2);
  a.count = 1;
  assert_int_equal(ukind_limit.atomic_release(&a, &op, &val), UKIND_OP);
  assert_int_equal(op.action, USTORE_DEL);
  assert_int_equal(op.expect, USTORE_VERSION);
  a.ver = 0;
  assert_int_equal(ukind_limit.atomic_release(&a, &op, &val), UKIND_NONE);
  ubuf_free(&val);
}

static const uint8_t *pk_at(const void *ctx, size_t i, size_t *len) {
  const char *const *pks = ctx;
  *len = strlen(pks[i]);
  return (const uint8_t *)pks[i];
}

static void test_build(void **state) {
  (void)state;
  uschema *s = parse();
  const utable *t = &s->tables[0];
  const uconstraint *u = &t->cons[0], *l = &t->cons[1];
  assert_false(ukind_unique.over(u, 1));
  assert_true(ukind_unique.over(u, 2));
  assert_false(ukind_limit.over(l, 3));
  assert_true(ukind_limit.over(l, 4));
  assert_int_equal(ukind_unique.audit_limit(u), -1);
  assert_int_equal(ukind_limit.audit_limit(l), 3);
  static const char *pks[] = {"pk-a", "pk-b"};
  ukind_holders h = {2, pk_at, pks, 0, "schema-build", 5};
  ubuf v = UBUF_INIT;
  /* a claim names its first holder */
  assert_int_equal(ukind_unique.build_value(&v, &h), 0);
  ustored_claim cl;
  assert_int_equal(ustored_claim_decode(v.p, v.len, &cl), 0);
  assert_int_equal(cl.state, UCLAIM_COMMITTED);
  assert_int_equal(cl.owner_len, 4);
  assert_memory_equal(cl.owner, "pk-a", 4);
  ustored_claim_free(&cl);
  /* a group its count, or its members where the store keeps them */
  ubuf_reset(&v);
  int64_t n = 0;
  assert_int_equal(ukind_limit.build_value(&v, &h), 0);
  assert_int_equal(ustored_group_decode(v.p, v.len, &n), 0);
  assert_int_equal(n, 2);
  ubuf_reset(&v);
  h.members = 1;
  assert_int_equal(ukind_limit.build_value(&v, &h), 0);
  ustored_members m = {0, NULL};
  assert_int_equal(ustored_members_decode(v.p, v.len, &m, NULL), 0);
  assert_int_equal(m.n, 2);
  assert_memory_equal(m.v[1].pk, "pk-b", 4);
  ustored_members_free(&m);
  /* the report entries name the constraint */
  json_t *r = ukind_limit.report(l, json_string("g"), 4, json_array());
  assert_int_equal(json_integer_value(json_object_get(r, "limit")), 3);
  assert_non_null(json_object_get(r, "group"));
  json_decref(r);
  r = ukind_unique.report(u, json_string("v"), 2, json_array());
  assert_string_equal(json_string_value(json_object_get(r, "constraint")),
                      u->name);
  assert_non_null(json_object_get(r, "value"));
  json_decref(r);
  assert_int_not_equal(ukind_unique.report_slot, ukind_limit.report_slot);
  ubuf_free(&v);
  uschema_free(s);
}

/* A NAMESPACE's UNIQUE files one value of two tables under one key
 * ("u", "", ns, value...), apart from any table's claims, and the key's
 * owner, (table, pk...), leads back to each table's record. */
static void test_namespace_keys(void **state) {
  (void)state;
  uschema *s = NULL;
  uparse_error e;
  assert_int_equal(
      uschema_parse("CREATE TABLE users (id text PRIMARY KEY, login text,"
                    " UNIQUE (login) NORMALIZE casefold NAMESPACE logins);"
                    "CREATE TABLE orgs (id text PRIMARY KEY, name text,"
                    " UNIQUE (name) NORMALIZE casefold NAMESPACE logins,"
                    " CONSTRAINT own UNIQUE (name));",
                    &s, &e),
      0);
  json_t *u = json_pack("{s:s,s:s}", "id", "u1", "login", "Alice");
  json_t *o = json_pack("{s:s,s:s}", "id", "o1", "name", "ALICE");
  uclaims cu = UCLAIMS_INIT, co = UCLAIMS_INIT;
  unico_result res = UNICO_RESULT_INIT;
  assert_int_equal(uplan_claims(&s->tables[0], u, &cu, &res), UNICO_OK);
  assert_int_equal(uplan_claims(&s->tables[1], o, &co, &res), UNICO_OK);
  assert_int_equal(cu.n, 1);
  assert_int_equal(co.n, 2);
  /* one key for both tables' value; the org's own constraint apart */
  assert_int_equal(cu.v[0].klen, co.v[0].klen);
  assert_memory_equal(cu.v[0].key, co.v[0].key, cu.v[0].klen);
  assert_true(ukey_claim_shared(cu.v[0].key, cu.v[0].klen));
  assert_false(ukey_claim_shared(co.v[1].key, co.v[1].klen));
  ubuf pre = UBUF_INIT;
  ukey_shared_claims(&pre, "logins");
  assert_int_equal(cu.v[0].voff, pre.len);
  assert_memory_equal(cu.v[0].key, pre.p, pre.len);
  /* owner of the namespace's claim: (table, pk); of the table's: pk */
  ubuf pk = UBUF_INIT, rk = UBUF_INIT, back = UBUF_INIT;
  utup_str(&pk, "o1");
  ukey_record(&rk, "orgs", pk.p, pk.len);
  const uint8_t *ow;
  size_t ol;
  assert_int_equal(ukey_claim_owner_of(co.v[0].key, co.v[0].klen, rk.p,
                                       rk.len, &ow, &ol), 0);
  assert_int_equal(ol, rk.len - 3);
  assert_int_equal(ukey_claim_owner_record(&back, co.v[0].key, co.v[0].klen,
                                           ow, ol), 0);
  assert_int_equal(back.len, rk.len);
  assert_memory_equal(back.p, rk.p, rk.len);
  assert_int_equal(ukey_claim_owner_of(co.v[1].key, co.v[1].klen, rk.p,
                                       rk.len, &ow, &ol), 0);
  assert_int_equal(ol, pk.len);
  assert_memory_equal(ow, pk.p, pk.len);
  ubuf_reset(&back);
  assert_int_equal(ukey_claim_owner_record(&back, co.v[1].key, co.v[1].klen,
                                           ow, ol), 0);
  assert_memory_equal(back.p, rk.p, rk.len);
  /* the constraint a key belongs to, from the key, in each table */
  size_t voff;
  int con = -1;
  assert_int_equal(uplan_claim_split(&s->tables[1], cu.v[0].key,
                                     cu.v[0].klen, &voff, &con, NULL, 0), 0);
  assert_int_equal(con, 0);
  ubuf_free(&pre);
  ubuf_free(&pk);
  ubuf_free(&rk);
  ubuf_free(&back);
  uclaims_free(&cu);
  uclaims_free(&co);
  unico_result_clear(&res);
  json_decref(u);
  json_decref(o);
  uschema_free(s);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_entry_filled),
      cmocka_unit_test(test_plan_keys),
      cmocka_unit_test(test_unique_atomic),
      cmocka_unit_test(test_limit_atomic),
      cmocka_unit_test(test_build),
      cmocka_unit_test(test_namespace_keys),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
