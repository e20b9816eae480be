/* watch.c - unico_watch: writes behind unico's back, seen as they happen.
 * The store's change feed (exec/feed.h: DynamoDB Streams) names the rows
 * that changed; each is read again as it is now and judged as check
 * judges a record (check.c, uapi_check_record), so a row unico wrote
 * (its bookkeeping and claims agree with its values) is never reported,
 * whatever the stream said; with repair, fixed as repair would. The
 * cursor is kept in a checkpoint file. docs/cli.md, "watch". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/internal.h"
#include "exec/feed.h"
#include "keys/keyspace.h"
#include "plan/plan.h"
#include "records/record.h"
#include "util/err.h"

#define DEFAULT_POLL_MS 1000
#define STOP_SLICE_MS 50

typedef struct found {
  char kind[48];
  ubuf key;
} found;

typedef struct flist {
  found *v;
  size_t n, cap;
} flist;

typedef struct watch {
  unico *u;
  const unico_watch_options *o;
  unico_result *res;
  flist *into; /* where the findings of the judge go */
  int oom;
  uint64_t changes, findings, repaired;
  json_t *drift; /* "table\tkind" -> count */
} watch;

static void on_found(void *ctx, const char *kind, const uint8_t *key,
                     size_t klen) {
  watch *w = ctx;
  flist *l = w->into;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    found *p = realloc(l->v, cap * sizeof *p);
    if (!p) {
      w->oom = 1;
      return;
    }
    l->v = p;
    l->cap = cap;
  }
  found *f = &l->v[l->n++];
  snprintf(f->kind, sizeof f->kind, "%s", kind);
  f->key = (ubuf)UBUF_INIT;
  ubuf_put(&f->key, key, klen);
}

static void flist_free(flist *l) {
  for (size_t i = 0; i < l->n; i++) ubuf_free(&l->v[i].key);
  free(l->v);
}

/* The primary key of record key rk as the API shows it (a scalar for a
 * one-column key), and its table into table. */
static json_t *pk_json(const uint8_t *rk, size_t rkl, char *table, size_t cap) {
  size_t off;
  if (ukey_split_table(rk, rkl, "r", table, cap, &off)) return NULL;
  json_t *a = urec_tuple_json(rk + off, rkl - off);
  if (json_array_size(a) == 1) {
    json_t *one = json_incref(json_array_get(a, 0));
    json_decref(a);
    return one;
  }
  return a;
}

/* The owner a claim key names now (its primary key), or NULL. */
static json_t *owner_of(watch *w, const ubuf *ck) {
  ubuf v = UBUF_INIT;
  ustored_claim cl;
  json_t *o = NULL;
  if (uexec_read(w->u->x, ck, &v, NULL, NULL) == UNICO_OK &&
      !ustored_claim_decode(v.p, v.len, &cl)) {
    size_t off = 0; /* (a NAMESPACE's claim: (table, pk...), the pk shown) */
    ubuf tb = UBUF_INIT;
    if (ukey_claim_shared(ck->p, ck->len))
      ukey_text_at(cl.owner, cl.owner_len, &off, &tb);
    ubuf_free(&tb);
    json_t *a = urec_tuple_json(cl.owner + off, cl.owner_len - off);
    o = json_array_size(a) == 1 ? json_incref(json_array_get(a, 0)) : json_incref(a);
    json_decref(a);
    ustored_claim_free(&cl);
  }
  ubuf_free(&v);
  return o;
}

/* The line of finding f about record rk. */
static json_t *finding_json(watch *w, const usch *sc, const uint8_t *rk,
                            size_t rkl, const found *f) {
  char table[256] = "";
  json_t *pk = pk_json(rk, rkl, table, sizeof table);
  json_t *o = json_pack("{s:s,s:o,s:s}", "table", "", "key",
                        pk ? pk : json_null(), "kind", f->kind);
  if (!o) return NULL;
  json_object_set_new(o, "table", json_string(table));
  const utable *t = sc ? uschema_table(sc->s, table) : NULL;
  size_t voff;
  int con = -1;
  if (t && !uplan_claim_split(t, f->key.p, f->key.len, &voff, &con, NULL, 0) &&
      con >= 0) {
    json_object_set_new(o, "constraint", json_string(t->cons[con].name));
    json_object_set_new(o, "value", urec_tuple_json(f->key.p + voff, f->key.len - voff));
  }
  if (!strcmp(f->kind, "claim_owner_mismatch")) {
    json_t *own = owner_of(w, &f->key);
    if (own) json_object_set_new(o, "owner", own);
  }
  return o;
}

/* Count finding kind of table in w->drift. */
static void count_drift(watch *w, const char *table, const char *kind) {
  char k[400];
  snprintf(k, sizeof k, "%s\t%s", table, kind);
  json_t *n = json_object_get(w->drift, k);
  json_object_set_new(w->drift, k, json_integer(json_integer_value(n) + 1));
}

/* Was finding f found again (after the fixes)? */
static int still_found(const flist *again, const found *f) {
  for (size_t i = 0; i < again->n; i++)
    if (!strcmp(again->v[i].kind, f->kind) && again->v[i].key.len == f->key.len &&
        !memcmp(again->v[i].key.p, f->key.p, f->key.len))
      return 1;
  return 0;
}

/* Hand the findings of rk to the caller; with repair, each marked
 * repaired when it is not found again (again: the findings after the
 * fixes). */
static void emit(watch *w, const uint8_t *rk, size_t rkl, const flist *first,
                 const flist *again) {
  usch *sc = uapi_sch_get(w->u);
  for (size_t i = 0; i < first->n; i++) {
    const found *f = &first->v[i];
    json_t *o = finding_json(w, sc, rk, rkl, f);
    int fixed = w->o->repair && !still_found(again, f);
    if (o && w->o->repair) json_object_set_new(o, "repaired", json_boolean(fixed));
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (line && w->o->finding) w->o->finding(w->o->ctx, line);
    count_drift(w, json_string_value(json_object_get(o, "table")), f->kind);
    w->findings++;
    w->repaired += fixed;
    free(line);
    json_decref(o);
  }
  uapi_sch_put(sc);
}

/* A changed row: judged (and repaired), its findings handed on. */
static int on_change(void *ctx, const uint8_t *rk, size_t rkl) {
  watch *w = ctx;
  uint64_t fixed = 0;
  flist first = {NULL, 0, 0}, again = {NULL, 0, 0};
  w->into = &first;
  int rc = uapi_check_record(w->u, rk, rkl, w->o->repair, on_found, w, &fixed,
                             w->res);
  if (!rc && fixed) { /* what is left after the fixes */
    w->into = &again;
    rc = uapi_check_record(w->u, rk, rkl, 0, on_found, w, &fixed, w->res);
  }
  /* (nothing fixed: every finding is still there) */
  if (!rc) emit(w, rk, rkl, &first, fixed ? &again : &first);
  flist_free(&first);
  flist_free(&again);
  if (!rc && w->oom) rc = uerr(w->res, UNICO_ENOMEM, NULL, "out of memory");
  if (!rc) w->changes++;
  return rc;
}

/* The checkpoint file's text into *out (NULL: none, or empty). */
static int read_checkpoint(const char *path, char **out, unico_result *res) {
  *out = NULL;
  FILE *fp = fopen(path, "rb");
  if (!fp && errno == ENOENT) return UNICO_OK;
  if (!fp)
    return uerr(res, UNICO_EINVAL, NULL, "cannot read the checkpoint %s: %s",
                path, strerror(errno));
  ubuf b = UBUF_INIT;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) ubuf_put(&b, chunk, n);
  int bad = ferror(fp);
  fclose(fp);
  ubuf_put(&b, "", 1);
  if (bad || !ubuf_ok(&b)) {
    ubuf_free(&b);
    return uerr(res, UNICO_EINVAL, NULL, "cannot read the checkpoint %s", path);
  }
  *out = (char *)b.p; /* (ubuf's bytes, NUL-ended: freed with free) */
  return UNICO_OK;
}

/* Write text to path: a new file, synced, renamed over it. */
static int write_checkpoint(const char *path, const char *text,
                            unico_result *res) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *fp = fopen(tmp, "wb");
  int ok = fp && fputs(text, fp) >= 0 && fputc('\n', fp) != EOF &&
           fflush(fp) == 0 && fsync(fileno(fp)) == 0;
  if (fp && fclose(fp)) ok = 0;
  if (ok && rename(tmp, path)) ok = 0;
  if (ok) return UNICO_OK;
  int en = errno;
  unlink(tmp);
  return uerr(res, UNICO_EINVAL, NULL, "cannot write the checkpoint %s: %s",
              path, strerror(en));
}

static int save(watch *w, uexec_feed *f, ubuf *last) {
  ubuf cur = UBUF_INIT;
  int rc = uexec_feed_cursor(f, &cur);
  if (rc) rc = uerr(w->res, rc, NULL, "out of memory");
  else if (w->o->checkpoint && (cur.len != last->len || memcmp(cur.p, last->p, cur.len)))
    rc = write_checkpoint(w->o->checkpoint, (const char *)cur.p, w->res);
  if (!rc) {
    ubuf_free(last);
    *last = cur;
  } else {
    ubuf_free(&cur);
  }
  return rc;
}

static int stopped(const watch *w) {
  return w->o->stop && w->o->stop(w->o->ctx);
}

static void pause_ms(const watch *w, uint64_t ms) {
  for (uint64_t t = 0; t < ms && !stopped(w); t += STOP_SLICE_MS)
    uapi_sleep_ms(STOP_SLICE_MS);
}

/* Rounds until stopped or an error. */
static int follow(watch *w, uexec_feed *f) {
  ubuf last = UBUF_INIT;
  uint64_t poll = w->o->poll_ms ? w->o->poll_ms : DEFAULT_POLL_MS;
  int rc = save(w, f, &last); /* (a checkpoint that cannot be written fails now) */
  while (!rc && !stopped(w)) {
    uint64_t before = w->changes;
    rc = uexec_feed_poll(f, on_change, w, w->res);
    int r2 = save(w, f, &last); /* (what was judged, also on an error) */
    if (!rc) rc = r2;
    if (!rc && w->changes == before) pause_ms(w, poll);
  }
  ubuf_free(&last);
  return rc;
}

/* res->json: the counts. */
static void summary(watch *w, unico_result *res) {
  json_t *d = json_array(), *v;
  const char *k;
  json_object_foreach(w->drift, k, v) {
    const char *tab = strchr(k, '\t');
    json_array_append_new(d, json_pack("{s:s%,s:s,s:O}", "table", k,
                                       (size_t)(tab - k), "kind", tab + 1,
                                       "count", v));
  }
  json_t *o = json_pack("{s:I,s:I,s:I,s:o}", "changes", (json_int_t)w->changes,
                        "findings", (json_int_t)w->findings, "repaired",
                        (json_int_t)w->repaired, "drift", d);
  free(res->json);
  res->json = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
}

int uapi_watch(unico *u, const unico_watch_options *o, unico_result *res) {
  watch w;
  uexec_feed *f = NULL;
  char *cursor = NULL;
  memset(&w, 0, sizeof w);
  w.u = u;
  w.o = o;
  w.res = res;
  w.drift = json_object();
  int rc = w.drift ? UNICO_OK : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  if (!rc && o->checkpoint) rc = read_checkpoint(o->checkpoint, &cursor, res);
  if (!rc) rc = uapi_sch_reload(u, res); /* (the store learns the tables) */
  if (!rc) rc = uexec_feed_open(u->x, cursor, &f, res);
  if (!rc) rc = follow(&w, f);
  uexec_feed_close(f);
  free(cursor);
  if (res) summary(&w, res);
  json_decref(w.drift);
  return rc;
}
