/* test_drift.c - repair of drift under the claims protocol (on the LMDB
 * store seen through compare-and-set only: lmdb:DIR?txn=off), in the
 * states a repair's stamp of a bare row can leave behind.
 *
 * A bare row is a native table's row another client wrote (Cassandra:
 * no unico_ columns, store version 0). A repair claims its free values by
 * an update of the row (exec/repair.c claims_stamp), whose claims are
 * PENDING in the row's name until the row lists them. A stamp that dies
 * there leaves an orphan naming the row; whoever fences it writes the row
 * back as it is: with bookkeeping, but at record version 0 and listing
 * nothing. LMDB has no bare rows at store version 0, but that fenced state
 * is made here exactly, behind unico's back, with the claim the dead stamp
 * left (old, or still in flight). tests/native_cassandra.py has the bare
 * rows themselves. Also: a lookup that meets a dead writer's claim settles
 * it (the reader, not only check and repair, removes leftovers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/stored.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "store/store.h"
#include "unico.h"
#include "testutil.h"
#include "util/clock.h"

static const char *DDL =
    "CREATE TABLE users (id text PRIMARY KEY, email text, n int,"
    " CONSTRAINT users_email UNIQUE (email));";

static char dir[256];
static char url[400];

static unico *open_store(void) {
  unico *u = tu_open(url, NULL);
  assert_non_null(u);
  return u;
}

static unico *open_fresh(void) {
  assert_int_equal(tu_rmtree(dir), 0);
  unico *u = tu_open(url, DDL);
  assert_non_null(u);
  return u;
}

static void keys_of(const char *id, const char *email, ubuf *rk, ubuf *ck,
                    ubuf *pk) {
  ubuf v = UBUF_INIT;
  utup_str(pk, id);
  ukey_record(rk, "users", pk->p, pk->len);
  utup_str(&v, email);
  ukey_claim(ck, "users", "users_email", v.p, v.len);
  ubuf_free(&v);
}

/* Behind unico's back (closed meanwhile): users/id as a fence leaves a
 * bare row holding email, and, when claim_op is given, a PENDING claim of
 * the email naming the row, by op claim_op since since_ms. */
static unico *fenced_bare(unico *u, const char *id, const char *email,
                          const char *claim_op, int64_t since_ms) {
  unico_close(u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf rk = UBUF_INIT, ck = UBUF_INIT, pk = UBUF_INIT, v = UBUF_INIT;
  char body[256];
  keys_of(id, email, &rk, &ck, &pk);
  snprintf(body, sizeof body, "{\"email\":\"%s\",\"id\":\"%s\"}", email, id);
  ustored_record_encode(&v, UREC_LIVE, 0, "", body, NULL);
  ustore_op o = ustore_op_make(rk.p, rk.len, USTORE_ABSENT, 0, USTORE_PUT,
                               v.p, v.len);
  assert_int_equal(st->vt->cas(st, &o, &e), UNICO_OK);
  ubuf_free(&o.cur);
  if (claim_op) {
    ubuf_reset(&v);
    ustored_claim_encode(&v, UCLAIM_PENDING, pk.p, pk.len, claim_op, since_ms);
    o = ustore_op_make(ck.p, ck.len, USTORE_ABSENT, 0, USTORE_PUT, v.p, v.len);
    assert_int_equal(st->vt->cas(st, &o, &e), UNICO_OK);
    ubuf_free(&o.cur);
  }
  ubuf_free(&rk);
  ubuf_free(&ck);
  ubuf_free(&pk);
  ubuf_free(&v);
  st->vt->close(st);
  return open_store();
}

/* The stored record of users/id and the claim of email (closing and
 * reopening u); *claim_found 0 when there is no claim. */
static void stored(unico **u, const char *id, const char *email,
                   ustored_record *rec, ustored_claim *cl, int *claim_found) {
  unico_close(*u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf rk = UBUF_INIT, ck = UBUF_INIT, pk = UBUF_INIT, v = UBUF_INIT;
  uint64_t ver;
  keys_of(id, email, &rk, &ck, &pk);
  assert_int_equal(st->vt->get(st, rk.p, rk.len, &v, &ver, &e), UNICO_OK);
  assert_int_equal(ustored_record_decode(v.p, v.len, rec), 0);
  int rc = st->vt->get(st, ck.p, ck.len, &v, &ver, &e);
  *claim_found = rc == UNICO_OK;
  if (*claim_found) assert_int_equal(ustored_claim_decode(v.p, v.len, cl), 0);
  ubuf_free(&rk);
  ubuf_free(&ck);
  ubuf_free(&pk);
  ubuf_free(&v);
  st->vt->close(st);
  *u = open_store();
}

/* An integer of a JSON report (-1 when absent). */
static long long num(json_t *o, const char *name) {
  json_t *v = json_object_get(o, name);
  return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* unico_audit (settle 0) or unico_check (settle 1): its code and report. */
static int audit(unico *u, int settle, json_t **rep) {
  unico_result r = UNICO_RESULT_INIT;
  int rc = settle ? unico_check(u, &r) : unico_audit(u, &r);
  *rep = r.json ? json_loads(r.json, 0, NULL) : NULL;
  if (!*rep) *rep = json_object();
  if (rc && rc != UNICO_ECORRUPT) fprintf(stderr, "check: %s\n", r.message);
  unico_result_clear(&r);
  return rc;
}

/* Repair's report; it must answer want (UNICO_ECORRUPT: violations it
 * cannot fix are left, and the report says so). */
static json_t *repair_answering(unico *u, int want) {
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_repair(u, &r);
  if (rc != want) fprintf(stderr, "repair: %s\n", r.message);
  assert_int_equal(rc, want);
  json_t *o = json_loads(r.json, 0, NULL);
  assert_non_null(o);
  unico_result_clear(&r);
  return o;
}

static json_t *repair(unico *u) { return repair_answering(u, UNICO_OK); }

static int insert(unico *u, const char *json, char *out, size_t n) {
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_insert(u, "users", json, NULL, &r);
  if (out) snprintf(out, n, "%.200s %.200s", r.message, r.json ? r.json : "");
  unico_result_clear(&r);
  return rc;
}

/* A stamp that died with its claim PENDING: past the grace period the
 * claim is an orphan. The fenced row is drift, not a violation; repair
 * takes the orphan over (fencing the row itself) and stamps the row as it
 * is then. */
static void test_dead_stamp_repaired(void **state) {
  (void)state;
  unico *u = open_fresh();
  u = fenced_bare(u, "b", "b@x.org", "dead-stamp", 1);
  json_t *rep;
  int rc = audit(u, 0, &rep);
  if (rc) fprintf(stderr, "%s\n", json_dumps(rep, JSON_COMPACT));
  assert_int_equal(rc, UNICO_OK); /* not missing_claim: bare */
  assert_int_equal(num(rep, "bare_rows"), 1);
  assert_int_equal(num(rep, "unclaimed_values"), 0); /* (named: an orphan) */
  assert_int_equal(num(rep, "orphans"), 1);
  json_decref(rep);

  json_t *o = repair(u);
  if (num(o, "rows_claimed") != 1)
    fprintf(stderr, "%s\n", json_dumps(o, JSON_COMPACT));
  assert_int_equal(num(o, "rows_claimed"), 1);
  json_decref(o);

  ustored_record rec;
  ustored_claim cl;
  int found;
  stored(&u, "b", "b@x.org", &rec, &cl, &found);
  assert_int_equal(rec.state, UREC_LIVE);
  assert_int_equal(rec.claims.n, 1);
  assert_true(found);
  assert_int_equal(cl.state, UCLAIM_COMMITTED);
  assert_true(cl.owner_len > 0 && cl.op_id && strcmp(cl.op_id, "dead-stamp"));
  assert_string_equal(rec.op_id, cl.op_id);
  ustored_claim_free(&cl);
  ustored_record_free(&rec);

  char out[512];
  assert_int_equal(insert(u, "{\"id\":\"d\",\"email\":\"b@x.org\"}", out,
                          sizeof out),
                   UNICO_ECONFLICT);
  assert_non_null(strstr(out, "\"b\""));
  rc = audit(u, 0, &rep);
  assert_int_equal(rc, UNICO_OK);
  assert_int_equal(num(rep, "bare_rows"), -1);
  assert_int_equal(num(rep, "orphans"), 0);
  json_decref(rep);
  /* and the row is unico's: an update moves its value */
  unico_result r = UNICO_RESULT_INIT;
  assert_int_equal(unico_update(u, "users", "\"b\"", "{\"email\":\"c@x.org\"}", 0, NULL,
                                &r),
                   UNICO_OK);
  unico_result_clear(&r);
  assert_int_equal(insert(u, "{\"id\":\"d\",\"email\":\"b@x.org\"}", NULL, 0),
                   UNICO_OK);
  unico_close(u);
}

/* check settles the dead stamp's orphan (fencing the row, freeing the
 * claim): the row is then drift with a free value, and repair claims it. */
static void test_dead_stamp_settled(void **state) {
  (void)state;
  unico *u = open_fresh();
  u = fenced_bare(u, "b", "b@x.org", "dead-stamp", 1);
  json_t *rep;
  int rc = audit(u, 1, &rep);
  if (rc) fprintf(stderr, "%s\n", json_dumps(rep, JSON_COMPACT));
  assert_int_equal(rc, UNICO_OK);
  assert_int_equal(num(rep, "settled"), 1);
  assert_int_equal(num(rep, "bare_rows"), 1);
  assert_int_equal(num(rep, "unclaimed_values"), 1);
  assert_int_equal(num(rep, "orphans"), 0);
  assert_int_equal(num(rep, "free_claims"), 1);
  json_decref(rep);
  unico_result r = UNICO_RESULT_INIT;
  assert_int_equal(unico_lookup(u, "users", "users_email", "[\"b@x.org\"]", &r),
                   UNICO_ENOTFOUND);
  unico_result_clear(&r);
  json_t *o = repair(u);
  assert_int_equal(num(o, "rows_claimed"), 1);
  json_decref(o);
  assert_int_equal(unico_lookup(u, "users", "users_email", "[\"b@x.org\"]", &r),
                   UNICO_OK);
  assert_non_null(strstr(r.json, "\"b\""));
  unico_result_clear(&r);
  unico_close(u);
}

/* A stamp still in flight (its claim PENDING and young): repair leaves
 * both the claim and the row, and does not list the claim in the row (that
 * stamp could still fail and free it). */
static void test_stamp_in_flight_left(void **state) {
  (void)state;
  unico *u = open_fresh();
  u = fenced_bare(u, "e", "e@x.org", "live-stamp", unow_ms());
  json_t *o = repair(u);
  assert_int_equal(num(o, "rows_claimed"), -1);
  assert_true(num(o, "skipped_changed") >= 1);
  json_decref(o);
  ustored_record rec;
  ustored_claim cl;
  int found;
  stored(&u, "e", "e@x.org", &rec, &cl, &found);
  assert_int_equal(rec.claims.n, 0);
  assert_int_equal(rec.version, 0);
  assert_true(found);
  assert_int_equal(cl.state, UCLAIM_PENDING);
  assert_string_equal(cl.op_id, "live-stamp");
  ustored_claim_free(&cl);
  ustored_record_free(&rec);
  json_t *rep;
  assert_int_equal(audit(u, 0, &rep), UNICO_OK);
  assert_int_equal(num(rep, "bare_rows"), 1);
  assert_int_equal(num(rep, "in_flight"), 1);
  json_decref(rep);
  unico_close(u);
}

/* The claim of email (users/id's) is stored, in state st (and by op_id
 * when given). */
static void assert_claim(unico **u, const char *id, const char *email, int st,
                         const char *op_id) {
  ustored_record rec;
  ustored_claim cl;
  int found;
  stored(u, id, email, &rec, &cl, &found);
  assert_true(found);
  assert_int_equal(cl.state, st);
  if (op_id) assert_string_equal(cl.op_id, op_id);
  ustored_claim_free(&cl);
  ustored_record_free(&rec);
}

/* A lookup meeting a claim its owner does not hold settles it when its
 * writer is dead (past the grace period: fenced, freed), and leaves it
 * when the write may still be in flight. Either way: not found. */
static void test_lookup_settles(void **state) {
  (void)state;
  unico *u = open_fresh();
  u = fenced_bare(u, "g", "g@x.org", "dead-writer", 1);
  u = fenced_bare(u, "h", "h@x.org", "live-writer", unow_ms());
  unico_result r = UNICO_RESULT_INIT;
  assert_int_equal(unico_lookup(u, "users", "users_email", "[\"g@x.org\"]", &r),
                   UNICO_ENOTFOUND);
  assert_int_equal(unico_lookup(u, "users", "users_email", "[\"h@x.org\"]", &r),
                   UNICO_ENOTFOUND);
  unico_result_clear(&r);
  assert_claim(&u, "g", "g@x.org", UCLAIM_FREE, NULL);
  assert_claim(&u, "h", "h@x.org", UCLAIM_PENDING, "live-writer");
  /* what is left to check: the young claim alone */
  json_t *rep;
  assert_int_equal(audit(u, 0, &rep), UNICO_OK);
  assert_int_equal(num(rep, "orphans"), 0);
  assert_int_equal(num(rep, "in_flight"), 1);
  json_decref(rep);
  unico_close(u);
}

/* A value another record holds: a violation, and repair leaves the row. */
static void test_duplicate_left(void **state) {
  (void)state;
  unico *u = open_fresh();
  assert_int_equal(insert(u, "{\"id\":\"a\",\"email\":\"a@x.org\"}", NULL, 0),
                   UNICO_OK);
  u = fenced_bare(u, "f", "a@x.org", NULL, 0);
  json_t *rep;
  assert_int_equal(audit(u, 0, &rep), UNICO_ECORRUPT);
  assert_int_equal(num(rep, "bare_rows"), 1);
  json_t *v = json_object_get(rep, "violations");
  int dup = 0;
  for (size_t i = 0; i < json_array_size(v); i++)
    dup |= !strcmp(json_string_value(json_object_get(json_array_get(v, i),
                                                     "kind")),
                   "duplicate_value");
  assert_true(dup);
  json_decref(rep);
  /* the duplicate is left, and repair says so */
  json_t *o = repair_answering(u, UNICO_ECORRUPT);
  assert_int_equal(num(o, "rows_claimed"), -1);
  assert_true(json_is_false(json_object_get(json_object_get(o, "after"), "ok")));
  json_decref(o);
  ustored_record rec;
  ustored_claim cl;
  int found;
  stored(&u, "f", "a@x.org", &rec, &cl, &found);
  assert_int_equal(rec.claims.n, 0);
  assert_true(found);
  ubuf apk = UBUF_INIT;
  utup_str(&apk, "a");
  assert_true(cl.owner_len == apk.len && !memcmp(cl.owner, apk.p, apk.len));
  ubuf_free(&apk);
  ustored_claim_free(&cl);
  ustored_record_free(&rec);
  unico_close(u);
}

/* Two bare rows holding one value (issue 37 item 8): repair claims it for
 * neither, whichever it would repair first; check names both. */
static void test_two_bare_rows_no_winner(void **state) {
  (void)state;
  unico *u = open_fresh();
  u = fenced_bare(u, "x1", "dup@x.org", NULL, 0);
  u = fenced_bare(u, "x2", "dup@x.org", NULL, 0);
  json_t *rep;
  assert_int_equal(audit(u, 0, &rep), UNICO_ECORRUPT);
  assert_int_equal(num(rep, "bare_rows"), 2);
  json_t *v = json_object_get(rep, "violations");
  int dup = 0;
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *x = json_array_get(v, i);
    const char *d = json_string_value(json_object_get(x, "detail"));
    if (!strcmp(json_string_value(json_object_get(x, "kind")),
                "duplicate_value"))
      dup = d && strstr(d, "\"x1\"") && strstr(d, "\"x2\"");
  }
  assert_true(dup); /* (its detail names both rows) */
  json_decref(rep);
  json_t *o = repair_answering(u, UNICO_ECORRUPT);
  assert_int_equal(num(o, "rows_claimed"), -1);
  json_decref(o);
  const char *ids[] = {"x1", "x2"};
  for (int i = 0; i < 2; i++) {
    ustored_record rec;
    ustored_claim cl;
    int found;
    stored(&u, ids[i], "dup@x.org", &rec, &cl, &found);
    assert_int_equal(rec.claims.n, 0);
    assert_false(found); /* claimed for neither */
    ustored_record_free(&rec);
  }
  unico_close(u);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dead_stamp_repaired),
      cmocka_unit_test(test_dead_stamp_settled),
      cmocka_unit_test(test_stamp_in_flight_left),
      cmocka_unit_test(test_duplicate_left),
      cmocka_unit_test(test_two_bare_rows_no_winner),
      cmocka_unit_test(test_lookup_settles),
  };
  if (tu_scratch("test_drift", dir, sizeof dir)) return 1;
  snprintf(url, sizeof url, "lmdb:%s?txn=off", dir);
  int failed = ucm_run_group("tests", tests, NULL, NULL);
  if (tu_rmtree(dir) != 0) failed++;
  return ucm_done(failed);
}
