/* store.c - choose a store backend from a URL. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "unico_errors.h"
#include "util/clock.h"

void ustore_seterr(ustore_err *e, const char *fmt, ...) {
  if (!e) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

int ustore_parse_long(const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) return -1;
  *out = x;
  return 0;
}

int64_t ustore_now(ustore *s) {
  if (s && s->vt->version >= 3 && s->vt->now_ms) return s->vt->now_ms(s);
  return unow_ms();
}

void ustore_sleep(ustore *s, int64_t ms) {
  if (ms <= 0) return;
  if (s && s->vt->version >= 3 && s->vt->sleep_ms) {
    s->vt->sleep_ms(s, ms);
    return;
  }
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

int ustore_cas_many(ustore *s, ustore_op *ops, size_t n, int *rcs,
                    ustore_err *errs) {
  if (s->vt->version >= 3 && s->vt->cas_many)
    return s->vt->cas_many(s, ops, n, rcs, errs);
  for (size_t i = 0; i < n; i++)
    rcs[i] = s->vt->cas(s, &ops[i], errs ? &errs[i] : NULL);
  return UNICO_OK;
}

void ustore_post_many(ustore *s, ustore_op *ops, size_t n) {
  if (s->vt->version >= 4 && s->vt->post_many) {
    s->vt->post_many(s, ops, n);
    return;
  }
  int *rcs = calloc(n ? n : 1, sizeof *rcs);
  if (!rcs) return; /* (best effort by definition) */
  ustore_cas_many(s, ops, n, rcs, NULL);
  free(rcs);
}

int ustore_get_many(ustore *s, ustore_op *ops, size_t n, int *rcs,
                    ustore_err *errs) {
  if (s->vt->version >= 4 && s->vt->get_many)
    return s->vt->get_many(s, ops, n, rcs, errs);
  for (size_t i = 0; i < n; i++) {
    ubuf_reset(&ops[i].cur);
    ops[i].cur_version = 0;
    rcs[i] = s->vt->get(s, ops[i].key, ops[i].klen, &ops[i].cur,
                        &ops[i].cur_version, errs ? &errs[i] : NULL);
    ops[i].exists = rcs[i] == UNICO_OK;
  }
  return UNICO_OK;
}

/* Deferral is per thread: the calling thread's operations are the ones
 * whose answers wait. */
static _Thread_local struct {
  int on;
  uint64_t seq;
} defer_tls;

void ustore_defer_begin(void) {
  defer_tls.on = 1;
  defer_tls.seq = 0;
}

uint64_t ustore_defer_end(void) {
  uint64_t seq = defer_tls.seq;
  defer_tls.on = 0;
  defer_tls.seq = 0;
  return seq;
}

int ustore_deferring(void) { return defer_tls.on; }

void ustore_defer_note(uint64_t seq) {
  if (seq > defer_tls.seq) defer_tls.seq = seq;
}

int ustore_watch_durable(ustore *s, ustore_watch *w) {
  if (w->seq == 0 || s->vt->version < 5 || !s->vt->watch_durable) return 0;
  return s->vt->watch_durable(s, w);
}

int ustore_key_cmp(const void *a, size_t al, const void *b, size_t bl) {
  size_t n = al < bl ? al : bl;
  int c = n ? memcmp(a, b, n) : 0;
  if (c) return c;
  return al < bl ? -1 : al > bl;
}

int ustore_scanbuf_add(ustore_scanbuf *b, const void *k, size_t kl,
                       const void *v, size_t vl, uint64_t ver) {
  if (b->n == b->cap) {
    size_t nc = b->cap ? 2 * b->cap : 256;
    ustore_scanitem *ni = realloc(b->v, nc * sizeof *ni);
    if (!ni) return UNICO_ENOMEM;
    b->v = ni;
    b->cap = nc;
  }
  ustore_scanitem *it = &b->v[b->n];
  it->k = malloc(kl ? kl : 1);
  it->v = malloc(vl ? vl : 1);
  if (!it->k || !it->v) {
    free(it->k);
    free(it->v);
    return UNICO_ENOMEM;
  }
  if (kl) memcpy(it->k, k, kl);
  if (vl) memcpy(it->v, v, vl);
  it->kl = kl;
  it->vl = vl;
  it->ver = ver;
  b->n++;
  return UNICO_OK;
}

static int scanitem_cmp(const void *a, const void *b) {
  const ustore_scanitem *x = a, *y = b;
  return ustore_key_cmp(x->k, x->kl, y->k, y->kl);
}

int ustore_scanbuf_deliver(ustore_scanbuf *b, ustore_scan_cb cb, void *ctx) {
  if (b->n) qsort(b->v, b->n, sizeof *b->v, scanitem_cmp);
  for (size_t i = 0; i < b->n; i++) {
    int r = cb(ctx, b->v[i].k, b->v[i].kl, b->v[i].v, b->v[i].vl,
               b->v[i].ver);
    if (r) return r;
  }
  return UNICO_OK;
}

void ustore_scanbuf_free(ustore_scanbuf *b) {
  for (size_t i = 0; i < b->n; i++) {
    free(b->v[i].k);
    free(b->v[i].v);
  }
  free(b->v);
  memset(b, 0, sizeof *b);
}

/* cas-only view: every call but txn goes to the wrapped store. */
typedef struct cas_only {
  ustore base;
  ustore *in;
  char name[40];
  ustore_vtab vt;
} cas_only;

static int co_get(ustore *s, const void *key, size_t klen, ubuf *val,
                  uint64_t *version, ustore_err *e) {
  ustore *in = ((cas_only *)s)->in;
  return in->vt->get(in, key, klen, val, version, e);
}

static int co_cas(ustore *s, ustore_op *op, ustore_err *e) {
  ustore *in = ((cas_only *)s)->in;
  return in->vt->cas(in, op, e);
}

static int co_watch(ustore *s, ustore_watch *w) {
  return ustore_watch_durable(((cas_only *)s)->in, w);
}

static int co_txn(ustore *s, ustore_op *ops, size_t n, ustore_err *e) {
  (void)ops;
  (void)n;
  ustore_seterr(e, "the %s store has no transactions", s->vt->name);
  return UNICO_EUNSUPPORTED;
}

static int co_scan(ustore *s, const void *prefix, size_t plen,
                   const void *after, size_t alen, ustore_scan_cb cb,
                   void *ctx, ustore_err *e) {
  ustore *in = ((cas_only *)s)->in;
  return in->vt->scan(in, prefix, plen, after, alen, cb, ctx, e);
}

static void co_close(ustore *s) {
  if (!s) return;
  ustore *in = ((cas_only *)s)->in;
  in->vt->close(in);
  free(s);
}

int ustore_cas_only(ustore **s, ustore_err *e) {
  cas_only *c = calloc(1, sizeof *c);
  if (!c) {
    (*s)->vt->close(*s);
    *s = NULL;
    ustore_seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  c->in = *s;
  snprintf(c->name, sizeof c->name, "%s (cas only)", (*s)->vt->name);
  c->vt = *(*s)->vt;
  c->vt.version = USTORE_VTAB_VERSION;
  c->vt.name = c->name;
  c->vt.caps &= ~USTORE_CAP_TXN;
  c->vt.get = co_get;
  c->vt.cas = co_cas;
  c->vt.txn = co_txn;
  c->vt.scan = co_scan;
  c->vt.close = co_close;
  c->vt.max_txn = 0;
  c->vt.now_ms = NULL;
  c->vt.sleep_ms = NULL;
  c->vt.cas_many = NULL;
  c->vt.post_many = NULL;
  c->vt.get_many = NULL;
  c->vt.watch_durable = co_watch;
  c->base.vt = &c->vt;
  *s = &c->base;
  return UNICO_OK;
}

int ustore_open(ustore **out, const char *url, ustore_err *e) {
  *out = NULL;
  if (!url || !*url) url = "lmdb:./unico-data";
  const char *rest = url;
  if (!strncmp(url, "lmdb://", 7)) {
    rest = url + 7;
  } else if (!strncmp(url, "lmdb:", 5)) {
    rest = url + 5;
  } else if (!strncmp(url, "dynamodb://", 11) ||
             !strncmp(url, "dynamodbs://", 12)) {
    return ustore_dynamodb_open(out, url, e);
  } else if (!strncmp(url, "cassandra://", 12)) {
    return ustore_cassandra_open(out, url, e);
  } else if (!strncmp(url, "sim:", 4)) {
    return ustore_sim_open(out, url + 4, e);
  } else if (strstr(url, "://")) {
    if (e)
      snprintf(e->msg, sizeof e->msg,
               "unsupported store URL \"%s\" (this build knows lmdb:PATH, "
               "dynamodb://HOST:PORT/TABLE, dynamodbs://HOST:PORT/TABLE and "
               "cassandra://HOST[:PORT],.../KEYSPACE)",
               url);
    return UNICO_EUNSUPPORTED;
  }
  /* Split PATH?QUERY. */
  const char *qm = strchr(rest, '?');
  size_t plen = qm ? (size_t)(qm - rest) : strlen(rest);
  char *path = strndup(rest, plen);
  if (!path) return UNICO_ENOMEM;
  int rc = ustore_lmdb_open(out, path, qm ? qm + 1 : NULL, e);
  free(path);
  return rc;
}
