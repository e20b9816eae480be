/* test_history.c - a retry after a lost answer, when another operation
 * changed the record before the retry (claims protocol, on the LMDB store
 * seen through compare-and-set only: lmdb:DIR?txn=off).
 *
 * The claims protocol writes an operation's outcome after its commit, so
 * a client that fails between the two leaves no outcome. The test makes
 * that state exactly: it runs a write with an op id, then removes the
 * outcome behind unico's back, as if the finish had never run. Then
 * another operation changes the record, and the first write is retried
 * with the same op id. The retry must answer what the first attempt did
 * and change nothing: not apply a second time (an insert after a delete,
 * a delete of a record inserted again), not refuse a write that happened
 * (a stale If-Match), and not take an op id used for a different request.
 * The record key's history (plan.h, ustored_hist) is what makes this
 * work; without it every case below fails. */
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
#include "plan/plan.h"
#include "store/sim/sim.h"
#include "store/store.h"
#include "unico.h"
#include "testutil.h"

static const char *DDL =
    "CREATE TABLE users (id text PRIMARY KEY, email text, n int,"
    " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold);";

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

/* Behind unico's back (it is closed meanwhile): remove the outcome of
 * op_id, as if that write's finish had never run. Asserts it was there. */
static unico *lose_outcome(unico *u, const char *op_id) {
  unico_close(u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf k = UBUF_INIT;
  ukey_outcome(&k, op_id);
  ustore_op del = ustore_op_make(k.p, k.len, USTORE_PRESENT, 0, USTORE_DEL,
                                 NULL, 0);
  assert_int_equal(st->vt->cas(st, &del, &e), UNICO_OK);
  ubuf_free(&del.cur);
  ubuf_free(&k);
  st->vt->close(st);
  return open_store();
}

/* Behind unico's back: the state a delete with op_id leaves when its
 * client stops right after the commit (no finish): its outcome missing
 * and its DELETED tombstone, with the key's history naming it, still at
 * the record key ("r", table, pk). A finished delete has removed that
 * tombstone once its outcome was stored (docs/protocol.md, "Rows that
 * leave"), so it is put back as the commit left it: at the key's floor
 * (the deleted record's version, written with the commit). */
static unico *lose_delete_finish(unico *u, const char *op_id,
                                 const char *table, const char *pk_text) {
  unico_close(u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf k = UBUF_INIT, ov = UBUF_INIT, rk = UBUF_INIT, fk = UBUF_INIT,
       fv = UBUF_INIT, tomb = UBUF_INIT, pk = UBUF_INIT;
  uint64_t ver;
  ukey_outcome(&k, op_id);
  assert_int_equal(st->vt->get(st, k.p, k.len, &ov, &ver, &e), UNICO_OK);
  ustore_op del = ustore_op_make(k.p, k.len, USTORE_PRESENT, 0, USTORE_DEL,
                                 NULL, 0);
  assert_int_equal(st->vt->cas(st, &del, &e), UNICO_OK);
  utup_str(&pk, pk_text);
  ukey_record(&rk, table, pk.p, pk.len);
  ukey_floor_of(&fk, rk.p, rk.len);
  ustored_record fr;
  assert_int_equal(st->vt->get(st, fk.p, fk.len, &fv, &ver, &e), UNICO_OK);
  assert_int_equal(ustored_record_decode(fv.p, fv.len, &fr), 0);
  ustored_hist h = {0, NULL};
  assert_int_equal(ustored_hist_add(&h, op_id, tu_wall_ms(), ov.p, ov.len), 0);
  ustored_record_encode_hist(&tomb, UREC_DELETED, fr.version, op_id, "{}",
                             NULL, tu_wall_ms(), &h);
  ustore_op put = ustore_op_make(rk.p, rk.len, USTORE_ABSENT, 0, USTORE_PUT,
                                 tomb.p, tomb.len);
  assert_int_equal(st->vt->cas(st, &put, &e), UNICO_OK);
  ustored_hist_free(&h);
  ustored_record_free(&fr);
  ubuf_free(&del.cur);
  ubuf_free(&put.cur);
  ubuf_free(&k);
  ubuf_free(&ov);
  ubuf_free(&rk);
  ubuf_free(&fk);
  ubuf_free(&fv);
  ubuf_free(&tomb);
  ubuf_free(&pk);
  st->vt->close(st);
  return open_store();
}

/* Is the outcome of op_id stored? */
static int has_outcome(unico **u, const char *op_id) {
  unico_close(*u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf k = UBUF_INIT, v = UBUF_INIT;
  uint64_t ver;
  ukey_outcome(&k, op_id);
  int rc = st->vt->get(st, k.p, k.len, &v, &ver, &e);
  ubuf_free(&k);
  ubuf_free(&v);
  st->vt->close(st);
  *u = open_store();
  return rc == UNICO_OK;
}

/* The stored record of users/id, decoded (closing and reopening u). */
static void stored(unico **u, const char *id, ustored_record *rec) {
  unico_close(*u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf pk = UBUF_INIT, k = UBUF_INIT, v = UBUF_INIT;
  uint64_t ver;
  utup_str(&pk, id);
  ukey_record(&k, "users", pk.p, pk.len);
  assert_int_equal(st->vt->get(st, k.p, k.len, &v, &ver, &e), UNICO_OK);
  assert_int_equal(ustored_record_decode(v.p, v.len, rec), 0);
  ubuf_free(&pk);
  ubuf_free(&k);
  ubuf_free(&v);
  st->vt->close(st);
  *u = open_store();
}

static void expect_ok(int rc, const unico_result *r, const char *what) {
  if (rc != UNICO_OK)
    fprintf(stderr, "%s: %s (%s)\n", what, r->message, unico_strerror(rc));
  assert_int_equal(rc, UNICO_OK);
}

/* The email of users/id, or NULL when it is not there. */
static char *email_of(unico *u, const char *id) {
  unico_result r = UNICO_RESULT_INIT;
  char pk[64];
  snprintf(pk, sizeof pk, "\"%s\"", id);
  char *out = NULL;
  if (unico_get(u, "users", pk, &r) == UNICO_OK) {
    json_t *j = json_loads(r.json, 0, NULL);
    json_t *rec = json_object_get(j, "record");
    if (!rec) rec = j;
    const char *e = json_string_value(json_object_get(rec, "email"));
    out = strdup(e ? e : "");
    json_decref(j);
  }
  unico_result_clear(&r);
  return out;
}

static uint64_t version_of(unico *u, const char *id) {
  unico_result r = UNICO_RESULT_INIT;
  char pk[64];
  snprintf(pk, sizeof pk, "\"%s\"", id);
  uint64_t v = unico_get(u, "users", pk, &r) == UNICO_OK ? r.version : 0;
  unico_result_clear(&r);
  return v;
}

/* An update applies, its answer is lost, another update follows; the
 * retry (with and without the If-Match it first had) answers version 2
 * and leaves the record at the later update. */
static void test_update_then_update(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "users", "{\"id\":\"a\",\"email\":\"a1@x\"}",
                         "ins-a", &r), &r, "insert");
  expect_ok(unico_update(u, "users", "\"a\"", "{\"email\":\"a2@x\"}", 1,
                         "up-a2", &r), &r, "update");
  assert_int_equal(r.version, 2);
  u = lose_outcome(u, "up-a2");
  expect_ok(unico_update(u, "users", "\"a\"", "{\"email\":\"a3@x\"}", 2,
                         "up-a3", &r), &r, "later update");
  assert_int_equal(r.version, 3);
  /* the retry as first sent: If-Match 1 */
  int rc = unico_update(u, "users", "\"a\"", "{\"email\":\"a2@x\"}", 1,
                        "up-a2", &r);
  expect_ok(rc, &r, "retry with If-Match");
  assert_int_equal(r.version, 2);
  unico_result_clear(&r);
  char *e = email_of(u, "a");
  assert_non_null(e);
  assert_string_equal(e, "a3@x");
  free(e);
  assert_int_equal(version_of(u, "a"), 3);
  /* a2@x is not held by anyone: the later update released it */
  expect_ok(unico_insert(u, "users", "{\"id\":\"b\",\"email\":\"A2@x\"}", NULL,
                         &r), &r, "a2@x free");
  unico_result_clear(&r);
  unico_close(u);
}

/* The same without If-Match: before the history, the retry applied a
 * second time (version 4, email back to a2). */
static void test_update_retry_no_if_match(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "users", "{\"id\":\"a\",\"email\":\"a1@x\"}",
                         "ins-a", &r), &r, "insert");
  expect_ok(unico_update(u, "users", "\"a\"", "{\"n\":1}", 0, "up-n1", &r),
            &r, "update");
  u = lose_outcome(u, "up-n1");
  expect_ok(unico_update(u, "users", "\"a\"", "{\"n\":2}", 0, "up-n2", &r),
            &r, "later update");
  expect_ok(unico_update(u, "users", "\"a\"", "{\"n\":1}", 0, "up-n1", &r),
            &r, "retry");
  assert_int_equal(r.version, 2);
  assert_int_equal(version_of(u, "a"), 3);
  unico_result_clear(&r);
  unico_close(u);
}

/* An insert applies, its answer is lost, the record is deleted; the retry
 * answers the insert and does not bring the record back. */
static void test_insert_then_delete(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "users", "{\"id\":\"c\",\"email\":\"c@x\"}",
                         "ins-c", &r), &r, "insert");
  u = lose_outcome(u, "ins-c");
  expect_ok(unico_delete(u, "users", "\"c\"", 0, "del-c", &r), &r, "delete");
  expect_ok(unico_insert(u, "users", "{\"id\":\"c\",\"email\":\"c@x\"}",
                         "ins-c", &r), &r, "retry");
  assert_int_equal(r.version, 1);
  assert_non_null(r.json);
  assert_non_null(strstr(r.json, "\"c\""));
  assert_int_equal(version_of(u, "c"), 0); /* still deleted */
  /* and c@x stays free for someone else */
  expect_ok(unico_insert(u, "users", "{\"id\":\"d\",\"email\":\"C@x\"}", NULL,
                         &r), &r, "c@x free");
  unico_result_clear(&r);
  unico_close(u);
}

/* ... and after the key was inserted again by someone else: the retry
 * answers its own insert, not a conflict, and changes nothing. */
static void test_insert_then_reinsert(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "users", "{\"id\":\"e\",\"email\":\"e1@x\"}",
                         "ins-e1", &r), &r, "insert");
  u = lose_outcome(u, "ins-e1");
  expect_ok(unico_delete(u, "users", "\"e\"", 0, NULL, &r), &r, "delete");
  expect_ok(unico_insert(u, "users", "{\"id\":\"e\",\"email\":\"e2@x\"}",
                         "ins-e2", &r), &r, "insert again");
  expect_ok(unico_insert(u, "users", "{\"id\":\"e\",\"email\":\"e1@x\"}",
                         "ins-e1", &r), &r, "retry");
  assert_int_equal(r.version, 1);
  char *e = email_of(u, "e");
  assert_non_null(e);
  assert_string_equal(e, "e2@x");
  free(e);
  unico_result_clear(&r);
  unico_close(u);
}

/* A delete applies, its answer is lost, the key is inserted again; the
 * retry answers the delete and leaves the new record alone. */
static void test_delete_then_reinsert(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "users", "{\"id\":\"f\",\"email\":\"f1@x\"}", NULL,
                         &r), &r, "insert");
  expect_ok(unico_delete(u, "users", "\"f\"", 0, "del-f", &r), &r, "delete");
  u = lose_delete_finish(u, "del-f", "users", "f");
  expect_ok(unico_insert(u, "users", "{\"id\":\"f\",\"email\":\"f2@x\"}",
                         "ins-f2", &r), &r, "insert again");
  expect_ok(unico_delete(u, "users", "\"f\"", 0, "del-f", &r), &r, "retry");
  char *e = email_of(u, "f");
  assert_non_null(e); /* not deleted a second time */
  assert_string_equal(e, "f2@x");
  free(e);
  unico_result_clear(&r);
  unico_close(u);
}

/* An op id found in the history for a different request is refused as
 * reused, like one found in an outcome. */
static void test_opid_reused(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "users", "{\"id\":\"g\",\"email\":\"g@x\"}",
                         "op-g", &r), &r, "insert");
  u = lose_outcome(u, "op-g");
  expect_ok(unico_update(u, "users", "\"g\"", "{\"n\":5}", 0, NULL, &r), &r,
            "later update");
  int rc = unico_insert(u, "users", "{\"id\":\"g\",\"email\":\"other@x\"}",
                        "op-g", &r);
  assert_int_equal(rc, UNICO_EOPID);
  unico_result_clear(&r);
  unico_close(u);
}

/* Writes without a caller's op id leave no history; with one, the history
 * keeps at most USTORED_HIST_MAX entries, and an entry pushed out within
 * retention has its outcome written first, so its retry is still
 * answered. */
static void test_history_bounded(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  ustored_record rec;
  expect_ok(unico_insert(u, "users", "{\"id\":\"h\",\"email\":\"h@x\"}", NULL,
                         &r), &r, "insert");
  expect_ok(unico_update(u, "users", "\"h\"", "{\"n\":0}", 0, NULL, &r), &r,
            "update");
  stored(&u, "h", &rec);
  assert_int_equal(rec.hist.n, 0);
  ustored_record_free(&rec);

  expect_ok(unico_update(u, "users", "\"h\"", "{\"n\":1}", 0, "h-1", &r), &r,
            "update h-1");
  assert_int_equal(r.version, 3);
  u = lose_outcome(u, "h-1");
  assert_false(has_outcome(&u, "h-1"));
  for (int i = 2; i <= USTORED_HIST_MAX + 3; i++) {
    char op[32], patch[32];
    snprintf(op, sizeof op, "h-%d", i);
    snprintf(patch, sizeof patch, "{\"n\":%d}", i);
    expect_ok(unico_update(u, "users", "\"h\"", patch, 0, op, &r), &r, op);
  }
  stored(&u, "h", &rec);
  assert_int_equal(rec.hist.n, USTORED_HIST_MAX);
  assert_int_equal(ustored_hist_find(&rec.hist, "h-1"), -1);
  assert_true(ustored_hist_find(&rec.hist, "h-2") < 0); /* oldest gone */
  char last[32];
  snprintf(last, sizeof last, "h-%d", USTORED_HIST_MAX + 3);
  assert_int_equal(ustored_hist_find(&rec.hist, last),
                   USTORED_HIST_MAX - 1);
  ustored_record_free(&rec);
  assert_true(has_outcome(&u, "h-1")); /* written when it left */
  expect_ok(unico_update(u, "users", "\"h\"", "{\"n\":1}", 0, "h-1", &r), &r,
            "retry h-1");
  assert_int_equal(r.version, 3);
  assert_int_equal(version_of(u, "h"), (uint64_t)USTORED_HIST_MAX + 5);
  unico_result_clear(&r);
  unico_close(u);
}

/* The store as it is, behind unico's back: rc of a get of key kind
 * ("r" record, "f" floor) of users/id, with its record decoded into *r
 * when present (the caller frees it). */
static int raw_record(unico **u, const char *kind, const char *id,
                      ustored_record *r) {
  unico_close(*u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf pk = UBUF_INIT, rk = UBUF_INIT, fk = UBUF_INIT, v = UBUF_INIT;
  uint64_t ver;
  utup_str(&pk, id);
  ukey_record(&rk, "users", pk.p, pk.len);
  ukey_floor_of(&fk, rk.p, rk.len);
  const ubuf *k = kind[0] == 'f' ? &fk : &rk;
  int rc = st->vt->get(st, k->p, k->len, &v, &ver, &e);
  if (rc == UNICO_OK) assert_int_equal(ustored_record_decode(v.p, v.len, r), 0);
  ubuf_free(&pk);
  ubuf_free(&rk);
  ubuf_free(&fk);
  ubuf_free(&v);
  st->vt->close(st);
  *u = open_store();
  return rc;
}

/* A delete whose client stopped after its commit leaves its tombstone
 * (and no outcome): once it is older than the grace period, check's
 * settling removes it as the delete's finish would have (docs/protocol.md,
 * "Rows that leave"): the outcome stored from the tombstone's history
 * first, the floor raised; the key then goes on counting, and the
 * delete's retry answers from the outcome, leaving the record inserted
 * since alone. */
static void test_check_removes_stopped_delete(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  ustored_record rec;
  expect_ok(unico_insert(u, "users", "{\"id\":\"g\",\"email\":\"g1@x\"}",
                         NULL, &r), &r, "insert");
  expect_ok(unico_delete(u, "users", "\"g\"", 0, "del-g", &r), &r, "delete");
  assert_int_equal(raw_record(&u, "r", "g", &rec), UNICO_ENOTFOUND);
  u = lose_delete_finish(u, "del-g", "users", "g");
  assert_int_equal(raw_record(&u, "r", "g", &rec), UNICO_OK);
  assert_int_equal(rec.state, UREC_DELETED);
  ustored_record_free(&rec);
  ustore_clock_shift(10000); /* (past the grace period) */
  expect_ok(unico_check(u, &r), &r, "check");
  assert_int_equal(raw_record(&u, "r", "g", &rec), UNICO_ENOTFOUND);
  assert_int_equal(raw_record(&u, "f", "g", &rec), UNICO_OK);
  assert_int_equal(rec.version, 1);
  assert_int_equal(rec.state, UREC_DELETED); /* (not fenced) */
  ustored_record_free(&rec);
  expect_ok(unico_insert(u, "users", "{\"id\":\"g\",\"email\":\"g2@x\"}",
                         "ins-g2", &r), &r, "insert again");
  assert_int_equal(version_of(u, "g"), 2);
  expect_ok(unico_delete(u, "users", "\"g\"", 0, "del-g", &r), &r, "retry");
  char *e = email_of(u, "g");
  assert_non_null(e); /* the retry answered from the outcome */
  assert_string_equal(e, "g2@x");
  free(e);
  unico_result_clear(&r);
  unico_close(u);
}

/* A fence through a record key (an orphan claim of another op naming the
 * record, judged past the grace period) marks the key's floor: from then
 * on the key's tombstone never leaves, so that the fenced op's insert
 * intent, which may still be on its way, can never land where the fence
 * counted on the key being there. */
static void test_fenced_key_keeps_tombstone(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  ustored_record rec;
  expect_ok(unico_insert(u, "users", "{\"id\":\"h\",\"email\":\"h1@x\"}",
                         NULL, &r), &r, "insert");
  /* behind unico's back: an orphan claim of h2@x by an op that died */
  unico_close(u);
  ustore *st = NULL;
  ustore_err err = {{0}};
  assert_int_equal(ustore_open(&st, url, &err), UNICO_OK);
  ubuf pk = UBUF_INIT, val = UBUF_INIT, ck = UBUF_INIT, cv = UBUF_INIT;
  utup_str(&pk, "h");
  utup_str(&val, "h2@x");
  ukey_claim(&ck, "users", "users_email", val.p, val.len);
  ustored_claim_encode(&cv, UCLAIM_PENDING, pk.p, pk.len, "died-op",
                       tu_wall_ms() - 60000);
  ustore_op put = ustore_op_make(ck.p, ck.len, USTORE_ABSENT, 0, USTORE_PUT,
                                 cv.p, cv.len);
  assert_int_equal(st->vt->cas(st, &put, &err), UNICO_OK);
  ubuf_free(&put.cur);
  ubuf_free(&pk);
  ubuf_free(&val);
  ubuf_free(&ck);
  ubuf_free(&cv);
  st->vt->close(st);
  u = open_store();
  /* another record takes the value: the orphan's op is fenced through h */
  expect_ok(unico_insert(u, "users", "{\"id\":\"k\",\"email\":\"h2@x\"}",
                         NULL, &r), &r, "insert k");
  assert_int_equal(raw_record(&u, "f", "h", &rec), UNICO_OK);
  assert_int_equal(rec.state, UREC_ABORTED); /* fenced */
  ustored_record_free(&rec);
  expect_ok(unico_delete(u, "users", "\"h\"", 0, NULL, &r), &r, "delete h");
  assert_int_equal(raw_record(&u, "r", "h", &rec), UNICO_OK);
  assert_int_equal(rec.state, UREC_DELETED); /* stays */
  ustored_record_free(&rec);
  ustore_clock_shift(10000);
  expect_ok(unico_check(u, &r), &r, "check");
  assert_int_equal(raw_record(&u, "r", "h", &rec), UNICO_OK); /* stays */
  ustored_record_free(&rec);
  unico_result_clear(&r);
  unico_close(u);
}

static int keep_row(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  return ustore_scanbuf_add(ctx, k, kl, v, vl, ver) ? -1 : 0;
}

/* Behind unico's back: the claim of users_email (the only one) into
 * key and val. */
static void the_claim(unico **u, ubuf *key, ubuf *val) {
  unico_close(*u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf pre = UBUF_INIT, kk = UBUF_INIT;
  ukey_claims(&pre, "users", "users_email");
  ustore_scanbuf b;
  memset(&b, 0, sizeof b);
  assert_int_equal(st->vt->scan(st, pre.p, pre.len, NULL, 0, keep_row, &b, &e),
                   UNICO_OK);
  assert_int_equal(b.n, 1);
  ubuf_reset(key);
  ubuf_reset(val);
  ubuf_put(key, b.v[0].k, b.v[0].kl);
  ubuf_put(val, b.v[0].v, b.v[0].vl);
  ustore_scanbuf_free(&b);
  ubuf_free(&pre);
  ubuf_free(&kk);
  st->vt->close(st);
  *u = open_store();
}

/* The token of a hold from a reserve's answer (json) into out. */
static void token_of(const char *json, char *out, size_t cap) {
  json_t *j = json_loads(json, 0, NULL);
  snprintf(out, cap, "%s", json_string_value(json_object_get(j, "token")));
  json_decref(j);
}

/* Behind unico's back: put val at key, whatever is there. */
static void put_raw(unico **u, const ubuf *key, const ubuf *val) {
  unico_close(*u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ustore_op put = ustore_op_make(key->p, key->len, USTORE_ANY, 0, USTORE_PUT,
                                 val->p, val->len);
  assert_int_equal(st->vt->cas(st, &put, &e), UNICO_OK);
  ubuf_free(&put.cur);
  st->vt->close(st);
  *u = open_store();
}

/* A hold used by an insert whose finish was lost stays used once the
 * record leaves: the insert (op id "ins-h") took the hold over and
 * committed, but its claim still carries the hold (its finish, which
 * drops the carry, did not land), and the delete of the record did not
 * free the claim either (its finish lost too) though it removed its
 * tombstone. The next writer finds an orphan claim whose owner record is
 * gone, or made again by another write: the hold was used (the stored
 * outcome of "ins-h" says so), so the value is free, not held again until
 * the hold's expiry (found by test_diff, history 1090 of 1500). */
static void test_used_hold_stays_used(void **state) {
  (void)state;
  for (int again = 0; again < 2; again++) {
    unico *u = open_fresh();
    unico_result r = UNICO_RESULT_INIT;
    expect_ok(unico_reserve(u, "users", "users_email", "[\"h@x\"]", 3600000,
                            "res-h", &r), &r, "reserve");
    char token[128];
    token_of(r.json, token, sizeof token);
    ubuf ck = UBUF_INIT, held = UBUF_INIT, carrying = UBUF_INIT,
         owner = UBUF_INIT;
    the_claim(&u, &ck, &held);
    ustored_claim h;
    assert_int_equal(ustored_claim_decode(held.p, held.len, &h), 0);
    assert_int_equal(h.state, UCLAIM_HELD);
    const char *mine[] = {token};
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.holds = mine;
    wo.nholds = 1;
    wo.op_id = "ins-h";
    expect_ok(unico_insert_with(u, "users", "{\"id\":\"u2\",\"email\":\"h@x\"}",
                                &wo, &r), &r, "insert with the token");
    expect_ok(unico_delete(u, "users", "\"u2\"", 0, "del-h", &r), &r,
              "delete");
    if (again)
      expect_ok(unico_insert(u, "users",
                             "{\"id\":\"u2\",\"email\":\"other@x\"}",
                             "ins-h2", &r), &r, "insert the key again");
    /* the claim as the insert's commit left it, long past the grace */
    utup_str(&owner, "u2");
    ustored_claim_encode_carrying(&carrying, owner.p, owner.len, "ins-h",
                                  tu_wall_ms() - 3600000, 0, held.p, held.len,
                                  h.expires_ms);
    put_raw(&u, &ck, &carrying);
    int rc = unico_insert(u, "users", "{\"id\":\"u3\",\"email\":\"h@x\"}",
                          NULL, &r);
    if (rc != UNICO_OK)
      fail_msg("%s: the value of a used hold was not free: %s (%s)",
               again ? "key made again" : "key gone", unico_errname(rc),
               r.message);
    expect_ok(unico_check(u, &r), &r, "check");
    ustored_claim_free(&h);
    ubuf_free(&ck);
    ubuf_free(&held);
    ubuf_free(&carrying);
    ubuf_free(&owner);
    unico_result_clear(&r);
    unico_close(u);
  }
}

/* A hold taken over by a write of its holder that then died (its PENDING
 * claim carries the hold, young, and no record or intent follows): the
 * holder's release does not wait for that write, since only the token's
 * bearer can have made it, but fences it at once, puts the hold back and
 * releases it: the value is free at once (found by the CQL stand-in's
 * concurrency run; docs/protocol.md, holds). */
static void test_release_fences_holders_write(void **state) {
  (void)state;
  unico *u = open_fresh();
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_reserve(u, "users", "users_email", "[\"r@x\"]", 3600000,
                          NULL, &r), &r, "reserve");
  char token[128];
  token_of(r.json, token, sizeof token);
  ubuf ck = UBUF_INIT, held = UBUF_INIT, carrying = UBUF_INIT,
       owner = UBUF_INIT;
  the_claim(&u, &ck, &held);
  ustored_claim h;
  assert_int_equal(ustored_claim_decode(held.p, held.len, &h), 0);
  utup_str(&owner, "w");
  /* (young on the store's clock, which earlier tests moved forward) */
  ustored_claim_encode_carrying(&carrying, owner.p, owner.len, "w-op",
                                tu_wall_ms() + 600000, 0, held.p, held.len,
                                h.expires_ms);
  put_raw(&u, &ck, &carrying);
  int rc = unico_release_hold(u, token, &r);
  if (rc != UNICO_OK)
    fail_msg("the release of a hold its holder's dead write took over "
             "answered %s (%s)", unico_errname(rc), r.message);
  expect_ok(unico_insert(u, "users", "{\"id\":\"x\",\"email\":\"r@x\"}",
                         NULL, &r), &r, "the value is free");
  expect_ok(unico_check(u, &r), &r, "check");
  ustored_claim_free(&h);
  ubuf_free(&ck);
  ubuf_free(&held);
  ubuf_free(&carrying);
  ubuf_free(&owner);
  unico_result_clear(&r);
  unico_close(u);
}

/* A NAMESPACE's claim names its owner in another table, and the claims
 * protocol's judge reads that table: an org's write that committed but
 * died before its finish leaves its claim PENDING, old enough to be
 * fenced; the org's record holds the value, so a user taking it is
 * refused (naming the org), and lookup from the users' constraint finds
 * the org. Read in the wrong table, the owner looks gone and the user
 * takes the value. */
static const char *ns_ddl =
    "CREATE TABLE users (id text PRIMARY KEY, login text, CONSTRAINT "
    "users_login UNIQUE (login) NORMALIZE casefold NAMESPACE logins);"
    "CREATE TABLE orgs (id text PRIMARY KEY, name text, CONSTRAINT "
    "orgs_login UNIQUE (name) NORMALIZE casefold NAMESPACE logins);";

static void test_namespace_owner_read(void **state) {
  (void)state;
  assert_int_equal(tu_rmtree(dir), 0);
  unico *u = tu_open(url, ns_ddl);
  assert_non_null(u);
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(u, "orgs", "{\"id\":\"o1\",\"name\":\"Alice\"}",
                         NULL, &r), &r, "insert the org");
  unico_close(u);
  ustore *st = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf pre = UBUF_INIT, ck = UBUF_INIT, pv = UBUF_INIT;
  ukey_shared_claims(&pre, "logins");
  ustore_scanbuf b;
  memset(&b, 0, sizeof b);
  assert_int_equal(st->vt->scan(st, pre.p, pre.len, NULL, 0, keep_row, &b, &e),
                   UNICO_OK);
  assert_int_equal(b.n, 1);
  ustored_claim cl;
  assert_int_equal(ustored_claim_decode(b.v[0].v, b.v[0].vl, &cl), 0);
  ubuf_put(&ck, b.v[0].k, b.v[0].kl);
  ustored_claim_encode(&pv, UCLAIM_PENDING, cl.owner, cl.owner_len, cl.op_id,
                       tu_wall_ms() - 3600000);
  ustored_claim_free(&cl);
  ustore_scanbuf_free(&b);
  st->vt->close(st);
  u = open_store();
  put_raw(&u, &ck, &pv);
  int rc = unico_insert(u, "users", "{\"id\":\"u1\",\"login\":\"alice\"}",
                        NULL, &r);
  if (rc != UNICO_ECONFLICT)
    fail_msg("a user took a login whose org holds it (its claim PENDING, "
             "its writer dead): %s (%s)", unico_errname(rc), r.message);
  assert_string_equal(r.owner_table, "orgs");
  assert_string_equal(r.owner, "\"o1\"");
  expect_ok(unico_lookup(u, "users", "users_login", "[\"ALICE\"]", &r), &r,
            "lookup");
  assert_non_null(strstr(r.json, "\"table\":\"orgs\""));
  expect_ok(unico_check(u, &r), &r, "check");
  assert_non_null(strstr(r.json, "\"ok\":true"));
  ubuf_free(&pre);
  ubuf_free(&ck);
  ubuf_free(&pv);
  unico_result_clear(&r);
  unico_close(u);
}

/* check and repair follow a NAMESPACE claim to its owner's table: a
 * user's record removed behind unico's back leaves its login's claim an
 * orphan, which repair removes (an org may then take the login), while
 * the org's claim, whose owner lives, stays. On the atomic store and
 * under the claims protocol. */
static void test_namespace_repair(void **state) {
  (void)state;
  static const char *const modes[] = {"", "?txn=off"};
  for (size_t m = 0; m < 2; m++) {
    char murl[400];
    snprintf(murl, sizeof murl, "lmdb:%s%s", dir, modes[m]);
    assert_int_equal(tu_rmtree(dir), 0);
    unico *u = tu_open(murl, ns_ddl);
    assert_non_null(u);
    unico_result r = UNICO_RESULT_INIT;
    expect_ok(unico_insert(u, "users", "{\"id\":\"u1\",\"login\":\"alice\"}",
                           NULL, &r), &r, "insert the user");
    expect_ok(unico_insert(u, "orgs", "{\"id\":\"o1\",\"name\":\"Acme\"}",
                           NULL, &r), &r, "insert the org");
    unico_close(u);
    ustore *st = NULL;
    ustore_err e = {{0}};
    assert_int_equal(ustore_open(&st, murl, &e), UNICO_OK);
    ubuf pk = UBUF_INIT, rk = UBUF_INIT;
    utup_str(&pk, "u1");
    ukey_record(&rk, "users", pk.p, pk.len);
    ustore_op del = ustore_op_make(rk.p, rk.len, USTORE_PRESENT, 0,
                                   USTORE_DEL, NULL, 0);
    assert_int_equal(st->vt->cas(st, &del, &e), UNICO_OK);
    ubuf_free(&del.cur);
    st->vt->close(st);
    u = tu_open(murl, NULL);
    assert_non_null(u);
    expect_ok(unico_repair(u, &r), &r, "repair");
    expect_ok(unico_check(u, &r), &r, "check after repair");
    assert_non_null(strstr(r.json, "\"ok\":true"));
    assert_non_null(strstr(r.json, "\"claims\":1,"));
    expect_ok(unico_insert(u, "orgs", "{\"id\":\"o2\",\"name\":\"ALICE\"}",
                           NULL, &r), &r, "the orphan's login is free");
    assert_int_equal(unico_insert(u, "users",
                                  "{\"id\":\"u2\",\"login\":\"acme\"}",
                                  NULL, &r),
                     UNICO_ECONFLICT);
    assert_string_equal(r.owner_table, "orgs");
    ubuf_free(&pk);
    ubuf_free(&rk);
    unico_result_clear(&r);
    unico_close(u);
  }
}

/* An update planned under a schema that another handle has changed since
 * (a UNIQUE added on a filled table) must not commit: it reads the schema
 * key in its first batch, after the record its commit expects, and finds
 * it moved (docs/protocol.md, "Updates and deletes"). Its record version
 * is the one after the change's scan, so only that read stops it: the
 * other handle's insert of the same value then meets the update's claim.
 * On the simulated store, two handles in one process. */
static void test_update_under_stale_schema(void **state) {
  (void)state;
  static const char *ddl2 =
      "CREATE TABLE users (id text PRIMARY KEY, email text, n int,"
      " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,"
      " CONSTRAINT users_n UNIQUE (n));";
  usim *sim = NULL;
  assert_int_equal(usim_new(&sim, "hist-stale", 1, NULL), 0);
  unico *a = tu_open("sim:hist-stale", DDL), *b = NULL;
  assert_non_null(a);
  unico_result r = UNICO_RESULT_INIT;
  expect_ok(unico_insert(a, "users", "{\"id\":\"u1\",\"email\":\"a@x\"}",
                         NULL, &r), &r, "insert u1");
  b = tu_open("sim:hist-stale", NULL);
  assert_non_null(b);
  expect_ok(unico_schema_apply(b, ddl2, &r), &r, "add UNIQUE (n)");
  /* a still plans under the first schema */
  expect_ok(unico_update(a, "users", "\"u1\"", "{\"n\":7}", 0, NULL, &r),
            &r, "update u1 through the stale handle");
  int rc = unico_insert(b, "users", "{\"id\":\"u2\",\"email\":\"b@x\","
                        "\"n\":7}", NULL, &r);
  if (rc != UNICO_ECONFLICT)
    fail_msg("an update planned under a schema changed since committed "
             "without the new constraint's claim: u2 took n 7 too (%s: %s)",
             unico_errname(rc), r.message);
  expect_ok(unico_check(b, &r), &r, "check");
  assert_non_null(strstr(r.json, "\"ok\":true"));
  unico_result_clear(&r);
  unico_close(a);
  unico_close(b);
  usim_free(sim);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_update_then_update),
      cmocka_unit_test(test_update_retry_no_if_match),
      cmocka_unit_test(test_insert_then_delete),
      cmocka_unit_test(test_insert_then_reinsert),
      cmocka_unit_test(test_delete_then_reinsert),
      cmocka_unit_test(test_opid_reused),
      cmocka_unit_test(test_history_bounded),
      cmocka_unit_test(test_check_removes_stopped_delete),
      cmocka_unit_test(test_fenced_key_keeps_tombstone),
      cmocka_unit_test(test_used_hold_stays_used),
      cmocka_unit_test(test_release_fences_holders_write),
      cmocka_unit_test(test_namespace_owner_read),
      cmocka_unit_test(test_namespace_repair),
      cmocka_unit_test(test_update_under_stale_schema),
  };
  if (tu_scratch("test_history", dir, sizeof dir)) return 1;
  snprintf(url, sizeof url, "lmdb:%s?txn=off", dir);
  int failed = ucm_run_group("tests", tests, NULL, NULL);
  if (tu_rmtree(dir) != 0) failed++;
  return ucm_done(failed);
}
