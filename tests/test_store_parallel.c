/* test_store_parallel.c - log mode's parallel writers (writers=parallel,
 * src/store/lmdb/parallel.c), made to interleave deterministically through
 * the store's test hook (ustore_lmdb_hook):
 *   - two writers of one key: the second waits for the first's latch, so
 *     exactly one of two inserts of a fresh value is applied, also when
 *     the first writes two keys of different parts of the table;
 *   - a request of keys in more than 32 parts takes the whole table: a
 *     writer of one of its keys waits for it too;
 *   - a writer that only checks a key (a condition) waits for a writer
 *     of that key's part, but two that check the same key do not wait
 *     for each other (every write checks its table's schema key);
 *   - log mode's writers are parallel by default, the leader's where the
 *     URL or UNICO_LMDB_WRITERS says so;
 *   - an answer waits for the log position it depends on: a refusal judged
 *     on a write whose sync has not ended is not answered until then, and
 *     when that sync fails it is answered "unknown", not "refused"; writes
 *     are refused after, until the store is reopened;
 *   - many writers at once, each inserting its own keys and racing for
 *     shared ones, across freezes of the table (a tiny wal_size): every
 *     write answered applied is there after a reopen, and each shared key
 *     was won once. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/lmdb/lmdb_store.h"
#include "store/lmdb/memtable.h"
#include "store/store.h"
#include "store_ops.h"
#include "testutil.h"
#include "unico.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  return tu_scratch("test_store_parallel", dir, sizeof dir);
}

static int teardown(void **state) {
  (void)state;
  return tu_rmtree(dir);
}

static ustore *open_store(const char *sub, const char *query) {
  char url[512];
  snprintf(url, sizeof url, "lmdb:%s/%s?wal=on&writers=parallel%s", dir, sub,
           query ? query : "");
  ustore *s = NULL;
  ustore_err e = {{0}};
  int rc = ustore_open(&s, url, &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", url, rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  return s;
}

/* ---- the hook: a gate the test holds writers at ---- */

static pthread_mutex_t hk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hk_cv = PTHREAD_COND_INITIALIZER;
static int hk_point;       /* the point to stop at */
static int hk_armed;       /* stop the next writer that comes there */
static int hk_held;        /* a writer waits at the gate */
static int hk_open;        /* let it go */
static int hk_fail;        /* SYNC: the errno to fail the sync with */
static int hk_others_done; /* the other writer has its answer */

static int hook(ustore *s, int point) {
  (void)s;
  int rc = 0;
  pthread_mutex_lock(&hk_mu);
  if (point == hk_point && hk_armed) {
    hk_armed = 0;
    hk_held = 1;
    pthread_cond_broadcast(&hk_cv);
    /* (LATCHED: at most 2 s for the other writer to finish, which it
     * cannot while this one holds the latch it needs) */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    while (!hk_open && !(point == USTORE_LMDB_HOOK_LATCHED && hk_others_done))
      if (pthread_cond_timedwait(&hk_cv, &hk_mu, &until) == ETIMEDOUT &&
          point == USTORE_LMDB_HOOK_LATCHED)
        break;
    hk_held = 0;
    rc = point == USTORE_LMDB_HOOK_SYNC ? hk_fail : 0;
  }
  pthread_mutex_unlock(&hk_mu);
  return rc;
}

static void hook_arm(int point) {
  pthread_mutex_lock(&hk_mu);
  hk_point = point;
  hk_armed = 1;
  hk_held = hk_open = hk_fail = hk_others_done = 0;
  pthread_mutex_unlock(&hk_mu);
  ustore_lmdb_hook = hook;
}

/* Wait until a writer is held at the gate (at most 20 s: a writer that
 * never comes there, answered without it, fails the test). */
static void hook_wait_held(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 20;
  pthread_mutex_lock(&hk_mu);
  while (!hk_held &&
         pthread_cond_timedwait(&hk_cv, &hk_mu, &until) != ETIMEDOUT) {
  }
  int held = hk_held;
  pthread_mutex_unlock(&hk_mu);
  assert_int_equal(held, 1);
}

static void hook_release(int fail) {
  pthread_mutex_lock(&hk_mu);
  hk_open = 1;
  hk_fail = fail;
  pthread_cond_broadcast(&hk_cv);
  pthread_mutex_unlock(&hk_mu);
}

/* ---- a writer on a thread ---- */

#define WIDE 40 /* parts a wide request writes (parallel.c: over 32) */

typedef struct writer {
  ustore *s;
  ustore_op ops[WIDE + 1];
  size_t n;
  int rc;
  atomic_int done;
  pthread_t th;
} writer;

static void *writer_main(void *arg) {
  writer *w = arg;
  ustore_err e = {{0}};
  w->rc = w->s->vt->txn(w->s, w->ops, w->n, &e);
  atomic_store(&w->done, 1);
  pthread_mutex_lock(&hk_mu);
  hk_others_done = 1;
  pthread_cond_broadcast(&hk_cv);
  pthread_mutex_unlock(&hk_mu);
  return NULL;
}

static void writer_start(writer *w, ustore *s) {
  w->s = s;
  atomic_store(&w->done, 0);
  assert_int_equal(pthread_create(&w->th, NULL, writer_main, w), 0);
}

static void writer_join(writer *w) {
  pthread_join(w->th, NULL);
  for (size_t i = 0; i < w->n; i++) ubuf_free(&w->ops[i].cur);
}

/* A runs and is held with its latches (it has checked its conditions);
 * B starts meanwhile and must wait for A: A is applied, B refused on
 * A's write. */
static void a_held_b_meets(writer *a, writer *b, ustore *s) {
  hook_arm(USTORE_LMDB_HOOK_LATCHED);
  writer_start(a, s);
  hook_wait_held();
  writer_start(b, s);
  writer_join(a);
  writer_join(b);
  ustore_lmdb_hook = NULL;
  assert_int_equal(a->rc, UNICO_OK);
  assert_int_equal(b->rc, USTORE_NOT_APPLIED);
}

/* Two keys whose parts of the table differ, the first named "k1-*". */
static void two_parts(char *k1, char *k2, size_t n) {
  snprintf(k1, n, "k1-0");
  for (int i = 0;; i++) {
    snprintf(k2, n, "k2-%d", i);
    if (umts_shard(k2, strlen(k2)) != umts_shard(k1, strlen(k1))) return;
  }
}

/* Writer A inserts k1 (and, with two, k2 in another part of the table)
 * and is held with its latches; writer B inserts k1 meanwhile. B must
 * wait for A's latch: A is applied, B refused on A's write. */
static void same_key(const char *sub, int two) {
  char k1[32], k2[32];
  two_parts(k1, k2, sizeof k1);
  ustore *s = open_store(sub, NULL);
  writer a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.ops[0] = op(k1, USTORE_ABSENT, 0, USTORE_PUT, "a");
  a.ops[1] = op(k2, USTORE_ABSENT, 0, USTORE_PUT, "a");
  a.n = two ? 2 : 1;
  b.ops[0] = op(k1, USTORE_ABSENT, 0, USTORE_PUT, "b");
  b.n = 1;
  a_held_b_meets(&a, &b, s);
  ubuf v = UBUF_INIT;
  ustore_err e = {{0}};
  assert_int_equal(s->vt->get(s, k1, strlen(k1), &v, NULL, &e), UNICO_OK);
  assert_int_equal(v.len, 1);
  assert_int_equal(v.p[0], 'a');
  ubuf_free(&v);
  s->vt->close(s);
}

static void test_latch_same_key(void **state) {
  (void)state;
  same_key("latch1", 0);
}

static void test_latch_every_key(void **state) {
  (void)state;
  same_key("latch2", 1);
}

/* A wide request (keys in WIDE parts besides k1's: it takes the whole
 * table instead of latches) inserts k1 and is held; B inserts k1
 * meanwhile. B must wait for it: A applied, B refused. */
static void test_latch_wide(void **state) {
  (void)state;
  static char keys[WIDE][32];
  char k1[32], k2[32];
  two_parts(k1, k2, sizeof k1);
  uint64_t parts = (uint64_t)1 << umts_shard(k1, strlen(k1));
  writer a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.ops[0] = op(k1, USTORE_ABSENT, 0, USTORE_PUT, "a");
  a.n = 1;
  for (int i = 0; a.n <= WIDE; i++) {
    char *k = keys[a.n - 1];
    snprintf(k, sizeof keys[0], "w-%d", i);
    uint64_t bit = (uint64_t)1 << umts_shard(k, strlen(k));
    if (parts & bit) continue;
    parts |= bit;
    a.ops[a.n++] = op(k, USTORE_ABSENT, 0, USTORE_PUT, "a");
  }
  b.ops[0] = op(k1, USTORE_ABSENT, 0, USTORE_PUT, "b");
  b.n = 1;
  ustore *s = open_store("latch5", NULL);
  a_held_b_meets(&a, &b, s);
  s->vt->close(s);
}

/* Three keys in three different parts of the table: k1 and k2 as
 * two_parts(), and a third, "s-*". */
static void three_parts(char *k1, char *k2, char *k3, size_t n) {
  two_parts(k1, k2, n);
  for (int i = 0;; i++) {
    snprintf(k3, n, "s-%d", i);
    unsigned p = umts_shard(k3, strlen(k3));
    if (p != umts_shard(k1, strlen(k1)) && p != umts_shard(k2, strlen(k2)))
      return;
  }
}

/* A inserts k1 and is held with its latches; B only checks that k1 is
 * absent (a condition, as every write checks its schema key) and inserts
 * k2, in another part. B's check must wait for A's latch on k1's part
 * (taken shared, still behind an exclusive holder): A is applied, B
 * refused on it. */
static void test_latch_check_waits(void **state) {
  (void)state;
  char k1[32], k2[32];
  two_parts(k1, k2, sizeof k1);
  ustore *s = open_store("latch3", NULL);
  writer a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.ops[0] = op(k1, USTORE_ABSENT, 0, USTORE_PUT, "a");
  a.n = 1;
  b.ops[0] = op(k1, USTORE_ABSENT, 0, USTORE_CHECK, NULL);
  b.ops[1] = op(k2, USTORE_ABSENT, 0, USTORE_PUT, "b");
  b.n = 2;
  a_held_b_meets(&a, &b, s);
  ustore_err e = {{0}};
  assert_int_equal(s->vt->get(s, k2, strlen(k2), NULL, NULL, &e), UNICO_ENOTFOUND);
  s->vt->close(s);
}

/* Two writers that check one key (s-*, standing for their table's schema
 * key) and insert keys of other parts do not wait for each other: with A
 * held with its latches, B is answered (applied) while A is still held. */
static void test_latch_checks_share(void **state) {
  (void)state;
  char k1[32], k2[32], k3[32];
  three_parts(k1, k2, k3, sizeof k1);
  ustore *s = open_store("latch4", NULL);
  writer a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.ops[0] = op(k3, USTORE_ABSENT, 0, USTORE_CHECK, NULL);
  a.ops[1] = op(k1, USTORE_ABSENT, 0, USTORE_PUT, "a");
  a.n = 2;
  b.ops[0] = op(k3, USTORE_ABSENT, 0, USTORE_CHECK, NULL);
  b.ops[1] = op(k2, USTORE_ABSENT, 0, USTORE_PUT, "b");
  b.n = 2;
  hook_arm(USTORE_LMDB_HOOK_LATCHED);
  writer_start(&a, s);
  hook_wait_held();
  writer_start(&b, s);
  /* (the gate lets A go after 2 s if B has not answered by then) */
  for (int i = 0; i < 150 && !atomic_load(&b.done); i++) tu_sleep_ms(10);
  int b_done = atomic_load(&b.done);
  writer_join(&a);
  writer_join(&b);
  ustore_lmdb_hook = NULL;
  assert_int_equal(b_done, 1); /* B answered within 1.5 s, A still held */
  assert_int_equal(a.rc, UNICO_OK);
  assert_int_equal(b.rc, UNICO_OK);
  s->vt->close(s);
}

/* Log mode's writers are parallel unless the URL or UNICO_LMDB_WRITERS
 * says leader: the hook (called by parallel writers alone, when latched)
 * counts one call per write on a store opened with wal=on and nothing
 * more, none with UNICO_LMDB_WRITERS=leader. */
static atomic_int calls;
static int count_hook(ustore *s, int point) {
  (void)s;
  if (point == USTORE_LMDB_HOOK_LATCHED) atomic_fetch_add(&calls, 1);
  return 0;
}

static int writes_latched(const char *sub, const char *query) {
  char url[512];
  ustore *s = NULL;
  ustore_err e = {{0}};
  snprintf(url, sizeof url, "lmdb:%s/%s?wal=on%s", dir, sub, query);
  assert_int_equal(ustore_open(&s, url, &e), UNICO_OK);
  atomic_store(&calls, 0);
  ustore_lmdb_hook = count_hook;
  ustore_op o = op("k", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->txn(s, &o, 1, &e), UNICO_OK);
  ustore_lmdb_hook = NULL;
  ubuf_free(&o.cur);
  s->vt->close(s);
  return atomic_load(&calls);
}

static void test_default_parallel(void **state) {
  (void)state;
  const char *was = getenv("UNICO_LMDB_WRITERS");
  char keep[64];
  snprintf(keep, sizeof keep, "%s", was ? was : "");
  unsetenv("UNICO_LMDB_WRITERS");
  assert_int_equal(writes_latched("dflt1", ""), 1);
  assert_int_equal(writes_latched("dflt2", "&writers=leader"), 0);
  setenv("UNICO_LMDB_WRITERS", "leader", 1);
  assert_int_equal(writes_latched("dflt3", ""), 0);
  assert_int_equal(writes_latched("dflt4", "&writers=parallel"), 1);
  if (was) setenv("UNICO_LMDB_WRITERS", keep, 1);
  else unsetenv("UNICO_LMDB_WRITERS");
}

/* A's insert of k is held in its sync; B's insert of k is refused on A's
 * write, which is not durable: B is not answered while that sync runs,
 * and once it fails B hears "unknown" (its refusal was judged on a write
 * that may be lost), as A does. Writes are refused after. */
static void test_refusal_waits_for_sync(void **state) {
  (void)state;
  ustore *s = open_store("syncwait", NULL);
  writer a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.ops[0] = op("k", USTORE_ABSENT, 0, USTORE_PUT, "a");
  a.n = 1;
  b.ops[0] = op("k", USTORE_ABSENT, 0, USTORE_PUT, "b");
  b.n = 1;
  hook_arm(USTORE_LMDB_HOOK_SYNC);
  writer_start(&a, s);
  hook_wait_held(); /* A applied, its record written, its sync held */
  writer_start(&b, s);
  usleep(300 * 1000);
  assert_int_equal(atomic_load(&b.done), 0); /* not answered yet */
  assert_int_equal(atomic_load(&a.done), 0);
  hook_release(EIO);
  writer_join(&a);
  writer_join(&b);
  ustore_lmdb_hook = NULL;
  assert_int_equal(a.rc, UNICO_EUNKNOWN);
  assert_int_equal(b.rc, UNICO_EUNKNOWN);
  /* refused until reopened */
  ustore_err e = {{0}};
  ustore_op o = op("other", USTORE_ABSENT, 0, USTORE_PUT, "x");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_EUNAVAILABLE);
  s->vt->close(s);
  s = open_store("syncwait", NULL);
  o = op("other", USTORE_ABSENT, 0, USTORE_PUT, "x");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  s->vt->close(s);
}

/* ---- many writers, across freezes ---- */

#define NW 6
#define PER 300
#define SHARED 50

typedef struct racer {
  ustore *s;
  int id;
  int won[SHARED]; /* answered applied */
  int mine_ok;     /* own keys answered applied */
} racer;

static void *racer_main(void *arg) {
  racer *r = arg;
  char key[64], val[64];
  for (int i = 0; i < PER; i++) {
    ustore_err e = {{0}};
    ustore_op o[2];
    snprintf(key, sizeof key, "own-%d-%d", r->id, i);
    snprintf(val, sizeof val, "v%d", i);
    o[0] = op(key, USTORE_ABSENT, 0, USTORE_PUT, val);
    char sk[32];
    int sh = (i * 7 + r->id) % SHARED;
    snprintf(sk, sizeof sk, "shared-%d", sh);
    o[1] = op(sk, USTORE_ABSENT, 0, USTORE_PUT, "w");
    int rc = r->s->vt->txn(r->s, o, 2, &e);
    if (rc == UNICO_OK) {
      r->won[sh]++;
      r->mine_ok++;
    } else if (rc == USTORE_NOT_APPLIED) {
      /* the shared one was taken: its own key alone */
      ubuf_free(&o[0].cur);
      ubuf_free(&o[1].cur);
      o[0] = op(key, USTORE_ABSENT, 0, USTORE_PUT, val);
      if (r->s->vt->txn(r->s, o, 1, &e) == UNICO_OK) r->mine_ok++;
    }
    ubuf_free(&o[0].cur);
    ubuf_free(&o[1].cur);
  }
  return NULL;
}

static void test_many_writers(void **state) {
  (void)state;
  ustore *s = open_store("many", "&wal_size=16KiB&sync=data");
  racer r[NW];
  pthread_t th[NW];
  memset(r, 0, sizeof r);
  for (int i = 0; i < NW; i++) {
    r[i].s = s;
    r[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
  }
  for (int i = 0; i < NW; i++) pthread_join(th[i], NULL);
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(s, &st);
  assert_true(st.checkpoints > 0); /* the table froze on the way */
  s->vt->close(s);
  s = open_store("many", "&wal_size=16KiB&sync=data");
  for (int sh = 0; sh < SHARED; sh++) {
    int wins = 0;
    for (int i = 0; i < NW; i++) wins += r[i].won[sh];
    assert_int_equal(wins, 1);
  }
  for (int i = 0; i < NW; i++) {
    assert_int_equal(r[i].mine_ok, PER);
    for (int k = 0; k < PER; k++) {
      char key[64];
      ustore_err e = {{0}};
      snprintf(key, sizeof key, "own-%d-%d", i, k);
      assert_int_equal(s->vt->get(s, key, strlen(key), NULL, NULL, &e), UNICO_OK);
    }
  }
  s->vt->close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_latch_same_key),
      cmocka_unit_test(test_latch_every_key),
      cmocka_unit_test(test_latch_check_waits),
      cmocka_unit_test(test_latch_wide),
      cmocka_unit_test(test_latch_checks_share),
      cmocka_unit_test(test_default_parallel),
      cmocka_unit_test(test_refusal_waits_for_sync),
      cmocka_unit_test(test_many_writers),
  };
  return ucm_done(ucm_run_group("tests", tests, setup, teardown));
}
