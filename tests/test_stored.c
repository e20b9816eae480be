/* test_stored.c - the stored formats parallel commit adds
 * (docs/parallel-commit.md): an insert's intent (UREC_INTENT, with the
 * attempt its claims must name and the table fingerprint it was planned
 * under), PENDING claims naming an attempt, and uplan_table_fingerprint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_main.h"

#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "schema/schema.h"

static void make_intent(ustored_record *r, uclaims *cl, ustored_hist *h) {
  memset(r, 0, sizeof *r);
  ubuf k = UBUF_INIT;
  ukey_claim(&k, "users", "users_email_key", (const uint8_t *)"\x02" "ann", 4);
  assert_int_equal(uclaims_add(cl, k.p, k.len, 0, -1), 0);
  ubuf_free(&k);
  assert_int_equal(ustored_hist_add(h, "op-earlier", 1234, (const uint8_t *)"o", 1), 0);
  r->state = UREC_INTENT;
  r->version = 7;
  r->op_id = "op-1";
  r->body = "{\"id\":\"a\"}";
  r->claims = *cl;
  r->since_ms = 99;
  r->hist = *h;
  r->attempt = 0xfedcba9876543210ULL;
  r->fp = 0x8000000000000001ULL; /* (above INT64_MAX: stored as is) */
}

static void test_intent_round_trip(void **state) {
  (void)state;
  ustored_record in, out;
  uclaims cl = UCLAIMS_INIT;
  ustored_hist h = {0, NULL};
  ubuf b = UBUF_INIT, b2 = UBUF_INIT;
  make_intent(&in, &cl, &h);
  ustored_intent_encode(&b, &in);
  assert_true(ubuf_ok(&b));
  assert_int_equal(ustored_record_decode(b.p, b.len, &out), 0);
  assert_int_equal(out.state, UREC_INTENT);
  assert_int_equal(out.version, 7);
  assert_string_equal(out.op_id, "op-1");
  assert_string_equal(out.body, "{\"id\":\"a\"}");
  assert_int_equal(out.claims.n, 1);
  assert_memory_equal(out.claims.v[0].key, cl.v[0].key, cl.v[0].klen);
  assert_int_equal(out.since_ms, 99);
  assert_int_equal(out.hist.n, 1);
  assert_string_equal(out.hist.v[0].op_id, "op-earlier");
  assert_true(out.attempt == 0xfedcba9876543210ULL);
  assert_true(out.fp == 0x8000000000000001ULL);
  /* re-encoding a decoded intent gives the same bytes */
  ustored_record_reencode(&b2, &out);
  assert_int_equal(b2.len, b.len);
  assert_memory_equal(b2.p, b.p, b.len);
  ustored_record_free(&out);
  /* every proper prefix is refused (no field of an intent is optional) */
  for (size_t n = 0; n < b.len; n++)
    assert_int_not_equal(ustored_record_decode(b.p, n, &out), 0);
  /* an intent with no history still carries attempt and fingerprint */
  ustored_hist_free(&h);
  in.hist.n = 0;
  in.hist.v = NULL;
  ubuf_reset(&b);
  ustored_intent_encode(&b, &in);
  assert_int_equal(ustored_record_decode(b.p, b.len, &out), 0);
  assert_int_equal(out.hist.n, 0);
  assert_true(out.attempt == in.attempt && out.fp == in.fp);
  ustored_record_free(&out);
  uclaims_free(&cl);
  ubuf_free(&b);
  ubuf_free(&b2);
}

/* The other states keep their format: an empty history list is still
 * refused there, and attempt/fp read as 0. */
static void test_other_states_unchanged(void **state) {
  (void)state;
  ubuf b = UBUF_INIT;
  ustored_record out;
  ustored_record_encode_at(&b, UREC_PENDING, 0, "op", "{}", NULL, 5);
  utup_int(&b, 0); /* a history of no entries */
  assert_int_not_equal(ustored_record_decode(b.p, b.len, &out), 0);
  ubuf_reset(&b);
  ustored_record_encode_at(&b, UREC_LIVE, 3, "op", "{}", NULL, 5);
  assert_int_equal(ustored_record_decode(b.p, b.len, &out), 0);
  assert_int_equal(out.state, UREC_LIVE);
  assert_true(out.attempt == 0 && out.fp == 0);
  ustored_record_free(&out);
  ubuf_free(&b);
}

static void test_claim_attempt(void **state) {
  (void)state;
  ubuf b = UBUF_INIT;
  ustored_claim c;
  const uint8_t pk[] = {0x02, 'a', 0};
  ustored_claim_encode_attempt(&b, pk, sizeof pk, "op-1", 42, 1ULL << 63);
  assert_int_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  assert_int_equal(c.state, UCLAIM_PENDING);
  assert_memory_equal(c.owner, pk, sizeof pk);
  assert_string_equal(c.op_id, "op-1");
  assert_int_equal(c.since_ms, 42);
  assert_true(c.attempt == 1ULL << 63);
  ustored_claim_free(&c);
  /* a classic PENDING claim names no attempt */
  ubuf_reset(&b);
  ustored_claim_encode(&b, UCLAIM_PENDING, pk, sizeof pk, "op-1", 42);
  assert_int_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  assert_true(c.attempt == 0);
  ustored_claim_free(&c);
  /* only PENDING claims may carry one */
  ubuf_reset(&b);
  ustored_claim_encode(&b, UCLAIM_COMMITTED, pk, sizeof pk, "op-1", 42);
  utup_int(&b, 5);
  assert_int_not_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  ubuf_free(&b);
}

/* A PENDING claim that took over a hold carries the hold as stored. */
static void test_claim_carrying(void **state) {
  (void)state;
  ubuf b = UBUF_INIT, hold = UBUF_INIT;
  ustored_claim c, h;
  const uint8_t pk[] = {0x02, 'a', 0};
  uint8_t hash[32];
  ustored_token_hash("tok-1", hash);
  ustored_hold_encode(&hold, "hold-op", 10, 5000, hash);
  ustored_claim_encode_carrying(&b, pk, sizeof pk, "op-1", 42, 0, hold.p,
                                hold.len, 5000);
  assert_int_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  assert_int_equal(c.state, UCLAIM_PENDING);
  assert_string_equal(c.op_id, "op-1");
  assert_true(c.attempt == 0);
  assert_int_equal(c.expires_ms, 5000);
  assert_int_equal(c.hold_len, hold.len);
  assert_memory_equal(c.hold, hold.p, hold.len);
  assert_int_equal(ustored_claim_decode(c.hold, c.hold_len, &h), 0);
  assert_int_equal(h.state, UCLAIM_HELD);
  assert_memory_equal(h.token_hash, hash, 32);
  ustored_claim_free(&h);
  ustored_claim_free(&c);
  assert_null(c.hold);
  /* a claim without one has none */
  ubuf_reset(&b);
  ustored_claim_encode_attempt(&b, pk, sizeof pk, "op-1", 42, 7);
  assert_int_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  assert_null(c.hold);
  assert_int_equal(c.expires_ms, 0);
  ustored_claim_free(&c);
  /* an empty hold, or an expiry with no hold, is corrupt */
  ubuf_reset(&b);
  ustored_claim_encode_carrying(&b, pk, sizeof pk, "op-1", 42, 0, NULL, 0,
                                5000);
  assert_int_not_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  ubuf_reset(&b);
  ustored_claim_encode_attempt(&b, pk, sizeof pk, "op-1", 42, 0);
  utup_int(&b, 5000);
  assert_int_not_equal(ustored_claim_decode(b.p, b.len, &c), 0);
  ubuf_free(&b);
  ubuf_free(&hold);
}

static uint64_t fp_of(const char *ddl, const char *table) {
  uschema *s = NULL;
  uparse_error e;
  if (uschema_parse(ddl, &s, &e)) fail_msg("%s: %s", ddl, e.msg);
  const utable *t = uschema_table(s, table);
  assert_non_null(t);
  uint64_t fp = uplan_table_fingerprint(t);
  uschema_free(s);
  return fp;
}

static void test_fingerprint(void **state) {
  (void)state;
  const char *base =
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 3 PER (phone));";
  uint64_t f = fp_of(base, "users");
  /* the same definition, written differently, agrees */
  assert_true(f == fp_of("-- a comment\ncreate table USERS (id TEXT primary key,"
                         " email varchar, phone text, n int,"
                         " unique (email) normalize casefold,"
                         " constraint per limit 3 per (phone));",
                         "users"));
  /* another table beside it changes nothing */
  char two[1024];
  snprintf(two, sizeof two, "%s CREATE TABLE other (k int PRIMARY KEY);", base);
  assert_true(f == fp_of(two, "users"));
  /* each of these changes it */
  const char *changed[] = {
      /* a column added */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, x text, UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 3 PER (phone));",
      /* a column's type */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n bigint, UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 3 PER (phone));",
      /* normalization */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, UNIQUE (email),"
      " CONSTRAINT per LIMIT 3 PER (phone));",
      /* a limit */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 4 PER (phone));",
      /* a constraint's columns */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 3 PER (phone, n));",
      /* a constraint added */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, UNIQUE (email) NORMALIZE casefold, UNIQUE (phone),"
      " CONSTRAINT per LIMIT 3 PER (phone));",
      /* a constraint dropped */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, UNIQUE (email) NORMALIZE casefold);",
      /* a constraint renamed */
      "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
      " n int, CONSTRAINT mail UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 3 PER (phone));",
      /* the primary key */
      "CREATE TABLE users (id text, email text, phone text,"
      " n int, PRIMARY KEY (id, n), UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT per LIMIT 3 PER (phone));",
  };
  for (size_t i = 0; i < sizeof changed / sizeof *changed; i++) {
    uint64_t g = fp_of(changed[i], "users");
    if (g == f) fail_msg("change %zu kept the fingerprint", i);
    for (size_t j = 0; j < i; j++)
      if (g == fp_of(changed[j], "users"))
        fail_msg("changes %zu and %zu share a fingerprint", j, i);
  }
  /* the table's name is part of it */
  assert_true(fp_of("CREATE TABLE a (id int PRIMARY KEY);", "a") !=
              fp_of("CREATE TABLE b (id int PRIMARY KEY);", "b"));
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_intent_round_trip),
      cmocka_unit_test(test_other_states_unchanged),
      cmocka_unit_test(test_claim_attempt),
      cmocka_unit_test(test_claim_carrying),
      cmocka_unit_test(test_fingerprint),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
