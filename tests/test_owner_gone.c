/* test_owner_gone.c - freeing a claim whose owner no longer holds its
 * value (issue 37 item 5, api/write.c claim_owner_gone) under the race
 * that made the first version of it give one email to two live records:
 * two writers are refused by the same claim of a record deleted behind
 * unico's back, both read the owner gone and both prepare the same fix
 * (the claim removed at the version they read, the owner still absent).
 * The first fix applies and its writer takes the value; the second is
 * made after that. It must not apply: the claim under the key is another
 * one now, though the owner it named is still absent. A condition on the
 * claim's store version tells them apart only because a claim key is made
 * at a fresh version each time it is taken (exec/internal.h,
 * uexec_fresh_version); made at 1 each time, both claims are at 1 and the
 * second fix removed the first writer's claim, so a third writer took the
 * value too (docs/protocol.md, "Claims whose owner is gone").
 *
 * The interleaving is played step by step with the executor's own fix
 * (the one claim_owner_gone makes), on the embedded store and, when run
 * through tests/support/dynamodb_local.sh (UNICO_TEST_STORE_BASE), on
 * DynamoDB Local with the records in a native table, where unico's own
 * writes free such a claim too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/internal.h"
#include "codec/stored.h"
#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "records/record.h"
#include "testutil.h"
#include "unico.h"

static char g_url[700];
static char g_dir[256];
static int g_native; /* records in native tables (DynamoDB) */
static const utable *g_users;

static const char *DDL =
    "CREATE TABLE users (id text PRIMARY KEY, email text,"
    " CONSTRAINT users_email UNIQUE (email));";

typedef struct found {
  ubuf key, val;
  uint64_t ver;
  int n;
} found;

static int one_claim(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  found *f = ctx;
  f->n++;
  ubuf_reset(&f->key);
  ubuf_reset(&f->val);
  ubuf_put(&f->key, k, kl);
  ubuf_put(&f->val, v, vl);
  f->ver = ver;
  return 0;
}

/* The constraint's one claim: its key, value and store version. */
static void the_claim(unico *u, found *f) {
  ubuf pre = UBUF_INIT;
  unico_result r = UNICO_RESULT_INIT;
  ukey_claims(&pre, "users", "users_email");
  f->n = 0;
  assert_int_equal(uexec_scan(u->x, &pre, one_claim, f, &r), UNICO_OK);
  assert_int_equal(f->n, 1);
  ubuf_free(&pre);
  unico_result_clear(&r);
}

static int insert(unico *u, const char *id, const char *email) {
  char json[200];
  unico_result r = UNICO_RESULT_INIT;
  snprintf(json, sizeof json, "{\"id\":\"%s\",\"email\":\"%s\"}", id, email);
  int rc = unico_insert(u, "users", json, NULL, &r);
  if (rc && rc != UNICO_ECONFLICT)
    fprintf(stderr, "insert %s: %d %s\n", id, rc, r.message);
  unico_result_clear(&r);
  return rc;
}

static void test_second_fix_does_not_apply(void **state) {
  (void)state;
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_open(&u, g_url, NULL, &r);
  if (rc) fprintf(stderr, "open %s: %d %s\n", g_url, rc, r.message);
  assert_int_equal(rc, UNICO_OK);
  assert_int_equal(unico_schema_apply(u, DDL, &r), UNICO_OK);
  assert_int_equal(uexec_native_rows(u->x), g_native);

  /* p1 holds e1@x: its claim C1, at version v1 */
  assert_int_equal(insert(u, "p1", "e1@x"), UNICO_OK);
  found c1 = {UBUF_INIT, UBUF_INIT, 0, 0};
  the_claim(u, &c1);
  ustored_claim cl;
  assert_int_equal(ustored_claim_decode(c1.val.p, c1.val.len, &cl), 0);
  assert_int_equal(cl.state, UCLAIM_COMMITTED);
  ubuf rk = UBUF_INIT;
  ukey_record(&rk, "users", cl.owner, cl.owner_len);
  ustored_claim_free(&cl);

  /* p1's record removed behind unico's back (on DynamoDB: its item) */
  ustore_op del = uexec_op(&rk, USTORE_ANY, 0, USTORE_DEL, NULL);
  assert_int_equal(uexec_cas(u->x, &del, &r), UNICO_OK);
  ubuf_free(&del.cur);
  ubuf v = UBUF_INIT;
  uint64_t rver = 0;
  assert_int_equal(uexec_read(u->x, &rk, &v, &rver, &r), UNICO_ENOTFOUND);

  /* two writers refused by C1 read the owner gone: the same fix each */
  uexec_fix f;
  memset(&f, 0, sizeof f);
  f.kind = UEXEC_FIX_ORPHAN;
  f.key = c1.key;
  f.ver = c1.ver;
  f.rkey = rk;
  f.rver = 0;
  f.rexists = 0;
  assert_int_equal(uexec_fix_apply(u->x, &f, &r), UNICO_OK);
  /* the first writer takes the value */
  assert_int_equal(insert(u, "p2", "e1@x"), UNICO_OK);
  found c2 = {UBUF_INIT, UBUF_INIT, 0, 0};
  the_claim(u, &c2);

  /* the second fix comes now: the owner it read is still absent, but the
   * claim is p2's */
  rc = uexec_fix_apply(u->x, &f, &r);
  assert_int_equal(rc, UEXEC_NOT_APPLIED);
  assert_true(c2.ver != c1.ver);
  found c3 = {UBUF_INIT, UBUF_INIT, 0, 0};
  the_claim(u, &c3);
  assert_int_equal(c3.ver, c2.ver);
  assert_int_equal(ustored_claim_decode(c3.val.p, c3.val.len, &cl), 0);
  ubuf p2k = UBUF_INIT;
  ukey_record(&p2k, "users", cl.owner, cl.owner_len);
  ustored_claim_free(&cl);
  assert_int_equal(uexec_read(u->x, &p2k, &v, &rver, &r), UNICO_OK);

  /* so the value stays p2's: a third writer is told so */
  assert_int_equal(insert(u, "p3", "e1@x"), UNICO_ECONFLICT);
  assert_int_equal(unico_check(u, &r), UNICO_OK);

  /* (and where records are the users' own, unico itself frees a claim
   * whose owner's item left: p2's item removed, p3 takes the value) */
  if (g_native) {
    del = uexec_op(&p2k, USTORE_ANY, 0, USTORE_DEL, NULL);
    assert_int_equal(uexec_cas(u->x, &del, &r), UNICO_OK);
    ubuf_free(&del.cur);
    assert_int_equal(insert(u, "p3", "e1@x"), UNICO_OK);
    found c4 = {UBUF_INIT, UBUF_INIT, 0, 0};
    the_claim(u, &c4);
    assert_true(c4.ver != c2.ver && c4.ver != c1.ver);
    ubuf_free(&c4.key);
    ubuf_free(&c4.val);
  }

  ubuf_free(&p2k);
  ubuf_free(&v);
  ubuf_free(&rk);
  ubuf_free(&c1.key);
  ubuf_free(&c1.val);
  ubuf_free(&c2.key);
  ubuf_free(&c2.val);
  ubuf_free(&c3.key);
  ubuf_free(&c3.val);
  unico_result_clear(&r);
  unico_close(u);
}

/* Record id's key (users), in *rk. */
static void record_key(const char *id, ubuf *rk) {
  char pk[64];
  snprintf(pk, sizeof pk, "\"%s\"", id);
  ubuf pkb = UBUF_INIT;
  unico_result r = UNICO_RESULT_INIT;
  ubuf_reset(rk);
  /* (a text primary key: its tuple as urec_pk makes it) */
  assert_int_equal(urec_pk_parse(g_users, pk, &pkb, &r), UNICO_OK);
  ukey_record(rk, "users", pkb.p, pkb.len);
  ubuf_free(&pkb);
  unico_result_clear(&r);
}

/* Record id (holding email) no longer holds it, behind unico's back: its
 * record removed (how 0), or its email removed while it still lists the
 * claim (how 1: as another client's update-item REMOVE email leaves it). */
static void make_stale(unico *u, const char *id, const char *email, int how) {
  unico_result r = UNICO_RESULT_INIT;
  ubuf rk = UBUF_INIT, v = UBUF_INIT;
  uint64_t ver = 0;
  assert_int_equal(insert(u, id, email), UNICO_OK);
  record_key(id, &rk);
  ustore_op op;
  if (how == 0) {
    op = uexec_op(&rk, USTORE_ANY, 0, USTORE_DEL, NULL);
  } else {
    ustored_record o;
    assert_int_equal(uexec_read(u->x, &rk, &v, &ver, &r), UNICO_OK);
    assert_int_equal(ustored_record_decode(v.p, v.len, &o), 0);
    assert_int_equal(o.claims.n, 1);
    char body[200];
    snprintf(body, sizeof body, "{\"id\":\"%s\"}", id);
    ubuf_reset(&v);
    ustored_record_encode_hist(&v, o.state, o.version, o.op_id, body,
                               &o.claims, o.since_ms, &o.hist);
    ustored_record_free(&o);
    op = uexec_op(&rk, USTORE_ANY, 0, USTORE_PUT, &v);
  }
  assert_int_equal(uexec_cas(u->x, &op, &r), UNICO_OK);
  ubuf_free(&op.cur);
  ubuf_free(&rk);
  ubuf_free(&v);
  unico_result_clear(&r);
}

static int exists(unico *u, const char *id) {
  char pk[64];
  unico_result r = UNICO_RESULT_INIT;
  snprintf(pk, sizeof pk, "\"%s\"", id);
  int rc = unico_get(u, "users", pk, &r);
  unico_result_clear(&r);
  assert_true(rc == UNICO_OK || rc == UNICO_ENOTFOUND);
  return rc == UNICO_OK;
}

/* A batch whose op takes a value whose claim names an owner that no
 * longer holds it gets the single write's answer: on DynamoDB (records in
 * the users' tables) the stale claim is freed and the batch commits; on
 * LMDB, where only unico writes records, both are refused alike, and the
 * refused batch writes nothing. Each way of going stale, one value for
 * the single write and one for the batch, set up alike. Ops of each kind
 * that take a value: an insert, an update. */
static void test_batch_judges_owner(void **state) {
  (void)state;
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  assert_int_equal(unico_open(&u, g_url, NULL, &r), UNICO_OK);
  assert_int_equal(unico_schema_apply(u, DDL, &r), UNICO_OK);
  usch *sc = uapi_sch_get(u);
  g_users = uapi_find_table(sc, "users", &r);
  assert_non_null(g_users);
  int want = g_native ? UNICO_OK : UNICO_ECONFLICT;
  for (int how = 0; how < 2; how++)
    for (int upd = 0; upd < 2; upd++) {
      char a[32], b[32], sid[32], bid[32], other[32], rec[200], rec2[200];
      char pk[64];
      snprintf(a, sizeof a, "s%d%d@x", how, upd);
      snprintf(b, sizeof b, "b%d%d@x", how, upd);
      /* the single write */
      snprintf(sid, sizeof sid, "os%d%d", how, upd);
      make_stale(u, sid, a, how);
      snprintf(sid, sizeof sid, "ns%d%d", how, upd);
      int single;
      if (upd) {
        assert_int_equal(insert(u, sid, sid), UNICO_OK);
        snprintf(pk, sizeof pk, "\"%s\"", sid);
        snprintf(rec, sizeof rec, "{\"email\":\"%s\"}", a);
        single = unico_update(u, "users", pk, rec, 0, NULL, &r);
      } else {
        single = insert(u, sid, a);
      }
      assert_int_equal(single, want);
      /* the batch, with a second op that takes a free value */
      snprintf(bid, sizeof bid, "ob%d%d", how, upd);
      make_stale(u, bid, b, how);
      snprintf(bid, sizeof bid, "nb%d%d", how, upd);
      snprintf(other, sizeof other, "x%d%d", how, upd);
      snprintf(rec2, sizeof rec2, "{\"id\":\"%s\",\"email\":\"%s@x\"}", other,
               other);
      unico_batch_op ops[2] = {
          {UNICO_WRITE_INSERT, "users", rec, NULL, 0},
          {UNICO_WRITE_INSERT, "users", rec2, NULL, 0}};
      if (upd) {
        assert_int_equal(insert(u, bid, bid), UNICO_OK);
        snprintf(pk, sizeof pk, "\"%s\"", bid);
        snprintf(rec, sizeof rec, "{\"email\":\"%s\"}", b);
        ops[0] = (unico_batch_op){UNICO_WRITE_UPDATE, "users", rec, pk, 0};
      } else {
        snprintf(rec, sizeof rec, "{\"id\":\"%s\",\"email\":\"%s\"}", bid, b);
      }
      int rc = unico_batch(u, ops, 2, NULL, &r);
      if (rc != single)
        fprintf(stderr, "how %d upd %d: batch %d (%s), single %d\n", how, upd,
                rc, r.message, single);
      assert_int_equal(rc, single);
      /* all or nothing: the second op's record with the first */
      assert_int_equal(exists(u, other), rc == UNICO_OK);
      if (rc == UNICO_ECONFLICT)
        assert_non_null(strstr(r.message, "op 0: "));
      if (g_native) /* (the store is clean: no claim left stale) */
        assert_int_equal(unico_check(u, &r), UNICO_OK);
    }
  uapi_sch_put(sc);
  unico_result_clear(&r);
  unico_close(u);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const char *b = getenv("UNICO_TEST_STORE_BASE");
  if (b && !strncmp(b, "dynamodb://", 11)) {
    long id = (long)getpid();
    snprintf(g_url, sizeof g_url,
             "%sunico_owner_gone_%ld?table_prefix=unico_owner_gone_%ld_", b,
             id, id);
    g_native = 1;
  } else {
    if (tu_scratch("test_owner_gone", g_dir, sizeof g_dir)) return 1;
    snprintf(g_url, sizeof g_url, "lmdb:%s?sync=off", g_dir);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_fix_does_not_apply),
      cmocka_unit_test(test_batch_judges_owner),
  };
  int rc = ucm_done(ucm_run_group("owner_gone", tests, NULL, NULL));
  if (g_dir[0]) tu_rmtree(g_dir);
  return rc;
}
