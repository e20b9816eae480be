/* test_store_lmdb.c - what is the LMDB store's own (the store interface's
 * cases, the same on every store, are tests/store_conformance.c): map
 * growth, a clear error when full whose advice works, deletes on a full
 * store, bad options, shared environments and reopening with other
 * options, deferred durability; group commit: concurrent requests share
 * batches, yet each is all or nothing and sees the writes of the requests
 * batched before it. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/lmdb/lmdb_store.h"
#include "store/store.h"
#include "store_ops.h"
#include "testutil.h"
#include "unico.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  return tu_scratch("test_store_lmdb", dir, sizeof dir);
}

static int teardown(void **state) {
  (void)state;
  return tu_rmtree(dir);
}

static ustore *open_store(const char *sub, const char *query) {
  char url[512];
  snprintf(url, sizeof url, "lmdb:%s/%s%s%s", dir, sub, query ? "?" : "",
           query ? query : "");
  ustore *s = NULL;
  ustore_err e = {{0}};
  int rc = ustore_open(&s, url, &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", url, rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  return s;
}

static void test_growth_and_full(void **state) {
  (void)state;
  ustore_err e = {{0}};
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  /* starts at 1 MiB, must grow to hold ~8 MiB */
  ustore *s = open_store("grow", "map_size=1MiB");
  for (int i = 0; i < 2000; i++) {
    char k[32];
    snprintf(k, sizeof k, "key%06d", i);
    ustore_op o = op(k, USTORE_ABSENT, 0, USTORE_PUT, big);
    int rc = s->vt->cas(s, &o, &e);
    if (rc) fprintf(stderr, "put %d: %d %s\n", i, rc, e.msg);
    assert_int_equal(rc, UNICO_OK);
  }
  s->vt->close(s);
  /* capped at 2 MiB: a clear "full" error naming the option */
  s = open_store("full", "map_size=1MiB&max_map_size=2MiB");
  int rc = UNICO_OK, i;
  for (i = 0; i < 2000 && rc == UNICO_OK; i++) {
    char k[32];
    snprintf(k, sizeof k, "key%06d", i);
    ustore_op o = op(k, USTORE_ABSENT, 0, USTORE_PUT, big);
    rc = s->vt->cas(s, &o, &e);
  }
  assert_int_equal(rc, UNICO_EFULL);
  assert_non_null(strstr(e.msg, "max_map_size"));
  /* what was written before stays readable */
  ubuf v = UBUF_INIT;
  assert_int_equal(s->vt->get(s, "key000000", 9, &v, NULL, &e), UNICO_OK);
  ubuf_free(&v);
  s->vt->close(s);
}

/* Puts of 1.5 KB values under prefix until the store is full; returns how
 * many were acknowledged, and the refusal in *e. The refused one left
 * nothing behind. */
static int fill_up(ustore *s, const char *prefix, ustore_err *e) {
  char big[1500], k[32];
  memset(big, 'f', sizeof big - 1);
  big[sizeof big - 1] = 0;
  int i, rc = UNICO_OK;
  for (i = 0; i < 5000; i++) {
    snprintf(k, sizeof k, "%s%06d", prefix, i);
    ustore_op o = op(k, USTORE_ABSENT, 0, USTORE_PUT, big);
    rc = s->vt->cas(s, &o, e);
    if (rc) break;
  }
  assert_int_equal(rc, UNICO_EFULL);
  assert_int_equal(s->vt->get(s, k, strlen(k), NULL, NULL, e), UNICO_ENOTFOUND);
  return i;
}

/* Open the store URL a message advises, from marker to its end. */
static ustore *open_advised(const char *msg, const char *marker) {
  const char *p = strstr(msg, marker);
  if (!p) fprintf(stderr, "no \"%s\" in: %s\n", marker, msg);
  assert_non_null(p);
  ustore *s = NULL;
  ustore_err e = {{0}};
  int rc = ustore_open(&s, p + strlen(marker), &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", p + strlen(marker), rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  return s;
}

static void test_full_deletes(void **state) {
  (void)state;
  /* A full store: every delete still works (each with a small put beside
   * it, as a delete writes its outcome), and frees room for inserts. */
  ustore *s = open_store("fulldel", "map_size=1MiB&max_map_size=1MiB&sync=off");
  ustore_err e = {{0}}, full = {{0}};
  int n = fill_up(s, "f", &full);
  assert_true(n > 100);
  for (int i = 0; i < n; i++) {
    char k[32], o[32];
    snprintf(k, sizeof k, "f%06d", i);
    snprintf(o, sizeof o, "o%06d", i);
    ustore_op ops[2] = {op(k, USTORE_VERSION, 1, USTORE_DEL, NULL),
                        op(o, USTORE_ABSENT, 0, USTORE_PUT, "deleted")};
    int rc = s->vt->txn(s, ops, 2, &e);
    if (rc) fprintf(stderr, "delete %d of %d: %d %s\n", i, n, rc, e.msg);
    assert_int_equal(rc, UNICO_OK);
    if (i == 10) { /* some room again */
      ustore_op p = op("again", USTORE_ABSENT, 0, USTORE_PUT, "x");
      assert_int_equal(s->vt->cas(s, &p, &e), UNICO_OK);
    }
  }
  assert_true(fill_up(s, "g", &e) > n / 2); /* the space came back */
  s->vt->close(s);
  /* The advice names a value that works: it opens and takes more. */
  assert_non_null(strstr(full.msg, "max_map_size=2MiB"));
  s = open_advised(full.msg, "reopen it as ");
  ustore_op p = op("more", USTORE_ABSENT, 0, USTORE_PUT, "x");
  assert_int_equal(s->vt->cas(s, &p, &e), UNICO_OK);
  s->vt->close(s);
}

static void test_full_shrinks(void **state) {
  (void)state;
  /* A full store whose values all shrink to a few bytes (records replaced
   * by tombstones): the room comes back. LMDB merges pages when keys
   * leave them, not when values shrink, so a value shrinking to half or
   * less is deleted and put again (lm_put_reserve). */
  ustore *s = open_store("fullshrink", "map_size=1MiB&max_map_size=1MiB&sync=off");
  ustore_err e = {{0}};
  int n = fill_up(s, "f", &e);
  assert_true(n > 100);
  for (int i = 0; i < n; i++) {
    char k[32];
    snprintf(k, sizeof k, "f%06d", i);
    ustore_op o = op(k, USTORE_VERSION, 1, USTORE_PUT, "t");
    int rc = s->vt->cas(s, &o, &e);
    if (rc) fprintf(stderr, "shrink %d of %d: %d %s\n", i, n, rc, e.msg);
    assert_int_equal(rc, UNICO_OK);
  }
  assert_true(fill_up(s, "g", &e) > n / 2); /* the space came back */
  s->vt->close(s);
}

static void test_max_map_size_alone(void **state) {
  (void)state;
  /* max_map_size below the default start: the map starts at the limit */
  ustore *s = open_store("maxonly", "max_map_size=4MiB&sync=off");
  ustore_err e = {{0}};
  ustore_op o = op("k", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  int n = fill_up(s, "m", &e);
  fprintf(stderr, "max_map_size=4MiB: full after %d puts of 1.5 KB\n", n);
  assert_true(n > 800); /* 3.75 MiB of it, a page each */
  s->vt->close(s);
}

static void test_bad_options(void **state) {
  (void)state;
  const char *bad[] = {"lmdb:/tmp/x?map_size=abc", "lmdb:/tmp/x?bogus=1",
                       "lmdb:/tmp/x?sync=maybe", "lmdb:/tmp/x?map_size",
                       "dynamo://nowhere/t", "lmdb:/proc/version/x"};
  int want[] = {UNICO_EINVAL, UNICO_EINVAL, UNICO_EINVAL, UNICO_EINVAL,
                UNICO_EUNSUPPORTED, UNICO_EUNAVAILABLE};
  for (int i = 0; i < 6; i++) {
    ustore *s = (ustore *)1;
    ustore_err e = {{0}};
    int rc = ustore_open(&s, bad[i], &e);
    if (rc != want[i]) fprintf(stderr, "%s: %d %s\n", bad[i], rc, e.msg);
    assert_int_equal(rc, want[i]);
    assert_null(s);
    assert_true(e.msg[0] != 0);
  }
}

static void test_shared_env(void **state) {
  (void)state;
  /* Two opens of one directory in one process share the environment, and
   * closing one leaves the other working. */
  ustore *a = open_store("shared", NULL), *b = open_store("shared", NULL);
  ustore_err e = {{0}};
  ustore_op o = op("k", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(a->vt->cas(a, &o, &e), UNICO_OK);
  ubuf v = UBUF_INIT;
  assert_int_equal(b->vt->get(b, "k", 1, &v, NULL, &e), UNICO_OK);
  a->vt->close(a);
  o = op("k2", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(b->vt->cas(b, &o, &e), UNICO_OK);
  assert_int_equal(b->vt->get(b, "k2", 2, &v, NULL, &e), UNICO_OK);
  ubuf_free(&v);
  b->vt->close(b);
}

/* A directory already open in this process is shared (LMDB allows one
 * environment per process), so a second open with other options for the
 * environment is refused, naming the option, instead of handing back the
 * first store as it is (it used to: "wal=on" ignored, a plain-mode store
 * returned). Options of the handle alone (txn) may differ. */
static void test_reopen_other_options(void **state) {
  (void)state;
  ustore *a = open_store("reopen", NULL);
  const char *other[] = {"wal=on", "sync=off", "sync=data",
                         "max_map_size=64MiB", "map_size=4MiB",
                         "wal_size=1MiB", "sync_delay_us=500"};
  const char *named[] = {"wal", "sync", "sync", "max_map_size", "map_size",
                         "wal_size", "sync_delay_us"};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    char url[512];
    snprintf(url, sizeof url, "lmdb:%s/reopen?%s", dir, other[i]);
    ustore *b = (ustore *)1;
    ustore_err e = {{0}};
    int rc = ustore_open(&b, url, &e);
    if (rc != UNICO_EINVAL) fprintf(stderr, "%s: %d %s\n", url, rc, e.msg);
    assert_int_equal(rc, UNICO_EINVAL);
    assert_null(b);
    assert_non_null(strstr(e.msg, named[i]));
  }
  /* the same options, spelled out, and a handle of its own without
   * transactions, share it */
  ustore *b = open_store("reopen", "sync=on&wal=off&map_size=1GiB");
  ustore *c = open_store("reopen", "txn=off");
  assert_int_equal(c->vt->caps & USTORE_CAP_TXN, 0);
  b->vt->close(b);
  c->vt->close(c);
  a->vt->close(a);
  /* the other way round: log mode first, then a plain open */
  a = open_store("reopen-log", "wal=on");
  char url[512];
  snprintf(url, sizeof url, "lmdb:%s/reopen-log", dir);
  ustore_err e = {{0}};
  ustore *d = (ustore *)1;
  assert_int_equal(ustore_open(&d, url, &e), UNICO_EINVAL);
  assert_null(d);
  assert_non_null(strstr(e.msg, "wal"));
  a->vt->close(a);
}

/* ---- deferred durability ---- */

typedef struct dwatch {
  ustore_watch w; /* first */
  ustore *s;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fired, rc;
  uint64_t durable_then; /* the store's durable commit when it fired */
} dwatch;

static void dwatch_cb(ustore_watch *w, int rc, const char *msg) {
  dwatch *d = (dwatch *)w;
  (void)msg;
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(d->s, &st);
  pthread_mutex_lock(&d->mu);
  d->fired++;
  d->rc = rc;
  d->durable_then = st.durable;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

/* Watch seq and wait for the callback: it must fire once, with the commit
 * durable by then. */
static void watch_and_wait(ustore *s, uint64_t seq) {
  dwatch d;
  memset(&d, 0, sizeof d);
  d.w.seq = seq;
  d.w.cb = dwatch_cb;
  d.s = s;
  pthread_mutex_init(&d.mu, NULL);
  pthread_cond_init(&d.cv, NULL);
  int pending = ustore_watch_durable(s, &d.w);
  assert_int_equal(pending, 1);
  pthread_mutex_lock(&d.mu);
  while (!d.fired) pthread_cond_wait(&d.cv, &d.mu);
  pthread_mutex_unlock(&d.mu);
  assert_int_equal(d.fired, 1);
  assert_int_equal(d.rc, UNICO_OK);
  assert_true(d.durable_then >= seq);
  /* once durable, a watch of the same commit is answered at once */
  assert_int_equal(ustore_watch_durable(s, &d.w), 0);
  pthread_cond_destroy(&d.cv);
  pthread_mutex_destroy(&d.mu);
}

static void deferred_on(const char *sub, const char *query) {
  ustore *s = open_store(sub, query);
  ustore_err e = {{0}};
  ustore_lmdb_stats st;
  /* a deferred write is answered before the sync that makes it durable */
  ustore_defer_begin();
  ustore_op o = op("k1", USTORE_ABSENT, 0, USTORE_PUT, "v1");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  uint64_t seq1 = ustore_defer_end();
  assert_true(seq1 > 0);
  ustore_lmdb_stats_get(s, &st);
  assert_true(st.committed >= seq1);
  assert_true(st.durable < seq1);
  /* a refusal judged on that state carries a ticket covering it */
  ustore_defer_begin();
  o = op("k1", USTORE_ABSENT, 0, USTORE_PUT, "v2");
  assert_int_equal(s->vt->cas(s, &o, &e), USTORE_NOT_APPLIED);
  ubuf_free(&o.cur);
  uint64_t seq2 = ustore_defer_end();
  assert_true(seq2 >= seq1);
  /* reads add nothing to the ticket */
  ustore_defer_begin();
  ubuf v = UBUF_INIT;
  assert_int_equal(s->vt->get(s, "k1", 2, &v, NULL, &e), UNICO_OK);
  ubuf_free(&v);
  assert_int_equal(ustore_defer_end(), 0);
  watch_and_wait(s, seq2);
  /* another deferred write, then a plain one: the plain one returns only
   * once durable, which covers the deferred one before it */
  ustore_defer_begin();
  o = op("k2", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  uint64_t seq3 = ustore_defer_end();
  assert_true(seq3 > seq2);
  o = op("k3", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  ustore_lmdb_stats_get(s, &st);
  assert_true(st.durable >= seq3 + 1);
  s->vt->close(s);
}

static void test_deferred(void **state) {
  (void)state;
  deferred_on("defer-log", "wal=on");
  deferred_on("defer-plain", NULL); /* the meta page's sync is deferred */
  /* with sync=off nothing waits: no ticket */
  ustore *s = open_store("defer-off", "wal=on&sync=off");
  ustore_err e = {{0}};
  ustore_defer_begin();
  ustore_op o = op("k", USTORE_ABSENT, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  assert_int_equal(ustore_defer_end(), 0);
  s->vt->close(s);
}

/* ---- gathering (sync_delay_us) ---- */

static void test_gather_goal(void **state) {
  (void)state;
  /* off, a lone writer or a few (up to 15): sync at once */
  assert_int_equal(ustore_lmdb_gather_goal(20, 40, 0), 0);
  for (size_t n = 0; n < 16; n++) assert_int_equal(ustore_lmdb_gather_goal(n, 40, 1000), 0);
  /* from 16: wait for as many as were lately seen waiting, at most 64 */
  assert_int_equal(ustore_lmdb_gather_goal(16, 40, 1000), 40);
  assert_int_equal(ustore_lmdb_gather_goal(20, 20, 1), 20);
  assert_int_equal(ustore_lmdb_gather_goal(30, 100, 1000), 64);
  assert_int_equal(ustore_lmdb_gather_goal(63, 64, 1000), 64);
  /* 64 or more: enough already */
  assert_int_equal(ustore_lmdb_gather_goal(64, 64, 1000), 0);
  assert_int_equal(ustore_lmdb_gather_goal(500, 500, 100000), 0);
}

/* A deferred put of a new key: its ticket, 0 if it failed (no assertion:
 * writer threads call it too). */
static uint64_t deferred_put(ustore *s, const char *key) {
  ustore_err e = {{0}};
  ustore_defer_begin();
  ustore_op o = op(key, USTORE_ABSENT, 0, USTORE_PUT, "v");
  int rc = s->vt->cas(s, &o, &e);
  uint64_t seq = ustore_defer_end();
  return rc == UNICO_OK ? seq : 0;
}

/* A lone writer whose every write waits for its sync: the syncer never
 * waits for more, however long sync_delay_us allows (100 ms here: 40
 * writes would take 4 s if it did). */
static void test_gather_lone_writer(void **state) {
  (void)state;
  ustore *s = open_store("gather-lone", "wal=on&sync_delay_us=100000");
  for (int i = 0; i < 40; i++) {
    char k[16];
    snprintf(k, sizeof k, "k%02d", i);
    uint64_t seq = deferred_put(s, k);
    assert_true(seq > 0);
    watch_and_wait(s, seq);
  }
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(s, &st);
  assert_int_equal(st.gathers, 0);
  assert_true(st.syncs >= 40);
  s->vt->close(s);
}

/* Writers many at once (24, enough for the syncer to gather: it prints how
 * often it did): every watch is called back once, durable by then, whether
 * the syncer gathered or not; then a store
 * closed while watches wait for a sync with a long delay answers them
 * and closes (the gathering ends at stop). */
#define GW_THREADS 24
#define GW_WRITES 40
static ustore *gw_store;

/* A watch that counts its calls and keeps the outcome. */
typedef struct cwatch {
  ustore_watch w;
  atomic_int calls;
  int rc;
  uint64_t durable_then;
} cwatch;

static void cwatch_cb(ustore_watch *w, int rc, const char *msg) {
  (void)msg;
  cwatch *c = (cwatch *)w;
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(gw_store, &st);
  c->rc = rc;
  c->durable_then = st.durable;
  atomic_fetch_add(&c->calls, 1);
}

/* Each write waits for its callback (or is durable already); 1 on any
 * wrong answer (no assertions off the main thread). */
static void *gather_writer(void *p) {
  int t = (int)(intptr_t)p;
  for (int i = 0; i < GW_WRITES; i++) {
    char k[32];
    snprintf(k, sizeof k, "w%d/%03d", t, i);
    cwatch c = {.rc = -1};
    c.w.seq = deferred_put(gw_store, k);
    if (!c.w.seq) return (void *)1;
    c.w.cb = cwatch_cb;
    int pending = ustore_watch_durable(gw_store, &c.w);
    if (pending < 0) return (void *)1;
    if (pending == 0) continue; /* durable already */
    for (int n = 0; n < 60000 && !atomic_load(&c.calls); n++) tu_sleep_ms(1);
    if (atomic_load(&c.calls) != 1 || c.rc != UNICO_OK || c.durable_then < c.w.seq)
      return (void *)1;
  }
  return NULL;
}

static void test_gather_many(void **state) {
  (void)state;
  gw_store = open_store("gather-many", "wal=on&sync_delay_us=2000");
  pthread_t th[GW_THREADS];
  for (intptr_t t = 0; t < GW_THREADS; t++)
    assert_int_equal(pthread_create(&th[t], NULL, gather_writer, (void *)t), 0);
  for (int t = 0; t < GW_THREADS; t++) {
    void *r;
    pthread_join(th[t], &r);
    assert_null(r);
  }
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(gw_store, &st);
  assert_true(st.syncs <= st.requests);
  printf("gather-many: %llu writes, %llu syncs, %llu of them gathered first\n",
         (unsigned long long)st.requests, (unsigned long long)st.syncs,
         (unsigned long long)st.gathers);
  for (int t = 0; t < GW_THREADS; t++)
    for (int i = 0; i < GW_WRITES; i++) {
      char k[32];
      snprintf(k, sizeof k, "w%d/%03d", t, i);
      ubuf v = UBUF_INIT;
      ustore_err e = {{0}};
      assert_int_equal(gw_store->vt->get(gw_store, k, strlen(k), &v, NULL, &e), UNICO_OK);
      ubuf_free(&v);
    }
  gw_store->vt->close(gw_store);

  /* 20 watches of 20 deferred writes, then close at once, 100 ms allowed */
  gw_store = open_store("gather-close", "wal=on&sync_delay_us=100000");
  static cwatch c[20];
  int pending = 0;
  for (int i = 0; i < 20; i++) {
    char k[16];
    snprintf(k, sizeof k, "c%02d", i);
    memset(&c[i], 0, sizeof c[i]);
    c[i].rc = -1;
    c[i].w.seq = deferred_put(gw_store, k);
    assert_true(c[i].w.seq > 0);
    c[i].w.cb = cwatch_cb;
    int p = ustore_watch_durable(gw_store, &c[i].w);
    assert_true(p == 0 || p == 1);
    if (p == 0) atomic_store(&c[i].calls, 1), c[i].rc = UNICO_OK, c[i].durable_then = c[i].w.seq;
    pending += p;
  }
  assert_true(pending > 0);
  gw_store->vt->close(gw_store); /* the syncer calls back every watch first */
  for (int i = 0; i < 20; i++) {
    assert_int_equal(atomic_load(&c[i].calls), 1);
    assert_int_equal(c[i].rc, UNICO_OK);
    assert_true(c[i].durable_then >= c[i].w.seq);
  }
}

/* ---- group commit ---- */

#define GC_THREADS 16
#define GC_ROUNDS 300

static ustore *gc_store;

typedef struct gc_arg {
  int t;
  int wins, losses, errors;
} gc_arg;

/* Every thread races for "race/i" and, in the same request, writes its own
 * "mine/t/i": only the winner's own key may exist afterwards. */
static void *gc_racer(void *p) {
  gc_arg *a = p;
  for (int i = 0; i < GC_ROUNDS; i++) {
    char rk[32], mk[32], tv[16];
    snprintf(rk, sizeof rk, "race/%04d", i);
    snprintf(mk, sizeof mk, "mine/%02d/%04d", a->t, i);
    snprintf(tv, sizeof tv, "t%02d", a->t);
    ustore_op ops[2] = {op(rk, USTORE_ABSENT, 0, USTORE_PUT, tv),
                        op(mk, USTORE_ABSENT, 0, USTORE_PUT, tv)};
    ustore_err e = {{0}};
    int rc = gc_store->vt->txn(gc_store, ops, 2, &e);
    if (rc == UNICO_OK) {
      a->wins++;
    } else if (rc == USTORE_NOT_APPLIED && ops[0].failed && !ops[1].failed &&
               ops[0].exists && ops[0].cur_version == 1 &&
               ops[0].cur.len == 3 && ops[0].cur.p[0] == 't') {
      a->losses++;
    } else {
      fprintf(stderr, "racer %d round %d: rc %d %s\n", a->t, i, rc, e.msg);
      a->errors++;
    }
    ubuf_free(&ops[0].cur);
    ubuf_free(&ops[1].cur);
  }
  return NULL;
}

static void group_commit_races(const char *sub, const char *query) {
  gc_store = open_store(sub, query); /* durable: sync=on */
  uint64_t all0 = ustore_lmdb_serial_ns();
  double t0 = tu_now_s();
  pthread_t th[GC_THREADS];
  gc_arg args[GC_THREADS];
  for (int t = 0; t < GC_THREADS; t++) {
    args[t] = (gc_arg){t, 0, 0, 0};
    assert_int_equal(pthread_create(&th[t], NULL, gc_racer, &args[t]), 0);
  }
  int wins = 0, losses = 0;
  for (int t = 0; t < GC_THREADS; t++) {
    pthread_join(th[t], NULL);
    assert_int_equal(args[t].errors, 0);
    wins += args[t].wins;
    losses += args[t].losses;
  }
  uint64_t wall_ns = (uint64_t)((tu_now_s() - t0) * 1e9) + 1000;
  assert_int_equal(wins, GC_ROUNDS);
  assert_int_equal(losses, GC_ROUNDS * (GC_THREADS - 1));
  /* Each race key names its winner, whose own key exists; no loser's own
   * key was written (its request was aborted alone, inside a batch). */
  ustore_err e = {{0}};
  ubuf v = UBUF_INIT;
  for (int i = 0; i < GC_ROUNDS; i++) {
    char rk[32];
    snprintf(rk, sizeof rk, "race/%04d", i);
    assert_int_equal(gc_store->vt->get(gc_store, rk, strlen(rk), &v, NULL, &e),
                     UNICO_OK);
    int winner = atoi((char *)v.p + 1);
    for (int t = 0; t < GC_THREADS; t++) {
      char mk[32];
      snprintf(mk, sizeof mk, "mine/%02d/%04d", t, i);
      int rc = gc_store->vt->get(gc_store, mk, strlen(mk), NULL, NULL, &e);
      assert_int_equal(rc, t == winner ? UNICO_OK : UNICO_ENOTFOUND);
    }
  }
  ubuf_free(&v);
  /* Requests were batched: fewer write transactions than requests. */
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(gc_store, &st);
  fprintf(stderr, "group commit: %llu requests in %llu batches, %llu syncs\n",
          (unsigned long long)st.requests, (unsigned long long)st.batches,
          (unsigned long long)st.syncs);
  assert_int_equal(st.requests, (uint64_t)GC_ROUNDS * GC_THREADS);
  assert_true(st.batches < st.requests);
  assert_true(st.syncs <= st.batches);
  /* The serial part (unico-bench's serial_us_per_op): one leader at a
   * time, so its sum fits in the run's wall time; every batch spent some
   * in it (a commit or a log append), and the process-wide sum has it. */
  fprintf(stderr, "serial part: %.1f ms of %.1f ms, %.2f us per request\n",
          (double)st.serial_ns / 1e6, (double)wall_ns / 1e6,
          (double)st.serial_ns / 1e3 / (double)st.requests);
  assert_true(st.serial_ns >= st.batches * 500);
  assert_true(st.serial_ns <= wall_ns);
  assert_true(ustore_lmdb_serial_ns() - all0 >= st.serial_ns);
  gc_store->vt->close(gc_store);
}

static void test_group_commit_races(void **state) {
  (void)state;
  group_commit_races("gc", NULL);
}

static void test_group_commit_races_log(void **state) {
  (void)state;
  /* log mode, with a table small enough to freeze and checkpoint often */
  group_commit_races("gclog", "wal=on&wal_size=64KiB");
}

#define FULL_THREADS 8

typedef struct full_arg {
  int t, ok, full, other;
} full_arg;

/* Two 1.5 KB values per request until the capped map is full. */
static void *gc_filler(void *p) {
  full_arg *a = p;
  char big[1500];
  memset(big, 'a' + a->t, sizeof big - 1);
  big[sizeof big - 1] = 0;
  for (int i = 0; i < 100000 && !a->full; i++) {
    char k1[32], k2[32];
    snprintf(k1, sizeof k1, "a/%d/%06d", a->t, i);
    snprintf(k2, sizeof k2, "b/%d/%06d", a->t, i);
    ustore_op ops[2] = {op(k1, USTORE_ABSENT, 0, USTORE_PUT, big),
                        op(k2, USTORE_ABSENT, 0, USTORE_PUT, big)};
    ustore_err e = {{0}};
    int rc = gc_store->vt->txn(gc_store, ops, 2, &e);
    if (rc == UNICO_OK) a->ok++;
    else if (rc == UNICO_EFULL) a->full = 1;
    else a->other++;
  }
  return NULL;
}

static void test_group_commit_full(void **state) {
  (void)state;
  /* The map fills up in the middle of batches: each request is written
   * whole or not at all, and every thread gets a clear "full". */
  gc_store = open_store("gcfull", "map_size=1MiB&max_map_size=4MiB&sync=off");
  pthread_t th[FULL_THREADS];
  full_arg args[FULL_THREADS];
  for (int t = 0; t < FULL_THREADS; t++) {
    args[t] = (full_arg){t, 0, 0, 0};
    assert_int_equal(pthread_create(&th[t], NULL, gc_filler, &args[t]), 0);
  }
  for (int t = 0; t < FULL_THREADS; t++) pthread_join(th[t], NULL);
  ustore_err e = {{0}};
  int total = 0;
  for (int t = 0; t < FULL_THREADS; t++) {
    assert_int_equal(args[t].other, 0);
    assert_int_equal(args[t].full, 1);
    total += args[t].ok;
    /* acknowledged pairs exist whole; the refused one left nothing */
    for (int i = 0; i <= args[t].ok; i++) {
      char k1[32], k2[32];
      snprintf(k1, sizeof k1, "a/%d/%06d", t, i);
      snprintf(k2, sizeof k2, "b/%d/%06d", t, i);
      int want = i < args[t].ok ? UNICO_OK : UNICO_ENOTFOUND;
      assert_int_equal(gc_store->vt->get(gc_store, k1, strlen(k1), NULL, NULL, &e), want);
      assert_int_equal(gc_store->vt->get(gc_store, k2, strlen(k2), NULL, NULL, &e), want);
    }
  }
  assert_true(total > 100); /* the map grew past 1 MiB before filling */
  gc_store->vt->close(gc_store);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_growth_and_full),
      cmocka_unit_test(test_full_deletes),
      cmocka_unit_test(test_full_shrinks),
      cmocka_unit_test(test_max_map_size_alone),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_shared_env),
      cmocka_unit_test(test_reopen_other_options),
      cmocka_unit_test(test_gather_goal),
      cmocka_unit_test(test_gather_lone_writer),
      cmocka_unit_test(test_gather_many),
      cmocka_unit_test(test_deferred),
      cmocka_unit_test(test_group_commit_races),
      cmocka_unit_test(test_group_commit_races_log),
      cmocka_unit_test(test_group_commit_full),
  };
  return ucm_done(ucm_run_group("tests", tests, setup, teardown));
}
