/* test_races.c - many clients racing in one process through the public
 * API: for one value exactly one insert wins and every loser is told who
 * holds it; optimistic updates with --if-version lose no increment; two
 * records swapping a unique value through a free one never both hold it;
 * updates of one record racing to give it the same new value all succeed
 * (none is told the record itself holds the value). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "thread_check.h"
#include "testutil.h"
#include "unico.h"

#define THREADS 16

static char base[256];
static unico *U;


static const char *DDL =
    "CREATE TABLE users (id text PRIMARY KEY, email text, n int,"
    " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold);";

static const char *extra = ""; /* more store options */

static int setup(void **state) {
  (void)state;
  if (tu_scratch("test_races", base, sizeof base)) return -1;
  char url[300];
  snprintf(url, sizeof url, "lmdb:%s?sync=off%s", base, extra);
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_open(&U, url, NULL, &r);
  if (!rc) rc = unico_schema_apply(U, DDL, &r);
  unico_result_clear(&r);
  return rc ? -1 : 0;
}

static int teardown(void **state) {
  unico_close(U);
  (void)state;
  return tu_rmtree(base);
}

typedef struct racer {
  int round, id;
  atomic_int *go;
  int rc;
  char owner[64];
  char constraint[UNICO_CONSTRAINT_NAME_MAX + 1];
} racer;

static void *race_insert(void *arg) {
  racer *r = arg;
  unico_result res = UNICO_RESULT_INIT;
  char rec[128];
  /* Everyone spells the same address differently: casefold makes it one. */
  snprintf(rec, sizeof rec, "{\"id\":\"r%d-%d\",\"email\":\"%s%d@Example.com\"}",
           r->round, r->id, r->id % 2 ? "HOT" : "hot", r->round);
  while (!atomic_load(r->go)) {
    sched_yield(); /* (16 spinners on 2 cores, or under ThreadSanitizer) */
  }
  r->rc = unico_insert(U, "users", rec, NULL, &res);
  if (res.owner) snprintf(r->owner, sizeof r->owner, "%s", res.owner);
  snprintf(r->constraint, sizeof r->constraint, "%s", res.constraint);
  unico_result_clear(&res);
  return NULL;
}

static void test_one_winner(void **state) {
  (void)state;
  for (int round = 0; round < 200; round++) {
    atomic_int go = 0;
    racer rs[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
      memset(&rs[i], 0, sizeof rs[i]);
      rs[i].round = round;
      rs[i].id = i;
      rs[i].go = &go;
      pthread_create(&th[i], NULL, race_insert, &rs[i]);
    }
    atomic_store(&go, 1);
    int winners = 0, winner = -1;
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
      if (rs[i].rc == UNICO_OK) {
        winners++;
        winner = i;
      }
    assert_int_equal(winners, 1);
    char want[64];
    snprintf(want, sizeof want, "\"r%d-%d\"", round, winner);
    for (int i = 0; i < THREADS; i++) {
      if (i == winner) continue;
      assert_int_equal(rs[i].rc, UNICO_ECONFLICT);
      assert_string_equal(rs[i].constraint, "users_email");
      assert_string_equal(rs[i].owner, want);
    }
    /* and lookup agrees */
    unico_result res = UNICO_RESULT_INIT;
    char vals[64];
    snprintf(vals, sizeof vals, "[\"HOT%d@EXAMPLE.COM\"]", round);
    assert_int_equal(unico_lookup(U, "users", "users_email", vals, &res), UNICO_OK);
    json_t *j = json_loads(res.json, 0, NULL);
    char *pk = json_dumps(json_object_get(j, "pk"), JSON_ENCODE_ANY);
    assert_string_equal(pk, want);
    free(pk);
    json_decref(j);
    unico_result_clear(&res);
  }
}

/* Read-modify-write of one counter with --if-version: a lost update would
 * leave the counter below the number of acknowledged increments. */
static atomic_long acked;

static void *increment(void *arg) {
  (void)arg;
  unico_result res = UNICO_RESULT_INIT;
  for (int done = 0; done < 100 && !atomic_load(&thread_failures);) {
    TCHECK(unico_get(U, "users", "\"counter\"", &res) == UNICO_OK);
    json_t *j = json_loads(res.json, 0, NULL);
    long n = (long)json_integer_value(json_object_get(json_object_get(j, "record"), "n"));
    uint64_t v = (uint64_t)json_integer_value(json_object_get(j, "version"));
    json_decref(j);
    char patch[64];
    snprintf(patch, sizeof patch, "{\"n\":%ld}", n + 1);
    int rc = unico_update(U, "users", "\"counter\"", patch, v, NULL, &res);
    if (rc == UNICO_OK) {
      done++;
      atomic_fetch_add(&acked, 1);
    } else {
      TCHECK(rc == UNICO_EVERSION);
    }
  }
  unico_result_clear(&res);
  return NULL;
}

static void test_no_lost_update(void **state) {
  (void)state;
  unico_result res = UNICO_RESULT_INIT;
  atomic_store(&acked, 0);
  assert_int_equal(unico_insert(U, "users", "{\"id\":\"counter\",\"n\":0}", NULL, &res),
                   UNICO_OK);
  pthread_t th[8];
  for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, increment, NULL);
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&thread_failures), 0);
  assert_int_equal(unico_get(U, "users", "\"counter\"", &res), UNICO_OK);
  json_t *j = json_loads(res.json, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "record"), "n")),
                   atomic_load(&acked));
  assert_int_equal(json_integer_value(json_object_get(j, "version")), 1 + atomic_load(&acked));
  assert_int_equal(atomic_load(&acked), 800);
  json_decref(j);
  unico_result_clear(&res);
}

/* Two records pass one value back and forth (each releases it by moving to
 * a private value, then tries to take it) while a checker looks it up: the
 * owner it reports always holds the value. */
static atomic_int stop_swap;

static void *swapper(void *arg) {
  const char *me = arg;
  unico_result res = UNICO_RESULT_INIT;
  char pk[32], mine[64];
  snprintf(pk, sizeof pk, "\"%s\"", me);
  snprintf(mine, sizeof mine, "{\"email\":\"own-%s@x\"}", me);
  /* (until the checker has seen enough: on a loaded machine the threads
   * may start late) */
  for (int i = 0; i < 1000000 && !atomic_load(&stop_swap); i++) {
    int rc = unico_update(U, "users", pk, "{\"email\":\"shared@x\"}", 0, NULL, &res);
    TCHECK(rc == UNICO_OK || rc == UNICO_ECONFLICT);
    rc = unico_update(U, "users", pk, mine, 0, NULL, &res);
    TCHECK(rc == UNICO_OK);
  }
  unico_result_clear(&res);
  return NULL;
}

static void test_swap_and_lookup(void **state) {
  (void)state;
  unico_result res = UNICO_RESULT_INIT;
  atomic_store(&stop_swap, 0);
  assert_int_equal(unico_insert(U, "users", "{\"id\":\"A\"}", NULL, &res), UNICO_OK);
  assert_int_equal(unico_insert(U, "users", "{\"id\":\"B\"}", NULL, &res), UNICO_OK);
  pthread_t a, b;
  pthread_create(&a, NULL, swapper, "A");
  pthread_create(&b, NULL, swapper, "B");
  long seen = 0;
  time_t t0 = time(NULL);
  for (int i = 0; i < 3000 || (!seen && time(NULL) - t0 < 60); i++) {
    int rc = unico_lookup(U, "users", "users_email", "[\"shared@x\"]", &res);
    if (rc == UNICO_ENOTFOUND) continue;
    assert_int_equal(rc, UNICO_OK);
    json_t *j = json_loads(res.json, 0, NULL);
    const char *email =
        json_string_value(json_object_get(json_object_get(j, "record"), "email"));
    /* invariant 5: the owner returned holds the value */
    assert_non_null(email);
    assert_string_equal(email, "shared@x");
    json_decref(j);
    seen++;
  }
  atomic_store(&stop_swap, 1);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  assert_int_equal(atomic_load(&thread_failures), 0);
  assert_true(seen > 0);
  assert_int_equal(unico_check(U, &res), UNICO_OK);
  unico_result_clear(&res);
}

/* A hold given up while a write presenting its token is under way: the
 * write takes the value either way (held by its token, or free), never
 * answers an error (it planned to take the hold over at its version and
 * found the key gone: it must plan again, taking the value free). */
typedef struct holdrace {
  atomic_int *go;
  const char *token, *rec;
  int rc;
  char msg[1024];
} holdrace;

static void *hold_release(void *arg) {
  holdrace *h = arg;
  unico_result res = UNICO_RESULT_INIT;
  while (!atomic_load(h->go)) {
    sched_yield(); /* (16 spinners on 2 cores, or under ThreadSanitizer) */
  }
  h->rc = unico_release_hold(U, h->token, &res);
  unico_result_clear(&res);
  return NULL;
}

static void *hold_insert(void *arg) {
  holdrace *h = arg;
  unico_result res = UNICO_RESULT_INIT;
  const char *mine[] = {h->token};
  unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
  wo.holds = mine;
  wo.nholds = 1;
  while (!atomic_load(h->go)) {
    sched_yield(); /* (16 spinners on 2 cores, or under ThreadSanitizer) */
  }
  h->rc = unico_insert_with(U, "users", h->rec, &wo, &res);
  snprintf(h->msg, sizeof h->msg, "%s", res.message);
  unico_result_clear(&res);
  return NULL;
}

static void test_hold_released_midway(void **state) {
  (void)state;
  unico_result res = UNICO_RESULT_INIT;
  int released = 0;
  for (int i = 0; i < 400; i++) {
    char value[64], rec[128], token[128];
    snprintf(value, sizeof value, "[\"held%d@x\"]", i);
    assert_int_equal(unico_reserve(U, "users", "users_email", value, 60000,
                                   NULL, &res),
                     UNICO_OK);
    json_t *j = json_loads(res.json, 0, NULL);
    snprintf(token, sizeof token, "%s",
             json_string_value(json_object_get(j, "token")));
    json_decref(j);
    snprintf(rec, sizeof rec, "{\"id\":\"h%d\",\"email\":\"held%d@x\"}", i, i);
    atomic_int go = 0;
    holdrace ins = {&go, token, rec, 0, ""}, rel = {&go, token, NULL, 0, ""};
    pthread_t a, b;
    pthread_create(&a, NULL, hold_insert, &ins);
    pthread_create(&b, NULL, hold_release, &rel);
    atomic_store(&go, 1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (ins.rc != UNICO_OK)
      fail_msg("round %d: the insert with the token answered %s (%s); the "
               "release %s",
               i, unico_errname(ins.rc), ins.msg, unico_errname(rel.rc));
    released += rel.rc == UNICO_OK;
  }
  printf("hold released midway: 400 rounds, %d released before the insert "
         "took it\n", released);
  assert_int_equal(unico_check(U, &res), UNICO_OK);
  unico_result_clear(&res);
}

/* Every round, THREADS updates of record "same" set one new value: the
 * record holding a value never conflicts with itself, whichever update
 * claims it first. */
typedef struct same_racer {
  int round;
  atomic_int *go;
  int rc;
  char owner[64];
} same_racer;

static void *race_same(void *arg) {
  same_racer *r = arg;
  unico_result res = UNICO_RESULT_INIT;
  char patch[64];
  snprintf(patch, sizeof patch, "{\"email\":\"same%d@x\"}", r->round);
  while (!atomic_load(r->go)) {
    sched_yield(); /* (16 spinners on 2 cores, or under ThreadSanitizer) */
  }
  r->rc = unico_update(U, "users", "\"same\"", patch, 0, NULL, &res);
  if (res.owner) snprintf(r->owner, sizeof r->owner, "%s", res.owner);
  unico_result_clear(&res);
  return NULL;
}

static void test_same_value_one_record(void **state) {
  (void)state;
  unico_result res = UNICO_RESULT_INIT;
  assert_int_equal(unico_insert(U, "users", "{\"id\":\"same\"}", NULL, &res),
                   UNICO_OK);
  unico_result_clear(&res);
  for (int round = 0; round < 100; round++) {
    atomic_int go = 0;
    same_racer rs[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
      memset(&rs[i], 0, sizeof rs[i]);
      rs[i].round = round;
      rs[i].go = &go;
      pthread_create(&th[i], NULL, race_same, &rs[i]);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) {
      if (rs[i].rc != UNICO_OK)
        fprintf(stderr, "round %d: update %d: %s (owner %s)\n", round, i,
                unico_strerror(rs[i].rc), rs[i].owner);
      assert_int_equal(rs[i].rc, UNICO_OK);
    }
  }
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_winner),
      cmocka_unit_test(test_no_lost_update),
      cmocka_unit_test(test_swap_and_lookup),
      cmocka_unit_test(test_hold_released_midway),
      cmocka_unit_test(test_same_value_one_record),
  };
  int failed = ucm_run_group("transactions", tests, setup, teardown);
  /* The same races through the claims protocol. */
  extra = "&txn=off";
  failed += ucm_run_group("claims protocol", tests, setup, teardown);
  return ucm_done(failed);
}
