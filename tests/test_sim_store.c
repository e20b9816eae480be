/* test_sim_store.c - what is the simulated store's own (its conditions,
 * versions, scans and missing transactions are tests/store_conformance.c's
 * cases, run on it as store_conformance_sim): the handle and its write
 * counter, usim_scan; the scheduler runs one client at a time, replays a
 * seed exactly, and injects each fault as configured; the virtual clock
 * (sleeps, jumps, the clock outside runs) and the observer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/sim/sim.h"
#include "store/store.h"
#include "store_ops.h"
#include "thread_check.h"
#include "testutil.h"
#include "unico.h"
#include "util/err.h"

#define BASE_MS INT64_C(1700000000000)

static ustore *open_sim(const char *name) {
  char url[128];
  snprintf(url, sizeof url, "sim:%s", name);
  ustore *st = NULL;
  ustore_err e = {{0}};
  int rc = ustore_open(&st, url, &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", url, rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  return st;
}

static usim *new_sim(const char *name, uint64_t seed, const usim_faults *f) {
  usim *s = NULL;
  assert_int_equal(usim_new(&s, name, seed, f), UNICO_OK);
  return s;
}

static int put(ustore *st, const char *k, const char *v) {
  ustore_op o = op(k, USTORE_ANY, 0, USTORE_PUT, v);
  int rc = st->vt->cas(st, &o, NULL);
  ubuf_free(&o.cur);
  return rc;
}

/* ------------------------------------------------------------------ */

/* The simulated store's own side of the interface (its conditions,
 * versions, scans and missing transactions are tests/store_conformance.c's
 * cases): what the handle reports, the write counter (only changes count),
 * cas_many outside runs, handles and names. */
static void test_handle(void **state) {
  (void)state;
  usim *s = new_sim("cas", 1, NULL);
  ustore *st = open_sim("cas");
  ustore_err e = {{0}};
  ubuf v = UBUF_INIT;
  uint64_t ver = 0;
  usim_stats stats;
  assert_string_equal(st->vt->name, "sim");
  /* no transactions, no round trips; a seeded schedule */
  assert_int_equal(st->vt->caps, USTORE_CAP_DETERMINISTIC);
  assert_int_equal(st->vt->max_key, 1024);
  /* writes count changes only: not refusals, checks, deleting nothing */
  ustore_op o = op("k", USTORE_ABSENT, 0, USTORE_PUT, "one");
  assert_int_equal(st->vt->cas(st, &o, &e), UNICO_OK);
  o = op("k", USTORE_ABSENT, 0, USTORE_PUT, "two");
  assert_int_equal(st->vt->cas(st, &o, &e), USTORE_NOT_APPLIED);
  ubuf_free(&o.cur);
  o = op("k", USTORE_PRESENT, 0, USTORE_CHECK, NULL);
  assert_int_equal(st->vt->cas(st, &o, &e), UNICO_OK);
  o = op("nokey", USTORE_ANY, 0, USTORE_DEL, NULL);
  assert_int_equal(st->vt->cas(st, &o, &e), UNICO_OK);
  o = op("k", USTORE_VERSION, 1, USTORE_PUT, "two");
  assert_int_equal(st->vt->cas(st, &o, &e), UNICO_OK);
  usim_stats_get(s, &stats);
  assert_int_equal(stats.writes, 2);
  /* a key too long: the message says how long */
  char big[1025];
  memset(big, 'b', sizeof big);
  ustore_op ob = ustore_op_make(big, 1025, USTORE_ABSENT, 0, USTORE_PUT, "v", 1);
  assert_int_equal(st->vt->cas(st, &ob, &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "1025"));
  ob = ustore_op_make("", 0, USTORE_ANY, 0, USTORE_PUT, "v", 1);
  assert_int_equal(st->vt->cas(st, &ob, &e), UNICO_EINVAL);
  /* cas_many outside runs: in order, each its own answer */
  ustore_op many[3] = {op("m1", USTORE_ABSENT, 0, USTORE_PUT, "a"),
                       op("k", USTORE_ABSENT, 0, USTORE_PUT, "b"),
                       op("m1", USTORE_VERSION, 1, USTORE_PUT, "c")};
  int rcs[3];
  ustore_err errs[3];
  assert_int_equal(ustore_cas_many(st, many, 3, rcs, errs), UNICO_OK);
  assert_int_equal(rcs[0], UNICO_OK);
  assert_int_equal(rcs[1], USTORE_NOT_APPLIED);
  assert_int_equal(rcs[2], UNICO_OK);
  assert_int_equal(usim_get(s, "m1", 2, &v, &ver), UNICO_OK);
  assert_int_equal(ver, 2);
  assert_memory_equal(v.p, "c", 1);
  for (int i = 0; i < 3; i++) ubuf_free(&many[i].cur);
  /* a second handle sees the same data; names are checked */
  ustore *st2 = open_sim("cas");
  assert_int_equal(st2->vt->get(st2, "m1", 2, NULL, &ver, &e), UNICO_OK);
  st2->vt->close(st2);
  usim *dup = NULL;
  assert_int_not_equal(usim_new(&dup, "cas", 2, NULL), UNICO_OK);
  assert_null(dup);
  ustore *none = NULL;
  assert_int_equal(ustore_open(&none, "sim:nosuch", &e), UNICO_EUNAVAILABLE);
  assert_null(none);
  assert_non_null(strstr(e.msg, "nosuch"));
  assert_int_equal(ustore_open(&none, "sim:cas?opt=1", &e), UNICO_EINVAL);
  ubuf_free(&v);
  st->vt->close(st);
  usim_free(s);
  /* freed: the name is gone */
  assert_int_equal(ustore_open(&none, "sim:cas", &e), UNICO_EUNAVAILABLE);
}

/* ------------------------------------------------------------------ */

typedef struct seen {
  int n;
  char keys[16][8];
  usim *s;      /* when set, each callback also reads its key directly */
  int lookups;  /* ... and counts those that worked */
} seen;

static int collect(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl, uint64_t ver) {
  (void)v, (void)vl, (void)ver;
  seen *s = ctx;
  if (s->n < 16) {
    snprintf(s->keys[s->n], sizeof s->keys[0], "%.*s", (int)kl, (const char *)k);
    s->n++;
  }
  if (s->s && usim_get(s->s, k, kl, NULL, NULL) == UNICO_OK) s->lookups++;
  return 0;
}

/* usim_scan, whose callback may read the sim directly (scans through the
 * handle are tests/store_conformance.c's). */
static void test_usim_scan(void **state) {
  (void)state;
  usim *s = new_sim("scan", 1, NULL);
  ustore *st = open_sim("scan");
  const char *keys[] = {"p2", "a1", "p1", "p3", "q1", "p", "p\xff", "o"};
  for (int i = 0; i < 8; i++) assert_int_equal(put(st, keys[i], "v"), UNICO_OK);
  seen got = {0};
  got.s = s;
  assert_int_equal(usim_scan(s, "p", 1, collect, &got), 0);
  assert_int_equal(got.n, 5);
  assert_string_equal(got.keys[0], "p");
  assert_string_equal(got.keys[4], "p\xff");
  assert_int_equal(got.lookups, 5);
  st->vt->close(st);
  usim_free(s);
}

/* ------------------------------------------------------------------ */
/* a workload: clients increment shared counters by read-modify-write */

#define NCOUNTERS 3

typedef struct work {
  ustore *st;
  int rounds;
  atomic_int running;    /* clients between two calls: never above 1 */
  atomic_int max_running;
  int done[16];          /* increments each client saw acknowledged */
} work;

/* Between two store calls: this client is the only one running. */
static void between_begin(work *w) {
  int r = atomic_fetch_add(&w->running, 1) + 1;
  int m = atomic_load(&w->max_running);
  while (r > m && !atomic_compare_exchange_weak(&w->max_running, &m, r)) {
  }
  tu_sleep_us(50); /* give a second runner every chance to show up */
}

static void between_end(work *w) { atomic_fetch_sub(&w->running, 1); }

static void counters(void *ctx, int client) {
  work *w = ctx;
  ustore *st = w->st;
  uint64_t r = (uint64_t)client * 7919 + 1;
  TCHECK(usim_client() == client);
  between_begin(w);
  for (int i = 0; i < w->rounds && !usim_crashed(); i++) {
    r = r * 6364136223846793005u + 1442695040888963407u;
    char key[8], val[32];
    snprintf(key, sizeof key, "c%d", (int)((r >> 33) % NCOUNTERS));
    for (int tries = 0; tries < 100 && !usim_crashed(); tries++) {
      ubuf cur = UBUF_INIT;
      uint64_t ver = 0;
      long n = 0;
      between_end(w);
      int rc = st->vt->get(st, key, 2, &cur, &ver, NULL);
      between_begin(w);
      if (rc == UNICO_OK) n = strtol((const char *)cur.p, NULL, 10);
      ubuf_free(&cur);
      if (rc != UNICO_OK && rc != UNICO_ENOTFOUND) continue;
      snprintf(val, sizeof val, "%ld", n + 1);
      ustore_op o = op(key, rc == UNICO_OK ? USTORE_VERSION : USTORE_ABSENT,
                       ver, USTORE_PUT, val);
      between_end(w);
      if ((r >> 40) % 4 == 0) { /* now and then through cas_many */
        ustore_op two[2] = {o, op("log", USTORE_ANY, 0, USTORE_PUT, key)};
        int rcs[2];
        ustore_cas_many(st, two, 2, rcs, NULL);
        rc = rcs[0];
        ubuf_free(&two[0].cur);
        ubuf_free(&two[1].cur);
      } else {
        rc = st->vt->cas(st, &o, NULL);
      }
      if ((r >> 50) % 8 == 0) ustore_sleep(st, (int64_t)((r >> 20) % 50) + 1);
      between_begin(w);
      ubuf_free(&o.cur);
      if (rc == UNICO_OK) w->done[client]++;
      if (rc != USTORE_NOT_APPLIED && rc != UNICO_EUNAVAILABLE) break;
    }
  }
  between_end(w);
}

typedef struct dump {
  char text[512];
} dump;

static int dump_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl, uint64_t ver) {
  dump *d = ctx;
  size_t at = strlen(d->text);
  snprintf(d->text + at, sizeof d->text - at, "%.*s=%.*s@%llu;", (int)kl,
           (const char *)k, (int)vl, (const char *)v, (unsigned long long)ver);
  return 0;
}

typedef struct run_result {
  uint64_t trace;
  dump state;
  usim_stats stats;
  int max_running;
  int64_t clock;
} run_result;

static run_result run_counters(const char *name, uint64_t seed,
                               const usim_faults *f, int clients, int rounds) {
  usim *s = new_sim(name, seed, f);
  work w;
  memset(&w, 0, sizeof w);
  w.st = open_sim(name);
  w.rounds = rounds;
  assert_int_equal(usim_run(s, clients, counters, &w), 0);
  run_result res;
  memset(&res, 0, sizeof res);
  res.trace = usim_trace(s);
  usim_scan(s, "", 0, dump_cb, &res.state);
  usim_stats_get(s, &res.stats);
  res.max_running = atomic_load(&w.max_running);
  res.clock = usim_now(s);
  w.st->vt->close(w.st);
  usim_free(s);
  return res;
}

static const usim_faults all_faults = {
    .unknown_pm = 40, .fail_pm = 40, .crash_pm = 2, .pause_pm = 40,
    .pause_ms = 30, .reorder = 1, .step_ms = 3};

static void test_determinism(void **state) {
  (void)state;
  run_result a = run_counters("det-a", 42, &all_faults, 5, 50);
  run_result b = run_counters("det-b", 42, &all_faults, 5, 50);
  run_result c = run_counters("det-c", 43, &all_faults, 5, 50);
  assert_int_equal(a.trace, b.trace);
  assert_string_equal(a.state.text, b.state.text);
  assert_memory_equal(&a.stats, &b.stats, sizeof a.stats);
  assert_int_not_equal(a.trace, c.trace);
  /* the faults really were on, and the run did real work */
  assert_true(a.stats.unknown > 0 && a.stats.failed > 0 && a.stats.pauses > 0);
  assert_true(a.stats.reordered > 0);
  assert_true(a.stats.writes > 100);
  assert_true(a.stats.steps >= a.stats.calls);
  assert_non_null(strstr(a.state.text, "c0="));
}

static long sum_counters(const char *text) {
  long sum = 0;
  for (int i = 0; i < NCOUNTERS; i++) {
    char pat[8];
    snprintf(pat, sizeof pat, "c%d=", i);
    const char *p = strstr(text, pat);
    if (p) sum += strtol(p + strlen(pat), NULL, 10);
  }
  return sum;
}

static void test_mutual_exclusion(void **state) {
  (void)state;
  /* without faults, version-checked increments lose nothing */
  run_result r = run_counters("mutex", 7, NULL, 6, 40);
  assert_int_equal(r.max_running, 1);
  assert_int_equal(sum_counters(r.state.text), 6 * 40);
  assert_int_equal(atomic_load(&thread_failures), 0);
  /* and with every fault on, still one client at a time */
  r = run_counters("mutex-f", 7, &all_faults, 6, 40);
  assert_int_equal(r.max_running, 1);
  assert_int_equal(atomic_load(&thread_failures), 0);
}

/* ------------------------------------------------------------------ */
/* faults */

typedef struct fault_ctx {
  ustore *st;
  int puts;               /* writes per client */
  int rc_put[8][600];
  int rc_get[8];
  int crashed_after[8];
  int rc_after[8];
  int64_t sleep_delta[8];
  atomic_int observed;
} fault_ctx;

static void fault_client(void *ctx, int client) {
  fault_ctx *f = ctx;
  ustore *st = f->st;
  for (int i = 0; i < f->puts; i++) {
    char key[32];
    snprintf(key, sizeof key, "f%d-%d", client, i);
    ustore_op o = op(key, USTORE_ABSENT, 0, USTORE_PUT, "v");
    f->rc_put[client][i] = st->vt->cas(st, &o, NULL);
    ubuf_free(&o.cur);
  }
  ustore_err e = {{0}};
  f->rc_get[client] = st->vt->get(st, "f0-0", 4, NULL, NULL, &e);
  f->crashed_after[client] = usim_crashed();
  /* a crashed client's calls fail at once and its sleeps return at once */
  ustore_op o = op("late", USTORE_ANY, 0, USTORE_PUT, "v");
  f->rc_after[client] = st->vt->cas(st, &o, NULL);
  int64_t t0 = ustore_now(st);
  ustore_sleep(st, 100);
  f->sleep_delta[client] = ustore_now(st) - t0;
}

static void count_obs(void *ctx, usim *s, int client) {
  (void)s;
  fault_ctx *f = ctx;
  TCHECK(client >= 0);
  atomic_fetch_add(&f->observed, 1);
}

static int count_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  (void)k, (void)kl, (void)v, (void)vl, (void)ver;
  ++*(int *)ctx;
  return 0;
}

static int nkeys(usim *s, const char *prefix) {
  int n = 0;
  usim_scan(s, prefix, strlen(prefix), count_cb, &n);
  return n;
}

static fault_ctx *run_faults(const char *name, usim_faults faults, int clients,
                             int puts, usim **out) {
  usim *s = new_sim(name, 99, &faults);
  fault_ctx *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->st = open_sim(name);
  f->puts = puts;
  usim_observe(s, count_obs, f);
  assert_int_equal(usim_run(s, clients, fault_client, f), 0);
  f->st->vt->close(f->st);
  *out = s;
  return f;
}

static void test_fault_unknown(void **state) {
  (void)state;
  usim *s;
  usim_faults uf = {.unknown_pm = 1000};
  fault_ctx *f = run_faults("unknown", uf, 3, 5, &s);
  for (int c = 0; c < 3; c++) {
    for (int i = 0; i < 5; i++) assert_int_equal(f->rc_put[c][i], UNICO_EUNKNOWN);
    assert_int_equal(f->rc_get[c], UNICO_EUNAVAILABLE); /* reads apply nothing */
  }
  /* every write applied, and the observer saw each one */
  assert_int_equal(nkeys(s, "f"), 15);
  assert_int_equal(nkeys(s, "late"), 1);
  assert_int_equal(atomic_load(&f->observed), 15 + 3);
  usim_stats st;
  usim_stats_get(s, &st);
  assert_int_equal(st.unknown, st.calls);
  assert_int_equal(st.calls, 3 * 7);
  assert_int_equal(st.writes, 15 + 3);
  free(f);
  usim_free(s);
}

static void test_fault_fail(void **state) {
  (void)state;
  usim *s;
  usim_faults ff = {.fail_pm = 1000};
  fault_ctx *f = run_faults("fail", ff, 3, 5, &s);
  for (int c = 0; c < 3; c++) {
    for (int i = 0; i < 5; i++)
      assert_int_equal(f->rc_put[c][i], UNICO_EUNAVAILABLE);
    assert_int_equal(f->rc_get[c], UNICO_EUNAVAILABLE);
  }
  assert_int_equal(nkeys(s, ""), 0);
  assert_int_equal(atomic_load(&f->observed), 0);
  usim_stats st;
  usim_stats_get(s, &st);
  assert_int_equal(st.failed, 3 * 7);
  assert_int_equal(st.writes, 0);
  /* faults are for clients in runs only */
  usim_observe(s, NULL, NULL);
  ustore *h = open_sim("fail");
  assert_int_equal(put(h, "outside", "v"), UNICO_OK);
  h->vt->close(h);
  free(f);
  usim_free(s);
}

static void test_fault_crash(void **state) {
  (void)state;
  usim *s;
  usim_faults cf = {.crash_pm = 1000};
  fault_ctx *f = run_faults("crash", cf, 8, 1, &s);
  int applied = 0;
  for (int c = 0; c < 8; c++) {
    assert_int_not_equal(f->rc_put[c][0], UNICO_OK); /* it died there */
    assert_int_equal(f->rc_get[c], UNICO_EUNAVAILABLE);
    assert_int_equal(f->crashed_after[c], 1);
    assert_int_equal(f->rc_after[c], UNICO_EUNAVAILABLE);
    assert_int_equal(f->sleep_delta[c], 0);
    char key[16];
    snprintf(key, sizeof key, "f%d-0", c);
    applied += usim_get(s, key, strlen(key), NULL, NULL) == UNICO_OK;
  }
  /* each crashing write applied or not, at random */
  assert_true(applied > 0 && applied < 8);
  assert_int_equal(atomic_load(&f->observed), applied);
  assert_int_equal(nkeys(s, "late"), 0);
  usim_stats st;
  usim_stats_get(s, &st);
  assert_int_equal(st.crashes, 8);
  assert_int_equal(st.calls, 8); /* the refused calls never reached it */
  assert_int_equal(usim_crashed(), 0);
  assert_int_equal(usim_client(), -1);
  free(f);
  usim_free(s);
}

static void test_fault_rates(void **state) {
  (void)state;
  usim *s;
  usim_faults rf = {.unknown_pm = 200, .fail_pm = 100};
  fault_ctx *f = run_faults("rates", rf, 4, 500, &s);
  int unknown = 0, failed = 0, ok = 0;
  for (int c = 0; c < 4; c++)
    for (int i = 0; i < 500; i++) {
      unknown += f->rc_put[c][i] == UNICO_EUNKNOWN;
      failed += f->rc_put[c][i] == UNICO_EUNAVAILABLE;
      ok += f->rc_put[c][i] == UNICO_OK;
    }
  /* 2000 writes: ~400 unknown, ~200 failed */
  assert_true(unknown > 300 && unknown < 500);
  assert_true(failed > 130 && failed < 270);
  assert_int_equal(unknown + failed + ok, 2000);
  assert_int_equal(nkeys(s, "f"), unknown + ok);
  free(f);
  usim_free(s);
}

/* pause: client 0 makes 30 calls, client 1 many; a paused call of
 * client 0 takes pause_ms of virtual time while client 1 goes on. */
typedef struct pause_ctx {
  ustore *st;
  int other_calls;    /* calls client 1 completed */
  int saw_progress;   /* a paused call of client 0 saw client 1 progress */
  int paused_calls;   /* calls of client 0 that took >= pause_ms */
} pause_ctx;

static void pause_client(void *ctx, int client) {
  pause_ctx *p = ctx;
  ustore *st = p->st;
  for (int i = 0; i < (client == 0 ? 30 : 200); i++) {
    int64_t t0 = ustore_now(st);
    int before = p->other_calls;
    st->vt->get(st, "x", 1, NULL, NULL, NULL);
    if (client == 1) {
      p->other_calls++;
    } else if (ustore_now(st) - t0 >= 1000) {
      p->paused_calls++;
      if (p->other_calls > before) p->saw_progress = 1;
    }
  }
}

static void test_fault_pause(void **state) {
  (void)state;
  usim_faults pf = {.pause_pm = 300, .pause_ms = 1000, .step_ms = 1};
  usim *s = new_sim("pause", 5, &pf);
  pause_ctx p = {open_sim("pause"), 0, 0, 0};
  assert_int_equal(usim_run(s, 2, pause_client, &p), 0);
  usim_stats st;
  usim_stats_get(s, &st);
  assert_true(st.pauses > 0);
  assert_true(p.paused_calls > 0);
  assert_int_equal(p.saw_progress, 1);
  /* without pauses, a call costs at most step_ms per scheduling decision */
  usim_faults none = {.step_ms = 1};
  usim_set_faults(s, &none);
  p.paused_calls = 0;
  assert_int_equal(usim_run(s, 2, pause_client, &p), 0);
  assert_int_equal(p.paused_calls, 0);
  p.st->vt->close(p.st);
  usim_free(s);
}

/* reorder: the observer records which key each applied write touched */
typedef struct order_ctx {
  ustore *st;
  int n;
  char keys[64][8];
  int clients[64];
  int rcs[2][6];
} order_ctx;

static int last_key(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  (void)k, (void)kl, (void)ver;
  snprintf(ctx, 8, "%.*s", (int)vl, (const char *)v);
  return 0;
}

static void order_obs(void *ctx, usim *s, int client) {
  order_ctx *o = ctx;
  if (o->n >= 64) return;
  /* the write put its own key as the value of "last" ... */
  usim_scan(s, "last", 4, last_key, o->keys[o->n]);
  o->clients[o->n++] = client;
}

static void order_client(void *ctx, int client) {
  order_ctx *o = ctx;
  ustore_op ops[3];
  char keys[3][8];
  for (int i = 0; i < 3; i++) {
    snprintf(keys[i], sizeof keys[i], "%c%d", 'a' + client, i);
    ops[i] = op("last", USTORE_ANY, 0, USTORE_PUT, keys[i]);
  }
  ustore_cas_many(o->st, ops, 3, o->rcs[client], NULL);
  for (int i = 0; i < 3; i++) ubuf_free(&ops[i].cur);
}

static void run_order(const char *name, uint64_t seed, int reorder,
                      int clients, order_ctx *o) {
  usim_faults f = {.reorder = reorder};
  usim *s = new_sim(name, seed, &f);
  memset(o, 0, sizeof *o);
  o->st = open_sim(name);
  usim_observe(s, order_obs, o);
  assert_int_equal(usim_run(s, clients, order_client, o), 0);
  o->st->vt->close(o->st);
  usim_free(s);
}

static int in_index_order(const order_ctx *o, int client) {
  int next = 0;
  for (int i = 0; i < o->n; i++) {
    if (o->clients[i] != client) continue;
    if (o->keys[i][1] - '0' != next) return 0;
    next++;
  }
  return 1;
}

static void test_fault_reorder(void **state) {
  (void)state;
  order_ctx o;
  /* without reorder: index order, whatever the seed */
  for (uint64_t seed = 1; seed <= 5; seed++) {
    run_order("order", seed, 0, 1, &o);
    assert_int_equal(o.n, 3);
    assert_true(in_index_order(&o, 0));
  }
  /* with it, some seed applies them out of order */
  int shuffled = 0;
  for (uint64_t seed = 1; seed <= 10; seed++) {
    run_order("order", seed, 1, 1, &o);
    assert_int_equal(o.n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(o.rcs[0][i], UNICO_OK);
    shuffled += !in_index_order(&o, 0);
  }
  assert_true(shuffled > 0);
  /* ops of one cas_many are separate scheduling points: another client's
   * writes land between them for some seed */
  int interleaved = 0;
  for (uint64_t seed = 1; seed <= 10; seed++) {
    run_order("order2", seed, 0, 2, &o);
    assert_int_equal(o.n, 6);
    int switches = 0;
    for (int i = 1; i < o.n; i++) switches += o.clients[i] != o.clients[i - 1];
    interleaved += switches > 1;
    assert_true(in_index_order(&o, 0) && in_index_order(&o, 1));
  }
  assert_true(interleaved > 0);
}

/* ------------------------------------------------------------------ */
/* the clock */

typedef struct clock_ctx {
  ustore *st;
  int64_t start[4], woke[4];
  int wake_order[4];
  int nwoke;
} clock_ctx;

/* A sleeper's nap, virtual: long enough that a real one could not pass
 * for virtual on any machine. */
#define NAP_MS 10000

static void sleeper(void *ctx, int client) {
  clock_ctx *c = ctx;
  c->start[client] = ustore_now(c->st);
  ustore_sleep(c->st, NAP_MS * (4 - client)); /* client 3 wakes first */
  c->woke[client] = ustore_now(c->st);
  c->wake_order[c->nwoke++] = client;
}

static void test_clock(void **state) {
  (void)state;
  usim_faults f = {.step_ms = 2};
  int64_t before = unow_ms();
  usim *s = new_sim("clock", 3, &f);
  ustore *st = open_sim("clock");
  /* outside runs: the wall clock moves it, so do virtual advances; it
   * started at BASE_MS, no earlier than `before` */
  int64_t t0 = usim_now(s);
  assert_true(t0 >= BASE_MS && t0 <= BASE_MS + (unow_ms() - before));
  tu_sleep_us(30 * 1000);
  int64_t t1 = usim_now(s);
  assert_true(t1 >= t0 + 25);
  usim_advance(s, 5000);
  int64_t t2 = ustore_now(st);
  assert_true(t2 >= t1 + 5000);
  int64_t w0 = unow_ms();
  ustore_sleep(st, 60 * 1000); /* a virtual sleep: returns at once */
  assert_true(unow_ms() - w0 < 60 * 1000); /* (a real one takes 60 s) */
  int64_t t3 = usim_now(s);
  assert_true(t3 >= t2 + 60000);
  /* in a run: everyone sleeps, the clock jumps to each wake time */
  clock_ctx c;
  memset(&c, 0, sizeof c);
  c.st = st;
  w0 = unow_ms();
  assert_int_equal(usim_run(s, 4, sleeper, &c), 0);
  /* 4 naps of virtual time, no real wait (which would take 4 naps) */
  assert_true(unow_ms() - w0 < 4 * NAP_MS);
  int64_t run_start = BASE_MS + 65000;
  for (int i = 0; i < 4; i++) {
    /* the run's clock is virtual only: from the virtual time so far */
    assert_true(c.start[i] >= run_start && c.start[i] < run_start + 100);
    assert_true(c.woke[i] >= c.start[i] + NAP_MS * (4 - i));
    assert_true(c.woke[i] < c.start[i] + NAP_MS * (4 - i) + 100);
    assert_int_equal(c.wake_order[i], 3 - i);
  }
  /* after the run the outside clock is past everything the run reached */
  int64_t t4 = usim_now(s);
  assert_true(t4 >= c.woke[0]);
  assert_true(t4 >= t3 + 4 * NAP_MS);
  st->vt->close(st);
  usim_free(s);
}

/* ------------------------------------------------------------------ */
/* the observer */

typedef struct obs_ctx {
  ustore *st;
  int n;
  int client[64];
  int keys_seen[64]; /* keys usim_scan saw from inside the observer */
} obs_ctx;

static void record_obs(void *ctx, usim *s, int client) {
  obs_ctx *o = ctx;
  if (o->n >= 64) return;
  int n = 0;
  usim_scan(s, "", 0, count_cb, &n);
  o->keys_seen[o->n] = n;
  o->client[o->n++] = client;
}

static void obs_client(void *ctx, int client) {
  obs_ctx *o = ctx;
  ustore *st = o->st;
  for (int i = 0; i < 3; i++) {
    char key[16];
    snprintf(key, sizeof key, "o%d-%d", client, i);
    ustore_op w = op(key, USTORE_ABSENT, 0, USTORE_PUT, "v");
    TCHECK(st->vt->cas(st, &w, NULL) == UNICO_OK);
    ubuf_free(&w.cur);
  }
  /* not mutations: refused writes, checks, deleting nothing */
  char mine[16];
  snprintf(mine, sizeof mine, "o%d-0", client);
  ustore_op w = op(mine, USTORE_ABSENT, 0, USTORE_PUT, "v");
  TCHECK(st->vt->cas(st, &w, NULL) == USTORE_NOT_APPLIED);
  ubuf_free(&w.cur);
  w = op(mine, USTORE_PRESENT, 0, USTORE_CHECK, NULL);
  TCHECK(st->vt->cas(st, &w, NULL) == UNICO_OK);
  w = op("nothing", USTORE_ANY, 0, USTORE_DEL, NULL);
  TCHECK(st->vt->cas(st, &w, NULL) == UNICO_OK);
}

static void test_observer(void **state) {
  (void)state;
  usim *s = new_sim("obs", 11, NULL);
  obs_ctx o;
  memset(&o, 0, sizeof o);
  o.st = open_sim("obs");
  usim_observe(s, record_obs, &o);
  assert_int_equal(put(o.st, "outside", "v"), UNICO_OK);
  assert_int_equal(o.n, 1);
  assert_int_equal(o.client[0], -1);
  assert_int_equal(o.keys_seen[0], 1);
  assert_int_equal(usim_run(s, 3, obs_client, &o), 0);
  assert_int_equal(atomic_load(&thread_failures), 0);
  assert_int_equal(o.n, 1 + 9);
  int per[3] = {0};
  for (int i = 1; i < o.n; i++) {
    assert_true(o.client[i] >= 0 && o.client[i] < 3);
    per[o.client[i]]++;
    assert_int_equal(o.keys_seen[i], 1 + i); /* each saw its own write */
  }
  for (int c = 0; c < 3; c++) assert_int_equal(per[c], 3);
  /* a delete is a mutation too; an observer can be removed */
  ustore_op d = op("outside", USTORE_PRESENT, 0, USTORE_DEL, NULL);
  assert_int_equal(o.st->vt->cas(o.st, &d, NULL), UNICO_OK);
  assert_int_equal(o.n, 11);
  assert_int_equal(o.keys_seen[10], 9);
  usim_observe(s, NULL, NULL);
  assert_int_equal(put(o.st, "more", "v"), UNICO_OK);
  assert_int_equal(o.n, 11);
  o.st->vt->close(o.st);
  usim_free(s);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handle),
      cmocka_unit_test(test_usim_scan),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_mutual_exclusion),
      cmocka_unit_test(test_fault_unknown),
      cmocka_unit_test(test_fault_fail),
      cmocka_unit_test(test_fault_crash),
      cmocka_unit_test(test_fault_rates),
      cmocka_unit_test(test_fault_pause),
      cmocka_unit_test(test_fault_reorder),
      cmocka_unit_test(test_clock),
      cmocka_unit_test(test_observer),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
