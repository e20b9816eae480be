/* exec.c - what both protocols share: opening the store and choosing the
 * protocol, reads and scans, the outcome sweep, and the calls that
 * dispatch to the protocol's table (exec/internal.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "store/backend.h"
#include "util/err.h"

#define SWEEP_EVERY 4096 /* writes between automatic outcome sweeps */
#define DAY_MS (24 * 3600 * 1000ULL)


int uexec_store_err(unico_result *res, int rc, const char *what,
                    const ustore_err *e) {
  if (rc == UNICO_ENOMEM) return uerr(res, rc, NULL, "out of memory");
  const char *m = e && e->msg[0] ? e->msg : unico_strerror(rc);
  size_t wl = strlen(what);
  /* (a store's message that already says what it was doing is not said
   * twice: "writing: writing: ...") */
  if (!strncmp(m, what, wl) && (m[wl] == ':' || m[wl] == ' '))
    return uerr(res, rc, NULL, "%s", m);
  return uerr(res, rc, NULL, "%s: %s", what, m);
}

int uexec_open(uexec **out, const char *url, uint64_t retention_ms,
               unico_result *res) {
  ustore *st = NULL;
  ustore_err e = {{0}};
  ustore_params params;
  *out = NULL;
  int rc = ustore_open_with(&st, url, &params, &e);
  if (rc)
    return uerr(res, rc, NULL, "%s", e.msg[0] ? e.msg : unico_strerror(rc));
  uexec *x = calloc(1, sizeof *x);
  if (!x) {
    st->vt->close(st);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  x->st = st;
  x->retention_ms = retention_ms ? retention_ms : DAY_MS;
  /* Stores without transactions run the claims protocol (claims.c). */
  x->claims = !(st->vt->caps & USTORE_CAP_TXN);
  x->proto = x->claims ? &uexec_claims_proto : &uexec_atomic_proto;
  x->grace_ms = UEXEC_GRACE_MS;
  atomic_init(&x->writes, 0);
  atomic_init(&x->attempts, 0);
  /* The insert's commit: the store URL's commit=parallel|classic. */
  x->pc = x->claims && params.commit == USTORE_COMMIT_PARALLEL;
  /* Attempt ids need only differ between two runs of one op id; a
   * deterministic store keeps them reproducible (seed 0). */
  if (!(st->vt->caps & USTORE_CAP_DETERMINISTIC) &&
      getrandom(&x->seed, sizeof x->seed, 0) != (ssize_t)sizeof x->seed)
    x->seed = (uint64_t)unow_ms() ^ ((uint64_t)getpid() << 32);
  /* Outcomes past retention go at open, then every SWEEP_EVERY writes. */
  uexec_sweep(x, ustore_now(x->st), NULL, NULL);
  *out = x;
  return UNICO_OK;
}

void uexec_close(uexec *x) {
  if (!x) return;
  if (x->st) x->st->vt->close(x->st);
  free(x);
}

int uexec_close_checked(uexec *x, unico_result *res) {
  if (!x) return UNICO_OK;
  ustore_err e = {{0}};
  int rc = ustore_close_checked(x->st, &e);
  free(x);
  if (rc) return uerr(res, rc, NULL, "%s", e.msg[0] ? e.msg : unico_strerror(rc));
  return UNICO_OK;
}

int uexec_health(uexec *x, const char **reason, unico_result *res) {
  ustore_err e = {{0}};
  int rc = ustore_health(x->st, reason, &e);
  if (rc) return uerr(res, rc, NULL, "%s", e.msg[0] ? e.msg : unico_strerror(rc));
  return UNICO_OK;
}

int uexec_read(uexec *x, const ubuf *key, ubuf *val, uint64_t *version,
               unico_result *res) {
  ustore_err e = {{0}};
  int rc = x->st->vt->get(x->st, key->p, key->len, val, version, &e);
  if (rc && rc != UNICO_ENOTFOUND) return uexec_store_err(res, rc, "reading", &e);
  return rc;
}

int uexec_cas(uexec *x, ustore_op *op, unico_result *res) {
  ustore_err e = {{0}};
  int rc = x->st->vt->cas(x->st, op, &e);
  if (rc != UNICO_OK && rc != USTORE_NOT_APPLIED)
    return uexec_store_err(res, rc, "writing", &e);
  return rc;
}

int uexec_txn(uexec *x, ustore_op *ops, size_t n, unico_result *res) {
  ustore_err e = {{0}};
  /* One op needs no transaction (what the claims protocol can offer). */
  int rc = n == 1 && x->claims ? x->st->vt->cas(x->st, ops, &e)
                               : x->st->vt->txn(x->st, ops, n, &e);
  if (rc == USTORE_NOT_APPLIED && n == 1) ops[0].failed = 1;
  if (rc != UNICO_OK && rc != USTORE_NOT_APPLIED)
    return uexec_store_err(res, rc, "writing", &e);
  if (rc == UNICO_OK) uexec_count_write(x);
  return rc;
}

int uexec_scan(uexec *x, const ubuf *prefix, uexec_scan_cb cb, void *ctx,
               unico_result *res) {
  ustore_err e = {{0}};
  int rc = x->st->vt->scan(x->st, prefix->p, prefix->len, NULL, 0, cb, ctx, &e);
  if (rc < 0) return uexec_store_err(res, rc, "scanning", &e);
  return rc;
}

int uexec_written(uexec *x, uexec_written_cb cb, void *ctx,
                  unico_result *res) {
  ustore_err e = {{0}};
  if (!x->st->vt->written)
    return uerr(res, UNICO_EUNSUPPORTED, NULL,
                "the %s store keeps no write times, so check --since cannot "
                "tell recent rows from old ones: run check without --since",
                x->st->vt->name);
  int rc = x->st->vt->written(x->st, cb, ctx, &e);
  if (rc < 0) return uexec_store_err(res, rc, "reading write times", &e);
  return rc;
}

/* Count a write; every SWEEP_EVERY-th runs a sweep. */
void uexec_count_write(uexec *x) {
  if ((atomic_fetch_add(&x->writes, 1) + 1) % SWEEP_EVERY == 0)
    uexec_sweep(x, ustore_now(x->st), NULL, NULL);
}

int uexec_apply(uexec *x, const uplan *p, uexec_refused *why,
                unico_result *res) {
  memset(why, 0, sizeof *why);
  int rc = uexec_repeat_first(x, p, why, res);
  if (rc != UNICO_ENOTFOUND) return rc; /* answered, reused, or an error */
  if (p->refused) { /* (the caller's read refused it: not a repeat) */
    why->why = UREFUSED_RECORD;
    return UEXEC_NOT_APPLIED;
  }
  rc = x->proto->apply(x, p, why, res);
  if (rc == UEXEC_NOT_APPLIED) rc = uexec_repeat_after(x, p, why, res);
  return rc;
}

void uexec_refused_free(uexec_refused *why) {
  ustored_claim_free(&why->owner);
  free(why->restored);
  why->restored = NULL;
  ubuf_free(&why->rec);
  free(why->answer);
  why->answer = NULL;
}

/* ------------------------------------------------------------------ */
/* sweep */

#define SWEEP_BATCH 256

typedef struct swp {
  int64_t cutoff;
  size_t n, max;
  ubuf keys[SWEEP_BATCH]; /* index keys */
  char *ids[SWEEP_BATCH];
} swp;

static int sweep_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  swp *s = ctx;
  utup_reader r;
  utup_item it;
  ubuf id = UBUF_INIT;
  (void)v, (void)vl, (void)ver;
  utup_reader_init(&r, k, kl);
  if (utup_next(&r, &it) != 1 || utup_next(&r, &it) != 1 || it.type != UTUP_INT)
    return 0; /* not an index key: leave it */
  if (it.i >= s->cutoff) return 1; /* the index is in age order: done */
  if (utup_next(&r, &it) != 1 || it.type != UTUP_TEXT) return 0;
  utup_item_copy(&it, &id);
  s->ids[s->n] = ubuf_take(&id);
  s->keys[s->n] = (ubuf)UBUF_INIT;
  ubuf_put(&s->keys[s->n], k, kl);
  s->n++;
  return s->n == s->max ? 2 : 0;
}

int uexec_sweep(uexec *x, int64_t now_ms, uint64_t *removed,
                unico_result *res) {
  uint64_t total = 0;
  int rc = UNICO_OK;
  for (;;) {
    swp s;
    ubuf p = UBUF_INIT;
    ustore_err e = {{0}};
    s.cutoff = now_ms - (int64_t)x->retention_ms;
    s.n = 0;
    /* two ops per outcome: within the store's transaction size */
    s.max = uexec_max_txn(x) ? uexec_max_txn(x) / 2 : SWEEP_BATCH;
    if (s.max > SWEEP_BATCH) s.max = SWEEP_BATCH;
    if (s.max == 0) s.max = 1;
    ukey_kind(&p, "x");
    int sr = x->st->vt->scan(x->st, p.p, p.len, NULL, 0, sweep_cb, &s, &e);
    ubuf_free(&p);
    if (sr < 0) rc = uexec_store_err(res, sr, "scanning outcomes", &e);
    ustore_op ops[2 * SWEEP_BATCH];
    ubuf okeys[SWEEP_BATCH];
    for (size_t i = 0; i < s.n; i++) {
      okeys[i] = (ubuf)UBUF_INIT;
      ukey_outcome(&okeys[i], s.ids[i] ? s.ids[i] : "");
      ops[2 * i] = uexec_op(&s.keys[i], USTORE_ANY, 0, USTORE_DEL, NULL);
      ops[2 * i + 1] = uexec_op(&okeys[i], USTORE_ANY, 0, USTORE_DEL, NULL);
    }
    if (!rc && s.n && x->claims) {
      /* No transactions: the outcome first, then its index, so an index
       * left behind by a failure is found and removed by a later sweep. */
      for (size_t i = 0; i < 2 * s.n && !rc; i += 2) {
        int tr = x->st->vt->cas(x->st, &ops[i + 1], &e);
        if (!tr) tr = x->st->vt->cas(x->st, &ops[i], &e);
        if (tr) rc = uexec_store_err(res, tr, "removing old outcomes", &e);
        else total++;
      }
    } else if (!rc && s.n) {
      int tr = x->st->vt->txn(x->st, ops, 2 * s.n, &e);
      if (tr) rc = uexec_store_err(res, tr, "removing old outcomes", &e);
      else total += s.n;
    }
    for (size_t i = 0; i < s.n; i++) {
      ubuf_free(&ops[2 * i].cur);
      ubuf_free(&ops[2 * i + 1].cur);
      ubuf_free(&s.keys[i]);
      ubuf_free(&okeys[i]);
      free(s.ids[i]);
    }
    if (rc || sr != 2) break;
  }
  if (removed) *removed = total;
  return rc;
}

void uexec_set_grace(uexec *x, int64_t grace_ms) {
  x->grace_ms = grace_ms > 0 ? grace_ms : UEXEC_GRACE_MS;
}

void uexec_set_fingerprint(uexec *x, uexec_fingerprint_fn fn) {
  x->fingerprint = fn;
}

void uexec_set_holds(uexec *x, uexec_holds_fn fn, void *ctx) {
  if (!(x->st->vt->caps & USTORE_CAP_ROWS)) return;
  x->holds = fn;
  x->holds_ctx = ctx;
}

int uexec_native_rows(uexec *x) {
  return (x->st->vt->caps & USTORE_CAP_ROWS) != 0;
}

unsigned uexec_traits(uexec *x) {
  unsigned t = x->proto->traits;
  if (!(x->st->vt->caps & USTORE_CAP_REMOTE)) t &= ~UEXEC_T_CACHE_RECORDS;
  return t;
}
int64_t uexec_grace(uexec *x) { return x->grace_ms; }
uint64_t uexec_retention(uexec *x) { return x->retention_ms; }

int64_t uexec_purge_at(uexec *x, int64_t since_ms) {
  return since_ms + (int64_t)x->retention_ms;
}

int64_t uexec_now(uexec *x) { return ustore_now(x->st); }

uint64_t uexec_fresh_version(uexec *x) {
  uint64_t n = atomic_fetch_add(&x->attempts, 1) + 1;
  uint64_t a = ustored_hash(USTORED_HASH_INIT ^ x->seed ^ 0xc1a1u, &n, sizeof n);
  return (a & ((UINT64_C(1) << 62) - 1)) | (UINT64_C(1) << 32);
}

void uexec_sleep(uexec *x, int64_t ms) { ustore_sleep(x->st, ms); }

size_t uexec_max_key(uexec *x) { return x->st->vt->max_key; }

const char *uexec_store_name(uexec *x) { return x->st->vt->name; }

void uexec_defer_begin(void) { ustore_defer_begin(); }

uint64_t uexec_defer_end(void) { return ustore_defer_end(); }

int uexec_watch_durable(uexec *x, uexec_watch *w) {
  return ustore_watch_durable(x->st, w);
}

int uexec_url_defers(const char *url) {
  unsigned caps = 0;
  int rc = ustore_url_caps(url, &caps, NULL);
  if (rc) return rc;
  return (caps & USTORE_CAP_DEFERS) != 0;
}

int uexec_option_is_secret(const char *name, size_t len) {
  return ustore_option_is_secret(name, len);
}

int uexec_fix_apply(uexec *x, const uexec_fix *f, unico_result *res) {
  return x->proto->fix(x, f, res);
}

int uexec_tables(uexec *x, const ustore_tabledef *defs, size_t n, int mode,
                 unico_result *res) {
  ustore_err e = {{0}};
  int sm = mode == UEXEC_TABLES_CREATE   ? USTORE_TABLES_CREATE
           : mode == UEXEC_TABLES_RETYPE ? USTORE_TABLES_RETYPE
                                         : USTORE_TABLES_SET;
  int rc = ustore_tables(x->st, defs, n, sm, &e);
  if (rc) return uexec_store_err(res, rc, "the native tables", &e);
  return UNICO_OK;
}

size_t uexec_max_txn(uexec *x) {
  return x->st->vt->max_txn;
}

int uexec_scan_after(uexec *x, const ubuf *prefix, const ubuf *after,
                     uexec_scan_cb cb, void *ctx, unico_result *res) {
  ustore_err e = {{0}};
  int rc = x->st->vt->scan(x->st, prefix->p, prefix->len,
                           after ? after->p : NULL, after ? after->len : 0, cb,
                           ctx, &e);
  if (rc < 0) return uexec_store_err(res, rc, "scanning", &e);
  return rc;
}
