/* test_schema_race.c - schema changes against concurrent writers, and the
 * recovery of a change abandoned half-way.
 *
 * Adding a UNIQUE constraint (on b, which the inserters repeat) races
 * threads inserting into that table. Whatever the interleaving, either the
 * change is refused because the records already hold a duplicate b, or it
 * is applied and every record then holds the new constraint's claims:
 * unico_check() must pass after every round. A broken protocol (a record
 * slipping in between the build's scan and the commit) leaves a record
 * without its claim, which check reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "keys/keyspace.h"
#include "plan/plan.h"
#include "store/store.h"
#include "unico.h"
#include "util/err.h"
#include "testutil.h"

static char base[256];

static const char *V1 =
    "CREATE TABLE t (id text PRIMARY KEY, a text, b text, UNIQUE (a));";
static const char *V2 =
    "CREATE TABLE t (id text PRIMARY KEY, a text, b text, UNIQUE (a),"
    " UNIQUE (b));";

typedef struct racer {
  unico *u;
  int id;
  atomic_int *go; /* start together */
  long delay_us;  /* then wait this long before the first insert */
  atomic_int *stop;
  int updates; /* also move b of the record inserted before */
  long ok, conflicts;
} racer;

/* Busy-wait: finer than a sleep, which the scheduler rounds up. */
static void spin_us(long us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void *insert_loop(void *arg) {
  racer *r = arg;
  unico_result res = UNICO_RESULT_INIT;
  while (!atomic_load(r->go)) sched_yield();
  spin_us(r->delay_us);
  for (int i = 0; !atomic_load(r->stop) && i < 100000; i++) {
    char rec[160];
    /* b repeats across racers: once UNIQUE (b) is in force, some collide */
    snprintf(rec, sizeof rec, "{\"id\":\"r%d-%d\",\"a\":\"a%d-%d\",\"b\":\"b%d\"}",
             r->id, i, r->id, i, i % 50);
    int rc = unico_insert(r->u, "t", rec, NULL, &res);
    if (rc == UNICO_OK) r->ok++;
    else if (rc == UNICO_ECONFLICT) r->conflicts++;
    else {
      fprintf(stderr, "insert: %s: %s\n", unico_strerror(rc), res.message);
      r->ok = -1000000;
      break;
    }
    if (r->updates && i > 0) {
      /* an update in flight across the change: one that read the record
       * before the marker and commits after the build must be fenced, or
       * the record lands without its new claim (check reports it) */
      char pk[40], patch[40];
      snprintf(pk, sizeof pk, "\"r%d-%d\"", r->id, i - 1);
      snprintf(patch, sizeof patch, "{\"b\":\"b%d\"}", (i + 25) % 50);
      rc = unico_update(r->u, "t", pk, patch, 0, NULL, &res);
      if (rc && rc != UNICO_ECONFLICT && rc != UNICO_ENOTFOUND) {
        fprintf(stderr, "update: %s: %s\n", unico_strerror(rc), res.message);
        r->ok = -1000000;
        break;
      }
    }
  }
  unico_result_clear(&res);
  return NULL;
}


/* What a race's change may answer: UNIQUE (b) added (applied, or refused
 * because the records already hold a duplicate b; both must happen over
 * the rounds), or a change that adds no constraint (applied every round). */
enum { ADDS_UNIQUE_B, ADDS_NO_CONSTRAINT };

/* A refusal of UNIQUE (b): its report lists duplicates of t_b_key only. */
static void expect_duplicate_b(int round, const char *report) {
  json_t *j = json_loads(report ? report : "", 0, NULL);
  json_t *dups = json_object_get(j, "duplicates");
  int ok = j && json_integer_value(json_object_get(j, "duplicates_total")) >= 1 &&
           json_integer_value(json_object_get(j, "over_limit_total")) == 0 &&
           json_array_size(dups) >= 1;
  for (size_t i = 0; ok && i < json_array_size(dups); i++) {
    json_t *d = json_array_get(dups, i);
    const char *c = json_string_value(json_object_get(d, "constraint"));
    ok = c && !strcmp(c, "t_b_key") &&
         json_integer_value(json_object_get(d, "count")) >= 2;
  }
  json_decref(j);
  if (!ok) fail_msg("round %d: refused without a duplicate b: %s", round,
                    report ? report : "(no report)");
}

/* opts: the store URL's options ("txn=off": the claims protocol, where
 * inserts take the parallel commit and the change settles their intents;
 * docs/parallel-commit.md); v2: the definition applied mid-race, which
 * adds what `adds` says; rounds. */
static void race(const char *opts, const char *v2, int rounds, int adds,
                 int updates) {
  int applied = 0, refused = 0, busy = 0;
  /* The inserters' head start (negative: the change's) adapts so that the
   * rounds straddle the moment where the first duplicate and the change
   * meet: refused -> inserters later, applied -> earlier. Where that moment
   * lies depends on the machine (thread wake-up, first-write cost), so the
   * step doubles while the outcome repeats and halves when it flips: the
   * search reaches the boundary within a few rounds on any machine, then
   * stays around it. */
  long delay = 0, step = 20;
  int last = 0; /* outcome of the previous round: 1 applied, -1 refused */
  static int seq;
  for (int round = 0; round < rounds; round++) {
    char url[400];
    snprintf(url, sizeof url, "lmdb:%s/race%d?sync=off%s%s", base, seq++,
             *opts ? "&" : "", opts);
    unico *u;
    unico_result res = UNICO_RESULT_INIT;
    assert_int_equal(unico_open(&u, url, NULL, &res), UNICO_OK);
    assert_int_equal(unico_schema_apply(u, V1, &res), UNICO_OK);
    atomic_int stop = 0, go = 0;
    racer rs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
      rs[i] = (racer){u, i, &go, (delay > 0 ? delay : 0) + 7L * i, &stop,
                      updates, 0, 0};
      pthread_create(&th[i], NULL, insert_loop, &rs[i]);
    }
    /* Release the inserters and apply after a delay that varies by round:
     * in some rounds the table is still empty, in others not, and in some
     * the first insert lands in the middle of the change. */
    tu_sleep_us(1000); /* let every thread reach its start line */
    atomic_store(&go, 1);
    if (delay < 0) spin_us(-delay); /* a negative head start: apply later */
    int rc = unico_schema_apply(u, v2, &res);
    /* Busy: a write that passed its schema check before the marker landed
     * its last step during the rebuild; the change undid itself and says
     * to apply it again, which a user does. */
    for (int again = 0; rc == UNICO_EBUSY && again < 20; again++) {
      busy++;
      rc = unico_schema_apply(u, v2, &res);
    }
    int outcome = 0;
    if (rc == UNICO_OK) {
      applied++;
      outcome = 1;
    } else if (rc == UNICO_ESCHEMA && adds == ADDS_UNIQUE_B) {
      expect_duplicate_b(round, res.json);
      refused++;
      outcome = -1;
    } else fail_msg("apply: %s: %s", unico_strerror(rc), res.message);
    if (last == outcome) step = step * 2 > 20000 ? 20000 : step * 2;
    else if (last) step = step / 2 < 10 ? 10 : step / 2;
    last = outcome;
    delay -= outcome * step;
    tu_sleep_us(2000);
    atomic_store(&stop, 1);
    long acked = 0;
    for (int i = 0; i < 3; i++) {
      pthread_join(th[i], NULL);
      assert_true(rs[i].ok >= 0);
      acked += rs[i].ok;
    }
    rc = unico_check(u, &res);
    if (rc) fail_msg("round %d: check: %s %s", round, res.message, res.json ? res.json : "");
    /* every acknowledged insert is a record, and nothing else is */
    json_t *cj = json_loads(res.json, 0, NULL);
    long records = (long)json_integer_value(json_object_get(cj, "records"));
    json_decref(cj);
    if (records != acked)
      fail_msg("round %d: %ld inserts acknowledged, %ld records", round,
               acked, records);
    unico_result_clear(&res);
    unico_close(u);
  }
  fprintf(stderr, "schema race (%s%s): %d applied, %d refused, %d busy "
          "(final head start %ld us)\n", *opts ? opts : "txn",
          updates ? ", updates" : "", applied, refused, busy, delay);
  if (adds == ADDS_UNIQUE_B) {
    /* Both outcomes must have happened, or the race was not exercised. */
    assert_true(applied > 0);
    assert_true(refused > 0);
  } else {
    /* nothing to refuse: every round's change applied */
    assert_int_equal(applied, rounds);
    assert_int_equal(refused, 0);
  }
}

static void test_apply_races_inserts(void **state) {
  (void)state;
  race("", V2, 60, ADDS_UNIQUE_B, 0);
}

static void test_apply_races_inserts_claims(void **state) {
  (void)state;
  race("txn=off", V2, 40, ADDS_UNIQUE_B, 0);
}

/* Updates and classic-commit inserts race the change on the claims
 * protocol: the change fences both kinds of writes in flight (a pending
 * record becomes a tombstone, a live record's version moves). */
static void test_apply_races_updates_claims(void **state) {
  (void)state;
  race("txn=off&commit=classic", V2, 40, ADDS_UNIQUE_B, 1);
}

static void test_apply_races_updates(void **state) {
  (void)state;
  race("", V2, 30, ADDS_UNIQUE_B, 1);
}

/* Adding a column changes the table's fingerprint but no constraint: the
 * change settles the intents planned under the old definition, then
 * commits; it is never refused, and every acknowledged insert must be a
 * live record after it. */
static void test_add_column_races_inserts_claims(void **state) {
  (void)state;
  race("txn=off",
       "CREATE TABLE t (id text PRIMARY KEY, a text, b text, c text,"
       " UNIQUE (a));",
       20, ADDS_NO_CONSTRAINT, 0);
}

/* A process that died between marking a change and committing it leaves
 * the marker; writers wait for a fresh one and roll back a stale one. */
static void test_abandoned_change_rolls_back(void **state) {
  (void)state;
  char url[400];
  snprintf(url, sizeof url, "lmdb:%s/abandoned", base);
  unico *u;
  unico_result res = UNICO_RESULT_INIT;
  assert_int_equal(unico_open(&u, url, NULL, &res), UNICO_OK);
  assert_int_equal(unico_schema_apply(u, V1, &res), UNICO_OK);
  assert_int_equal(unico_insert(u, "t", "{\"id\":\"x\",\"a\":\"1\"}", NULL, &res), UNICO_OK);
  unico_close(u);

  /* Plant what a crashed apply leaves: state "changing", 31 s old. */
  ustore *st;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&st, url, &e), UNICO_OK);
  ubuf key = UBUF_INIT, val = UBUF_INIT;
  uint64_t ver;
  ukey_schema(&key);
  assert_int_equal(st->vt->get(st, key.p, key.len, &val, &ver, &e), UNICO_OK);
  ustored_schema cur;
  assert_int_equal(ustored_schema_decode(val.p, val.len, &cur), 0);
  ustored_schema marker = {USCHEMA_CHANGING, cur.schema_version + 1, (char *)V2,
                           cur.ddl, cur.schema_version, unow_ms() - 31000};
  ubuf_reset(&val);
  ustored_schema_encode(&val, &marker);
  ustore_op op = ustore_op_make(key.p, key.len, USTORE_VERSION, ver,
                                USTORE_PUT, val.p, val.len);
  assert_int_equal(st->vt->cas(st, &op, &e), UNICO_OK);
  ustored_schema_free(&cur);
  st->vt->close(st);

  /* The next process rolls it back and works under the old schema. */
  assert_int_equal(unico_open(&u, url, NULL, &res), UNICO_OK);
  assert_int_equal(unico_schema_show(u, &res), UNICO_OK);
  assert_non_null(strstr(res.json, "\"schema_version\":1"));
  assert_null(strstr(res.json, "UNIQUE (b)"));
  assert_int_equal(unico_insert(u, "t", "{\"id\":\"y\",\"a\":\"2\",\"b\":\"z\"}", NULL, &res),
                   UNICO_OK);
  /* b is not unique under the rolled-back schema */
  assert_int_equal(unico_insert(u, "t", "{\"id\":\"w\",\"a\":\"3\",\"b\":\"z\"}", NULL, &res),
                   UNICO_OK);
  assert_int_equal(unico_check(u, &res), UNICO_OK);
  unico_result_clear(&res);
  unico_close(u);
  ubuf_free(&key);
  ubuf_free(&val);
}

static int setup(void **state) {
  (void)state;
  return tu_scratch("test_schema_race", base, sizeof base);
}

static int teardown(void **state) {
  (void)state;
  return tu_rmtree(base);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_apply_races_inserts),
      cmocka_unit_test(test_apply_races_inserts_claims),
      cmocka_unit_test(test_apply_races_updates),
      cmocka_unit_test(test_apply_races_updates_claims),
      cmocka_unit_test(test_add_column_races_inserts_claims),
      cmocka_unit_test(test_abandoned_change_rolls_back),
  };
  return ucm_done(ucm_run_group("tests", tests, setup, teardown));
}
