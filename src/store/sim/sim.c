/* sim.c - the simulated store (see sim.h for the contract).
 *
 * Data. A sorted array of entries (key, value, version) searched by binary
 * search; keys compare as bytes, a prefix before its extensions. The
 * semantics of conditions and versions are LMDB's: a version is 1 when a key
 * is created (also when it is created again after a delete), +1 on every
 * PUT; DEL of an absent key is a no-op that succeeds; CHECK writes nothing.
 *
 * Scheduler. usim_run starts one thread per client, but the clients pass a
 * baton: s->turn names the only client allowed to run, and every other one
 * waits on its own condition variable. A client gives the baton back at
 * each scheduling point: before each store call (cas_many: before each of
 * its ops), when it sleeps, and when it returns. Clients start parked, so
 * the first pick is a scheduling point too. Each decision (pick_next):
 *
 *   1. advance the virtual clock by 0..step_ms (PRNG);
 *   2. wake the sleepers whose time came; if no client is runnable but
 *      some sleep, jump the clock to the earliest wake time;
 *   3. pick one runnable client uniformly (PRNG) and hand it the baton.
 *
 * The picked client then draws its faults for the call (pause, then one of
 * unknown / fail / crash) and runs on until its next scheduling point. Only
 * the baton holder touches the PRNG and the clock, so one seed gives one
 * interleaving; every decision is folded into s->trace.
 *
 * Faults. unknown, fail and crash share one draw of 0..999 (in that order,
 * so their sum should stay within 1000); pause has its own draw. A read
 * has nothing to apply: under unknown it fails with UNICO_EUNAVAILABLE. A
 * write the client crashes in returns UNICO_EUNKNOWN, whether it applied
 * or not (its later calls return UNICO_EUNAVAILABLE). After an unknown
 * outcome the op's outputs are cleared: the answer was lost.
 *
 * Locks. s->mu guards the scheduler (turn, client states, PRNG, clock,
 * trace, stats); s->data guards the map, the write count and the observer.
 * Neither is held while user code runs (scan callbacks see a copy, the
 * observer is called after s->data is released), so the observer and scan
 * callbacks may call usim_scan and usim_get.
 *
 * Clock. The virtual clock starts at SIM_BASE_MS (fixed, so runs replay
 * exactly) and moves only by virtual time: steps and sleeps in runs,
 * usim_advance and sleeps outside runs. Outside runs usim_now adds the wall
 * time elapsed since usim_new; inside a run it is the virtual clock alone
 * (so a run starts from the virtual clock, behind what the outside clock
 * read just before by the wall time elapsed). */
#include "store/sim/sim.h"
#include "store/options.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "unico_errors.h"
#include "util/clock.h"

#define SIM_BASE_MS INT64_C(1700000000000)
#define SIM_MAX_KEY 1024

enum { ST_PARKED, ST_SLEEPING, ST_RUNNING, ST_DONE };
enum { F_NONE, F_UNKNOWN, F_FAIL, F_CRASH_APPLIED, F_CRASH_LOST };

typedef struct entry {
  uint8_t *k, *v;
  size_t kl, vl;
  uint64_t ver;
} entry;

typedef struct sim_client {
  usim *s;
  int idx;
  int state;    /* ST_* (s->mu) */
  int crashed;  /* only its own thread reads or writes it */
  int64_t wake; /* ST_SLEEPING: the virtual time it wakes at */
  pthread_cond_t cv;
  pthread_t th;
} sim_client;

struct usim {
  usim *next; /* registry */
  char *name;
  int handles;
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  uint64_t rng, trace;
  usim_faults f;
  int txn; /* fixed at usim_new: handles have transactions */
  int rows; /* fixed at usim_new: handles say USTORE_CAP_ROWS */
  int64_t vclock, wall0;
  usim_stats st; /* all but writes */
  int running, aborting, n, ndone, turn;
  sim_client *cl;
  void (*fn)(void *ctx, int client);
  void *ctx;
  pthread_mutex_t data;
  entry *e;
  size_t ne, cap;
  uint64_t writes;
  usim_observer obs;
  void *obs_ctx;
};

typedef struct sim_handle {
  ustore base;
  usim *s;
  /* late_posts: the writes posted and not landed yet (keys and values
   * copied), applied once the handle's next call has been */
  pthread_mutex_t lmu;
  ustore_op *late;
  size_t nlate;
} sim_handle;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static usim *registry;
static _Thread_local sim_client *tl_client;

/* ------------------------------------------------------------------ */
/* PRNG and trace */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* splitmix64; with s->mu */
static uint64_t rnd(usim *s) {
  s->rng += UINT64_C(0x9e3779b97f4a7c15);
  return mix64(s->rng);
}

static void trace(usim *s, uint64_t what, uint64_t v) {
  s->trace = mix64(s->trace ^ mix64(what * UINT64_C(0x100000001b3) + v));
}

/* ------------------------------------------------------------------ */
/* the map (with s->data) */

static int keycmp(const void *a, size_t al, const void *b, size_t bl) {
  size_t m = al < bl ? al : bl;
  int c = m ? memcmp(a, b, m) : 0;
  if (c) return c;
  return al < bl ? -1 : al > bl;
}

/* The first entry whose key is >= key. */
static size_t lower_bound(const usim *s, const void *key, size_t kl) {
  size_t lo = 0, hi = s->ne;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (keycmp(s->e[mid].k, s->e[mid].kl, key, kl) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static entry *find(usim *s, const void *key, size_t kl, size_t *at) {
  *at = lower_bound(s, key, kl);
  entry *x = *at < s->ne ? &s->e[*at] : NULL;
  return x && keycmp(x->k, x->kl, key, kl) == 0 ? x : NULL;
}

static uint8_t *dup(const void *p, size_t n) {
  uint8_t *d = malloc(n ? n : 1);
  if (d && n) memcpy(d, p, n);
  return d;
}

static int map_put(usim *s, entry *x, size_t at, const ustore_op *op) {
  uint8_t *v = dup(op->val, op->vlen);
  if (!v) return UNICO_ENOMEM;
  if (x) {
    free(x->v);
    x->v = v;
    x->vl = op->vlen;
    x->ver++;
    return UNICO_OK;
  }
  uint8_t *k = dup(op->key, op->klen);
  if (!k || (s->ne == s->cap && s->cap > SIZE_MAX / 2 / sizeof *s->e)) {
    free(k), free(v);
    return UNICO_ENOMEM;
  }
  if (s->ne == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    entry *e = realloc(s->e, cap * sizeof *e);
    if (!e) {
      free(k), free(v);
      return UNICO_ENOMEM;
    }
    s->e = e;
    s->cap = cap;
  }
  memmove(&s->e[at + 1], &s->e[at], (s->ne - at) * sizeof *s->e);
  s->e[at] = (entry){k, v, op->klen, op->vlen,
                     op->create_version ? op->create_version : 1};
  s->ne++;
  return UNICO_OK;
}

static void map_del(usim *s, size_t at) {
  free(s->e[at].k);
  free(s->e[at].v);
  memmove(&s->e[at], &s->e[at + 1], (s->ne - at - 1) * sizeof *s->e);
  s->ne--;
}

/* Apply ops at once (one op: as LMDB does; several: a transaction), all
 * or nothing under one lock: every condition is judged first, and nothing
 * is written unless all held (each failed op carries the current value,
 * as store.h asks). Then the observer hears of it, once, if the state
 * changed. */
static int apply_all(usim *s, ustore_op *ops, size_t n, int client) {
  size_t at;
  int failed = 0, rc = UNICO_OK, changed = 0;
  pthread_mutex_lock(&s->data);
  for (size_t i = 0; i < n; i++) {
    ustore_op *op = &ops[i];
    entry *x = find(s, op->key, op->klen, &at);
    op->failed = 0;
    op->exists = x != NULL;
    op->cur_version = x ? x->ver : 0;
    int ok = op->expect == USTORE_ANY ||
             (op->expect == USTORE_ABSENT && !x) ||
             (op->expect == USTORE_PRESENT && x) ||
             (op->expect == USTORE_VERSION && x &&
              x->ver == op->expect_version);
    if (ok) continue;
    op->failed = failed = 1;
    ubuf_reset(&op->cur);
    if (x && x->vl) ubuf_put(&op->cur, x->v, x->vl);
    if (!ubuf_ok(&op->cur)) rc = UNICO_ENOMEM;
  }
  for (size_t i = 0; !failed && rc == UNICO_OK && i < n; i++) {
    ustore_op *op = &ops[i];
    entry *x = find(s, op->key, op->klen, &at);
    if (op->action == USTORE_PUT) {
      rc = map_put(s, x, at, op);
      changed |= rc == UNICO_OK;
    } else if (op->action == USTORE_DEL && x) {
      map_del(s, at);
      changed = 1;
    }
  }
  if (changed) s->writes++;
  usim_observer obs = s->obs;
  void *octx = s->obs_ctx;
  pthread_mutex_unlock(&s->data);
  if (changed && obs) obs(octx, s, client);
  if (rc == UNICO_OK && failed) rc = USTORE_NOT_APPLIED;
  return rc;
}

static int apply(usim *s, ustore_op *op, int client) {
  return apply_all(s, op, 1, client);
}

static int map_get(usim *s, const void *key, size_t kl, ubuf *val,
                   uint64_t *version) {
  size_t at;
  int rc = UNICO_OK;
  pthread_mutex_lock(&s->data);
  entry *x = find(s, key, kl, &at);
  if (!x) {
    rc = UNICO_ENOTFOUND;
  } else {
    if (version) *version = x->ver;
    if (val) {
      ubuf_reset(val);
      if (x->vl) ubuf_put(val, x->v, x->vl);
      if (!ubuf_ok(val)) rc = UNICO_ENOMEM;
    }
  }
  pthread_mutex_unlock(&s->data);
  return rc;
}

/* A scan copies what it will show, then calls cb with no lock held. */
typedef struct snap_item {
  size_t off, kl, vl;
  uint64_t ver;
} snap_item;

static int map_scan(usim *s, const void *prefix, size_t plen,
                    const void *after, size_t alen, ustore_scan_cb cb,
                    void *ctx) {
  ubuf blob = UBUF_INIT;
  snap_item *it = NULL;
  size_t n = 0;
  pthread_mutex_lock(&s->data);
  size_t i = lower_bound(s, prefix, plen), end;
  if (after) {
    size_t j = lower_bound(s, after, alen);
    if (j < s->ne && keycmp(s->e[j].k, s->e[j].kl, after, alen) == 0) j++;
    if (j > i) i = j;
  }
  for (end = i; end < s->ne; end++)
    if (s->e[end].kl < plen || (plen && memcmp(s->e[end].k, prefix, plen)))
      break;
  if (end > i) it = malloc((end - i) * sizeof *it);
  for (; it && i < end; i++, n++) {
    const entry *x = &s->e[i];
    it[n] = (snap_item){blob.len, x->kl, x->vl, x->ver};
    ubuf_put(&blob, x->k, x->kl);
    if (x->vl) ubuf_put(&blob, x->v, x->vl);
  }
  pthread_mutex_unlock(&s->data);
  int rc = (i < end && !it) || !ubuf_ok(&blob) ? UNICO_ENOMEM : 0;
  for (size_t j = 0; j < n && !rc; j++)
    rc = cb(ctx, blob.p + it[j].off, it[j].kl, blob.p + it[j].off + it[j].kl,
            it[j].vl, it[j].ver);
  free(it);
  ubuf_free(&blob);
  return rc;
}

/* ------------------------------------------------------------------ */
/* the scheduler (with s->mu) */

/* Hand the baton to a runnable client, or signal the end of the run. */
static void pick_next(usim *s) {
  int64_t step = s->f.step_ms > 0 ? s->f.step_ms : 1;
  s->vclock += (int64_t)(rnd(s) % (uint64_t)(step + 1));
  for (;;) {
    int parked = 0, sleeping = 0;
    int64_t earliest = INT64_MAX;
    for (int i = 0; i < s->n; i++) {
      sim_client *c = &s->cl[i];
      if (c->state == ST_SLEEPING && c->wake <= s->vclock) c->state = ST_PARKED;
      if (c->state == ST_PARKED) parked++;
      if (c->state == ST_SLEEPING) {
        sleeping++;
        if (c->wake < earliest) earliest = c->wake;
      }
    }
    if (parked) {
      int k = (int)(rnd(s) % (uint64_t)parked);
      for (int i = 0; i < s->n; i++) {
        if (s->cl[i].state != ST_PARKED || k--) continue;
        s->turn = i;
        s->st.steps++;
        trace(s, 1, (uint64_t)i);
        trace(s, 2, (uint64_t)s->vclock);
        pthread_cond_signal(&s->cl[i].cv);
        return;
      }
    }
    if (!sleeping) break;
    s->vclock = earliest; /* everyone sleeps: time flies */
  }
  s->turn = -1;
  pthread_cond_signal(&s->done_cv);
}

/* Give the baton back (the client becomes `state`) and wait for it. */
static void yield(usim *s, sim_client *c, int state, int64_t wake) {
  c->state = state;
  c->wake = wake;
  pick_next(s);
  while (s->turn != c->idx) pthread_cond_wait(&c->cv, &s->mu);
  c->state = ST_RUNNING;
}

/* The scheduling point before one store call of client c: yield, maybe
 * pause, then draw the call's fault (F_*). */
static int sched_call(usim *s, sim_client *c) {
  pthread_mutex_lock(&s->mu);
  s->st.calls++;
  yield(s, c, ST_PARKED, 0);
  int pause = rnd(s) % 1000 < s->f.pause_pm && s->f.pause_ms > 0;
  trace(s, 3, (uint64_t)pause);
  if (pause) {
    s->st.pauses++;
    yield(s, c, ST_SLEEPING, s->vclock + s->f.pause_ms);
  }
  uint64_t r = rnd(s) % 1000, u = s->f.unknown_pm;
  uint64_t fl = u + s->f.fail_pm, cr = fl + s->f.crash_pm;
  int f = F_NONE;
  if (r < u) {
    f = F_UNKNOWN;
    s->st.unknown++;
  } else if (r < fl) {
    f = F_FAIL;
    s->st.failed++;
  } else if (r < cr) {
    f = rnd(s) & 1 ? F_CRASH_APPLIED : F_CRASH_LOST;
    s->st.crashes++;
    c->crashed = 1;
  }
  trace(s, 4, (uint64_t)f);
  pthread_mutex_unlock(&s->mu);
  return f;
}

/* The calling thread's client in s, or NULL (outside runs, other sims). */
static sim_client *me(usim *s) {
  return tl_client && tl_client->s == s ? tl_client : NULL;
}

static void *client_main(void *arg) {
  sim_client *c = arg;
  usim *s = c->s;
  tl_client = c;
  pthread_mutex_lock(&s->mu);
  while (s->turn != c->idx && !s->aborting) pthread_cond_wait(&c->cv, &s->mu);
  int run = !s->aborting;
  c->state = ST_RUNNING;
  pthread_mutex_unlock(&s->mu);
  if (run) s->fn(s->ctx, c->idx);
  pthread_mutex_lock(&s->mu);
  c->state = ST_DONE;
  s->ndone++;
  if (run) pick_next(s);
  pthread_mutex_unlock(&s->mu);
  tl_client = NULL;
  return NULL;
}

int usim_run(usim *s, int n, void (*fn)(void *ctx, int client), void *ctx) {
  if (!s || n < 0 || !fn || tl_client) return -1;
  if (n == 0) return 0;
  sim_client *cl = calloc((size_t)n, sizeof *cl);
  if (!cl) return -1;
  pthread_mutex_lock(&s->mu);
  if (s->running) {
    pthread_mutex_unlock(&s->mu);
    free(cl);
    return -1;
  }
  s->running = 1;
  s->aborting = 0;
  s->cl = cl;
  s->n = n;
  s->ndone = 0;
  s->turn = -1;
  s->fn = fn;
  s->ctx = ctx;
  for (int i = 0; i < n; i++) {
    cl[i] = (sim_client){.s = s, .idx = i, .state = ST_PARKED};
    pthread_cond_init(&cl[i].cv, NULL);
  }
  pthread_mutex_unlock(&s->mu);
  int started = 0;
  while (started < n &&
         pthread_create(&cl[started].th, NULL, client_main, &cl[started]) == 0)
    started++;
  pthread_mutex_lock(&s->mu);
  if (started < n) { /* let those started leave without running */
    s->aborting = 1;
    for (int i = 0; i < started; i++) pthread_cond_signal(&cl[i].cv);
  } else {
    pick_next(s);
    while (s->ndone < n) pthread_cond_wait(&s->done_cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < started; i++) pthread_join(cl[i].th, NULL);
  pthread_mutex_lock(&s->mu);
  s->running = 0;
  s->cl = NULL;
  s->n = 0;
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < n; i++) pthread_cond_destroy(&cl[i].cv);
  free(cl);
  return started < n ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* store calls: clients through the scheduler, others at once */

static int dead(sim_client *c, ustore_err *e) {
  ustore_seterr(e, "sim: client %d has crashed", c->idx);
  return UNICO_EUNAVAILABLE;
}

static int valid_key(size_t kl) { return kl > 0 && kl <= SIM_MAX_KEY; }

/* One conditional write by the calling thread. */
static int do_cas(usim *s, ustore_op *op, ustore_err *e) {
  if (!valid_key(op->klen)) {
    ustore_seterr(e, "sim: key of %zu bytes is outside 1..%d", op->klen,
                  SIM_MAX_KEY);
    return UNICO_EINVAL;
  }
  if (op->action < USTORE_PUT || op->action > USTORE_CHECK) {
    ustore_seterr(e, "sim: unknown action %d", op->action);
    return UNICO_EINVAL;
  }
  sim_client *c = me(s);
  if (!c) return apply(s, op, -1);
  if (c->crashed) return dead(c, e);
  int f = sched_call(s, c);
  if (f == F_FAIL) {
    ustore_seterr(e, "sim: injected failure (nothing applied)");
    return UNICO_EUNAVAILABLE;
  }
  if (f == F_CRASH_LOST) { /* as unknown to it as a crash that applied */
    ustore_seterr(e, "sim: client %d crashed", c->idx);
    return UNICO_EUNKNOWN;
  }
  int rc = apply(s, op, c->idx);
  if (f == F_NONE) return rc;
  /* The answer is lost: the caller learns nothing, not even the outputs. */
  op->failed = op->exists = 0;
  op->cur_version = 0;
  ubuf_reset(&op->cur);
  if (f == F_UNKNOWN)
    ustore_seterr(e, "sim: injected timeout (the write may have applied)");
  else
    ustore_seterr(e, "sim: client %d crashed", c->idx);
  return UNICO_EUNKNOWN;
}

/* A client's read: the scheduling point and its fault. UNICO_OK to go on. */
static int read_point(usim *s, ustore_err *e) {
  sim_client *c = me(s);
  if (!c) return UNICO_OK;
  if (c->crashed) return dead(c, e);
  switch (sched_call(s, c)) {
  case F_NONE:
    return UNICO_OK;
  case F_UNKNOWN:
    ustore_seterr(e, "sim: injected timeout");
    return UNICO_EUNAVAILABLE;
  case F_FAIL:
    ustore_seterr(e, "sim: injected failure");
    return UNICO_EUNAVAILABLE;
  default:
    ustore_seterr(e, "sim: client %d crashed", c->idx);
    return UNICO_EUNAVAILABLE;
  }
}

static usim *sim_of(ustore *st) { return ((sim_handle *)st)->s; }

static void late_free(ustore_op *ops, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free((void *)ops[i].key);
    free((void *)ops[i].val);
    ubuf_free(&ops[i].cur);
  }
  free(ops);
}

/* The posts that were waiting land now (after the call that overtook
 * them), their results dropped. */
static void land_late(ustore *st) {
  sim_handle *h = (sim_handle *)st;
  pthread_mutex_lock(&h->lmu);
  ustore_op *ops = h->late;
  size_t n = h->nlate;
  h->late = NULL;
  h->nlate = 0;
  pthread_mutex_unlock(&h->lmu);
  for (size_t i = 0; i < n; i++) do_cas(h->s, &ops[i], NULL);
  late_free(ops, n);
}

static int sv_get(ustore *st, const void *key, size_t klen, ubuf *val,
                  uint64_t *version, ustore_err *e) {
  usim *s = sim_of(st);
  if (!valid_key(klen)) return UNICO_ENOTFOUND; /* cannot be stored */
  int rc = read_point(s, e);
  if (!rc) rc = map_get(s, key, klen, val, version);
  land_late(st);
  return rc;
}

static int sv_cas(ustore *st, ustore_op *op, ustore_err *e) {
  int rc = do_cas(sim_of(st), op, e);
  land_late(st);
  return rc;
}

static int sv_txn(ustore *st, ustore_op *ops, size_t n, ustore_err *e) {
  usim *s = sim_of(st);
  if (!s->txn) {
    ustore_seterr(e, "sim: this simulation has no transactions");
    return UNICO_EUNSUPPORTED;
  }
  for (size_t i = 0; i < n; i++) {
    if (!valid_key(ops[i].klen)) {
      ustore_seterr(e, "sim: key of %zu bytes is outside 1..%d", ops[i].klen,
                    SIM_MAX_KEY);
      return UNICO_EINVAL;
    }
    if (ops[i].action < USTORE_PUT || ops[i].action > USTORE_CHECK) {
      ustore_seterr(e, "sim: unknown action %d", ops[i].action);
      return UNICO_EINVAL;
    }
  }
  sim_client *c = me(s);
  int rc;
  if (!c) {
    rc = apply_all(s, ops, n, -1);
  } else if (c->crashed) {
    rc = dead(c, e);
  } else {
    int f = sched_call(s, c);
    if (f == F_FAIL) {
      ustore_seterr(e, "sim: injected failure (nothing applied)");
      rc = UNICO_EUNAVAILABLE;
    } else if (f == F_CRASH_LOST) {
      ustore_seterr(e, "sim: client %d crashed", c->idx);
      rc = UNICO_EUNKNOWN;
    } else {
      rc = apply_all(s, ops, n, c->idx);
      if (f != F_NONE) { /* the answer is lost */
        for (size_t i = 0; i < n; i++) {
          ops[i].failed = ops[i].exists = 0;
          ops[i].cur_version = 0;
          ubuf_reset(&ops[i].cur);
        }
        if (f == F_UNKNOWN)
          ustore_seterr(e, "sim: injected timeout (the transaction may have "
                           "applied)");
        else
          ustore_seterr(e, "sim: client %d crashed", c->idx);
        rc = UNICO_EUNKNOWN;
      }
    }
  }
  land_late(st);
  return rc;
}

static int sv_scan(ustore *st, const void *prefix, size_t plen,
                   const void *after, size_t alen, ustore_scan_cb cb,
                   void *ctx, ustore_err *e) {
  usim *s = sim_of(st);
  int rc = read_point(s, e);
  if (!rc) rc = map_scan(s, prefix, plen, after, alen, cb, ctx);
  land_late(st);
  return rc;
}

static int sv_cas_many(ustore *st, ustore_op *ops, size_t n, int *rcs,
                       ustore_err *errs) {
  usim *s = sim_of(st);
  sim_client *c = me(s);
  size_t *order = NULL;
  pthread_mutex_lock(&s->mu);
  int reorder = s->f.reorder;
  void (*after)(void *, const ustore_op *, int) = s->f.after_op;
  void *actx = s->f.after_ctx;
  pthread_mutex_unlock(&s->mu);
  if (c && !c->crashed && reorder && n > 1) {
    order = malloc(n * sizeof *order);
    if (!order) {
      for (size_t i = 0; i < n; i++) {
        rcs[i] = UNICO_ENOMEM;
        if (errs) ustore_seterr(&errs[i], "sim: out of memory");
      }
      return UNICO_ENOMEM;
    }
    pthread_mutex_lock(&s->mu); /* the baton holder's PRNG */
    int moved = 0;
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = (size_t)(rnd(s) % (i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
      trace(s, 5, order[i]);
      moved |= order[i] != i;
    }
    s->st.reordered += (uint64_t)moved;
    pthread_mutex_unlock(&s->mu);
  }
  for (size_t k = 0; k < n; k++) {
    size_t i = order ? order[k] : k;
    rcs[i] = do_cas(s, &ops[i], errs ? &errs[i] : NULL);
    if (after) after(actx, &ops[i], rcs[i]);
  }
  free(order);
  land_late(st);
  return UNICO_OK;
}

/* Posts: at once, or with late_posts after the handle's next call. */
static void sv_post_many(ustore *st, ustore_op *ops, size_t n) {
  sim_handle *h = (sim_handle *)st;
  usim *s = h->s;
  pthread_mutex_lock(&s->mu);
  int late = s->f.late_posts;
  pthread_mutex_unlock(&s->mu);
  ustore_op *q = NULL;
  if (late && n) {
    pthread_mutex_lock(&h->lmu);
    q = realloc(h->late, (h->nlate + n) * sizeof *q);
    if (q) {
      h->late = q;
      for (size_t i = 0; i < n; i++) {
        ustore_op *o = &q[h->nlate + i];
        *o = ops[i];
        o->cur = (ubuf)UBUF_INIT;
        o->key = dup(ops[i].key, ops[i].klen);
        o->val = ops[i].val ? dup(ops[i].val, ops[i].vlen) : NULL;
      }
      h->nlate += n;
    }
    pthread_mutex_unlock(&h->lmu);
    if (q) return;
  }
  int *rcs = calloc(n ? n : 1, sizeof *rcs);
  if (rcs) sv_cas_many(st, ops, n, rcs, NULL);
  free(rcs);
}

static int64_t sv_now(ustore *st) { return usim_now(sim_of(st)); }

static void sv_sleep(ustore *st, int64_t ms) {
  usim *s = sim_of(st);
  sim_client *c = me(s);
  if (ms <= 0) return;
  if (!c) {
    usim_advance(s, ms);
    return;
  }
  if (c->crashed) return;
  pthread_mutex_lock(&s->mu);
  yield(s, c, ST_SLEEPING, s->vclock + ms);
  pthread_mutex_unlock(&s->mu);
}

static void sv_close(ustore *st) {
  if (!st) return;
  sim_handle *h = (sim_handle *)st;
  land_late(st); /* (a closed connection's posts land, or are lost) */
  pthread_mutex_destroy(&h->lmu);
  pthread_mutex_lock(&registry_lock);
  h->s->handles--;
  pthread_mutex_unlock(&registry_lock);
  free(h);
}

/* A seeded schedule; transactions only in a simulation made with them. */
static const ustore_vtab sim_vtab = {
    "sim", USTORE_CAP_DETERMINISTIC, sv_get, sv_cas,
    sv_txn, sv_scan, sv_close, SIM_MAX_KEY, 0, sv_now, sv_sleep, sv_cas_many,
    sv_post_many, NULL, NULL, NULL, NULL, NULL, NULL};
static const ustore_vtab sim_txn_vtab = {
    "sim", USTORE_CAP_DETERMINISTIC | USTORE_CAP_TXN,
    sv_get, sv_cas, sv_txn, sv_scan, sv_close, SIM_MAX_KEY, 0, sv_now,
    sv_sleep, sv_cas_many, sv_post_many, NULL, NULL, NULL, NULL, NULL, NULL};
/* The same, its records taken for rows of the users' own tables (another
 * writer may change them: usim_faults.rows) */
static const ustore_vtab sim_rows_vtab = {
    "sim", USTORE_CAP_DETERMINISTIC | USTORE_CAP_ROWS, sv_get, sv_cas,
    sv_txn, sv_scan, sv_close, SIM_MAX_KEY, 0, sv_now, sv_sleep, sv_cas_many,
    sv_post_many, NULL, NULL, NULL, NULL, NULL, NULL};
static const ustore_vtab sim_rows_txn_vtab = {
    "sim", USTORE_CAP_DETERMINISTIC | USTORE_CAP_TXN | USTORE_CAP_ROWS,
    sv_get, sv_cas, sv_txn, sv_scan, sv_close, SIM_MAX_KEY, 0, sv_now,
    sv_sleep, sv_cas_many, sv_post_many, NULL, NULL, NULL, NULL, NULL, NULL};

int ustore_sim_caps(const struct ustore_opts *opts, unsigned *caps,
                    ustore_err *e) {
  (void)opts; /* (none changes them) */
  (void)e;
  *caps = sim_vtab.caps;
  return UNICO_OK;
}

int ustore_sim_open(ustore **out, const char *name,
                    const struct ustore_opts *opts, ustore_err *e) {
  (void)opts; /* (none of its own) */
  *out = NULL;
  size_t nl = strlen(name);
  sim_handle *h = malloc(sizeof *h);
  if (!h) return UNICO_ENOMEM;
  pthread_mutex_lock(&registry_lock);
  usim *s = registry;
  while (s && (strlen(s->name) != nl || memcmp(s->name, name, nl))) s = s->next;
  if (s) s->handles++;
  pthread_mutex_unlock(&registry_lock);
  if (!s) {
    free(h);
    ustore_seterr(e, "no simulation named \"%.*s\" (usim_new registers one)",
                  (int)(nl > 200 ? 200 : nl), name);
    return UNICO_EUNAVAILABLE;
  }
  h->base.vt = s->rows ? (s->txn ? &sim_rows_txn_vtab : &sim_rows_vtab)
                       : (s->txn ? &sim_txn_vtab : &sim_vtab);
  h->s = s;
  pthread_mutex_init(&h->lmu, NULL);
  h->late = NULL;
  h->nlate = 0;
  *out = &h->base;
  return UNICO_OK;
}

/* ------------------------------------------------------------------ */
/* the simulation */

int usim_new(usim **out, const char *name, uint64_t seed,
             const usim_faults *faults) {
  *out = NULL;
  if (!name || !*name || strchr(name, '?')) return UNICO_EINVAL;
  usim *s = calloc(1, sizeof *s);
  if (!s || !(s->name = strdup(name))) {
    free(s);
    return UNICO_ENOMEM;
  }
  s->rng = seed;
  s->trace = mix64(seed);
  if (faults) s->f = *faults;
  s->txn = faults && faults->txn;
  s->rows = faults && faults->rows;
  s->vclock = SIM_BASE_MS;
  s->wall0 = unow_ms();
  s->turn = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->data, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  pthread_mutex_lock(&registry_lock);
  for (usim *o = registry; o; o = o->next)
    if (!strcmp(o->name, name)) {
      pthread_mutex_unlock(&registry_lock);
      free(s->name);
      pthread_mutex_destroy(&s->mu);
      pthread_mutex_destroy(&s->data);
      pthread_cond_destroy(&s->done_cv);
      free(s);
      return UNICO_EINVAL;
    }
  s->next = registry;
  registry = s;
  pthread_mutex_unlock(&registry_lock);
  *out = s;
  return UNICO_OK;
}

void usim_free(usim *s) {
  if (!s) return;
  pthread_mutex_lock(&registry_lock);
  for (usim **pp = &registry; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  pthread_mutex_unlock(&registry_lock);
  for (size_t i = 0; i < s->ne; i++) {
    free(s->e[i].k);
    free(s->e[i].v);
  }
  free(s->e);
  free(s->name);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->data);
  pthread_cond_destroy(&s->done_cv);
  free(s);
}

int usim_crashed(void) { return tl_client && tl_client->crashed; }

int usim_client(void) { return tl_client ? tl_client->idx : -1; }

void usim_set_faults(usim *s, const usim_faults *faults) {
  pthread_mutex_lock(&s->mu);
  if (faults) s->f = *faults;
  else memset(&s->f, 0, sizeof s->f);
  pthread_mutex_unlock(&s->mu);
}

int64_t usim_now(usim *s) {
  pthread_mutex_lock(&s->mu);
  int64_t t = s->vclock;
  if (!s->running) t += unow_ms() - s->wall0;
  pthread_mutex_unlock(&s->mu);
  return t;
}

void usim_advance(usim *s, int64_t ms) {
  if (ms <= 0) return;
  pthread_mutex_lock(&s->mu);
  s->vclock += ms;
  pthread_mutex_unlock(&s->mu);
}

void usim_stats_get(usim *s, usim_stats *out) {
  pthread_mutex_lock(&s->mu);
  *out = s->st;
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&s->data);
  out->writes = s->writes;
  pthread_mutex_unlock(&s->data);
}

uint64_t usim_trace(usim *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t t = s->trace;
  pthread_mutex_unlock(&s->mu);
  return t;
}

void usim_observe(usim *s, usim_observer fn, void *ctx) {
  pthread_mutex_lock(&s->data);
  s->obs = fn;
  s->obs_ctx = ctx;
  pthread_mutex_unlock(&s->data);
}

int usim_scan(usim *s, const void *prefix, size_t plen, ustore_scan_cb cb,
              void *ctx) {
  return map_scan(s, prefix, plen, NULL, 0, cb, ctx);
}

int usim_get(usim *s, const void *key, size_t klen, ubuf *val,
             uint64_t *version) {
  if (!valid_key(klen)) return UNICO_ENOTFOUND;
  return map_get(s, key, klen, val, version);
}
