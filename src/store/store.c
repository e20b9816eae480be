/* store.c - a store opened from its URL (the list of the backends'
 * descriptors, store/backend.h), and the defaults of the interface's
 * optional calls. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "store/store.h"

#include "store/backend.h"
#include "store/options.h"
#include "unico_errors.h"
#include "util/clock.h"

void ustore_seterr(ustore_err *e, const char *fmt, ...) {
  if (!e) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

static _Atomic int64_t clock_shift; /* ustore_clock_shift() */

int64_t ustore_now(ustore *s) {
  if (s && s->vt->now_ms) return s->vt->now_ms(s);
  return unow_ms() + clock_shift;
}

void ustore_clock_shift(int64_t ms) { clock_shift += ms; }

void ustore_sleep(ustore *s, int64_t ms) {
  if (ms <= 0) return;
  if (s && s->vt->sleep_ms) {
    s->vt->sleep_ms(s, ms);
    return;
  }
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

int ustore_cas_many(ustore *s, ustore_op *ops, size_t n, int *rcs,
                    ustore_err *errs) {
  if (s->vt->cas_many)
    return s->vt->cas_many(s, ops, n, rcs, errs);
  for (size_t i = 0; i < n; i++)
    rcs[i] = s->vt->cas(s, &ops[i], errs ? &errs[i] : NULL);
  return UNICO_OK;
}

void ustore_post_many(ustore *s, ustore_op *ops, size_t n) {
  if (s->vt->post_many) {
    s->vt->post_many(s, ops, n);
    return;
  }
  int *rcs = calloc(n ? n : 1, sizeof *rcs);
  if (!rcs) return; /* (best effort by definition) */
  ustore_cas_many(s, ops, n, rcs, NULL);
  free(rcs);
}

int ustore_tables(ustore *s, const ustore_tabledef *defs, size_t n, int mode,
                  ustore_err *e) {
  if (s->vt->tables)
    return s->vt->tables(s, defs, n, mode, e);
  return UNICO_OK;
}

int ustore_get_many(ustore *s, ustore_op *ops, size_t n, int *rcs,
                    ustore_err *errs) {
  if (s->vt->get_many)
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
  if (w->seq == 0 || !s->vt->watch_durable) return 0;
  return s->vt->watch_durable(s, w);
}

int ustore_health(ustore *s, const char **reason, ustore_err *e) {
  *reason = NULL;
  if (!s || !s->vt->health) return UNICO_OK;
  return s->vt->health(s, reason, e);
}

int ustore_close_checked(ustore *s, ustore_err *e) {
  if (!s) return UNICO_OK;
  if (s->vt->close_checked)
    return s->vt->close_checked(s, e);
  s->vt->close(s);
  return UNICO_OK;
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

static int co_tables(ustore *s, const ustore_tabledef *defs, size_t n,
                     int mode, ustore_err *e) {
  return ustore_tables(((cas_only *)s)->in, defs, n, mode, e);
}

static void co_close(ustore *s) {
  if (!s) return;
  ustore *in = ((cas_only *)s)->in;
  in->vt->close(in);
  free(s);
}

static int co_health(ustore *s, const char **reason, ustore_err *e) {
  return ustore_health(((cas_only *)s)->in, reason, e);
}

static int co_close_checked(ustore *s, ustore_err *e) {
  int rc = ustore_close_checked(((cas_only *)s)->in, e);
  free(s);
  return rc;
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
  c->vt.tables = co_tables;
  c->vt.health = co_health;
  c->vt.close_checked = co_close_checked;
  c->base.vt = &c->vt;
  *s = &c->base;
  return UNICO_OK;
}

/* The backends: one descriptor each (store/backend.h), in the order their
 * schemes are tried: the first scheme the URL starts with opens it. A URL
 * without "://" that matches none is a path of the embedded store. */
static const ustore_backend *const backends[] = {
    &ustore_lmdb_backend,
    &ustore_dynamodb_backend,
    &ustore_cassandra_backend,
    &ustore_sim_backend,
};
#define NBACKENDS (sizeof backends / sizeof backends[0])
#define BARE_PATH (&ustore_lmdb_backend) /* opens a URL that is a path */
#define BARE_SCHEME 1                    /* (as its "lmdb:") */

const ustore_backend *const *ustore_backends(size_t *n) {
  *n = NBACKENDS;
  return backends;
}

const ustore_backend *ustore_backend_named(const char *name) {
  for (size_t i = 0; i < NBACKENDS; i++)
    if (!strcmp(backends[i]->name, name)) return backends[i];
  return NULL;
}

int ustore_backend_built(const char *name) {
  const ustore_backend *b = ustore_backend_named(name);
  return b && b->open && b->caps;
}

/* The options of every store, read above it (ustore_params). */
static const char *const commit_words[] = {"parallel", "classic", NULL};
static const ustore_option_desc common[] = {
    {"commit", USTORE_OPT_WORD, "parallel", 0, 0, 0, 0, commit_words},
};
#define NCOMMON (sizeof common / sizeof common[0])

const ustore_option_desc *ustore_common_options(size_t *n) {
  *n = NCOMMON;
  return common;
}

/* Names no store takes that are secrets wherever they appear in a URL (a
 * credential pasted into one); any NAME_password is one too. */
static const char *const secret_words[] = {
    "password", "secret", "token", "secret_access_key", "session_token",
    "key",
};

static int name_is(const char *name, size_t len, const char *word) {
  return strlen(word) == len && !strncasecmp(name, word, len);
}

int ustore_option_is_secret(const char *name, size_t len) {
  static const char suffix[] = "_password";
  size_t sl = sizeof suffix - 1;
  for (size_t i = 0; i < NBACKENDS; i++)
    for (size_t k = 0; k < backends[i]->noptions; k++)
      if (backends[i]->options[k].flags & USTORE_OPT_SECRET &&
          name_is(name, len, backends[i]->options[k].name))
        return 1;
  for (size_t k = 0; k < NCOMMON; k++)
    if (common[k].flags & USTORE_OPT_SECRET && name_is(name, len, common[k].name))
      return 1;
  for (size_t i = 0; i < sizeof secret_words / sizeof secret_words[0]; i++)
    if (name_is(name, len, secret_words[i])) return 1;
  return len > sl && !strncasecmp(name + len - sl, suffix, sl);
}

/* The names of n options, ", "-separated, into out (cap bytes). */
static void option_names(const ustore_option_desc *d, size_t n, char *out,
                         size_t cap) {
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "",
                            d[i].name);
}

/* Each given option of d (n of them) checked against its type: the
 * message of the typed look-ups of options.h. */
static int check_types(const ustore_opts *o, const ustore_option_desc *d,
                       size_t n, ustore_err *e) {
  int rc = UNICO_OK;
  for (size_t i = 0; i < n && rc == UNICO_OK; i++) {
    long l;
    size_t z;
    int w;
    switch (d[i].type) {
    case USTORE_OPT_INT:
      rc = ustore_opt_long(o, d[i].name, d[i].lo, d[i].hi, &l, e);
      break;
    case USTORE_OPT_SIZE:
      rc = ustore_opt_size(o, d[i].name, d[i].min, &z, e);
      break;
    case USTORE_OPT_WORD:
      rc = ustore_opt_word(o, d[i].name, d[i].words, &w, e);
      break;
    default: /* USTORE_OPT_TEXT: the backend's to check */
      break;
    }
  }
  return rc;
}

static int common_options(ustore_opts *o, ustore_params *p, ustore_err *e) {
  int c = p->commit;
  int rc = ustore_opt_word(o, "commit", commit_words, &c, e);
  p->commit = c;
  return rc;
}

/* The URL forms of the backends this build has, for the unknown-scheme
 * error: "lmdb://PATH, lmdb:PATH, ... and sim:NAME". */
static void known_forms(char *out, size_t cap) {
  const char *f[16];
  size_t n = 0, len = 0;
  for (size_t i = 0; i < NBACKENDS; i++) {
    if (!backends[i]->open) continue;
    for (size_t k = 0; k < backends[i]->nschemes && n < 16; k++)
      if (backends[i]->schemes[k].form) f[n++] = backends[i]->schemes[k].form;
  }
  out[0] = 0;
  for (size_t i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%s",
                            i == 0 ? "" : i + 1 == n ? " and " : ", ", f[i]);
}

/* A URL taken apart: its backend (*b) and the index of its scheme there
 * (*scheme), what follows the scheme up to '?' (*loc, malloc'd) and its
 * options, checked against the names and types its descriptor and the
 * common options give, with the options of every store in *p. The caller
 * frees *loc and opts whatever this returns. */
static int resolve(const char *url, const ustore_backend **b, size_t *scheme,
                   char **loc, ustore_opts *opts, ustore_params *p,
                   ustore_err *e) {
  const char *rest = url;
  int rc;
  *b = BARE_PATH;
  *scheme = BARE_SCHEME;
  *loc = NULL;
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < NBACKENDS && rest == url; i++) {
    for (size_t k = 0; k < backends[i]->nschemes; k++) {
      size_t n = strlen(backends[i]->schemes[k].prefix);
      if (strncmp(url, backends[i]->schemes[k].prefix, n)) continue;
      *b = backends[i];
      *scheme = k;
      rest = url + n;
      break;
    }
  }
  if (rest == url && strstr(url, "://")) {
    char forms[512];
    known_forms(forms, sizeof forms);
    /* the URL cut (to 120 bytes at most) so that the whole list fits */
    int room = (int)(sizeof e->msg - 48 - strlen(forms));
    ustore_seterr(e, "unsupported store URL \"%.*s\" (this build knows %s)",
                  room < 24 ? 24 : room > 120 ? 120 : room, url, forms);
    return UNICO_EUNSUPPORTED;
  }
  if (!(*b)->open) {
    ustore_seterr(e, "this build has no %s store: \"%.40s\" URLs need a "
                     "build with -D%s=ON", (*b)->name,
                  (*b)->schemes[*scheme].prefix, (*b)->build);
    return UNICO_EUNSUPPORTED;
  }
  const char *qm = strchr(rest, '?');
  *loc = strndup(rest, qm ? (size_t)(qm - rest) : strlen(rest));
  if (!*loc) return UNICO_ENOMEM;
  char known[512], known_common[128];
  option_names((*b)->options, (*b)->noptions, known, sizeof known);
  option_names(common, NCOMMON, known_common, sizeof known_common);
  if ((rc = ustore_opts_parse(opts, (*b)->name, qm ? qm + 1 : NULL, e)) ||
      (rc = ustore_opts_check(opts, (*b)->noptions ? known : NULL,
                              known_common, e)) ||
      (rc = check_types(opts, (*b)->options, (*b)->noptions, e)))
    return rc;
  return common_options(opts, p, e);
}

int ustore_open_with(ustore **out, const char *url, ustore_params *params,
                     ustore_err *e) {
  ustore_params ignored;
  ustore_opts opts = USTORE_OPTS_INIT;
  char *loc = NULL;
  const ustore_backend *b;
  size_t scheme;
  *out = NULL;
  if (!params) params = &ignored;
  if (!url || !*url) url = "lmdb:./unico-data";
  /* (unknown options are refused before the backend connects or creates
   * anything) */
  int rc = resolve(url, &b, &scheme, &loc, &opts, params, e);
  if (rc == UNICO_OK) rc = b->open(out, scheme, loc, &opts, e);
  if (rc && *out) {
    (*out)->vt->close(*out);
    *out = NULL;
  }
  if (rc == UNICO_ENOMEM) ustore_seterr(e, "out of memory");
  ustore_opts_free(&opts);
  free(loc);
  return rc;
}

int ustore_open(ustore **out, const char *url, ustore_err *e) {
  return ustore_open_with(out, url, NULL, e);
}

int ustore_url_caps(const char *url, unsigned *caps, ustore_err *e) {
  ustore_params p;
  ustore_opts opts = USTORE_OPTS_INIT;
  char *loc = NULL;
  const ustore_backend *b;
  size_t scheme;
  *caps = 0;
  if (!url || !*url) url = "lmdb:./unico-data";
  int rc = resolve(url, &b, &scheme, &loc, &opts, &p, e);
  if (rc == UNICO_OK) rc = b->caps(&opts, caps, e);
  if (rc == UNICO_ENOMEM) ustore_seterr(e, "out of memory");
  ustore_opts_free(&opts);
  free(loc);
  return rc;
}
